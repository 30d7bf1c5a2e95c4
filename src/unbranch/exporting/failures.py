"""What a failed ``torch.export`` says: did it stop at Python control flow on data, and where.

Torch knows the place: non-strict export raises from inside the user's frame (the traceback
holds it), strict export names dynamo's user stack (``real_stack``), and a dimension declared
dynamic that a branch specialised is reported at the end of tracing, after the fact; for those,
:class:`GuardLog` remembers where each shape guard was added while the export ran.
A :class:`Site` is the innermost frame of the user's code (any package but torch and unbranch
itself, and not the standard library) at such a place.
"""

from __future__ import annotations

import ast
import inspect
import logging
import os
import re
import sys
import sysconfig
import textwrap
import threading
import traceback
import types
from dataclasses import dataclass, field

import torch

from ..errors import UnbranchError
from ..runtime import source_map
from ..runtime._tracing import failure_in

# what torch raises when Python needs a value that is data while it traces (a branch, ``int(t)``,
# ``bool(t)``), or when a branch on a size narrowed or fixed a dimension declared dynamic
_DATA = re.compile(
    r"GuardOnDataDependentSymNode|Could not guard on data-dependent|Data-dependent branching"
    r"|data-dependent expression|Could not extract specialized integer from data-dependent"
    r"|PendingUnbackedSymbolNotFound"  # torch 2.14: indexing with a tensor under strict export
    r"|builtin operator `\w+` with argument types \['Tensor'"  # dynamo: range(t), a Python value of a tensor
    r"|when trying to handle op (?:max|min|sorted)\b"  # dynamo: max(xs, key=...), keys compared in Python
    r"|sort with non-constant keys"  # dynamo: sorted(xs, key=lambda t: t.sum().item())
)
_DATA_OUTPUT = re.compile(
    r"DataDependentOutputException|Data dependent operator"  # an operator whose Python result is data (torch.equal)
)
_CONSTRAINT = re.compile(r"Constraints violated|specialized it to be a constant")
_SIZE_SOURCE = re.compile(r"L\[[^\s,]*?\.size\(\)\[\d+\]")

_TORCH = os.path.dirname(torch.__file__) + os.sep
_UNBRANCH = os.path.dirname(os.path.dirname(__file__)) + os.sep  # the whole package, not this folder
_STDLIB = sysconfig.get_paths()["stdlib"] + os.sep
_SITE = ("site-packages", "dist-packages")
GENERATED = "unbranch:"  # the file name prefix of rewritten code (loader.filename_for)


def kind_of(e: BaseException) -> str | None:
    """``"data"`` (a value of data needed in Python), ``"shape"`` (a dynamic dimension fixed or
    narrowed) or None (a failure unbranch has nothing to do with)."""
    text = _chain_text(e)
    if _DATA.search(text) or _DATA_OUTPUT.search(text):
        return "data"
    if _CONSTRAINT.search(text):
        return "shape"
    return None


def _chain_text(e: BaseException) -> str:
    parts, seen = [], e
    while seen is not None and len(parts) < 8:
        parts.append(f"{type(seen).__name__}: {seen}")
        seen = seen.__cause__ or seen.__context__
    return "\n".join(parts)


# torch's own packages of user-level Python, rewritten as a user's code is: a distribution
# validates its arguments (``if not valid.all(): raise ValueError``) by default, outside python -O;
# nn's layers and functions test tensors (is a mask causal, are the variances positive); never the
# machinery running and holding modules (module.py: calls, hooks, attributes; container.py: indexing
# a ModuleList, where a data index is the caller's to convert)
_TORCH_USER_LEVEL = tuple(
    os.path.join(_TORCH, *part)
    for part in [("distributions", ""), ("nn", "modules", ""), ("nn", "functional.py"), ("nn", "utils", "rnn.py")]
)
_TORCH_MACHINERY = tuple(os.path.join(_TORCH, "nn", "modules", name) for name in ("module.py", "container.py"))


def in_torch(path: str) -> bool:
    return path.startswith(_TORCH)


