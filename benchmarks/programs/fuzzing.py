"""Differential fuzzing: random ``if`` programs must compute the same thing eagerly, rewritten and exported.

A program is the source of one function ``f(x, y, flag, n, mask)``: nested ``if``/``elif``/``else``
on tensor predicates (``x.sum() > 0``) and Python ones (``flag``, ``n > 2``, ``mask is None``)
mixed with ``and``/``or``/``not``, assignments, ``+=``/``-=``/``*=`` and early returns. ``x`` and
``y`` are ``(k, 3)`` tensors, ``mask`` is ``None`` or a ``(3,)`` tensor. Every generated program
runs eagerly and returns a tensor (or a pair of tensors) on every path; it stays within what
unbranch converts (a variable is read only where every path defined it, all returns have one
arity). With ``effects=True`` programs also alias and view their tensors, change them in
place (methods, masked stores, a helper that halves its argument), append to a list and call
a closure; the inputs' state after the call is compared too, and an ``if`` whose effects a
branch function would lose must be refused clearly (a "refusal", not a divergence).
Shared by ``tests/test_fuzz.py`` (bounded) and ``benchmarks/fuzz.py`` (long run).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import logging
import os
import re
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass

import torch
from hypothesis import strategies as st
from torch.export import Dim

import unbranch

PARAMS = ("x", "y")
LOCALS = ("a", "b", "c")
MAX_DEPTH = 3
MAX_STATEMENTS = 24  # the rewrite's cost grows fast with nesting (see benchmarks/fuzz.py's slowest)
CONSTS = ("0", "0.5", "-0.5", "1.0")
# shape-preserving and finite: values grow at most geometrically with the number of statements
UNARY = (
    "torch.sin({})",
    "torch.tanh({})",
    "{}.abs()",
    "{}.relu()",
    "-{}",
    "{} * 0.5",
    "{} + 1.0",
    "{} - 0.25",
    "{} * (n * 0.5)",
)
BINARY = ("{} + {}", "{} - {}", "{} * torch.tanh({})")
TENSOR_TESTS = (
    "{e}.sum() > {c}",
    "{e}.mean() < {c}",
    "{v}.max() > {w}.min()",
    "({v} > {c}).any()",
    "({v} < {c}).all()",
    "{e}.abs().mean() > {c}",
    "({v} > {c}).sum()",  # an integer tensor's truthiness
    "{e}.sum().item() > {c}",  # a data-dependent Python float under export
)
PYTHON_TESTS = ("flag", "n > 2", "mask is None", "mask is not None")
# what real code writes around a tensor test (programs(realcode=True)): chained comparisons, bool()/int()
REAL_TESTS = (
    "{c} < {e}.mean() < 1.5",
    "-1.0 <= {v}.sum() < n",
    "not -0.5 < {e}.max() <= {c}",
    "bool(({v} > {c}).any())",
    "int(({v} > {c}).sum()) > 1",
    "0 < {v}.sum().item() < 2.5",
)
# checks that raise on some inputs: eager raises the same exception, the exported program raises too
CHECKS = (
    'if bool(({v}.abs() > 30.0).any()):\n    raise ValueError("too large")',
    'check_(({v}.abs() < 40.0).all(), "beyond 40")',
    'assert {v}.abs().max() < 50.0, "beyond 50"',
    'torch._assert(({v}.abs() < 45.0).all(), "beyond 45")',
)
SHAPE_TESTS = ("{v}.shape[0] > 3", "{v}.size(0) < 4")  # SymBools under a dynamic batch
INPLACE = ("{t}.mul_(0.5)", "{t}.add_(1.0)", "{t}.clamp_(-2.0, 2.0)", "{t}[{t} > 1.0] = 0.5", "halve_({t})")
# what an effects program defines before f: a helper unbranch reads to see that it changes its argument
PRELUDE = ["def halve_(t):", "    t.mul_(0.5)", "", ""]
# and a realcode program: a check helper in kornia's style
CHECK_PRELUDE = [
    "def check_(condition, message):",
    "    if not condition:",
    "        raise ValueError(message)",
    "",
    "",
]
HELPERS = ("check_", "soft_", "settle_")  # module-level helpers an export rewrites with f (family_programs')
# constructs that diverge today, drawn only with programs(known_bugs=True) until they are fixed
KNOWN_BUGS = {
    "return b, b": "a branch returning one tensor twice: cond rejects output-to-output aliasing",
    "mask = mask * 0.5": "an Optional tensor rebound in a branch: None cannot be a cond output; as the "
    "only output it comes back as () and a later `mask is None` is silently False",
}


class _Writer:
    """Draws one program; ``names`` is always the set of tensor variables defined on every path."""

    def __init__(
        self, draw, arity: int, known_bugs: bool, budget: int, effects: bool = False, ternaries=False, realcode=False
    ):
        self.draw, self.arity, self.known_bugs, self.budget = draw, arity, known_bugs, budget
        self.effects, self.ternaries, self.realcode = effects, ternaries, realcode
        self.extra_tests: tuple[str, ...] = ()  # more tensor tests (family_programs' spellings)
        # one program in four may append to the list or call the closure (ifs doing so are refused)
        self.refusable = effects and draw(st.integers(0, 3)) == 0

    def choose(self, options):
        return self.draw(st.sampled_from(options))

    def expr(self, names, depth=0, fresh=False) -> tuple[str, bool]:
        """(text, atomic): atomic text can take a method call or an operator without parentheses.

        ``fresh`` excludes a bare name: ``a = x`` would alias, and a later ``a += 1`` in a branch
        (rebound there by design) would then no longer update ``x`` as Python does.
        """
        if self.ternaries and depth == 0 and self.draw(st.integers(0, 3)) == 0:
            return ternary(self, names, depth, fresh)
        kinds = ("unary", "binary") if fresh and not self.effects else ("name", "name", "unary", "binary")
        kind = self.choose(kinds) if depth < 2 else "name"
        if kind == "name":
            return self.choose(sorted(names)), True
        if kind == "unary":
            template = self.choose(UNARY)
            inner = self.expr(names, depth + 1)
            text = template.format(inner[0] if template.startswith("torch.") else _paren(*inner))
            return text, template.startswith("torch.") or template.startswith("{}.")
        template = self.choose(BINARY)
        left, right = self.expr(names, depth + 1), self.expr(names, depth + 1)
        return template.format(_paren(*left), right[0] if template.endswith("tanh({})") else _paren(*right)), False

    def predicate(self, names, depth=0) -> str:
        kind = self.choose(("tensor", "tensor", "python", "shape", "and", "or", "not")) if depth < 2 else "leaf"
        if kind == "leaf":
            kind = self.choose(("tensor", "tensor", "python", "shape"))
        if kind == "shape":
            return self.choose(SHAPE_TESTS).format(v=self.choose(sorted(names)))
        if kind == "tensor":
            template = self.choose(TENSOR_TESTS + REAL_TESTS * self.realcode + self.extra_tests)
            e = _paren(*self.expr(names, depth=1))
            v, w = self.choose(sorted(names)), self.choose(sorted(names))
            return template.format(e=e, v=v, w=w, c=self.choose(CONSTS))
        if kind == "python":
            return self.choose(PYTHON_TESTS)
        if kind == "not":
            inner = self.predicate(names, depth + 1)
            return f"not ({inner})" if " and " in inner or " or " in inner else f"not {inner}"
        left, right = self.predicate(names, depth + 1), self.predicate(names, depth + 1)
        return f"({left}) {kind} ({right})" if self.draw(st.booleans()) else f"{left} {kind} {right}"

    def ret(self, names) -> str:
        values = [self.expr(names)[0] for _ in range(self.arity)]
        if self.effects:
            values[0] = f"{_paren(values[0], False)} + len(aux)"
        if self.realcode:  # the closure reads `s` as the branches left it
            values[0] = f"{_paren(values[0], False)} + scaled()"
        if len(values) == 2 and values[0] == values[1] and not self.known_bugs:
            values[1] = f"torch.sin({values[1]})"  # `return b, b`: see KNOWN_BUGS
        return "return " + ", ".join(values)

    def block(self, names, depth) -> tuple[list[str], set | None]:
        """Lines of a block and the names defined after it (None: every path returned)."""
        names, lines = set(names), []
        for _ in range(self.draw(st.integers(1, 4 if depth == 0 else 3))):
            self.budget -= 1
            simple = depth >= MAX_DEPTH or self.budget <= 0
            kinds = ("assign", "augassign") if simple else ("assign", "augassign", "if", "if", "mask")
            if self.effects:
                kinds += ("view", "inplace", "inplace", *(("append", "closure") if self.refusable else ()))
            if self.realcode:
                kinds += ("check",)
            kind = self.choose(kinds)
            if kind == "view":
                target = self.choose(sorted(set(LOCALS) | names))
                lines.append(f"{target} = {self.choose(sorted(names))}{self.choose(('[:]', '.view_as(x)', '.T.T'))}")
                names.add(target)
            elif kind == "inplace":
                lines.append(self.choose(INPLACE).format(t=self.choose(sorted(names))))
            elif kind == "append":
                lines.append(f"aux.append({self.expr(names)[0]})")
            elif kind == "check":
                lines += self.choose(CHECKS).format(v=self.choose(sorted(names))).split("\n")
            elif kind == "closure":
                lines.append(f"{self.choose(sorted(names))} = scaled() + {self.choose(sorted(names))}")
            elif kind == "assign":
                target = self.choose(sorted(set(LOCALS) | names))
                lines.append(f"{target} = {self.expr(names, fresh=True)[0]}")
                names.add(target)
            elif kind == "augassign":
                target, op = self.choose(sorted(names)), self.choose(("+=", "-=", "*="))
                value = self.expr(names) if op != "*=" else (f"torch.tanh({self.expr(names)[0]})", True)
                lines.append(f"{target} {op} {value[0]}")
            elif kind == "mask":
                targets = sorted(names) + ["mask"] * self.known_bugs
                target = self.choose(targets)
                value = "mask * 0.5" if target == "mask" else f"{target} * mask"
                lines += ["if mask is not None:", f"    {target} = {value}"]
            else:
                sub, after = self.if_stmt(names, depth)
                lines += sub
                if after is None:
                    return lines, None
                names = after
        if depth > 0 and self.draw(st.integers(0, 3)) == 0:
            return [*lines, self.ret(names)], None
        return lines, names

    def if_stmt(self, names, depth) -> tuple[list[str], set | None]:
        lines, ends = [], []
        for keyword in ("if", *["elif"] * self.draw(st.integers(0, 1))):
            body, after = self.block(names, depth + 1)
            lines += [f"{keyword} {self.predicate(names)}:", *_indent(body)]
            ends.append(after)
        if self.draw(st.booleans()):
            body, after = self.block(names, depth + 1) if self.draw(st.integers(0, 4)) else (["pass"], names)
            lines += ["else:", *_indent(body)]
            ends.append(after)
        else:
            ends.append(names)
        open_ends = [e for e in ends if e is not None]
        return lines, set.intersection(*open_ends) if open_ends else None


def ternary(writer: _Writer, names, depth: int, fresh: bool) -> tuple[str, bool]:
    """``(a if p else b)``: sides of one shape and dtype, on a tensor, shape or Python test."""
    test = writer.predicate(names, depth=2)  # one test, no and/or/not (those are the ifs' business)
    then = writer.expr(names, 1, fresh)  # (depth 1: a fresh side is never a bare name)
    nested = depth == 0 and writer.draw(st.integers(0, 3)) == 0
    orelse = ternary(writer, names, depth + 1, fresh) if nested else writer.expr(names, 1, fresh)
    return f"({then[0]} if {test} else {orelse[0]})", True


def _paren(text: str, atomic: bool) -> str:
    return text if atomic else f"({text})"


def _indent(lines):
    return ["    " + line for line in lines]


@st.composite
def programs(
    draw,
    known_bugs: bool = False,
    max_statements: int = MAX_STATEMENTS,
    effects: bool = False,
    ternaries: bool = False,
    loops: bool = False,
    jumps: bool = False,
    realcode: bool = False,
    families: bool = False,
) -> str:
    """Source text of ``def f(x, y, flag, n, mask)``; ``known_bugs`` also draws the KNOWN_BUGS constructs.

    ``ternaries``: expressions may also be conditional expressions ``(a if p else b)``;
    ``realcode``: tests as real code writes them (chained comparisons, ``bool()``, ``int()``),
    checks that raise (``if bool(t): raise``, a check helper, ``assert``) and a closure over ``s``
    that the return reads after the branches rebound it;
    ``loops``: loop programs instead (``loop_programs``); ``jumps``: loops with
    break/continue/return instead (``jump_programs``); ``families``: issue 37's constructs
    (Python values, loop lengths and reports decided by data, containers) instead (``family_programs``).
    """
    if families:
        return draw(family_programs(max_statements))
    if loops:
        return draw(loop_programs())
    if jumps:
        return draw(jump_programs())
    writer = _Writer(draw, draw(st.integers(1, 2)), known_bugs, max_statements, effects, ternaries, realcode)
    body, after = writer.block(set(PARAMS) | ({"s"} if realcode else set()), 0)
    if after is not None:
        body.append(writer.ret(after))
    if effects:  # a list the branches may append to and a closure over the first argument
        body = ["aux = []", "", "def scaled():", "    return x * 0.5", "", *body]
    elif realcode:  # a closure over a local the branches may rebind, called after them
        body = ["def scaled():", "    return s + 1.0", "", *body]
    if realcode:
        body = ["s = x * 0.5", *body]
    prelude = [*(PRELUDE if effects else []), *(CHECK_PRELUDE if realcode else [])]  # both, when both are drawn
    return "\n".join(["import torch", "", "", *prelude, "def f(x, y, flag, n, mask):", *_indent(body), ""])


_TENSOR_IF = re.compile(r"^\s*(?:el)?if .*\.", re.MULTILINE)  # only tensor and shape tests have a dot
_TENSOR_IFEXP = re.compile(r" if [^\n]*?\.[^\n]*? else ")  # (roughly: may also match a dot in a side)


def branches_on_tensors(source: str) -> bool:
    """Does the program have an ``if`` that can become a cond? Only those are worth an export."""
    return _TENSOR_IF.search(source) is not None or _TENSOR_IFEXP.search(source) is not None


# --- the check --------------------------------------------------------------------------------

_DIR = tempfile.TemporaryDirectory(prefix="unbranch_fuzz_")
MASK = torch.tensor([0.5, -1.0, 2.0])
# (flag, n, mask): every value each Python test can see
PYTHON_ARGS = [(flag, n, mask) for flag in (True, False) for n in (1, 3) for mask in (None, MASK)]
VARIANTS = {
    "pos, pos": lambda r: (r[0] + 0.5, r[1] + 0.5),
    "neg, neg": lambda r: (-r[0] - 0.5, -r[1] - 0.5),
    "pos, neg": lambda r: (r[0] + 0.5, -r[1] - 0.5),
    "neg, pos": lambda r: (-r[0] - 0.5, r[1] + 0.5),
    "mixed": lambda r: (r[2], r[3]),
    "10x, y/10": lambda r: (10 * r[2], r[3] / 10),
    "x/10, 10y": lambda r: (r[2] / 10, 10 * r[3]),
    "small": lambda r: (r[2] / 100, r[3] / 100),
    "big": lambda r: (100 * r[2], 100 * r[3]),
    "x = y": lambda r: (r[2], r[2].clone()),
    "x = -y": lambda r: (r[2], -r[2]),
    "zeros, mixed": lambda r: (torch.zeros_like(r[2]), r[3]),
    "mixed, zeros": lambda r: (r[2], torch.zeros_like(r[3])),
    "2 + x, mixed": lambda r: (r[0] + 2, r[3]),
    "mixed, -2 - y": lambda r: (r[2], -r[1] - 2),
    "ones, -ones": lambda r: (torch.ones_like(r[2]), -torch.ones_like(r[3])),
}


@dataclass
class Divergence:
    """One program on which unbranch differs from Python (or fails)."""

    kind: str  # "rewrite" (transform_method raised), "eager", "export", "export-error" or "crash" (unbranch's code)
    source: str
    detail: str
    strict: bool | None = None

    def __str__(self):
        mode = "" if self.strict is None else f" (strict={self.strict})"
        return f"{self.kind}{mode}: {self.detail}\n{self.source}"


def load(source: str):
    """Import ``source`` from a real file, since unbranch reads functions back with inspect.getsource."""
    name = "unbranch_fuzz_" + hashlib.sha1(source.encode()).hexdigest()[:16]
    if name not in sys.modules:
        path = os.path.join(_DIR.name, name + ".py")
        with open(path, "w") as f:
            f.write(source)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name].f


def _shifted(shift_x, scale_x, shift_y, scale_y):
    return lambda r: (scale_x * r[2] + shift_x, scale_y * r[3] + shift_y)


def _generator(source: str) -> torch.Generator:
    """Seeded by the program: a divergence reproduces from its source alone."""
    return torch.Generator().manual_seed(int(hashlib.sha1(source.encode()).hexdigest()[:8], 16))


def tensor_inputs(source: str, sizes=(2, 3, 5), shifted=8):
    """(label, x, y): each variant, then ``shifted`` random shifts and scales."""
    gen = _generator(source)
    makers = list(VARIANTS.items())
    for _ in range(shifted):
        sx, sy = (torch.randint(-4, 5, (2,), generator=gen) / 2).tolist()
        kx, ky = (10.0 ** torch.randint(-1, 2, (2,), generator=gen)).tolist()
        makers.append((f"{kx} * x {sx:+}, {ky} * y {sy:+}", _shifted(sx, kx, sy, ky)))
    out = []
    for i, (label, make) in enumerate(makers):
        k = sizes[i % len(sizes)]
        r = (torch.rand(k, 3, generator=gen), torch.rand(k, 3, generator=gen))
        r += (torch.randn(k, 3, generator=gen), torch.randn(k, 3, generator=gen))
        x, y = make(r)
        out.append((f"{label} ({k}, 3)", x, y))
    return out


class _Records(logging.Handler):
    def __init__(self, into: list):
        super().__init__()
        self.into = into

    def emit(self, record):
        self.into.append(f"log {record.levelname}: {record.getMessage()}")


@contextlib.contextmanager
def _reported(into: list, warned: bool = True):
    """Collects into ``into`` (and keeps off the terminal) what a family program reports: printed
    text, the "fuzz" logger's records and (``warned``) warnings saying "fuzz:", each kind in order."""
    logger = logging.getLogger("fuzz")
    handler, propagate = _Records(into), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), warnings.catch_warnings(record=True) as caught:
            if warned:
                warnings.simplefilter("always")
            yield
            into += [f"warning {w.category.__name__}: {w.message}" for w in caught if "fuzz:" in str(w.message)]
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
        into += [f"print: {line}" for line in printed.getvalue().splitlines()]


