"""transformers' naming conventions, as data the classifier applies to transformers' own files.

In transformers, ``output_attentions``, ``use_cache``, ``return_dict``, ``is_causal``... are
Python flags, ``self.config.x`` and a module's own ``self.x`` hold configuration, a literal
default marks a Python parameter and ``is_*()`` functions answer with Python bools
(``is_tracing()`` and ``is_torchdynamo_compiling()`` with True while torch exports). None of
this is true of Python code in general (a user's ``is_pad`` may well be a tensor), so the
generic classifier dispatches such conditions at run time; these hints let it leave them as
plain Python in transformers, as the catalogued rewrites in rewrites/ show them.
"""

from __future__ import annotations

from ..compiler.analysis import classify

TRANSFORMERS = classify.Hints(
    flag_prefixes=("use_", "output_", "return_", "is_", "has_", "do_", "should_", "need_", "with_"),
    flag_calls=("is_",),
    static_attribute_parts=frozenset({"config"}),
    self_attributes=True,
    literal_defaults=True,
    exporting_calls=("is_tracing", "is_torchdynamo_compiling"),
)

# installed transformers, and remote code it loads (``transformers_modules``)
_DIRECTORIES = ("/transformers/", "/transformers_modules/")


def transformers_hints(path: str) -> classify.Hints | None:
    """TRANSFORMERS for a file of transformers (or of a model's remote code), else None."""
    path = path.replace("\\", "/")
    return TRANSFORMERS if any(d in path for d in _DIRECTORIES) else None


classify.HINTS.append(transformers_hints)
