"""The composition root: settings read from the environment, and the deployment wired from them."""