def is_user_file(path: str) -> bool:
    """Code unbranch may rewrite: not torch (but for its user-level packages), not unbranch itself, not
    the standard library."""
    if path.startswith(GENERATED):
        return True  # rewritten code: it stands for the user's own lines
    if path.startswith(_TORCH_USER_LEVEL) and not path.startswith(_TORCH_MACHINERY):
        return True
    if path.startswith(("<frozen", "<eval_with_key>", _TORCH, _UNBRANCH)):  # (the second: torch.fx's code)
        return False
    return not (path.startswith(_STDLIB) and not any(s in path for s in _SITE))


@dataclass
class Site:
    """One place torch stopped at: the user's frame, and (if deeper) the torch code it was in."""

    path: str
    line: int
    name: str  # the function's name (``co_name``)
    code: types.CodeType | None = None  # its code object, when torch gave a live frame
    inside: str = ""  # ``torch/...py:LINE`` when the failure itself happened in torch's own code
    kind: str = "data"
    swallowed: str = ""  # ``file:line`` of the user's ``try`` that caught the error (the export went on)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def text(self) -> str:
        import linecache

        return linecache.getline(self.path, self.line).strip()

    def key(self) -> tuple:
        return (self.path, self.line)


def _site(frames: list, kind: str) -> Site | None:
    """The innermost user frame of ``frames`` (outermost first): (path, line, name, code or None)."""
    for k in range(len(frames) - 1, -1, -1):
        path, line, name, code = frames[k]
        if is_user_file(path):
            # the innermost frame of torch's user-level code beneath (a module's forward, not its tracing)
            deeper = next((f for f in reversed(frames[k + 1 :]) if _torch_library(f[0])), None)
            inside = f"{_short(deeper[0])}:{deeper[1]}" if deeper else ""
            return Site(path, line, name, code, inside, kind)
    return None


# torch's own tracing machinery, which every failure passes through (``bool(t)`` reaches it via
# __torch_function__): a frame there is not torch library code the user called
_MACHINERY = ("fx", "export", "overrides.py", "utils", "_")


def _torch_library(path: str) -> bool:
    """Is ``path`` a torch function a user calls (``torch/nn/functional.py``), not its tracing machinery?"""
    return path.startswith(_TORCH) and not path[len(_TORCH) :].startswith(_MACHINERY)


def _short(path: str) -> str:
    for marker in _SITE:
        if marker in path:
            return path.split(marker + os.sep)[-1]
    return path


def sites(e: BaseException, guards: GuardLog | None = None, kind: str | None = None) -> list[Site]:
    """Where the user's code made ``e`` happen (innermost user frames), most specific first.

    ``kind`` names a failure other than control flow (what :func:`kind_of` says, by default).
    """
    kind = kind or kind_of(e)
    if kind is None:
        return []
    found: list[Site] = []
    if kind == "shape" and guards is not None:
        found += guards.sites_for(_violated(e))
    chain = _chain(e)
    # innermost cause first: a cond's branch that failed inside dynamo is named by dynamo's
    # error, beneath the runtime's refusal raised at the ``if`` holding the cond
    for seen in reversed(chain):
        if found:
            break
        for frames in (_dynamo_frames(seen), _traceback_frames(seen)):
            site = _site(frames, kind) if frames else None
            if site is not None:
                found.append(site)
                break
    return found


def _chain(e: BaseException) -> list:
    """``e`` and its causes (or contexts), outermost first, each once."""
    chain, seen = [], e
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    return chain


def place(e: BaseException) -> tuple[str | None, int | None]:
    """(path, line) in the user's file of the innermost user frame ``e`` names (a line of rewritten
    code moved back to the line it stands for), or (None, None)."""
    # (not code without a file: ``<string>``, which torch's scan and cond make while tracing a step)
    site = next((s for s in sites(e, kind="other") if not s.path.startswith("<")), None)
    if site is None:
        return None, None
    if site.path.startswith(GENERATED):
        found = source_map.lookup(site.path, site.line)
        if found:
            return found
    return site.path, site.line


