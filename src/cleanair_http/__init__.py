"""HTTP service, operator CLI and composition root."""
