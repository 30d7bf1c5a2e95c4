"""The analysis layer on its own: facts about small snippets, no rewriting."""

import ast
import textwrap

import libcst as cst
import pytest

from unbranch.compiler.analysis import liveness
from unbranch.compiler.analysis.changes import Changes
from unbranch.compiler.analysis.effects import block_effects, closures, mutated_parameters
from unbranch.compiler.origins import Origins


def body(code: str) -> list:
    return list(cst.parse_module(textwrap.dedent(code)).body)


@pytest.mark.parametrize(
    "code, mutated",
    [
        ("x[i] = 0", {"x"}),
        ("x.add_(1)", {"x"}),
        ("torch.add(a, b, out=c)", {"c"}),
        ("torch.clamp_(h, 0, 1)", {"h"}),
        ("F.relu(h, inplace=True)", {"h"}),
        ("F.relu(h, inplace=False)", set()),
        ("n += 1", {"n"}),
        ("v = x[0]\nv.mul_(2)", {"v", "x"}),  # through a view
        ("a, b = x.chunk(2)\nb.zero_()", {"b", "x"}),
        ("y = x.clone()\ny.zero_()", {"y"}),  # a copy is not an alias
        ("y = torch.transpose(x, 0, 1)\ny[0] = 1", {"y", "x"}),
        ("for row in x:\n    row.relu_()", {"row", "x"}),
        ("y = x + 1", set()),
        ("v = x[0] if c else None\nv.add_(1)", {"v", "x"}),  # None is no object a change can reach
        ("def g():\n    x.add_(1)", {"x"}),  # a nested function may run in the block
    ],
)
def test_mutated_names(code, mutated):
    assert set(block_effects(body(code)).mutated) == mutated


def test_sort_changes_a_list_not_a_tensor():
    assert block_effects(body("names.sort()")).containers == {"names"}
    assert not block_effects(body("values, order = x.sort(dim=-1)")).mutated


def test_containers_and_state():
    effects = block_effects(body("aux.append(v)\nd.update(k=1)\nself.cache = v\nself.buf.add_(1)\nx.T.add_(1)"))
    assert effects.containers == {"aux", "d"}
    assert [what for _, what in effects.state] == [
        "an assignment to an attribute",
        "an in-place .add_() on an attribute",
    ]
    assert "x" in effects.mutated  # x.T is a view of x, not Python state


def test_helpers_followed_by_summary():
    helper = body("def fill_(ids, value):\n    ids.masked_fill_(ids < 0, value)\n")[0]
    assert mutated_parameters(helper) == (0,)
    effects = block_effects(body("fill_(tokens, 0)\nself.fix(h)"), {"fill_": (0,), "self.fix": (0,)})
    assert effects.mutated == {"tokens", "h"}
    assert effects.calls == {"fill_"}


@pytest.mark.parametrize(
    "code, changed",
    [
        ("def f(x):\n    x[0] = 1", (0,)),
        ("def f(x, y):\n    torch.add(x, 1, out=y)", (1,)),
        ("def f(x):\n    v = torch.narrow(x, 0, 0, 1)\n    v.zero_()", (0,)),  # a view through torch.*
        ("def f(x):\n    a = b = x.view(-1)\n    if (c := b) is not None:\n        c[0] = 1", (0,)),
        ("def f(x):\n    for row in x:\n        row += 1", (0,)),
        ("def f(x):\n    del x[0]", (0,)),
        ("def f(x):\n    x.data = x * 2", (0,)),
        ("def f(x, ids):\n    fill_(ids, x)", (1,)),  # through a helper's summary
        ("def f(x):\n    out = torch.zeros_like(x)\n    out[0] = 1\n    n = 0\n    n += 1", ()),
        ("def f(x):\n    y = x.clone()\n    y.add_(1)\n    x.sum().item()", ()),
    ],
)
def test_change_screen_holds_what_the_effects_analysis_finds(code, changed):
    """The ``ast`` screen (``analysis.changes``) that spares libcst most helpers and IfToCond most
    whole-function effects: never ``False`` where the analysis finds a change, for any name."""
    helpers = {"fill_": (0,)}
    fn = body(code)[0]
    assert mutated_parameters(fn, helpers) == changed
    tree = ast.parse(code).body[0]
    screen = Changes(tree)
    params = [a.arg for a in tree.args.args]
    assert screen.may_change(params, helpers) == bool(changed)
    mutated = block_effects(fn.body.body, helpers).mutated
    for name in {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}:
        assert screen.may_change([name], helpers) or name not in mutated


