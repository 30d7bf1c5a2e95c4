"""A forward hook's ``return None`` -> ``return output``: what ``Module.__call__`` makes of it.

    def hook(module, args, output):          def hook(module, args, output):
        if output.sum() > 0:                     if output.sum() > 0:
            return output * 0.5       ->             return output * 0.5
                                                 return output

A forward hook that returns None leaves the module's output as it was, so the hook's result
is always a tensor, though one side of its ``if`` gives None, which no ``torch.cond`` returns.
Only for functions registered as forward hooks (option ``hook_output``, set by model
discovery): the output is the hook's last positional parameter, with or without kwargs.
"""

from __future__ import annotations

import libcst as cst

from ..passes import IF, Pass, Rewrite, Unchanged


def _output(fn: cst.FunctionDef) -> str | None:
    """The last positional parameter, where the hook has a fixed list of them."""
    params = [*fn.params.posonly_params, *fn.params.params]
    if not params or isinstance(fn.params.star_arg, cst.Param):
        return None
    return params[-1].name.value


def _keeps(node: cst.Return) -> bool:
    return node.value is None or (isinstance(node.value, cst.Name) and node.value.value == "None")


class HookOutput(Pass):
    HANDLES = frozenset({IF})
    OPTIONS = {"hook_output": True}
    EXAMPLES = [
        Rewrite(
            """
            def hook(module, args, output):
                if output.abs().max() > 1e4:  # overflow: scale down
                    return output / 1e4
            """,
            """
            def hook(module, args, output):
                if output.abs().max() > 1e4:  # overflow: scale down
                    return output / 1e4
                return output
            """,
        ),
        Rewrite(  # (with kwargs: the output still comes last)
            """
            def hook(module, args, kwargs, output):
                if output.sum() > 0:
                    return None
                return -output
            """,
            """
            def hook(module, args, kwargs, output):
                if output.sum() > 0:
                    return output
                return -output
            """,
        ),
        Unchanged(  # every path gives a value already
            """
            def hook(module, args, output):
                if output.sum() > 0:
                    return output * 2
                return output
            """
        ),
    ]

    def __init__(self, fn, ctx) -> None:
        super().__init__(fn, ctx)
        self.output = _output(fn)

    def leave_SimpleStatementLine(self, original, updated):
        if self.output is None or not any(isinstance(s, cst.Return) and _keeps(s) for s in updated.body):
            return updated
        output = cst.Name(self.output)
        kept = [s.with_changes(value=output) if isinstance(s, cst.Return) and _keeps(s) else s for s in updated.body]
        return updated.with_changes(body=kept)

    def leave_FunctionDef(self, original, updated):
        if original is not self.fn or self.output is None:
            return updated
        body = list(updated.body.body)
        last = body[-1]
        if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], (cst.Return, cst.Raise)):
            return updated
        tail = cst.SimpleStatementLine([cst.Return(cst.Name(self.output))])
        self.ctx.origins.inherit(tail, last)
        return updated.with_changes(body=updated.body.with_changes(body=[*body, tail]))
