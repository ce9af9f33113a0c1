"""The process runtime, composition root, settings and operator CLI of cleanair."""
