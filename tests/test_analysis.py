"""The analysis layer on its own: facts about small snippets, no rewriting."""

import textwrap

import libcst as cst
import pytest

from unbranch.analysis.effects import block_effects, closures, mutated_parameters


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
    from unbranch.analysis.liveness import surroundings

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
