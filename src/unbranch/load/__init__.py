"""Compiled rewrites into the running program: compile, cache, swap code objects in and out."""
