"""Names a loop binds first (compiler.normalise.first_bound): a marker until a step binds them."""

from __future__ import annotations

from ._tracing import tracing

# the operators rewritten code calls as ``_ub.<name>``
__all__ = ["Unbound", "placeholder", "unbound"]


class Unbound:
    """What a name holds before the loop binds it. Any use raises as the unbound name does."""

    __slots__ = ("like", "name")

    def __init__(self, name: str, like=None):
        self.name, self.like = name, like

    def _unbound(self, *args, **kwargs):
        raise UnboundLocalError(f"cannot access local variable '{self.name}' where it is not associated with a value")

    __bool__ = __len__ = __iter__ = __call__ = __getitem__ = __setitem__ = _unbound
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _unbound
    __matmul__ = __rmatmul__ = __neg__ = __lt__ = __le__ = __gt__ = __ge__ = __float__ = __int__ = _unbound
    __index__ = _unbound

    def __repr__(self) -> str:
        return f"<unbound '{self.name}'>"


def unbound(name: str, *traced, like=None):
    """``name`` before the loop that first binds it; while torch traces, ``traced`` when given (a loop
    index's first value: a cond or loop op takes no marker, and every step that runs rebinds it).
    ``like(*item)``: a value of the kind a step binds, from a stand-in for the loop's first item (the
    value a loop op carries in until a step binds it: ``loops.bound_markers``)."""
    if traced and tracing():
        return traced[0]
    return Unbound(name, like)


def placeholder(value, make):
    """``value``; while torch traces and ``value`` is still unbound, ``make()``: a value of the kind
    the other side of a cond binds, which no path Python allows reads."""
    if isinstance(value, Unbound) and tracing():
        return make()
    return value
