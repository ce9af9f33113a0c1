"""Alerts (issue 32): subscriptions to a place's or a trip's air, decided in episodes (one alert
when a threshold is crossed, an all-clear when it ends), delivered by signed webhooks (the
Standard Webhooks specification) or read from a feed."""
