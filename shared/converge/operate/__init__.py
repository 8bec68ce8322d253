"""Operators' actions and views: resolve, retry, cancel, redrive, the reconciler, listings."""
