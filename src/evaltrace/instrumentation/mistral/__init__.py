"""Mistral auto-instrumentation (codec; the instrumentor is added on the shared engine)."""
