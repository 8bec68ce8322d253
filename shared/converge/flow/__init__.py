"""The flow: what happens to an operation (admission, relay, dispatch, the pipeline, the worker...)."""
