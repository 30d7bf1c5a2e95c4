"""What rewritten code calls, as ``_ub.<name>``.

This package never imports the compiler: rewritten code only needs torch and these
helpers. Each helper takes a plain Python path unless torch is tracing and the value is
symbolic, so eager runs of rewritten code stay exact and cheap.
"""

from . import checks, conditions, continuation, control_flow, jumps, loops, selection, state, unbound_names
from .checks import *  # noqa: F403
from .conditions import *  # noqa: F403
from .continuation import *  # noqa: F403
from .control_flow import *  # noqa: F403
from .jumps import *  # noqa: F403
from .loops import *  # noqa: F403
from .selection import *  # noqa: F403
from .state import *  # noqa: F403
from .unbound_names import *  # noqa: F403

# each module lists its own operators: a new one is its definition and its name there
__all__ = [
    *checks.__all__,
    *conditions.__all__,
    *continuation.__all__,
    *control_flow.__all__,
    *jumps.__all__,
    *loops.__all__,
    *selection.__all__,
    *state.__all__,
    *unbound_names.__all__,
]
