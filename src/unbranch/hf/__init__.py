"""The transformers integration: known rewrites, tiny models, validation and the sweep.

The compiler never imports this package; ``catalog`` registers its lookup with
:mod:`unbranch.exporting.discovery` and ``hints`` transformers' naming conventions with
:mod:`unbranch.compiler.analysis.classify` when imported (``import unbranch`` does), and transformers itself
is imported only when a model is looked up or built.
"""

from . import hints as hints  # registers transformers' naming conventions with the classifier
