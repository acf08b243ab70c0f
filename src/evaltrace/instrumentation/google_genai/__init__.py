"""Google Gen AI SDK (``google-genai``) auto-instrumentation."""