def _traceback_frames(e: BaseException) -> list:
    """The frames from torch's first one inward: those before it called the export (the user's own
    ``torch.export.export(...)`` line is no place that branched on data)."""
    walked = traceback.walk_tb(e.__traceback__)
    frames = [(f.f_code.co_filename, line, f.f_code.co_name, f.f_code) for f, line in walked]
    first = next((k for k, frame in enumerate(frames) if frame[0].startswith(_TORCH)), 0)
    return frames[first:]


_QUOTED_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def _dynamo_frames(e: BaseException) -> list:
    """Strict export: dynamo's user stack (``real_stack``), else the frames its message quotes."""
    stack = getattr(e, "real_stack", None)
    if stack:
        return [(f.filename, f.lineno, f.name, None) for f in stack]
    text = str(e)
    if "from user code:" in text or "User stack:" in text:
        return [(p, int(n), name, None) for p, n, name in _QUOTED_FRAME.findall(text)]
    return []


def caller_of(e: BaseException, code: types.CodeType) -> Site | None:
    """The frame that called ``code`` where ``e`` happened (non-strict: the traceback; strict:
    dynamo's user stack), if it is the user's code or code rewritten here; else None."""
    for seen in _chain(e):
        for frames in (_traceback_frames(seen), _dynamo_frames(seen)):
            for k in range(1, len(frames)):
                path, _, name, _ = frames[k]
                if path == code.co_filename and name == code.co_name:
                    caller = frames[k - 1]
                    if is_user_file(caller[0]) or caller[0].startswith(GENERATED):
                        return Site(*caller)
                    return None
    return None


def in_a_branch(e: BaseException) -> bool:
    """Did strict export fail inside a branch function of a converted ``if`` (dynamo's own error,
    which the runtime never sees: it traces the runtime too)?"""
    from ..runtime import control_flow

    return any(path == control_flow.__file__ and name == "branch" for path, _, name, _ in _dynamo_frames(e))


def _violated(e: BaseException) -> set[str]:
    """The dimensions (``L['x'].size()[0]``) a constraint violation names, in torch's own spelling."""
    names, seen = set(), e
    while seen is not None:
        names.update(_SIZE_SOURCE.findall(str(seen)))
        seen = seen.__cause__ or seen.__context__
    return names


def _data_errors() -> tuple[type, ...]:
    """The exception classes raised in the user's code where it needs a value that is data: torch's,
    and the runtime's own refusal of a construct left as Python (``_ub.unconverted``)."""
    from torch._subclasses.fake_tensor import DataDependentOutputException
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    return (GuardOnDataDependentSymNode, DataDependentOutputException, UnbranchError)


class Swallowed:
    """While open, remember every error torch raises where Python needs a value of data, to tell
    afterwards those the user's own ``except`` caught.

    Non-strict export runs the user's code: a branch on data raises inside it, and a ``try``
    around the branch catches that, so the export "works" with the ``except`` side baked in, for
    every input. The outermost frame an exception's traceback reaches is where it was caught:
    a user frame there, whose ``except`` does not name torch's data-dependent error itself (a
    deliberate ``guard_or_false``), swallowed a failure: the export did not succeed.
    Errors are recorded only from the thread that opened it (others' exports are theirs).
    """

    def __init__(self) -> None:
        self.raised: list[BaseException] = []
        self._thread = threading.get_ident()

    def __enter__(self):
        self._saved = []
        for kind in _data_errors():
            original = kind.__init__

            def recording(error, *args, _original=original, **kwargs):
                _original(error, *args, **kwargs)
                if threading.get_ident() == self._thread:
                    self.raised.append(error)

            self._saved.append((kind, original))
            kind.__init__ = recording
        return self

    def __exit__(self, *exc):
        for kind, original in self._saved:
            kind.__init__ = original

    def sites(self) -> list[Site]:
        """The user's frames that branched on data where the user's code swallowed the error."""
        found: dict[tuple, Site] = {}
        for error in self.raised:
            tb = error.__traceback__
            if tb is None or not is_user_file(tb.tb_frame.f_code.co_filename):
                continue  # never raised, or caught by torch itself
            if _names_data_error(tb.tb_frame.f_code, tb.tb_lineno):
                continue
            frames = [(f.f_code.co_filename, line, f.f_code.co_name, f.f_code) for f, line in traceback.walk_tb(tb)]
            site = _site(frames, "data")
            if site is not None:
                path, line = tb.tb_frame.f_code.co_filename, _handler_line(tb)
                path, line = source_map.lookup(path, line) or (path, line)  # (rewritten code: the user's line)
                site.swallowed = f"{_short(path)}:{line}"
                found.setdefault(site.key(), site)
        return list(found.values())