def _call(fn, x, y, py, state: bool = False):
    """The result (and, with ``state``, the arguments after the call: in-place changes count too),
    or the exception it raised (a check that fails), as a ``Raised``."""
    x, y = x.clone(), y.clone()
    try:
        out = fn(x, y, *py)
    except Exception as e:
        return Raised(type(e).__name__, str(e))
    return (out, x, y) if state else out


@dataclass(frozen=True)
class Raised:
    kind: str
    message: str


def _same(actual, expected, exact: bool) -> None:
    """Equal results (``exact``: bit for bit), or both raised (``exact``: the same exception)."""
    if isinstance(actual, Raised) or isinstance(expected, Raised):
        both = isinstance(actual, Raised) and isinstance(expected, Raised)
        assert both and (actual == expected or not exact), f"{actual} where the original gives {expected}"
        return
    tolerance = {"rtol": 0, "atol": 0} if exact else {}
    torch.testing.assert_close(actual, expected, equal_nan=True, **tolerance)


def _has_effects(source: str) -> bool:
    """Was ``source`` drawn with ``effects=True``? Only those promise the arguments' state."""
    return source.startswith("import torch\n\n\n" + PRELUDE[0])


def _describe(label, py) -> str:
    flag, n, mask = py
    return f"x, y = {label}, flag={flag}, n={n}, mask={'None' if mask is None else 'MASK'}"


