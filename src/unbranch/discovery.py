"""Which methods of a model need rewriting: the catalogue plus a scan of the model's code."""

from __future__ import annotations


def discover(model) -> list:
    """(callable, hooks) pairs for ``model`` (issue 4 extends this with the catalogue)."""
    return []
