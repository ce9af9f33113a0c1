"""Adapters for outside data: air quality, geolocation, street networks."""