def test_closures():
    fn = body(
        """
        def f(x):
            s = x * 2
            def g():
                return s + 1
            def bump():
                nonlocal s
                s = s + 1
            h = lambda: x * s
            return g
        """
    )[0]
    found = {c.name: (set(c.reads), set(c.rebinds)) for c in closures(fn)}
    assert found["g"] == ({"s"}, set())
    assert found["bump"][1] == {"s"}
    assert found["h"] == ({"x", "s"}, set())


def test_surroundings_of_a_nested_statement():
    from unbranch.compiler.analysis.liveness import surroundings

    fn = body(
        """
        def f(x):
            x = x * 2
            for i in range(3):
                y = x + i
                if y.sum() > 0:
                    x.add_(1)
                z = y
            return x
        """
    )[0]
    loop = fn.body.body[1]
    target = loop.body.body[1]
    before, after = surroundings(fn, target)
    assert [cst.Module([s]).code.strip() for s in before] == ["y = x + i", "x = x * 2"]
    # the rest of the loop body, what follows the loop, and the loop again (its next iteration)
    assert [cst.Module([s]).code.strip().splitlines()[0] for s in after] == ["z = y", "return x", "for i in range(3):"]


# --- classification: STATIC only when provably Python ---------------------------------------------


def _kind(expr: str, hints=None, fn: str = "def forward(self, x, is_pad, kwargs, n=3, flag: bool = False): pass"):
    import ast

    from unbranch.compiler.analysis.classify import Classifier

    c = Classifier.for_function(ast.parse(fn).body[0], hints=hints)
    return c.kind(ast.parse(expr, mode="eval").body)


@pytest.mark.parametrize(
    "expr",
    [
        "x is None",
        "x is not None and flag",
        "isinstance(x, torch.Tensor)",
        "hasattr(self, 'lin')",
        "callable(x)",
        "self.training",
        "x.dtype == torch.float16",
        "x.device.type == 'cpu'",
        "x.dtype in (torch.float16, torch.bfloat16)",
        "len((1, 2)) > 1",
        "mode in ('a', 'b')",
        "3",
        "bool(3)",
        "x.is_floating_point()",
        "torch.is_tensor(x)",
        "torch.jit.is_tracing()",
        "x.dim() == 2",
        "any(v is None for v in x)",
        # False (True) whenever torch exports, before the tensor is ever tested
        "not torch.compiler.is_compiling() and x.any()",
        "torch.compiler.is_exporting() or (x > 0).all()",
        "flag is None and not torch._dynamo.is_compiling() and x.any()",
    ],
)
def test_provably_python_is_static(expr):
    assert _kind(expr) == "static"


@pytest.mark.parametrize(
    "expr, kind",
    [
        ("self.scale > 0", "unknown"),  # a buffer or a parameter as well as a float
        ("is_pad", "unknown"),  # a flag name is no proof
        ("has_x", "unknown"),
        ("kwargs.get('mask_flag')", "unknown"),  # a dict may hold tensors
        ("getattr(self, 'scale') > 0", "unknown"),
        ("pad_id in ids[:, -1]", "unknown"),  # Tensor.__contains__
        ("x not in t", "unknown"),
        ("self.config.use_cache", "unknown"),
        ("is_torchdynamo_compiling()", "unknown"),
        ("n > 2", "unknown"),  # a literal default is no proof either
        ("bool(t.any())", "tensor"),
        ("int(n.sum()) == 3", "tensor"),
        ("any(t.any() for t in xs)", "tensor"),
        ("all([(a > 0).all(), (b > 0).all()])", "tensor"),
        ("torch.equal(a, b)", "tensor"),
        ("x.shape[0] > 4", "shape"),
        ("x.any() and not torch.compiler.is_compiling()", "tensor"),  # the tensor is tested first
        ("is_pad and not torch.compiler.is_compiling() and x.any()", "tensor"),  # is_pad may be a tensor
        ("not is_tracing(x) and x.any()", "tensor"),  # (transformers' is_tracing: a hint for its files only)
    ],
)
def test_not_provably_python_is_dispatched(expr, kind):
    assert _kind(expr) == kind


