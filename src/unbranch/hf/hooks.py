"""Ready-made libcst hooks for catalogue entries (``pre_rewriter``/``post_rewriter``).

Each is a small, named source change for code the rules alone cannot make exportable,
applied only while rewriting, so the change is visible in ``rewrites/`` like any other.
They find what they change by its text: a hook that finds nothing raises
:class:`HookDidNotApply` (the code it edits changed, in a new transformers release say)
instead of leaving the function as it was and the model quietly unfixed.
"""

from __future__ import annotations

import libcst as cst

from ..errors import UnbranchError


class HookDidNotApply(UnbranchError):
    """A hook found nothing to change in the function it was given."""


def _code(node) -> str:
    return cst.Module([]).code_for_node(node)


def _changed(name: str, fn: cst.FunctionDef, new: cst.FunctionDef, looked_for: str) -> cst.FunctionDef:
    """``new``, if the hook changed ``fn``; else HookDidNotApply saying what it looked for."""
    if new.deep_equals(fn):
        raise HookDidNotApply(
            f"hook {name} found nothing to change in {fn.name.value}(): no {looked_for} (the code it edits changed?)",
            construct="catalogue hook",
        )
    return new


class _DropNoneFallback(cst.CSTTransformer):
    def leave_If(self, original, updated):
        body = updated.body.body
        if updated.orelse is None and len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine):
            stmt = body[0].body[0]
            if isinstance(stmt, cst.Assign) and isinstance(stmt.value, cst.Name) and stmt.value.value == "None":
                return cst.RemovalSentinel.REMOVE
        return updated


def drop_none_fallback(fn: cst.FunctionDef) -> cst.FunctionDef:
    """``if not mask.any(): mask = None`` -> (removed): an all-False mask already masks nothing."""
    return _changed("drop_none_fallback", fn, fn.visit(_DropNoneFallback()), "`if ...: name = None` without else")


class _ReplaceValue(cst.CSTTransformer):
    def __init__(self, target: str, make):
        self.target, self.make = target, make

    def leave_Assign(self, original, updated):
        names = [t.target for t in updated.targets]
        if len(names) == 1 and isinstance(names[0], cst.Name) and names[0].value == self.target:
            return updated.with_changes(value=self.make(updated.value))
        return updated

    def leave_For(self, original, updated):
        if isinstance(updated.iter, cst.Name) and updated.iter.value == self.target:
            return updated.with_changes(iter=self.make(updated.iter))
        return updated


def guard_assignment(target: str, guard: str):
    """``target = value`` -> ``target = (guard) and value``: a Python guard that makes it static."""

    def hook(fn: cst.FunctionDef) -> cst.FunctionDef:
        guard_expr = cst.parse_expression(guard)
        new = fn.visit(_ReplaceValue(target, lambda v: cst.BooleanOperation(guard_expr, cst.And(), v)))
        return _changed(hook.__qualname__, fn, new, f"assignment `{target} = ...`")

    hook.__qualname__ = f"guard_assignment({target!r}, {guard!r})"
    return hook


def replace_loop_iterable(name: str, iterable: str):
    """``for x in name:`` -> ``for x in <iterable>:`` (e.g. every expert instead of the hit ones).

    Through the assignment of ``name`` (``replace_value``), which the loop then reads.
    """
    return replace_value(name, iterable)


class _DropIf(cst.CSTTransformer):
    def __init__(self, condition: str):
        self.condition = condition

    def leave_If(self, original, updated):
        if updated.orelse is None and _code(updated.test) == self.condition:
            return cst.RemovalSentinel.REMOVE
        return updated


def drop_if(condition: str):
    """``if <condition>: ...`` (no else) -> (removed): a shortcut whose body the code after it makes redundant.

    E.g. ``if token_idx.numel() == 0: continue`` in an expert loop: an expert without tokens
    adds nothing anyway (``index_add_`` of no rows).
    """

    def hook(fn: cst.FunctionDef) -> cst.FunctionDef:
        return _changed(hook.__qualname__, fn, fn.visit(_DropIf(condition)), f"`if {condition}:` without else")

    hook.__qualname__ = f"drop_if({condition!r})"
    return hook


