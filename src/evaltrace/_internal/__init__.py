"""Private implementation of evaltrace; nothing here is public API."""
