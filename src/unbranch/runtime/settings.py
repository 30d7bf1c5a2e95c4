"""How the runtime lowers what it is handed, for the export running now: one immutable value per
thread. An export (``unbranch.export``, an open context) sets it for its own thread and puts back
what was there, so a thread's settings never leak into another's or outlive the export.

(A ``threading.local``, not a ``contextvars.ContextVar``: dynamo, which runs the runtime's helpers
under strict export, cannot trace ``ContextVar.get``; it reads a thread-local's attributes.)"""

from __future__ import annotations

import contextlib
import dataclasses
import threading


@dataclasses.dataclass(frozen=True)
class Settings:
    # cond/scan/while_loop under torch.compile too (by default compiled code takes Python's branches)
    lower_under_compile: bool = False
    # "executorch": lower loops to what ExecuTorch runs, or refuse at export
    target: str | None = None
    # the user's bound on the trip count of loops no scan can count
    max_iterations: int | None = None
    # False: a loop whose steps carry nothing stays a scan (loops._vectorised)
    batch: bool = True
    # how a failed check on data fails (checks.CHECK_MODES)
    checks: str = "auto"
    # how an if on data whose sides are cheap elementwise arithmetic lowers (control_flow.BRANCH_MODES)
    branches: str = "auto"
    # True while a cond retried for the numbers its sides give traces: the conds nested in it give theirs
    # as 0-d tensors from the start (control_flow._numbers_held; dynamo cannot retry one inside another)
    numbers_held: bool = False
    # function -> its variant taking the caller's rest (continuation.continued), during a guided export;
    # never changed in place: applied() gives a new one
    variants: dict = dataclasses.field(default_factory=dict)


_DEFAULT = Settings()
_THREAD = threading.local()


def current() -> Settings:
    return getattr(_THREAD, "settings", _DEFAULT)


@contextlib.contextmanager
def applied(**changes):
    """These settings, in this thread, while open (each unset one as it was)."""
    before = current()
    _THREAD.settings = dataclasses.replace(before, **changes)
    try:
        yield
    finally:
        _THREAD.settings = before
