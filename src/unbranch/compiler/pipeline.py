"""The compiler, top to bottom: parse -> normalise -> rules -> emit.

Each pass is a ``passes.Pass`` subclass: ``apply(fn, ctx) -> fn``, run only when the screen
found a candidate of a kind it handles (``HANDLES``) and the options are those it runs under
(``OPTIONS``). The screen is derived from the passes: the words their kinds need in the text,
then their candidates on the ``ast``; libcst parses only functions that have one. Analyses a
pass declares are computed on the tree it gets.
"""

from __future__ import annotations

import ast
import functools
import gc
import re
from dataclasses import dataclass, field

import libcst as cst

from ..errors import UnbranchError
from . import verbatim
from .analysis import forget
from .analysis.classify import Classifier
from .context import Context, Namer, taken_names
from .libcst_internals import parse_module
from .normalise import suites
from .normalise.attribute_state import AttributeState
from .normalise.call_rest import RestAfterCall, ReturnsToRest
from .normalise.comprehensions import Comprehensions
from .normalise.condition_forms import ConditionForms
from .normalise.conversions import Conversions
from .normalise.early_return import EarlyReturn
from .normalise.elif_chain import ElifChain
from .normalise.first_bound import FirstBound
from .normalise.hook_output import HookOutput
from .normalise.jump_flags import JumpFlags
from .normalise.leading_break import LeadingBreak
from .normalise.match_chain import MatchChain
from .normalise.placeholders import Placeholders
from .normalise.reports import Reports
from .normalise.row_effects import RowEffects
from .normalise.shared_tail import SharedTail
from .normalise.torch_assert import TorchAssert
from .origins import Origins
from .rules.for_to_scan import ForToScan
from .rules.if_to_cond import IfToCond
from .rules.ifexp_to_cond import IfExpToCond
from .rules.index_at import IndexAt
from .rules.keyed_choice import KeyedChoice
from .rules.raise_to_check import RaiseToCheck
from .rules.select_by_data import SelectByData
from .rules.while_to_loop import WhileToLoop
from .source import SourceInfo

PASSES = [
    HookOutput,  # a forward hook's `return None` -> `return output` (Module.__call__ keeps the output for None)
    RestAfterCall,  # a call whose result is a Python value decided by data: the rest becomes a function
    ReturnsToRest,  # (a callee's variant) each return hands its value to the caller's rest
    MatchChain,  # match on data -> the if/elif chain of its cases' comparisons
    Comprehensions,  # a comprehension over rows -> the loop appending to a list it stands for
    RowEffects,  # a row changed in place in a loop over rows -> the change stored at the loop index
    TorchAssert,  # torch._assert(c, m) -> assert c, m (for RaiseToCheck)
    RaiseToCheck,  # first of the rules: `if c: raise` must not count as an early return
    Reports,  # a print, warning or log record in a dispatched if runs when torch does not trace
    ElifChain,  # dispatched elifs become `else: if`, so each if is a replaceable statement
    SharedTail,  # what both sides end with, where no branch function could carry it, runs after the if
    LeadingBreak,  # `while c: if stop: break` -> `while c and not stop` (before ifs see it)
    JumpFlags,  # other break/continue/return in loops -> flags, `if not flag:` guards, `if ret: return v` after
    EarlyReturn,  # then the code after a one-sided return (also those JumpFlags left) moves into the other branch
    ConditionForms,  # bool(t), x in t, any(...), torch.equal in dispatched tests
    Conversions,  # len(t), bool(t), int(t), float(t) of data in functions torch named (option `lengths`)
    AttributeState,  # self.n set in a converted if or loop -> a local, written back after it
    Placeholders,  # a name one side sets, read later only under the same test: the other side sets it too
    FirstBound,  # a name a loop binds first: a marker before it, a value of its kind on each if's other side
    SelectByData,  # container[int(t)] -> _ub.select (before the rules move code into functions they do not enter)
    IndexAt,  # on lines torch named: table[t] -> _ub.at(table)[t] (a 0-d tensor index, strict export)
    KeyedChoice,  # max/min/sorted(..., key=) -> _ub.max_by/min_by/sorted_by
    IfExpToCond,  # before IfToCond: a conditional expression in a branch moves into its function as a call
    IfToCond,  # liveness on the final shape of the code, then branch functions
    ForToScan,  # after the ifs: a converted if inside a loop is plain statements by now
    WhileToLoop,
]


