"""Differential fuzzing of the loop model (issue 54): loops that data leaves, over counts that are
sizes, carrying tensors, Python numbers and names the loop binds first, changing rows in place.

Each program is one loop, drawn from: a static ``range``, ``range(x.shape[0])``, the rows of ``x``
(plain, ``enumerate``, ``unbind``) and a ``while`` on data; an exit on data (``break`` at the start,
middle or end of the step, ``continue``, ``return``, ``for ... else``, a nested loop's break through a
flag) or none; carried values (a tensor, an int counter, a float that changes, a name first bound in
the loop, a row changed in place, the loop variable read after the loop). Every program is compared
with Python eagerly (the rewritten function), exported through ``unbranch.export`` with a dynamic
batch, strict and non-strict in turn, and run on inputs taking each exit at three batch sizes:
outputs must match in shape, dtype and value (a counter Python gives as an int may come back as a
0-d tensor: counted apart), an input that raises eagerly must raise in the program. A refusal is
counted with its reason, never as a match.

    python benchmarks/fuzz_loops.py --programs 200     # about 10 minutes on two cores
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import warnings
from pathlib import Path

import torch
from _common import machine, write
from fuzz_conditions import Model, run, same
from torch.export import Dim

sys.path.insert(0, str(Path(__file__).resolve().parent / "programs"))
from fuzzing import load  # noqa: E402

import unbranch  # noqa: E402

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
        expected, got = run(x.clone(), lambda t: fn(model, t)), run(x.clone(), lambda t: rewritten(model, t))
        if isinstance(expected, BaseException) or isinstance(got, BaseException):
            if type(got) is not type(expected):
                return {"result": "eager", "detail": f"{got!r} against {expected!r}"}
        elif (why := same(got, expected)) is not None:
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=54)
    parser.add_argument("--out", default="fuzz_loops")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rng = random.Random(args.seed)
    counts: dict = {}
    by_family: dict = {}
    cases, started = [], time.perf_counter()
    for n in range(args.programs):
        source, drawn = program(rng)
        strict = n % 2 == 1
        outcome = check(source, n, strict)
        key = outcome["result"]
        counts[key] = counts.get(key, 0) + 1
        family = f"{drawn['loop']}/{drawn['exit']}"
        by_family.setdefault(family, {}).setdefault(key, 0)
        by_family[family][key] += 1
        if key != "match":
            cases.append({"source": source, "strict": strict, **drawn, **outcome})
        if (n + 1) % 25 == 0:
            print(f"{n + 1}/{args.programs} programs, {time.perf_counter() - started:.0f} s: {counts}", flush=True)
    result = {
        "programs": args.programs,
        "seed": args.seed,
        "counts": counts,
        "by_family": dict(sorted(by_family.items())),
        "not_matched": cases,
        "seconds": time.perf_counter() - started,
        "machine": machine(),
    }
    write(args.out, result)
    print(counts)


if __name__ == "__main__":
    main()