def _handler_line(tb) -> int:
    """The line of the ``try`` whose body held ``tb``'s line in the catching frame, else that line."""
    found = _enclosing_try(tb.tb_frame.f_code, tb.tb_lineno)
    return tb.tb_lineno if found is None else found[0]


def _enclosing_try(code: types.CodeType, line: int) -> tuple[int, list] | None:
    """(file line, ``ast`` handlers) of the innermost ``try`` of ``code``'s source whose body
    holds file line ``line``, or None."""
    try:
        lines, first = inspect.getsourcelines(code)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return None
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and node.body:
            start, end = node.body[0].lineno + first - 1, node.body[-1].end_lineno + first - 1
            if start <= line <= end and (found is None or node.lineno + first - 1 > found[0]):
                found = (node.lineno + first - 1, node.handlers)
    return found


def _names_data_error(code: types.CodeType, line: int) -> bool:
    """Does an ``except`` of the ``try`` holding ``line`` name torch's data-dependent error itself?"""
    found = _enclosing_try(code, line)
    names = {kind.__name__ for kind in _data_errors()}
    for handler in found[1] if found is not None else ():
        for node in ast.walk(handler.type) if handler.type is not None else ():
            if (getattr(node, "id", None) or getattr(node, "attr", None)) in names:
                return True
    return False


@dataclass
class GuardLog(logging.Filter):
    """While open, remember the user's frame of every shape guard torch adds, and the dimensions it reads.

    Torch tells which dimension a violated constraint is about only once tracing is over; the
    guard that fixed or narrowed it was added by a branch somewhere earlier. Torch reports each
    guard to its ``symbolic_shapes`` logger (at INFO); this filter reads the user's frame there
    (the Python stack in non-strict export, dynamo's user stack in strict export) and lets the
    record through only where the logger would have emitted it anyway.
    """

    guards: list = field(default_factory=list)  # (dimension names, Site)

    def __post_init__(self):
        super().__init__()
        self._logger = logging.getLogger("torch.fx.experimental.symbolic_shapes")

    def __enter__(self):
        self._level = self._logger.level
        self._disabled = logging.root.manager.disable  # (``logging.disable(...)``: no record reaches a filter)
        self._emits = self._logger.getEffectiveLevel() if self._disabled < logging.INFO else logging.CRITICAL + 1
        self._logger.addFilter(self)
        if self._disabled >= logging.INFO:
            logging.disable(logging.NOTSET)
        if self._logger.getEffectiveLevel() > logging.INFO:
            self._logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc):
        self._logger.removeFilter(self)
        self._logger.setLevel(self._level)
        logging.disable(self._disabled)

    def filter(self, record: logging.LogRecord) -> bool:
        if "[guard added]" in str(record.msg):
            try:
                self._record()
            except Exception:  # torch's internals moved: guards are then not placed, nothing breaks
                pass
        return record.levelno >= self._emits

    def _record(self) -> None:
        from torch._guards import TracingContext

        frame, shape_env, guard, python_frames = sys._getframe(1), None, None, []
        while frame is not None:
            if frame.f_code.co_name == "_log_guard" and shape_env is None:
                shape_env, guard = frame.f_locals.get("self"), frame.f_locals.get("g")
            python_frames.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name, frame.f_code))
            frame = frame.f_back
        # strict export: dynamo's stack of the code it traces (the Python stack is dynamo's own,
        # under the caller of export); non-strict: the Python stack, which holds the user's frames
        user = TracingContext.extract_stack()
        frames = [(f.filename, f.lineno, f.name, None) for f in user] if user else python_frames[::-1]
        site = _site(frames, "shape")
        if site is None or shape_env is None or guard is None:
            return
        names = set()
        for symbol in getattr(guard, "free_symbols", ()):
            for source in shape_env.var_to_sources.get(symbol, ()):
                name = source.name
                names.add(name() if callable(name) else name)
        self.guards.append((names, site))

    def sites_for(self, dimensions: set[str]) -> list[Site]:
        """The places whose guards read one of ``dimensions`` (each place once, first added first).

        Strict export names a dimension after the argument (``L['x']``) where its guards named
        dynamo's flattened input (``L['flat_args'][0]``): when no guard matches, every place
        that added a shape guard is a candidate (rewriting one with no branch there changes nothing).
        """
        chosen = [site for names, site in self.guards if names & dimensions] or [site for _, site in self.guards]
        out: dict[tuple, Site] = {}
        for site in chosen:
            out.setdefault(site.key(), site)
        return list(out.values())