@dataclass
class Options:
    prefix: str = "branch_cond"
    filter_node: object = None
    pre_rewriter: object = None
    post_rewriter: object = None
    strict: bool = False  # True: a construct on a plainly tensor condition that cannot be converted raises
    is_method: bool = True
    shape_conditions: bool = True  # False: an if on sizes alone stays plain Python (model discovery)
    lengths: bool = False  # True: len(t) may give a symbolic length (functions torch's export named)
    annotations: bool = True  # False: ``n: int`` may hold a tensor (torch's export named a branch on it)
    # lines (in the function's text) of ifs after which the rest of the function moves into both branches
    # (torch's export named each for a value a cond cannot give: None, an object, a module)
    continue_at: frozenset = frozenset()
    # (line, the side to keep, why the other cannot be traced) of ifs torch could trace one side of only:
    # under export that side runs behind a check that the condition takes it, for a condition on sizes,
    # and for one on values where ``one_sided`` (the user's option) allows it
    one_side: tuple = ()
    one_sided: bool = False
    # lines of calls whose result is a Python value decided by data: the rest of the function after
    # each runs inside the callee (normalise.call_rest); ``continuation``: compile the callee's variant
    continue_calls: frozenset = frozenset()
    continuation: bool = False
    # lines torch named for a value from data where a subscript's index may be a 0-d tensor (rules.index_at)
    index_at: frozenset = frozenset()
    hook_output: bool = False  # a forward hook: ``return None`` keeps the output (normalise.hook_output)

    def key(self) -> tuple:
        hooks = tuple(_hook_key(h) for h in (self.filter_node, self.pre_rewriter, self.post_rewriter))
        flags = (self.strict, self.is_method, self.shape_conditions, self.lengths, self.annotations, self.hook_output)
        sides = (tuple(sorted(self.continue_at)), tuple(sorted(self.one_side)), self.one_sided)
        sides += (tuple(sorted(self.continue_calls)), self.continuation, tuple(sorted(self.index_at)))
        return (self.prefix, *flags, *sides, hooks)


def _hook_key(hook):
    if hook is None:
        return None
    code = getattr(hook, "__code__", None)
    if code is None:
        return ("id", id(hook))
    cells = tuple(repr(c.cell_contents) for c in hook.__closure__ or ())  # hooks made by a factory
    return (getattr(hook, "__module__", None), getattr(hook, "__qualname__", None), code.co_code, code.co_consts, cells)


@dataclass
class Compiled:
    """What the compiler made of one function's source."""

    text: str  # rewritten source (== source text when nothing changed)
    changed: bool
    notes: list
    runtime: str  # the global name the text uses for unbranch.runtime
    tree: cst.Module | None = None  # the output tree: positions on it give the source map (origins.line_table)
    origins: Origins | None = None
    callees: dict = field(default_factory=dict)  # what the helpers it calls change in place, as used


@functools.cache
def _screen(steps: tuple) -> tuple[re.Pattern, frozenset]:
    """What the text must contain for one of ``steps`` to have work, and the kinds they handle."""
    kinds = frozenset().union(*(step.HANDLES for step in steps))
    return re.compile("|".join(sorted({kind.word for kind in kinds}))), kinds


def _steps(options: Options, skip: tuple) -> tuple:
    """The passes that run under ``options``, in order."""
    return tuple(step for step in PASSES if step not in skip and step.runs_under(options))


