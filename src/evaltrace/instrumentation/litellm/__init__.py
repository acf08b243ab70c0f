"""LiteLLM instrumentation."""
