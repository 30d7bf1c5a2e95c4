"""Facts about a function's code; nothing here rewrites anything."""
