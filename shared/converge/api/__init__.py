"""The enqueue HTTP API."""