def test_transformers_hints_are_data_applied_to_transformers_files_only():
    from unbranch.compiler.analysis import classify
    from unbranch.hf.hints import TRANSFORMERS

    for expr in ("is_pad", "output_attentions", "self.config.use_cache", "self.num_heads > 1", "n > 2"):
        assert _kind(expr, hints=TRANSFORMERS) == "static"
        assert _kind(expr) != "static"
    assert _kind("is_torchdynamo_compiling()", hints=TRANSFORMERS) == "static"
    assert _kind("(x > 0).any()", hints=TRANSFORMERS) == "tensor"  # hints never hide tensor data
    assert classify.hints_for("/site-packages/transformers/models/bart/modeling_bart.py") == TRANSFORMERS
    assert classify.hints_for("/home/me/model.py") == classify.NO_HINTS
    assert classify.hints_for(None) == classify.NO_HINTS


def test_rewritten_forms_keep_their_kind():
    import ast

    from unbranch.compiler.analysis.classify import Classifier

    c = Classifier()
    c.runtime = "_ub"
    for original, rewritten in [
        ("torch.equal(a, b)", "_ub.equal(a, b)"),
        ("any(t.any() for t in xs)", "_ub.any_(t.any() for t in xs)"),
        ("bool(t.sum())", "_ub.bool_(t.sum())"),
        ("bool(3)", "_ub.bool_(3)"),
    ]:
        assert c.kind(ast.parse(rewritten, mode="eval").body) == c.kind(ast.parse(original, mode="eval").body)


# --- match/case, try, walrus, global in names and liveness -----------------------------------------


def _facts(code):
    from unbranch.compiler.analysis.liveness import analyse_function

    fn = body(code)[0]
    return fn, analyse_function(fn)


def test_match_case_reads_binds_and_defines():
    from unbranch.compiler.analysis.names import block_reads, block_writes, pattern_effects

    fn, facts = _facts(
        """
        def f(self, x, mode):
            match mode:
                case "a":
                    if x.sum() > 0:
                        x = x * 2
                case Kind.B | Kind.C:
                    y = 1
                case Point(x=px, y=0) as p:
                    x = x + px
                case [first, *rest] if first:
                    x = x + first
                case {"k": v, **others}:
                    x = v
            return x
        """
    )
    match = fn.body.body[0]
    inner_if = match.cases[0].body.body[0]
    assert facts.defined[inner_if] >= {"self", "x", "mode"}  # was: nothing defined, "'x' may be unbound"
    assert facts.live_out[inner_if] == {"x"}
    assert pattern_effects(match.cases[2].pattern) == ({"px", "p"}, {"Point"})  # x= names an attribute
    assert pattern_effects(match.cases[1].pattern) == (set(), {"Kind"})
    assert pattern_effects(match.cases[4].pattern)[0] == {"v", "others"}
    writes = block_writes([match])
    assert writes >= {"px", "p", "first", "rest", "v", "others", "y", "x"} and "Kind" not in writes
    assert block_reads([match]) >= {"mode", "Kind", "Point", "first", "x"}


def test_match_definedness_after_it():
    from unbranch.compiler.analysis.liveness import assigned

    exhaustive = body("match m:\n    case 1:\n        y = 1\n    case _:\n        y = 2\n")
    partial = body("match m:\n    case 1:\n        y = 1\n    case 2:\n        y = 2\n")
    assert assigned(exhaustive) == {"y"}
    assert assigned(partial) == set()  # no case may match


def test_match_liveness_kills_what_every_path_rebinds():
    from unbranch.compiler.analysis.liveness import live_in

    code = body("match m:\n    case 1:\n        y = 1\n    case _:\n        y = 2\nz = y\n")
    assert live_in(code, set()) == {"m"}
    partial = body("match m:\n    case 1:\n        y = 1\nz = y\n")
    assert live_in(partial, set()) == {"m", "y"}