def _summary(e: BaseException) -> str:
    """The exception's first lines: dynamo's first line alone is the same for every graph break."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return f"{type(e).__name__}: {' | '.join(lines[:3])}"


@dataclass
class EagerResult:
    """A divergence, if any, and how much of the program the inputs reached (for the long run's summary)."""

    divergence: Divergence | None
    sides_taken: int  # (dispatched if, side) pairs the inputs reached
    sides: int  # 2 per dispatched if
    rewrite_seconds: float


def check_eager(source: str) -> EagerResult:
    """The original and ``transform_method(f).func`` agree exactly on every input variant."""
    fn = load(source)
    start = time.perf_counter()
    try:
        try:
            rewritten = unbranch.transform_method(fn)
        except unbranch.UnbranchError as e:
            if not refused(e):
                raise
            rewritten = unbranch.transform_method(fn, strict=False)  # that if stays Python: still exact
    except Exception as e:
        return EagerResult(Divergence("rewrite", source, _summary(e)), 0, 0, time.perf_counter() - start)
    seconds = time.perf_counter() - start
    ifs = {note.line for note in rewritten.notes if note.kind == "cond"}
    with unbranch.observe_branches() as seen:
        for py in PYTHON_ARGS:
            for label, x, y in tensor_inputs(source):
                said, told = [], []  # what each reports (prints, warnings, log records) must agree too
                with _reported(said):
                    expected = _call(fn, x, y, py, state=True)
                try:
                    with _reported(told):
                        actual = _call(rewritten.func, x, y, py, state=True)
                    _same(actual, expected, exact=True)
                    assert told == said, f"reported {told} where the original reports {said}"
                except Exception as e:
                    detail = f"{_describe(label, py)}: {_summary(e)}"
                    return EagerResult(Divergence("eager", source, detail), 0, 2 * len(ifs), seconds)
    return EagerResult(None, sum(len(sides) for sides in seen.values()), 2 * len(ifs), seconds)


class Call(torch.nn.Module):
    """``forward(x, y) = fn(x, y, flag, n, mask)``: the Python arguments are constants of the export."""

    def __init__(self, fn, flag, n, mask):
        super().__init__()
        self.fn, self.flag, self.n, self.mask = fn, flag, n, mask

    def forward(self, x, y):
        return self.fn(x, y, self.flag, self.n, self.mask)


# what unbranch says of an if it leaves as Python because a branch function would lose an effect
REFUSALS = (
    "is changed in a branch",
    "is changed in place later",
    "read by the nested function",
    "Python state and parameters",
    "rebound in one branch only",
    "cannot carry out of a branch",
    "a torch bug",  # torch.cond fails inside torch itself (runtime/control_flow.py names it)
)


def refused(e: BaseException) -> bool:
    """Is ``e`` (or an exception it wraps, as dynamo's do) unbranch refusing an effect it would lose?"""
    while e is not None:
        if any(reason in str(e) for reason in REFUSALS):
            return True
        e = e.__cause__ or e.__context__
    return False


_PACKAGE = os.path.dirname(unbranch.__file__)


def crashed(e: BaseException) -> bool:
    """Did unbranch's own code fail (an exception other than UnbranchError raised in its package,
    or in one it wraps), rather than refuse with a reason or torch stop?"""
    while e is not None:
        if not isinstance(e, unbranch.UnbranchError) and e.__traceback__ is not None:
            tb = e.__traceback__
            while tb.tb_next is not None:
                tb = tb.tb_next
            if tb.tb_frame.f_code.co_filename.startswith(_PACKAGE):
                return True
        e = e.__cause__ or e.__context__
    return False


def _guards_hold(exported, x, y) -> bool:
    """Does the exported program accept these shapes (no specialisation guard fails)?"""
    try:
        exported(torch.zeros_like(x), torch.zeros_like(y))
    except AssertionError as e:
        if "Guard failed" in str(e):
            return False
        raise
    except Exception:
        return True  # zeros may be bad values; the real call below tells
    return True


def check_export(source: str, py, strict: bool) -> Divergence | None:
    """Export with a dynamic batch; ``ep.module()`` matches the original on other batch sizes."""
    fn = load(source)
    gen = _generator(source)
    example = (torch.randn(4, 3, generator=gen), torch.randn(4, 3, generator=gen))
    dynamic = ({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC})
    helpers = [h for h in (getattr(sys.modules[fn.__module__], name, None) for name in HELPERS) if h is not None]
    try:
        with unbranch.torch_export_rewrite(rewrite=[fn, *helpers]), _reported([], warned=False):
            ep = torch.export.export(Call(fn, *py), example, dynamic_shapes=dynamic, strict=strict)
    except Exception as e:
        kind = "refusal" if refused(e) else "crash" if crashed(e) else "export-error"
        if _exports_plainly(fn, py, example, dynamic, strict):
            kind = "harm"  # the program exported without unbranch: the rewrite broke it
        return Divergence(kind, source, f"{_describe('randn (4, 3)', py)}: {_summary(e)}", strict)
    exported = ep.module()
    for label, x, y in tensor_inputs(source, sizes=(2, 3, 5, 7)):
        if not _guards_hold(exported, x, y):
            continue  # a shape if kept as Python (here or at run time) specialised it, as a plain export would
        try:
            state = _has_effects(source)
            with _reported([], warned=False):  # (an exported program does not report)
                expected = _call(fn, x, y, py, state)
            _same(_call(exported, x, y, (), state), expected, exact=False)
        except Exception as e:
            return Divergence("export", source, f"{_describe(label, py)}: {_summary(e)}", strict)
    return None


def _exports_plainly(fn, py, example, dynamic, strict: bool) -> bool:
    """Does the original program export without unbranch (asked only when it failed with it)?"""
    try:
        with _reported([], warned=False):
            torch.export.export(Call(fn, *py), example, dynamic_shapes=dynamic, strict=strict)
    except Exception:
        return False
    return True


# --- loops ------------------------------------------------------------------------------------

# (header, index or None, the rows the body may read): loops over the batch of x (and y)
LOOP_HEADERS = (
    ("for i in range(x.shape[0]):", "i", ()),
    ("for i in range(1, x.shape[0]):", "i", ()),
    ("for i in range(x.shape[0] - 1, -1, -1):", "i", ()),
    ("for i in range(0, x.shape[0], 2):", "i", ()),
    ("for i, row in enumerate(x):", "i", ("row",)),
    ("for a, b in zip(x, y):", None, ("a", "b")),
    ("for row in y:", None, ("row",)),
    ("for i in reversed(range(x.shape[0])):", "i", ()),
    ("for row in x.unbind(0):", None, ("row",)),
    ("for i in range(len(x)):", "i", ()),
    ("for i, (a, b) in enumerate(zip(x, y)):", "i", ("a", "b")),
)
# the loops that take every row of x, in order or backwards: an appended list is never empty
_EVERY_ROW = {LOOP_HEADERS[k][0] for k in (0, 2, 4, 7, 8, 9)}


class _LoopWriter:
    """Draws a loop program: carried ``acc``, a buffer ``out`` written row by row, a dict updated at
    each step, nested loops, ifs on the index and on data inside the body, a list appended to and
    stacked after; the index in subscripts, arithmetic, select/narrow and conditional expressions."""

    def __init__(self, draw):
        self.draw = draw

    def choose(self, options):
        return self.draw(st.sampled_from(options))

    def row(self, index, rows, inner=None) -> str:
        """A (3,) tensor read at this step."""
        options = list(rows) + ["acc"]
        if index is not None:
            options += [f"x[{index}]", f"x[{index} - 1]", f"y[{index} % y.shape[0]]", f"out[{index}]"]
            options += [f"x[{index}, :]", f"(({index} + 1) * x[{index}])", f"(x[{index}] * ({index} % 2))"]
            # the index in other positions: select/narrow, both sides of a conditional expression
            options += [f"x.select(0, {index})", f"x.narrow(0, {index}, 1)[0]"]
            options += [f"(x[{index}] if {index} % 2 == 0 else y[{index} % y.shape[0]])"]
        if inner is not None:
            options += [f"y[{inner}]", f"(x[{inner}] * ({inner} + 1))"]
        return self.choose(options)

    def value(self, index, rows, inner=None) -> str:
        a, b = self.row(index, rows, inner), self.row(index, rows, inner)
        return self.choose(
            (f"torch.tanh({a} + {b})", f"torch.tanh({a}) * 0.5", f"{a} * 0.5 - {b} * 0.25", f"torch.sin({a} * {b})")
        )

    def statement(self, index, rows, depth, inner=None) -> list[str]:
        kinds = ["acc", "acc", "augacc", "dict"]
        if index is not None and inner is None:
            kinds += ["row", "row", "rowaug", "cell", "column"]
        if depth < 2:
            kinds += ["if"]
            if inner is None and index is not None:
                kinds += ["nested"]
        kind = self.choose(kinds)
        v = self.value(index, rows, inner)
        if kind == "acc":
            return [f"acc = acc * 0.5 + {v}"]
        if kind == "augacc":
            return [f"acc += {v} * 0.25"]
        if kind == "dict":  # a container updated at each step
            return [f'stats["sum"] = stats["sum"] + {v}']
        if kind == "row":
            return [f"out[{index}] = {v}"]
        if kind == "rowaug":
            return [f"out[{index}, :] += {v} * 0.5"]
        if kind == "cell":
            return [f"out[{index}, {self.choose(('0', '1', '2'))}] = ({v}).sum() * 0.1"]
        if kind == "column":
            return [f"out[:, {self.choose(('0', '2'))}] += x[{index}, 1] * 0.1"]
        if kind == "if":
            tests = ["acc.sum() > 0", f"{self.row(index, rows, inner)}.mean() < 0.2"]
            if index is not None:
                tests += [f"{index} % 2 == 0", f"{index} > 1"]
            test = self.choose(tests)
            then = self.statement(index, rows, depth + 1, inner)
            lines = [f"if {test}:", *_indent(then)]
            if self.draw(st.booleans()):
                lines += ["else:", *_indent(self.statement(index, rows, depth + 1, inner))]
            return lines
        bound = self.choose(("y.shape[0]", index, f"{index} + 1"))
        body = [line for _ in range(self.draw(st.integers(1, 2))) for line in self.statement(index, rows, 2, "j")]
        return [f"for j in range({bound}):", *_indent(body)]


@st.composite
def loop_programs(draw) -> str:
    """Source text of ``def f(x, y, flag, n, mask)`` looping over the batch (``programs(loops=True)``)."""
    writer = _LoopWriter(draw)
    header, index, rows = writer.choose(LOOP_HEADERS)
    body = [line for _ in range(draw(st.integers(1, 4))) for line in writer.statement(index, rows, 0)]
    appends = header in _EVERY_ROW and draw(st.booleans())
    if appends:
        body.append(f"outs.append({writer.value(index, rows)})")
    lines = ["acc = torch.zeros(x.shape[1])", "out = torch.zeros_like(x)", *(["outs = []"] if appends else [])]
    lines.append('stats = {"sum": torch.zeros(x.shape[1])}')
    lines += [header, *_indent(body)]
    if draw(st.integers(0, 4)) == 0:
        lines += ["else:", *_indent(["acc = acc + 1.0"])]
    result = 'acc + out.sum(0) + stats["sum"]' + (" + torch.stack(outs).sum(0)" if appends else "")
    lines.append(f"return {result}, out" if draw(st.booleans()) else f"return {result}")
    return "\n".join(["import torch", "", "", "def f(x, y, flag, n, mask):", *_indent(lines), ""])


# --- jumps: loops with break/continue/return under tensor and Python conditions ---------------

JUMP_LOOP_HEADERS = ("for _i in range(2):", "for _i in range(n):", "for _i in range(x.shape[0]):", "while")


class _JumpWriter(_Writer):
    """Also draws loops (``for`` over ``range``, ``while`` on a tensor test with a step counter)
    and, inside them, ``if <test>: [statements;] break/continue/return``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.loops = 0  # loops around the statement being drawn
        self.counters = 0
        self.flags: list[tuple[str, bool]] = []  # (name, counts?): `hit0 = False`, `hits0 = 0`, set by jumps

    def block(self, names, depth) -> tuple[list[str], set | None]:
        names, lines = set(names), []
        for _ in range(self.draw(st.integers(1, 3))):
            kinds = ["chunk", "chunk"]
            if depth < MAX_DEPTH and self.budget > 0:
                kinds.append("loop")
            if self.loops:
                kinds += ["jump", "jump"]
            kind = self.choose(kinds)
            if kind == "loop":
                lines += self.loop(names, depth)
            elif kind == "jump":
                lines += self.jump(names, depth)
            else:
                sub, after = super().block(names, depth)
                lines += sub
                if after is None:
                    return lines, None
                names = after
        return lines, names

    def loop(self, names, depth) -> list[str]:
        self.budget -= 2
        header = self.choose(JUMP_LOOP_HEADERS)
        head: list[str] = []
        if header == "while":  # a counter bounds it; counted first, so a continue cannot skip it
            counter = f"it{self.counters}"
            self.counters += 1
            test = self.choose(TENSOR_TESTS[:6]).format(
                e=self.choose(sorted(names)),
                v=self.choose(sorted(names)),
                w=self.choose(sorted(names)),
                c=self.choose(CONSTS),
            )
            head = [f"{counter} = 0"]
            header = f"while {counter} < 3 and {test}:"
            first = [f"{counter} = {counter} + 1"]  # `+= 1` on an int carry: see the report (runtime/loops)
        else:
            first = []
        flag, after = None, []
        if self.draw(st.integers(0, 2)) == 0:  # a Python flag or counter set before a jump, read after
            counting = self.draw(st.booleans())
            flag = f"{'hits' if counting else 'hit'}{self.counters}"
            self.counters += 1
            head.append(f"{flag} = {0 if counting else False}")
            after = [f"x = x * ({flag} + 1)"] if counting else [f"if {flag}:", "    x = x + 1.0"]
            self.flags.append((flag, counting))
        self.loops += 1
        try:
            body, _ = self.block(names, depth + 1)  # the names after a loop: those before it
        finally:
            self.loops -= 1
            if flag is not None:
                self.flags.pop()
        orelse = ["else:", "    x = x * 0.5"] if self.draw(st.integers(0, 3)) == 0 else []
        return [*head, header, *_indent([*first, *body]), *orelse, *after]

    def jump(self, names, depth) -> list[str]:
        self.budget -= 1
        kind = self.choose(("continue", "break", "return", "continue", "break"))
        stmt = self.ret(names) if kind == "return" else kind
        before = []
        if self.draw(st.booleans()):
            target = self.choose(sorted(set(LOCALS) | names))
            before = [f"{target} = {self.expr(names, fresh=True)[0]}"]
        if self.flags and self.draw(st.booleans()):
            flag, counting = self.choose(self.flags)
            before.append(f"{flag} += 1" if counting else f"{flag} = True")
        return [f"if {self.predicate(names)}:", *_indent([*before, stmt])]


@st.composite
def jump_programs(draw, max_statements: int = MAX_STATEMENTS) -> str:
    """Like ``programs``, with loops holding break/continue/return under tensor and Python tests."""
    writer = _JumpWriter(draw, draw(st.integers(1, 2)), False, max_statements)
    body, after = writer.block(set(PARAMS), 0)
    if after is not None:
        body.append(writer.ret(after))
    return "\n".join(["import torch", "", "", "def f(x, y, flag, n, mask):", *_indent(body), ""])


# --- families (issue 37): what real code writes around a branch on data -----------------------

# 3. a tensor predicate's other spellings: Python numbers read from data, math on them, closeness
FAMILY_TESTS = (
    "float({e}.mean()) > {c}",
    "int(({v} > {c}).sum()) == 2",
    "bool(({v} > {c}).all())",
    "torch.is_nonzero(({v} > {c}).any())",
    "math.isclose({v}.sum().item(), {c}, abs_tol=0.5)",
    "math.isfinite({e}.max().item())",
    "not math.isnan(float({e}.mean()))",
    "abs({e}.mean().item()) > {c}",
    "max(float({v}.max()), float({w}.min())) > {c}",
    "min({v}.min().item(), {c}) < -0.25",
    "abs(float({v}.sum()) - float({w}.sum())) < 1.0",
    "torch.allclose({v}, {w})",
    "torch.allclose({v}, {w}, atol=0.5)",
    "torch.isclose({v}, {w}).all()",
    "torch.isclose({v}, {w}, atol=0.25).any()",
    "any(r.sum() > {c} for r in {v})",  # 2. generators over rows
    "all(r.max() > {c} for r in {v}.unbind(0))",
)
# 3. a tensor chosen by a key, numbers read from data and compared in Python ({t}: a target's value)
FAMILY_VALUES = (
    "max([{v}, {w}], key=lambda t: t.sum()) * 1.0",
    "torch.tanh(min(({v}, {w}, {t}), key=lambda t: float(t.abs().mean())))",
    "sorted([{v}, {w}], key=lambda t: t.sum().item())[-1] * 0.5",
    "{t} * min(abs({v}.mean().item()), 1.0)",
    "{t} + max(float({v}.max()), 0.5)",
    "{t} - min({v}.min().item(), {w}.min().item())",
    # 2. comprehensions and generators over rows (the first a data test in each row)
    "torch.stack([torch.tanh(r) * 2 for r in {v}])",
    "torch.stack([r * 0.5 if r.sum() > {c} else -r for r in {v}])",
    "{t} + sum(r * 0.5 for r in {v}.unbind(0))",
    "torch.stack([a * torch.tanh(b) for a, b in zip({v}, {w})])",
    "{t} + sum([r for r in {v} if r.sum() > {c}], torch.zeros(3))",  # a data-dependent length
)
# 5. statements that only report (prefixed "fuzz:" so that the check sees only the program's own)
REPORTS = (
    'print("fuzz: {m}")',
    'warnings.warn("fuzz: {m}")',
    'warnings.warn("fuzz: {m}", RuntimeWarning, stacklevel=2)',
    'logger.warning("fuzz: %s", "{m}")',
    'print("fuzz: {m}", {v}.shape[0])',
    'warnings.warn(f"fuzz: {m} {{{v}.abs().max().item():.2f}}")',
)
# what a family program defines before f: a logger, callables picked by index, a helper falling off
# its end under a tensor test (None on one path) and one with a bare return before a dict update
FAMILY_PRELUDE = [
    "import logging",
    "import math",
    "import warnings",
    "",
    "import torch",
    "",
    'logger = logging.getLogger("fuzz")',
    "OPS = (torch.tanh, torch.sin, torch.relu)",
    "",
    "",
    "def soft_(t):",
    "    if t.mean() > 0:",
    "        return t * 0.5",
    "",
    "",
    "def settle_(d):",
    '    if d["n"].sum() > 0:',
    "        return",
    '    d["n"] = d["n"] * 0.5',
    "",
    "",
]
FAMILY_CONSTRUCTS = (
    # 1. Python values decided by data
    "flag",
    "optional",
    "mode",
    "choose",
    "select",
    "match",
    "helper",
    # 2. loops whose length is data
    "while_true",
    "range_data",
    # 3. values chosen or computed from data in Python
    "value",
    # 4. containers
    "dict",
    "buffer",
    "params",
    "shared_append",
    "one_side_append",
    "same_test",
    "del",
)


class _FamilyWriter(_Writer):
    """Draws ordinary statements and ifs (``_Writer``) mixed with the constructs of issue 37's
    families, each nested inside the others' sides and the ifs': a Python value a branch on data
    decides and later code reads, loops of a data length, a predicate's other spellings, lists and
    dicts of tensors changed in a branch or loop, reports (print, warnings, logging) in branches."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.extra_tests = FAMILY_TESTS
        self.counter = 0
        self.reported = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def block(self, names, depth) -> tuple[list[str], set | None]:
        names, lines = set(names), []
        for _ in range(self.draw(st.integers(1, 3))):
            kinds = ["chunk", "report"]
            if depth < MAX_DEPTH and self.budget > 0:
                kinds += ["family", "family", "family"]
            kind = self.choose(kinds)
            if kind == "report":
                lines.append(self.report(names))
                continue
            sub, after = self.family(names, depth) if kind == "family" else super().block(names, depth)
            lines += sub
            if after is None:
                return lines, None
            names = after
        return lines, names

    def report(self, names) -> str:
        self.reported += 1
        return self.choose(REPORTS).format(m=f"report {self.reported}", v=self.choose(sorted(names)))

    def test(self, names) -> str:
        """A predicate on data (the families branch on tensors; and/or/not mix in Python tests)."""
        while True:
            test = self.predicate(names)
            if "." in test:
                return test

    def side(self, names, depth, header, prefix=(), suffix=()) -> tuple[list[str], set | None]:
        """``header``, then ``prefix``, a drawn block (or none) and ``suffix``; the names after it."""
        body, after = self.block(names, depth + 1) if self.draw(st.booleans()) else ([], set(names))
        if after is None:
            return [header, *_indent([*prefix, *body])], None
        return [header, *_indent([*prefix, *body, *suffix] or ["pass"])], after

    def family(self, names, depth) -> tuple[list[str], set | None]:
        self.budget -= 2
        kind = self.choose(FAMILY_CONSTRUCTS)
        ordered = sorted(names)
        t, u, w = self.choose(ordered), self.choose(ordered), self.choose(ordered)
        c = self.choose(CONSTS)
        head, sides, tail = [], [], []  # sides: (lines, names after or None); None ends also the else
        implicit_else = True
        if kind == "flag":
            hit = self.fresh("hit")
            head = [f"{hit} = False"]
            sides.append(self.side(names, depth, f"if {self.test(names)}:", [f"{hit} = True"]))
            tail = self.choose(
                (
                    [f"if {hit}:", f"    {t} = {t} * 0.5"],
                    [f"{t} = {t} + {hit}"],
                    [f"{t} = {t} * (0.5 if {hit} else 2.0)"],
                    [f"if not {hit}:", f"    {t} = -{t}"],
                )
            )
        elif kind == "optional":
            opt = self.fresh("opt")
            head = [f"{opt} = None"]
            value = f"{opt} = {self.expr(names, 1, True)[0]}"
            sides.append(self.side(names, depth, f"if {self.test(names)}:", [value]))
            tail = self.choose(
                (
                    [f"if {opt} is not None:", f"    {t} = {t} * torch.tanh({opt})"],
                    [f"if {opt} is None:", f"    {t} = {t} + 1.0", "else:", f"    {t} = {t} - {opt}"],
                    [f"{t} = {t} if {opt} is None else {t} + {opt}"],
                )
            )
        elif kind == "mode":
            mode = self.fresh("mode")
            head = [f'{mode} = "scale"']
            sides.append(self.side(names, depth, f"if {self.test(names)}:", [f'{mode} = "clip"']))
            if self.draw(st.booleans()):
                sides.append(self.side(names, depth, f"elif {self.test(names)}:", [f'{mode} = "shift"']))
            tail = [
                f'if {mode} == "clip":',
                f"    {t} = {t}.clamp(-1.0, 1.0)",
                f'elif {mode} == "shift":',
                f"    {t} = {t} - 0.5",
                "else:",
                f"    {t} = {t} * 0.5",
            ]
        elif kind == "choose":
            g = self.fresh("g")
            if self.draw(st.booleans()):
                head = [f"{g} = torch.tanh if {self.test(names)} else torch.sin"]
            else:
                sides.append(self.side(names, depth, f"if {self.test(names)}:", [f"{g} = torch.tanh"]))
                sides.append(self.side(names, depth, "else:", [f"{g} = torch.sin"]))
                implicit_else = False
            tail = [f"{t} = {g}({u})"]
        elif kind == "select":
            index = self.choose(
                (f"int(({u} > {c}).sum()) % 3", f"({u} > {c}).sum() % 3", f"int({u}.sum().item() > {c})")
            )
            if self.draw(st.booleans()):
                k = self.fresh("k")
                head = [f"{k} = {index}"]
                index = k
            tail = [f"{t} = OPS[{index}]({w})"]
        elif kind == "match":
            head = [f"match int(({u} > {c}).sum()) % 3:"]
            cases = ["case 0:", "case 1:", "case _:"][: self.draw(st.integers(2, 3))]
            for case in cases:
                lines, after = self.side(names, depth, case, [f"{t} = {self.expr(names, 1, True)[0]}"])
                sides.append((_indent(lines), after))
            implicit_else = cases[-1] != "case _:"
        elif kind == "helper":
            if self.draw(st.booleans()):
                r = self.fresh("r")
                head = [f"{r} = soft_({t})"]
                tail = self.choose(
                    ([f"if {r} is not None:", f"    {t} = {r}"], [f"{t} = {t} if {r} is None else {r} * 2.0"])
                )
            else:
                d = self.fresh("d")
                head = [f'{d} = {{"n": {t} * 1.0}}', f"settle_({d})"]
                tail = [f'{t} = {d}["n"]']
        elif kind == "while_true":
            it = self.fresh("it")
            body, _ = self.block(names, depth + 1) if self.draw(st.booleans()) else ([], names)
            stop = self.choose((f"{t}.abs().sum() < 2.0", f"({t}.abs() < 0.5).all()", f"{t}.abs().max().item() < 1.0"))
            head = [
                f"{it} = 0",
                "while True:",
                *_indent([f"{it} += 1", f"{t} = {t} * 0.5", *body]),
                f"    if {stop}:",
                "        break",
                f"    if {it} >= 4:",
                "        break",
            ]
        elif kind == "range_data":
            count = self.choose(
                (f"({u} > {c}).sum() % 3", f"int({u}.sum().item()) % 3", f"int(({u} < {c}).sum().item()) % 4")
            )
            if self.draw(st.booleans()):
                k = self.fresh("k")
                head, count = [f"{k} = {count}"], k
            body, _ = self.block(names, depth + 1) if self.draw(st.booleans()) else ([], names)
            head += [f"for _ in range({count}):", *_indent([f"{t} = {t} * 0.9 + 0.1", *body])]
        elif kind == "value":
            head = [f"{t} = " + self.choose(FAMILY_VALUES).format(t=t, v=u, w=w, c=c)]
        elif kind == "dict":
            d = self.fresh("d")
            head = [f'{d} = {{"n": {t} * 1.0, "k": {u}.mean(0)}}']
            update = self.choose((f'{d}["n"] = {d}["n"] - {d}["k"]', f'{d}["n"] -= {d}["k"]'))
            sides.append(self.side(names, depth, f"if {self.test(names)}:", [update]))
            tail = [f"for _ in range({self.choose(('2', 'n'))}):", f'    {d}["n"] = {d}["n"] * 0.5']
            tail = tail * self.draw(st.booleans()) + [f'{t} = {d}["n"]']
        elif kind == "buffer":
            buf = self.fresh("buf")
            head = [f"{buf} = [{t}.sum(0), {u}.mean(0)]"]
            sides.append(self.side(names, depth, f"if {self.test(names)}:", [f"{buf}[0] += 1"]))
            tail = [f"{t} = {t} + {buf}[0] * {buf}[1]"]
        elif kind == "params":
            ps = self.fresh("ps")
            head = [f"{ps} = [{t}.clone(), {u}.clone()]"]
            sides.append(self.side(names, depth, f"if {self.test(names)}:", [f"for p in {ps}:", "    p.mul_(0.5)"]))
            tail = [f"{t} = {ps}[0] + {ps}[1]"]
        elif kind == "shared_append":
            outs, z = self.fresh("outs"), self.fresh("z")
            head = [f"{outs} = []"]
            for header in (f"if {self.test(names)}:", "else:"):
                value = f"{z} = {self.expr(names, 1, True)[0]}"
                sides.append(self.side(names, depth, header, [value], [f"{outs}.append({z})"]))
            implicit_else = False
            tail = [f"{t} = {t} + torch.cat({outs})"]
        elif kind == "one_side_append":
            outs = self.fresh("outs")
            head = [f"{outs} = [{t} * 0.5]"]
            value = f"{outs}.append({self.expr(names, 1, True)[0]})"
            sides.append(self.side(names, depth, f"if {self.test(names)}:", [value]))
            tail = [f"{t} = sum({outs}) * (1.0 / len({outs}))"]
        elif kind == "same_test":
            big, s = self.fresh("big"), self.fresh("s")
            head = [f"{big} = {self.test(names)}"]
            sides.append(([f"if {big}:", f"    {s} = {u}.abs().max()"], names))
            tail = [f"{t} = {t} * 2.0", f"if {big}:", f"    {t} = {t} / ({s} + 1.0)"]
        else:  # del
            tmp = self.fresh("tmp")
            prefix = [f"{tmp} = {t} * 2.0", f"{t} = {tmp} + 1.0", f"del {tmp}"]
            sides.append(self.side(names, depth, f"if {self.test(names)}:", prefix))
        lines = list(head)
        for side_lines, _ in sides:
            lines += side_lines
        ends = [after for _, after in sides] + ([set(names)] if implicit_else or not sides else [])
        open_ends = [e for e in ends if e is not None]
        if not open_ends:
            return lines, None
        return [*lines, *tail], set.intersection(*open_ends)


@st.composite
def family_programs(draw, max_statements: int = MAX_STATEMENTS) -> str:
    """Source text of ``def f(x, y, flag, n, mask)`` drawing issue 37's families (``programs(families=True)``).

    A strategy of its own, as ``loop_programs`` and ``jump_programs`` are: its constructs need a
    prelude (``math``, ``warnings``, a logger, helpers), statements that span several lines around
    a branch (a flag set in it and read after), and a check of what the program reports as well as
    what it computes. Every construct keeps the tensors (k, 3), every loop is bounded (a counter, a
    length taken modulo 3 or 4), so each program runs eagerly on every input and path.
    """
    writer = _FamilyWriter(draw, draw(st.integers(1, 2)), False, max_statements)
    body, after = writer.block(set(PARAMS), 0)
    if after is not None:
        body.append(writer.ret(after))
    return "\n".join([*FAMILY_PRELUDE, "def f(x, y, flag, n, mask):", *_indent(body), ""])
