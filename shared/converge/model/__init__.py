"""The model: what an operation is (states, request, envelope, records, outcomes, timing, errors)."""
