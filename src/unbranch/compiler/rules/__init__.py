"""Rewrite rules: one module each, each with the before/after EXAMPLES the tests run."""
