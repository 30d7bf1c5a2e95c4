"""Passes that put the code into the canonical forms the rules expect."""
