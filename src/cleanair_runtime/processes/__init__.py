"""The processes `cleanair serve` and `cleanair worker` run: API and plan processes, workers,
connection limits."""