_BRANCH_FUNCTION = re.compile(r"_(then|else)_\d+$")  # (lower.build's branch functions: ``branch_cond_then_1``)


def untraced_side(e: BaseException) -> tuple[str, int, str, str] | None:
    """(file, line, "then" or "else", why) of the converted if a side of which failed to trace: the
    innermost branch function of rewritten code among the frames ``e`` (and its causes) went through,
    placed at its caller's line (the ``if`` it stands for); None when the failure is in no branch."""
    from ..runtime.control_flow import rejection

    # every frame the failure went through, outermost first: an exception's own, then its cause's (a
    # runtime refusal's traceback holds the if's line, the cond's error under it the branch's frames)
    frames, seen, innermost = [], e, e
    while seen is not None and len(frames) < 10_000:
        frames += _traceback_frames(seen) + _dynamo_frames(seen)
        innermost, seen = seen, seen.__cause__ or seen.__context__
    branch = None
    for k, (path, _, name, _) in enumerate(frames):
        if path.startswith(GENERATED) and _BRANCH_FUNCTION.search(name):
            branch = k
    if branch is None:
        return None
    callers = [f for f in frames[:branch] if f[0].startswith(GENERATED)]  # (the if's line: in an outer branch too)
    place = source_map.lookup(callers[-1][0], callers[-1][1]) if callers else None
    if place is None:
        return None
    why = rejection(innermost)
    inside = [f for f in frames[branch + 1 :] if is_user_file(f[0])]
    if inside:  # (the user's line where it failed; in rewritten code, the line it stands for)
        path, line = source_map.lookup(inside[-1][0], inside[-1][1]) or inside[-1][:2]
        why += f", at {_short(path)}:{line}"
    return place[0], place[1], _BRANCH_FUNCTION.search(frames[branch][2]).group(1), why


def narrowing(ep, asked: frozenset = frozenset()) -> list[str]:
    """What an exported program accepts less of than the dynamic dimensions it was asked for: the
    guards on sizes it checks when run (``L['x'].size()[1] < 16``), which torch leaves where a
    branch on a size that ``Dim.DYNAMIC``/``Dim.AUTO`` left free was taken one way (a named ``Dim``
    fails the export instead, and its own bounds are no guard). ``asked``: the equalities the
    user's own ``dynamic_shapes`` state (one Dim for two dimensions), which narrow nothing."""
    return [str(guard) for guard in getattr(ep, "_guards_code", None) or () if str(guard) not in asked]


