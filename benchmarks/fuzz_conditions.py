"""Differential fuzzing of tensor conditions (issue 52): every lowering that decides by a tensor takes
Python's truth of a one-element tensor of any rank and dtype, and keeps each side's shape and dtype.

Each program tests a condition drawn from one-element tensors of rank 0 to 2 and of dtype bool, int
and float (``any``/``all``/``sum``/``max``/``amax``/``item``, slices, ``not``, a conjunction), in an
``if`` with cheap or costly sides, a conditional expression, a check (``if c: raise``) or a loop's
exit (``for ...: if c: break``), on outputs that are scalars, rows, broadcast and int tensors. Every
program is compared with Python eagerly (the rewritten function) and exported with a dynamic batch
in one of six ways (strict and non-strict, ``branches`` auto, where and cond, in turn), then run on
inputs taking each side at three batch sizes: outputs must match in shape, dtype and value, and an
input that raises eagerly must raise in the program. A condition of several elements must make the
export fail, as Python fails on the example.

    python benchmarks/fuzz_conditions.py --programs 1200     # about 25 minutes on two cores
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
from torch.export import Dim

sys.path.insert(0, str(Path(__file__).resolve().parent / "programs"))
from differential import Model, eager_difference, run, same  # noqa: E402
from fuzzing import load  # noqa: E402

import unbranch  # noqa: E402

# one-element conditions: (text, rank, dtype) of ``x`` (n, 4) float; ``[:1]`` keeps one row whatever n
CONDITIONS = (
    "(x > 0).any()",
    "(x > 0).all()",
    "(x[:, 0] > 0).any(dim=0, keepdim=True)",
    "(x[:1, :1] > 0)",
    "(x[:1, 1:2] < 0).reshape(1, 1, 1)",
    "x.sum()",
    "x[:1, :1].sum(dim=1)",
    "x.max()",
    "x[:1, 0]",
    "x.amax(dim=1, keepdim=True)[:1]",
    "(x > 0).sum()",
    "(x > 0).sum(dim=(0, 1), keepdim=True)",
    "(x * 3).long().sum()",
    "(x[:1, :1] * 3).int()",
    "x.sum() * 0",
    "x.sum().item() > 0",
    "x.mean()",
)
# conditions Python refuses: several elements (bool() of them raises on the example)
AMBIGUOUS = ("x[0] > 0", "x[:, :2].sum(dim=0)")
CHEAP = ("s = s * 2", "r = r + 1", "b = torch.relu(b) - 0.5", "k = k + 1", "s = -s", "r = r.clamp(min=0)")
COSTLY = ("s = torch.exp(s)", "r = r.cumsum(0)", "b = b @ self.w", "k = k * k")
# what each program returns: a 0-d float, a row (4,), the batch (n, 4), a column (n, 1), a 0-d int
OUTPUTS = {"s": "x.sum()", "r": "x[0] * 1", "b": "x * 1", "c": "x[:, :1] * 1", "k": "(x > 0).sum()"}
EXPRESSIONS = {
    "s": ("s * 2", "s - 1"),
    "r": ("r + 1", "r.abs()"),
    "b": ("b * 0.5", "torch.tanh(b)"),
    "k": ("k + 1", "k * 2"),
}
KINDS = ("if", "if-else", "ifexp", "check", "loop-break")
WAYS = [(strict, branches) for strict in (False, True) for branches in ("auto", "where", "cond")]


def condition(rng: random.Random) -> str:
    c = rng.choice(CONDITIONS)
    roll = rng.random()
    if roll < 0.15:
        return f"not {c}"
    if roll < 0.25:
        return f"{c} and {rng.choice(CONDITIONS)}"
    return c


def program(rng: random.Random, ambiguous: bool = False) -> str:
    """One program ``f(self, x)``: an ``if`` (or its kin) on a one-element condition (``ambiguous``: not)."""
    cond = rng.choice(AMBIGUOUS) if ambiguous else condition(rng)
    kind = rng.choice(KINDS)
    live = rng.sample(sorted(OUTPUTS), rng.randint(1, 3))
    body = [f"    {name} = {OUTPUTS[name]}" for name in live]
    sides = [s for s in (*CHEAP, *COSTLY) if s.split(" = ")[0] in live]
    pick = lambda: rng.choice(sides) if sides else "pass"  # noqa: E731
    if kind == "if":
        body += [f"    if {cond}:", f"        {pick()}"]
    elif kind == "if-else":
        body += [f"    if {cond}:", f"        {pick()}", "    else:", f"        {pick()}"]
    elif kind == "ifexp":
        name = next((n for n in live if n in EXPRESSIONS), None)
        if name is None:
            live.append("s")
            body.append("    s = x.sum()")
            name = "s"
        a, b = EXPRESSIONS[name]
        body.append(f"    {name} = {a} if {cond} else {b}")
    elif kind == "check":
        body += [f"    if {cond}:", '        raise ValueError(f"rejected: {x.shape[1]} columns")']
    else:  # a loop whose exit is the condition, on a value the loop changes
        body += [
            "    for _ in range(3):",
            f"        if {cond}:",
            "            break",
            f"        {pick()}",
            "        x = x - 0.75",
        ]
    body.append(f"    return {', '.join(live)}")
    return "\n".join(["import torch", "", "", "def f(self, x):", *body, ""])


def inputs(rng_seed: int) -> list[torch.Tensor]:
    """Inputs taking each side: all positive, all negative, zeros, mixed, at 3 (the example's), 5 and 2 rows."""
    g = torch.Generator().manual_seed(rng_seed)
    out = []
    for n in (3, 5, 2):
        r = torch.rand(n, 4, generator=g)
        out += [r + 0.5, -r - 0.5, torch.zeros(n, 4), r - 0.5, 2 * r - 1.2]
    return out


def check(source: str, seed: int, way, ambiguous: bool = False) -> dict:
    """Compare one program with Python eagerly and exported ``way``; ``ambiguous``: its condition has
    several elements, and its export must fail as Python fails on the example."""
    strict, branches = way
    fn = load(source)
    model = Model(fn)
    xs = inputs(seed)
    rewritten = unbranch.transform_method(fn).func
    taken = set()
    for x in xs:  # eagerly: the rewritten function is Python's
        why, expected = eager_difference(fn, rewritten, model, x)
        if why is not None:
            return {"result": "eager", "detail": why}
        taken.add(type(expected).__name__ if isinstance(expected, BaseException) else "ok")
    example = xs[0]
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            ep = unbranch.export(
                model, (example,), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict, branches=branches
            )
    except Exception as e:
        if ambiguous and "Boolean value of Tensor with more than one value is ambiguous" in str(e):
            return {"result": "refused as eager", "detail": type(e).__name__}
        return {"result": "export-error", "detail": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
    if ambiguous:
        return {"result": "divergence", "detail": "exported a condition of several elements, which Python refuses"}
    program = ep.module()
    for x in xs:
        why = same(run(x, program), run(x, lambda t: fn(model, t)))
        if why is not None:
            return {"result": "divergence", "detail": f"rows={x.shape[0]}: {why}"}
    return {"result": "match", "paths": sorted(taken)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=1200)
    parser.add_argument("--seed", type=int, default=52)
    parser.add_argument("--out", default="fuzz_conditions")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rng = random.Random(args.seed)
    counts: dict = {}
    bad, started = [], time.perf_counter()
    for n in range(args.programs):
        ambiguous = n % 25 == 24
        source = program(rng, ambiguous)
        way = WAYS[n % len(WAYS)]
        outcome = check(source, n, way, ambiguous)
        key = outcome["result"]
        counts[key] = counts.get(key, 0) + 1
        if key not in ("match", "refused as eager"):
            bad.append({"source": source, "strict": way[0], "branches": way[1], **outcome})
        if (n + 1) % 50 == 0:
            print(f"{n + 1}/{args.programs} programs, {time.perf_counter() - started:.0f} s: {counts}", flush=True)
    result = {
        "programs": args.programs,
        "seed": args.seed,
        "counts": counts,
        "divergences": bad,
        "seconds": time.perf_counter() - started,
        "machine": machine(),
    }
    write(args.out, result)
    print(counts)


if __name__ == "__main__":
    main()