def test_try_definedness():
    from unbranch.compiler.analysis.liveness import assigned

    assert assigned(body("try:\n    y = f()\nexcept E:\n    y = 0\n")) == {"y"}
    assert assigned(body("try:\n    y = f()\nexcept E:\n    pass\n")) == set()
    assert assigned(body("try:\n    y = f()\nexcept E as e:\n    y = e\n")) == {"y"}  # e is deleted
    assert assigned(body("try:\n    y = f()\nexcept E:\n    raise\nelse:\n    z = y\n")) == {"y", "z"}
    assert assigned(body("try:\n    pass\nfinally:\n    w = 1\n")) == {"w"}


def test_walrus_and_global():
    from unbranch.compiler.analysis.liveness import assigned, live_in

    assert assigned(body("while (n := f()) > 0:\n    pass\n")) == {"n"}
    assert live_in(body("if (n := f()):\n    g(n)\n"), set()) == {"f", "g"}
    fn, facts = _facts("def f(x):\n    global counter\n    counter = counter + 1\n    return x\n")
    assert "counter" not in facts.locals and "counter" in facts.declared_nonlocal


def test_facts_of_a_node_from_another_tree_fail_loudly():
    fn = cst.parse_module("def f(x):\n    if x:\n        y = 1\n    return x\n").body[0]
    facts = liveness.analyse_function(fn)
    stmt = fn.body.body[0]
    assert facts.before(stmt) == {"x"} and "x" in facts.after(stmt)
    with pytest.raises(LookupError, match="not in the analysed tree"):
        facts.before(stmt.deep_clone())


def test_origins_come_from_the_parser_for_every_statement_shape():
    text = (
        "def f(x, m):\n"  # 1
        "    a = 1; b = 2\n"  # 2
        "    if x: return a\n"  # 3
        "    elif m:\n"  # 4
        "        b = 3\n"  # 5
        "    match m:\n"  # 6
        "        case 1:\n"  # 7
        "            b = 4\n"  # 8
        "    try:\n"  # 9
        "        pass\n"  # 10
        "    except ValueError:\n"  # 11
        "        b = (\n"  # 12
        "            5)\n"  # 13
        "    return b\n"  # 14
    )
    fn = cst.parse_module(text).body[0]
    origins = Origins.parse(fn, ast.parse(text).body[0])
    body = fn.body.body
    first, small = body[0], body[0].body
    assert [origins.line(n) for n in (first, *small)] == [2, 2, 2]
    assert origins.line(body[1]) == 3 and origins.line(body[1].body.body[0]) == 3  # one-line suite
    assert origins.line(body[1].orelse) == 4 and origins.line(body[1].orelse.body.body[0]) == 5  # elif
    assert origins.line(body[2].cases[0].body.body[0]) == 8
    assert origins.line(body[3].handlers[0].body.body[0]) == 12 and origins.line(body[4]) == 14
    assert isinstance(origins.twin(body[1]), ast.If) and origins.line(cst.Pass()) is None
    clone = origins.cloned(body[2])
    assert origins.line(clone.cases[0].body.body[0]) == 8  # a copy keeps the lines it copies


_EVERY_FORM = '''
@decorator(arg)
def forward(self, x, *args, y: int = 2, **kw) -> torch.Tensor:
    """doc"""
    global g
    a, *b = x[1:2, ::3], [v for v in x if v if (w := v)]
    c = {k: v for k, v in kw.items()} | {1, 2} if x.any() else lambda q=1: q
    del a[0]
    with torch.no_grad() as ng, open(f"{x!r:>10}") as fh:
        pass
    try:
        raise ValueError("v") from None
    except* (TypeError, ValueError) as e:
        x += 1
    else:
        x @= y
    finally:
        assert x, "m"
    match x:
        case [1, *rest] | {"k": _, **others} if rest:
            return await x
        case Point(x=0, y=yy) as p:
            yield from x
    for i in range(3):
        continue
    else:
        x = not -x ** 2 < y <= 3 is not None
    while x and (y or x):
        break
    from . import *
    return x[...], (yield), x.y.z(*args, key=1, **kw), f"{x:>{y}}"


def other(q):
    return q
'''