def compile_source(info: SourceInfo, options: Options, global_names=(), mutating_helpers=None) -> Compiled:
    """The compiled function, with the cyclic garbage collector paused meanwhile.

    libcst's parse and the passes make hundreds of thousands of short-lived nodes without
    cycles (reference counting frees them), and every young-generation collection they trigger
    scans again each node still alive, over and over. Paused, the survivors are scanned once, by
    the first collection after it.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _compile(info, options, global_names, mutating_helpers)
    finally:
        forget()  # the analyses' memos hold this function's nodes
        if enabled:
            gc.enable()


def _compile(info: SourceInfo, options: Options, global_names=(), mutating_helpers=None, skip: tuple = ()) -> Compiled:
    hooked = options.pre_rewriter is not None or options.post_rewriter is not None
    steps = _steps(options, skip)
    screen, kinds = _screen(steps)
    if not hooked and not screen.search(info.text):
        return Compiled(info.text, False, [], "_ub")  # no parse needed for a function without ifs
    try:
        tree = ast.parse(info.text)
    except SyntaxError as e:
        raise UnbranchError(
            f"cannot parse the source: {e.msg}", info.path, info.line + (e.lineno or 1) - 1, "syntax"
        ) from None
    fn_ast = tree.body[0] if tree.body else None
    if isinstance(fn_ast, ast.AsyncFunctionDef):
        raise UnbranchError("async functions cannot be rewritten", info.path, info.line, "async def")
    if not isinstance(fn_ast, ast.FunctionDef):
        raise UnbranchError("the source is not a function definition", info.path, info.line, "def")
    classifier = Classifier.for_function(
        fn_ast, is_method=options.is_method, path=info.path, annotations=options.annotations
    )
    wanted = classifier.candidates(fn_ast, kinds)
    if not hooked and not wanted:
        return Compiled(info.text, False, [], "_ub")  # nothing to rewrite: libcst never runs
    module = parse_module(info.text)
    fn = module.body[0]
    origins = Origins.parse(fn, fn_ast)
    namer = Namer(taken_names(info.text, global_names))
    runtime = namer.new("_ub")
    classifier.runtime = runtime  # what the passes write keeps its kind: `_ub.bool_(t)` is `bool(t)`
    new = fn
    if options.pre_rewriter is not None:
        new = _hook(options.pre_rewriter, new, info, "pre_rewriter")
        if origins.line(new) is None:  # the hook rebuilt the tree: its statements need their lines again
            origins.adopt(new, module.with_changes(body=[new, *module.body[1:]]).code, info.text)
    new, layout = suites.expand(new, origins)  # one shape of block for every pass
    ctx = Context(
        source=info,
        module=module,
        classifier=classifier,
        namer=namer,
        function=new,
        runtime=runtime,
        prefix=options.prefix,
        filter_node=options.filter_node,
        strict=options.strict,
        shape_conditions=options.shape_conditions,
        self_name=classifier.self_name,
        tree=fn_ast if options.pre_rewriter is None else None,
        origins=origins,
        mutating_helpers=mutating_helpers if mutating_helpers is not None else {},
        kinds=None if hooked else frozenset(wanted),
        continue_at=frozenset(options.continue_at),
        continue_calls=frozenset(options.continue_calls),
        index_at=frozenset(options.index_at),
        one_side={line: (side, why) for line, side, why in options.one_side},
        one_sided=options.one_sided,
        named=options.lengths,
    )
    notes, flags_tested = [], False
    for step in steps:
        if hooked or wanted & step.HANDLES:
            new, run = step.apply(new, ctx)
            notes += run.notes
            flags_tested = flags_tested or run.flags_tested
            wanted |= step.PRODUCES | run.kinds
            ctx = ctx.after(run, None if hooked else frozenset(wanted))
    with ctx.bugs_placed():
        new = layout.restore(new)  # the user's layout wherever no pass changed the code
    if flags_tested and JumpFlags not in skip:
        # jumps lowered to flags that an if left as Python then tests: under export that if would
        # meet a flag tensor where the plain loop guarded on sizes; keep the jumps as written
        return _compile(info, options, global_names, mutating_helpers, skip=(JumpFlags,))
    if options.post_rewriter is not None:
        new = _hook(options.post_rewriter, new, info, "post_rewriter")
    if not notes and new.deep_equals(fn):  # normalising may change code without a note
        return Compiled(info.text, False, notes, runtime)
    out = module.with_changes(body=[new, *module.body[1:]])
    return Compiled(verbatim.code(out, module, fn_ast, info.text), True, notes, runtime, out, origins)


def _hook(hook, fn, info, name):
    try:
        out = hook(fn)
    except UnbranchError as e:  # a hook that found nothing to change: placed at the function it was given
        if e.path is None:
            raise type(e)(e.reason, info.path, info.line, e.construct or name) from None
        raise
    if not isinstance(out, cst.FunctionDef):
        raise UnbranchError(
            f"{name} must return a libcst FunctionDef, got {type(out).__name__}", info.path, info.line, name
        )
    return out
