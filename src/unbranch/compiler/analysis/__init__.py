"""Facts about a function's code; nothing here rewrites anything."""

from . import classify, effects, names


def forget() -> None:
    """Drop the facts memoised on the nodes of the function just compiled.

    No node is shared between two functions' trees, so nothing kept would ever be asked for
    again; kept, they held whole trees alive and made the collector's pauses grow.
    """
    memos = (classify.own_nodes, effects._effects, names._expr_effects, names._statement_names, names.names_in_order)
    for memo in memos:
        memo.cache_clear()