def test_read_visits_what_libcst_visits_in_the_same_order():
    import libcst as cst

    from unbranch.compiler.analysis.walk import read

    tree = cst.parse_module(_EVERY_FORM)

    class Recorder(cst.CSTVisitor):
        def __init__(self):
            self.seen = []

        def on_visit(self, node):
            self.seen.append(("visit", type(node).__name__))
            return not isinstance(node, cst.Lambda)  # a visitor that skips a scope skips it in both

        def on_leave(self, node):
            self.seen.append(("leave", type(node).__name__))

    by_libcst, by_read = Recorder(), Recorder()
    tree.visit(by_libcst)
    read(tree, by_read)
    assert by_read.seen == by_libcst.seen
    assert len(by_read.seen) > 500 and ("visit", "MatchAs") in by_read.seen


def test_read_skipping_layout_calls_the_hooks_libcst_calls():
    """A visitor with no hook for whitespace, comments or punctuation is not walked through
    them, and sees every other node as libcst shows it; one with such a hook sees them all."""
    import libcst as cst

    from unbranch.compiler.analysis.walk import read

    tree = cst.parse_module(_EVERY_FORM + "\nf(a,  # why\n  b)[0]  # done\n")

    class Names(cst.CSTVisitor):
        def __init__(self):
            self.seen = []

        def visit_Name(self, node):
            self.seen.append(("Name", node.value))

        def leave_Call(self, node):
            self.seen.append(("Call", cst.Module([]).code_for_node(node.func)))

        def visit_Lambda(self, node):
            return False

    class Comments(Names):
        def visit_Comment(self, node):
            self.seen.append(("Comment", node.value))

        def leave_Comma(self, node):
            self.seen.append(("Comma", ""))

    for kind in (Names, Comments):
        by_libcst, by_read = kind(), kind()
        tree.visit(by_libcst)
        read(tree, by_read)
        assert by_read.seen == by_libcst.seen
    assert len(by_read.seen) > 100 and ("Comma", "") in by_read.seen and ("Comment", "# why") in by_read.seen


def test_transform_gives_what_libcst_gives_and_keeps_what_did_not_change():
    """Same hooks in the same order, the same resulting code (renames, removals, a statement
    flattened into two, an optional part removed), and unchanged subtrees as the same objects."""
    import libcst as cst

    from unbranch.compiler.analysis.walk import transform

    class Changer(cst.CSTTransformer):
        def __init__(self):
            self.seen = []

        def on_visit(self, node):
            self.seen.append(("visit", type(node).__name__))
            return super().on_visit(node) and not isinstance(node, cst.Lambda)

        def on_leave(self, original, updated):
            self.seen.append(("leave", type(original).__name__))
            return super().on_leave(original, updated)

        def leave_Name(self, original, updated):
            return updated.with_changes(value="xx") if updated.value == "x" else updated

        def leave_Del(self, original, updated):
            return cst.RemoveFromParent()

        def leave_Pass(self, original, updated):
            return cst.FlattenSentinel([cst.Expr(cst.Name("a")), cst.Expr(cst.Name("b"))])

        def leave_Else(self, original, updated):
            return cst.RemoveFromParent()

    tree = cst.parse_module(_EVERY_FORM)
    by_libcst, by_transform = Changer(), Changer()
    expected, got = tree.visit(by_libcst), transform(tree, by_transform)
    assert got.code == expected.code and got.deep_equals(expected)
    assert "xx" in got.code and "del a[0]" not in got.code and "    pass" not in got.code
    assert by_transform.seen == by_libcst.seen
    assert got.body[1] is tree.body[1]  # `other` has no x, no del, no pass, no else: the same object
    assert got.body[0] is not tree.body[0]


@pytest.mark.parametrize("annotated", [False, True])
def test_a_parameter_the_function_reassigns_a_literal_is_not_plainly_python(annotated):
    """``is_causal = False`` in one branch does not make the parameter a Python flag: the caller may pass
    a tensor (torch.nn.functional's ``is_causal`` when a mask's causality is data). An annotation the
    classifier trusts still does."""
    from unbranch.compiler.analysis.classify import STATIC, UNKNOWN

    header = "def f(x, mask=None, is_causal: bool = False):" if annotated else "def f(x, mask=None, is_causal=False):"
    fn = header + "\n    if mask is not None:\n        is_causal = False\n    return x"
    assert _kind("is_causal and mask is None", fn=fn) == (STATIC if annotated else UNKNOWN)
    assert _kind("has_torch_function((x, mask))", fn=fn) == STATIC  # (torch.overrides: a test of types)
