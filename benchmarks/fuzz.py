"""Differential fuzzing, long run: thousands of random ``if`` programs, hundreds of them exported.

Every program is checked eagerly (original vs ``transform_method(f).func`` on inputs meant to
take every path). One in ``--export-every``, taken among those with a tensor or shape ``if``, is
also exported with a dynamic batch (every ``--strict-every``-th export in strict mode) and
compared with the original on other batch sizes. Divergences are recorded with their source,
not raised, so one run finds them all.

    python benchmarks/fuzz.py --programs 2000     # about 15 minutes on two cores
    python benchmarks/fuzz.py --programs 100      # a quick run
    python benchmarks/fuzz.py --known-bugs        # also the constructs of fuzzing.KNOWN_BUGS
    python benchmarks/fuzz.py --effects           # aliases, views, in-place ops, helpers, lists, closures
    python benchmarks/fuzz.py --ternaries         # conditional expressions (a if p else b) in expressions
    python benchmarks/fuzz.py --loops             # loops: index arithmetic, row writes, nested loops
    python benchmarks/fuzz.py --jumps             # loops with break/continue/return under any test
    python benchmarks/fuzz.py --realcode          # chained comparisons, bool()/int(), checks, closures
    python benchmarks/fuzz.py --families          # issue 37's families: Python values, loop lengths and
                                                  # reports decided by data, predicate spellings, containers
    python benchmarks/fuzz.py --layouts           # every kind of program above, each written in layouts
                                                  # Python accepts (benchmarks/programs/layouts.py); its conversions
                                                  # must be those of its one-statement-a-line spelling
                                                  # (with --families: family programs only)

An ``if`` whose effects a branch function would lose must be refused with its reason: such
exports are counted as refusals (results/fuzz_effects.json), not as errors.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
import warnings
from pathlib import Path

from _common import machine, write
from hypothesis import HealthCheck, Phase, given, seed, settings

sys.path.insert(0, str(Path(__file__).resolve().parent / "programs"))
from fuzzing import PYTHON_ARGS, Divergence, branches_on_tensors, check_eager, check_export, load, programs  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from layouts import LAYOUTS, render  # noqa: E402

import unbranch  # noqa: E402

# what a run may also draw: programs()' keyword -> the option's help
CONSTRUCTS = {
    "known_bugs": "also draw fuzzing.KNOWN_BUGS constructs",
    "effects": "also draw side effects (aliases, in-place ops...)",
    "ternaries": "also draw conditional expressions (a if p else b)",
    "loops": "loop programs (fuzzing.loop_programs) instead",
    "jumps": "loops with break/continue/return (fuzzing.jump_programs) instead",
    "realcode": "also draw real code's forms (chained comparisons, bool(), checks, a closure read after)",
    "families": "issue 37's families (fuzzing.family_programs) instead: Python values decided by data, "
    "loops of a data length, predicate spellings, containers changed in branches, reports",
    "layouts": "draw every kind of program, each written in layouts Python accepts (benchmarks/programs/layouts.py)",
}
# the kinds of program a layouts run draws (programs()' keywords; "plain" draws none). Family
# programs are drawn in layouts only with --families (the earlier layouts records stay reproducible)
_KINDS = ("plain", "effects", "ternaries", "loops", "jumps", "realcode")


@st.composite
def _laid_out(draw, kinds=_KINDS) -> tuple[str, str]:
    """(a program of any of ``kinds``, the same program in one to four layouts)."""
    kind = draw(st.sampled_from(kinds))
    source = draw(programs(**({} if kind == "plain" else {kind: True})))
    return source, render(source, draw(st.lists(st.sampled_from(LAYOUTS), min_size=1, max_size=4, unique=True)))


def _conversions(source: str) -> list:
    """What the rewrite does to each construct (converted, checked, left as Python), in order."""
    try:
        return sorted((n.kind, n.condition) for n in unbranch.transform_method(load(source), strict=False).notes)
    except Exception as e:
        return [("error", type(e).__name__)]


def run(n: int, export_every: int, strict_every: int, random_seed: int, **constructs) -> dict:
    tally = {"programs": 0, "exports": 0, "strict_exports": 0, "sides_taken": 0, "sides": 0}
    sources, rewrite_seconds, divergences, refusals = set(), [], [], []
    slowest = (0.0, "")

    laid_out = constructs.pop("layouts", False)
    kinds = ("families",) if laid_out and constructs.get("families") else _KINDS

    @seed(random_seed)
    @settings(
        max_examples=n,
        deadline=None,
        database=None,
        phases=[Phase.generate],  # record every divergence, do not stop at the first to shrink it
        suppress_health_check=list(HealthCheck),
    )
    @given(_laid_out(kinds) if laid_out else programs(**constructs).map(lambda s: (s, s)))
    def one(pair):
        nonlocal slowest
        plain, source = pair
        i = tally["programs"]
        tally["programs"] += 1
        sources.add(source)
        eager = check_eager(source)
        tally["sides_taken"] += eager.sides_taken
        tally["sides"] += eager.sides
        rewrite_seconds.append(eager.rewrite_seconds)
        slowest = max(slowest, (eager.rewrite_seconds, source))
        if eager.divergence is not None:
            divergences.append(eager.divergence)
            return
        if source != plain and _conversions(source) != _conversions(plain):
            divergences.append(Divergence("layout", source, f"converted otherwise than:\n{plain}"))
            return
        k = tally["exports"]
        exportable = (
            constructs.get("loops")
            or constructs.get("families")  # (a flag, a match, a loop length, a key... on data: every one)
            or "for " in source
            or "while " in source
            or branches_on_tensors(source)
        )  # it can hold a cond/loop
        if k <= i // export_every and exportable:  # one in export_every
            strict = k % strict_every == strict_every - 1
            tally["exports"] += 1
            tally["strict_exports"] += strict
            divergence = check_export(source, PYTHON_ARGS[k % len(PYTHON_ARGS)], strict)
            if (
                divergence is not None
                and divergence.kind == "export-error"
                and any(said in divergence.detail for said in ("could not be converted: ", ": left as Python: "))
            ):
                divergence.kind = "refusal"  # a construct left as Python, with its reason (strict or guided)
            if divergence is not None and source != plain and divergence.kind != "refusal":
                # the same program spelled one statement a line: what it does, the layout must do too
                if check_export(plain, PYTHON_ARGS[k % len(PYTHON_ARGS)], strict) is None:
                    divergence.kind = "layout"
            if divergence is not None and divergence.kind == "refusal":
                refusals.append(divergence)
            elif divergence is not None:
                divergences.append(divergence)
        if i % 100 == 99:
            print(f"  {i + 1} programs, {len(divergences)} divergence(s)", flush=True)

    one()
    kinds = [d.kind for d in divergences]
    ordered = sorted(rewrite_seconds)
    return {
        **tally,
        "distinct_programs": len(sources),
        "eager_divergences": kinds.count("eager"),
        "rewrite_errors": kinds.count("rewrite"),
        "layout_divergences": kinds.count("layout"),  # converted or exported otherwise than its plain spelling
        "export_divergences": kinds.count("export"),
        "export_errors": kinds.count("export-error"),
        "crashes": kinds.count("crash"),  # an export failing inside unbranch's code, not with an UnbranchError
        "harm": kinds.count("harm"),  # exported without the rewrite, failed with it
        "refusals": len(refusals),
        "refusal_reasons": sorted({d.detail.split(": ", 2)[-1][:160] for d in refusals}),
        "branch_sides_taken": tally["sides_taken"] / max(tally["sides"], 1),
        "rewrite_seconds": {
            "median": statistics.median(ordered),
            "p95": ordered[round(0.95 * (len(ordered) - 1))],
            "max": ordered[-1],
        },
        "slowest_rewrite_source": slowest[1],
        "divergences": [dataclasses.asdict(d) for d in divergences],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=2000)
    parser.add_argument("--export-every", type=int, default=10, help="export one program in this many")
    parser.add_argument("--strict-every", type=int, default=4, help="one export in this many is strict")
    parser.add_argument("--seed", type=int, default=0)
    for name, text in CONSTRUCTS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", action="store_true", help=text)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    start = time.perf_counter()
    drawn = {name: getattr(args, name) for name in CONSTRUCTS}
    result = run(args.programs, args.export_every, args.strict_every, args.seed, **drawn)
    result = {
        "seconds": time.perf_counter() - start,
        "settings": vars(args),
        **result,
        "machine": machine(),
    }
    path = write("_".join(["fuzz", *(n for n in CONSTRUCTS if drawn[n] and n != "known_bugs")]), result)
    print(
        f"{result['programs']} programs ({result['distinct_programs']} distinct) in {result['seconds']:.0f} s: "
        f"{result['eager_divergences']} eager divergence(s), {result['rewrite_errors']} rewrite error(s); "
        f"{result['exports']} exports ({result['strict_exports']} strict): {result['export_divergences']} "
        f"divergence(s), {result['export_errors']} error(s), {result['crashes']} crash(es), {result['harm']} harmed, "
        f"{result['refusals']} refusal(s); "
        f"{result['branch_sides_taken']:.0%} of branch sides "
        f"taken; rewrite median {result['rewrite_seconds']['median']:.2f} s, max "
        f"{result['rewrite_seconds']['max']:.1f} s -> {path}"
    )
    for d in result["divergences"]:
        print(f"\n{d['kind']} (strict={d['strict']}): {d['detail']}\n{d['source']}")


if __name__ == "__main__":
    main()
