"""What rewritten code calls, as ``_ub.<name>``.

This package never imports the compiler: rewritten code only needs torch and these
helpers. Each helper takes a plain Python path unless torch is tracing and the value is
symbolic, so eager runs of rewritten code stay exact and cheap.
"""

from .checks import raise_if, unconverted
from .conditions import all_, any_, bool_, equal, float_, in_, int_, len_, not_in
from .control_flow import and_, given, if_exp, if_stmt, not_, or_, right_needed
from .jumps import flag
from .loops import at, cat, for_each, for_range, stack, unconverted_loop, while_stmt, write_row

__all__ = [
    "all_",
    "and_",
    "at",
    "any_",
    "bool_",
    "cat",
    "equal",
    "flag",
    "float_",
    "for_each",
    "for_range",
    "given",
    "if_exp",
    "if_stmt",
    "in_",
    "int_",
    "len_",
    "not_",
    "not_in",
    "or_",
    "raise_if",
    "right_needed",
    "stack",
    "unconverted",
    "unconverted_loop",
    "while_stmt",
    "write_row",
]