def replace_value(target: str, expression: str):
    """``target = value`` -> ``target = <expression>`` (e.g. an index the loop now gives as a Python int)."""

    def hook(fn: cst.FunctionDef) -> cst.FunctionDef:
        new = fn.visit(_ReplaceValue(target, lambda _: cst.parse_expression(expression)))
        return _changed(hook.__qualname__, fn, new, f"assignment `{target} = ...`")

    hook.__qualname__ = f"replace_value({target!r}, {expression!r})"
    return hook


def chain(*hooks):
    """One hook applying ``hooks`` in turn (each must find what it changes)."""

    def hook(fn: cst.FunctionDef) -> cst.FunctionDef:
        for h in hooks:
            fn = h(fn)
        return fn

    hook.__qualname__ = "chain(" + ", ".join(h.__qualname__ for h in hooks) + ")"
    return hook


class _OnlyIf(cst.CSTTransformer):
    def __init__(self, target: str, guard: str):
        self.target, self.guard = target, guard

    def leave_SimpleStatementLine(self, original, updated):
        stmt = updated.body[0]
        if len(updated.body) == 1 and isinstance(stmt, cst.Assign) and len(stmt.targets) == 1:
            if _code(stmt.targets[0].target) == self.target:
                block = cst.IndentedBlock([updated.with_changes(leading_lines=[])])
                return cst.If(cst.parse_expression(self.guard), block, leading_lines=updated.leading_lines)
        return updated


def only_if(target: str, guard: str):
    """``target = value`` -> ``if guard: target = value`` (skip a no-op that export cannot trace)."""

    def hook(fn: cst.FunctionDef) -> cst.FunctionDef:
        return _changed(hook.__qualname__, fn, fn.visit(_OnlyIf(target, guard)), f"assignment `{target} = ...`")

    hook.__qualname__ = f"only_if({target!r}, {guard!r})"
    return hook


class _LinearCall(cst.CSTTransformer):
    def __init__(self, module: str, dtype: str):
        self.module, self.dtype = module, dtype

    def leave_Call(self, original, updated):
        if len(updated.args) != 1 or _code(updated.func) != self.module:
            return updated
        x = _code(updated.args[0].value)
        m, dt = self.module, self.dtype
        cast = f"torch.nn.functional.linear({x}, {m}.weight.to({dt}), None if {m}.bias is None else {m}.bias.to({dt}))"
        return cst.parse_expression(f"({m}({x}) if {m}.weight.dtype == {dt} else {cast})")


def cast_linear_in_graph(module: str, dtype: str):
    """``module = module.to(dtype)`` then ``module(x)`` -> the cast made eagerly, read in the graph under export.

    A router that casts its classifier to float32 inside ``forward`` (NllbMoe, SwitchTransformers)
    re-assigns a submodule, which export cannot trace: a float16 model exported before any eager
    call failed (``Couldn't swap Linear.weight``). Eagerly the cast happens as written; under export
    the weights are cast in the graph instead (the same values), and the module is left as it is.
    The two halves may live in different methods, so the hook rewrites whichever it finds.
    """
    guard = f"{module}.weight.dtype != {dtype} and not torch.compiler.is_compiling()"
    assign, call = _OnlyIf(module, guard), _LinearCall(module, dtype)

    def hook(fn: cst.FunctionDef) -> cst.FunctionDef:  # either half is enough: each method has one
        new = fn.visit(assign).visit(call)
        return _changed(hook.__qualname__, fn, new, f"assignment `{module} = ...` nor call `{module}(x)`")

    hook.__qualname__ = f"cast_linear_in_graph({module!r}, {dtype!r})"
    return hook


_SEGMENTS_COMMENT = "# under export: one attention over all the chunks, masked to each chunk's own positions"
_SEGMENTS = """\
segment = torch.searchsorted(cu_seqlens[1:].contiguous(), torch.arange({q}.shape[2], device={q}.device), right=True)
same = (segment[:, None] == segment[None, :])[None, None]
mask = torch.zeros(same.shape, dtype={q}.dtype, device={q}.device).masked_fill(~same, torch.finfo({q}.dtype).min)
{out} = {call}[0]
"""