def asked_equal(mod, args, kwargs, dynamic_shapes) -> frozenset[str]:
    """The guards torch states for one named ``Dim`` given to several dimensions of the arguments
    (``L['a'].size()[0] == L['b'].size()[0]``), both ways round."""
    leaves = [id(leaf) for leaf in torch.utils._pytree.tree_leaves((args, kwargs or {}))]
    sharing: dict[str, list[str]] = {}
    for source, tensor, i, dim in named_dims(mod, args, kwargs, dynamic_shapes):
        # (non-strict export names an argument; strict export its place among the flattened inputs)
        flat = [f"L['flat_args'][{leaves.index(id(tensor))}]"] if id(tensor) in leaves else []
        sharing.setdefault(dim.__name__, []).extend(f"{s}.size()[{i}]" for s in (source, *flat))
    return frozenset(f"{a} == {b}" for group in sharing.values() for a in group for b in group if a != b)


def named_dims(mod, args, kwargs, dynamic_shapes):
    """(source, tensor, dimension, Dim) of each named ``Dim`` ``dynamic_shapes`` gives a dimension of
    the arguments of ``mod.forward`` (``L['x']``, ``L['x'][0]``...); nothing where they do not bind."""
    if not dynamic_shapes or not hasattr(mod, "forward"):
        return
    try:
        bound = inspect.signature(mod.forward).bind(*args, **(kwargs or {})).arguments
    except (TypeError, ValueError):
        return
    specs = dynamic_shapes.items() if isinstance(dynamic_shapes, dict) else zip(bound, dynamic_shapes)
    for name, spec in specs:
        yield from _named_dims(f"L['{name}']", bound.get(name), spec)


def _named_dims(source: str, value, spec):
    """(source, tensor, dimension, Dim) of each named ``Dim`` (not a hint, not a number) that ``spec``
    gives a tensor in ``value``, also inside lists, tuples and dicts of them."""
    if isinstance(value, torch.Tensor):
        dims = spec.items() if isinstance(spec, dict) else enumerate(spec) if isinstance(spec, (list, tuple)) else ()
        yield from ((source, value, i, dim) for i, dim in dims if isinstance(dim, torch.export.Dim))
    elif isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)):
        for k, (item, inner) in enumerate(zip(value, spec)):
            yield from _named_dims(f"{source}[{k}]", item, inner)
    elif isinstance(value, dict) and isinstance(spec, dict):
        for key in spec.keys() & value.keys():
            yield from _named_dims(f"{source}[{key!r}]", value[key], spec[key])


# a branch (if, while, a conditional expression), or Python's int/float of a size
_NARROWS = re.compile(r"^\s*(?:(?:el)?if|while|assert)\b|\bif\b.*\belse\b|\b(?:int|float)\(")


def narrowed_by(narrowed: list[str], guards: GuardLog) -> list[Site]:
    """The branches (``if``, ``while``, conditional expressions) and the ``int(...)`` of sizes whose
    guards narrowed what ``narrowed`` lists; other code's guards (``x + y`` on two sizes) are the
    model's own needs."""
    return [
        site for site in guards.sites_for(set(_SIZE_SOURCE.findall(" ".join(narrowed)))) if _NARROWS.search(site.text)
    ]


def runtime_failure(e: BaseException) -> UnbranchError | None:
    """The runtime's own error inside what strict export raised, as UnbranchError.

    Under dynamo the runtime fails with a graph break whose argument is its message
    (``_tracing.fail``); torch wraps it, and the user would see dynamo's generic message.
    """
    if isinstance(e, UnbranchError):
        return None
    found = failure_in(e)
    if found is None:
        return None
    message, construct, seen = found
    return UnbranchError.placed(_placed(message, seen), construct)


def _placed(message: str, exc: BaseException) -> str:
    """Under dynamo the runtime cannot see its caller ("this line"); dynamo's user stack can."""
    if _UNPLACED not in message:
        return message
    frames = [f for f in getattr(exc, "real_stack", None) or () if f.filename.startswith("unbranch:")]
    if not frames:
        return message
    return message.replace(_UNPLACED, source_map.describe(frames[-1].filename, frames[-1].lineno))


_UNPLACED = "this line"  # runtime._tracing.origin_of_caller under dynamo
