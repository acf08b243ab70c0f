"""Cohere v2 chat instrumentation."""