class _BlockDiagonal(cst.CSTTransformer):
    """Finds ``splits = [torch.split(t, lengths.tolist(), dim=2) for t in (q, k, v)]``, the per-chunk
    ``attn_outputs = [attention_interface(self, q, k, v, ...)[0] for q, k, v in zip(*splits)]`` and the
    ``out = torch.cat(attn_outputs, dim=1)`` ending it, in one block."""

    def leave_IndentedBlock(self, original, updated):
        code = [_code(s.with_changes(leading_lines=[])).strip() for s in updated.body]
        try:
            first = next(i for i, c in enumerate(code) if c.startswith("lengths = cu_seqlens[1:] - cu_seqlens[:-1]"))
            last = next(i for i, c in enumerate(code) if i > first and "torch.cat(attn_outputs, dim=1)" in c)
        except StopIteration:
            return updated
        splits = next((s.body[0].value for s in updated.body[first:last] if _assigns(s, "splits")), None)
        outputs = next((s.body[0].value for s in updated.body[first:last] if _assigns(s, "attn_outputs")), None)
        if not isinstance(splits, cst.ListComp) or not isinstance(outputs, cst.ListComp):
            return updated
        call = outputs.elt.value if isinstance(outputs.elt, cst.Subscript) else None
        chunks, tensors = outputs.for_in.target, splits.for_in.iter
        if not isinstance(call, cst.Call) or not isinstance(chunks, cst.Tuple) or not isinstance(tensors, cst.Tuple):
            return updated
        # the per-chunk names (q, k, v) stand for the whole tensors they were split from
        whole = {_code(c.value): t.value for c, t in zip(chunks.elements, tensors.elements)}

        def unsplit(arg: cst.Arg) -> cst.Arg:
            if arg.keyword and arg.keyword.value == "attention_mask":
                return arg.with_changes(value=cst.Name("mask"))
            return arg.with_changes(value=whole.get(_code(arg.value), arg.value))

        whole_call = _code(call.with_changes(args=[unsplit(a) for a in call.args]))
        out = _code(updated.body[last].body[0].targets[0].target)
        q = _code(tensors.elements[0].value)
        new = list(cst.parse_module(_SEGMENTS.format(q=q, out=out, call=whole_call)).body)
        new[0] = new[0].with_changes(leading_lines=[cst.EmptyLine(comment=cst.Comment(_SEGMENTS_COMMENT))])
        kept = [updated.body[first].with_changes(leading_lines=[]), *updated.body[first + 1 : last + 1]]
        branch = cst.If(
            cst.parse_expression("torch.compiler.is_compiling()"),
            cst.IndentedBlock(new),
            orelse=cst.Else(cst.IndentedBlock(kept)),
            leading_lines=updated.body[first].leading_lines,
        )
        return updated.with_changes(body=[*updated.body[:first], branch, *updated.body[last + 1 :]])


def _assigns(stmt, name: str) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and isinstance(stmt.body[0], cst.Assign)
        and isinstance(stmt.body[0].targets[0].target, cst.Name)
        and stmt.body[0].targets[0].target.value == name
    )


def block_diagonal_attention(fn: cst.FunctionDef) -> cst.FunctionDef:
    """Attention split per chunk by ``torch.split(t, lengths.tolist())`` -> under export, one masked attention.

    Vision encoders (Qwen-VL, GLM-V and their kin) attend within each image: eagerly by splitting
    the sequence at ``cu_seqlens``, whose values are data, so every chunk has a data-dependent size
    and export fails. Under export the same attention is one call with a block-diagonal mask built
    from ``cu_seqlens`` (a masked position weighs exactly 0). Eagerly the code runs as written. The
    mask holds sequence x sequence values: for thousands of patches, memory to budget for.
    """
    looked_for = "`lengths = cu_seqlens[1:] - cu_seqlens[:-1]` ... `torch.cat(attn_outputs, dim=1)` block"
    return _changed("block_diagonal_attention", fn, fn.visit(_BlockDiagonal()), looked_for)


class _ReplaceExpressions(cst.CSTTransformer):
    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def on_leave(self, original, updated):
        # only expressions are rendered to be looked up (not every statement and whitespace node)
        if isinstance(original, cst.BaseExpression) and (new := self.mapping.get(_code(original))) is not None:
            return cst.parse_expression(new)
        return updated


def replace_expressions(mapping: dict[str, str]):
    """Every expression written as a key of ``mapping`` -> its value (e.g. a size kept in a tensor buffer,
    read as the Python int it was made from, so that export sees a size and not data)."""

    def hook(fn: cst.FunctionDef) -> cst.FunctionDef:
        new = fn.visit(_ReplaceExpressions(mapping))
        return _changed("replace_expressions", fn, new, "expression " + " or ".join(f"`{k}`" for k in mapping))

    hook.__qualname__ = f"replace_expressions({mapping!r})"
    return hook
