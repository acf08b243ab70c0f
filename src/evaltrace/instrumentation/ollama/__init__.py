"""Ollama instrumentation."""
