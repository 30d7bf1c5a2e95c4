"""Loops that data leaves, drawn for differential fuzzing (benchmarks/fuzz_loops.py runs them at
length, tests/test_loop_fuzz.py a bounded sample): one loop per program, its kind, exit and carries
drawn, inputs taking each exit at three sizes, and the comparison of the exported program with Python."""

from __future__ import annotations

import random
import warnings

import torch
from differential import Model, eager_difference, run, same
from fuzzing import load
from torch.export import Dim

import unbranch

HEADERS = {  # (header, the row a step reads, the index if any)
    "static": ("for i in range(3):", "x[i]", "i"),
    "sized": ("for i in range(x.shape[0]):", "x[i]", "i"),
    "rows": ("for row in x:", "row", None),
    "enumerate": ("for i, row in enumerate(x):", "row", "i"),
    "unbind": ("for i, row in enumerate(x.unbind(0)):", "row", "i"),
}
TESTS = ("{row}.sum() > {t}", "acc.sum() > {t}", "({row} > {t}).all()", "{row}.max() < -{t}")
EXITS = ("none", "break-first", "break-middle", "break-last", "continue", "return", "else", "nested")
CARRIES = ("counter", "float", "first-bound", "in-place", "after")


def program(rng: random.Random) -> tuple[str, dict]:
    """One program ``f(self, x)`` with one loop, and what it was drawn from."""
    kind = rng.choice((*HEADERS, "while"))
    exit_ = rng.choice(EXITS)
    carries = set(rng.sample(CARRIES, rng.randint(0, 2)))
    if kind == "while":
        exit_ = rng.choice(("none", "break-middle", "continue"))
        carries -= {"in-place", "after", "first-bound"}
    if exit_ in ("else", "nested"):
        carries.discard("after")  # (the loop variable after a break: Python's stays where it stopped)
    threshold = rng.choice(("0.5", "1.0", "0.0"))
    lines = ["    acc = torch.zeros(x.shape[1])"]
    if "in-place" in carries:
        lines.insert(0, "    x = x.clone()")
    if "counter" in carries:
        lines.append("    n = 0")
    if "float" in carries:
        lines.append("    scale = 1.0")
    if exit_ == "nested":
        lines.append("    found = False")
    if kind == "while":
        header, row, index = "while acc.sum() < 3.0 and k < x.shape[0]:", "x[k]", "k"
        lines.append("    k = 0")
    else:
        header, row, index = HEADERS[kind]
    test = rng.choice(TESTS).format(row=row, t=threshold)
    step = [f"acc = acc + {row} * {'scale' if 'float' in carries else '0.5'}"]
    if "counter" in carries:
        step.append("n += 1")
    if "float" in carries:
        step.append("scale = scale * 0.5")
    if "in-place" in carries and kind in ("rows", "enumerate", "unbind"):
        step.insert(0, rng.choice(("row.mul_(0.5)", "row += 1")))
    if kind == "while":
        step.append("k += 1")
    bound_first = "first-bound" in carries and exit_ in ("break-first", "break-middle", "break-last", "else")
    out = ["acc"]
    if "counter" in carries:
        out.append("acc * n")
    if "float" in carries:
        out.append("acc * scale")
    if exit_ == "else" or bound_first:
        out.append("hit")
    if "in-place" in carries and kind in ("rows", "enumerate", "unbind"):
        out.append("x")
    if "after" in carries and kind != "while":
        out.append("row" if row == "row" else "x[i]")
    body = list(step)
    # (a return inside the loop gives what the last return gives, of the same structure)
    jump = {"continue": "continue", "return": f"return {', '.join(['acc * 2', *out[1:]])}"}.get(exit_, "break")
    if exit_.startswith("break") or exit_ in ("continue", "return", "else"):
        hit = [f"hit = {row} * 2"] if bound_first or exit_ == "else" else []
        at = {"break-first": 0, "break-last": len(body)}.get(exit_, len(body) // 2 + (exit_ == "continue"))
        if kind == "while" and exit_ == "continue":
            at = len(body) - 1  # (before k += 1 a continue would loop forever)
        body[at:at] = [f"if {test}:", *(f"    {h}" for h in hit), f"    {jump}"]
    elif exit_ == "nested":
        body += ["for j in range(2):", f"    if {test.replace('>', '> j +')}:", "        found = True", "        break"]
        body += ["if found:", "    break"]
    lines += [f"    {header}", *(f"        {s}" for s in body)]
    if exit_ == "else" or bound_first:
        lines += ["    else:", "        hit = acc * 0"]
    lines.append(f"    return {', '.join(out)}")
    source = "\n".join(["import torch", "", "", "def f(self, x):", *lines, ""])
    return source, {"loop": kind, "exit": exit_, "carries": sorted(carries)}


def inputs(seed: int) -> list[torch.Tensor]:
    """Inputs taking each exit: positive, negative, mixed rows, at 4 (the example's), 6 and 3 rows."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in (4, 6, 3):
        r = torch.rand(n, 4, generator=g)
        out += [r + 0.5, -r - 0.5, r - 0.5, 2 * r - 1.0]
    return out


def check(source: str, seed: int, strict: bool) -> dict:
    fn = load(source)
    model = Model(fn)
    xs = inputs(seed)
    rewritten = unbranch.transform_method(fn).func
    for x in xs:  # eagerly: the rewritten function is Python's
        why, _ = eager_difference(fn, rewritten, model, x)
        if why is not None:
            return {"result": "eager", "detail": why}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ep = unbranch.export(model, (xs[0].clone(),), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)
    except Exception as e:
        return {"result": "refused", "detail": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
    program = ep.module()
    for x in xs:
        why = same(run(x.clone(), program), run(x.clone(), lambda t: fn(model, t)))
        if why is not None:
            return {"result": "divergence", "detail": f"rows={x.shape[0]}: {why}"}
    return {"result": "match"}
