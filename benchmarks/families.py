"""Issue 37's families: how many programs of a set export through ``unbranch.export`` and match eager.

    python benchmarks/families.py                           # benchmarks/programs/families.py's PROGRAMS, both modes
    python benchmarks/families.py --programs path/to/set.py # another set with a PROGRAMS dict (its Program
                                                            # entries: family, make, example, dynamic, inputs)
    python benchmarks/families.py --name redteam            # results/families_redteam.json
    python benchmarks/families.py --explicit                # also the explicit path: every function of
                                                            # the set's file named in rewrite=[...]

Each program is exported in non-strict and strict mode; its outcome is "ok" (the program matches
eager on every input, state included), the UnbranchError's first line, or the difference found.
Prints a table per family, records every outcome. With ``--explicit`` each program is also exported
through the context naming every function its file defines, and the cells that pass only that way
(the guided path should reach whatever naming reaches) are listed.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import logging
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

from _common import machine, write

sys.path.insert(0, str(Path(__file__).resolve().parent / "programs"))
import torch  # noqa: E402
from families import check  # noqa: E402

import unbranch  # noqa: E402


def _programs(path: str | None) -> dict:
    if path is None:
        from families import PROGRAMS

        return PROGRAMS
    spec = importlib.util.spec_from_file_location("program_set", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["program_set"] = module
    spec.loader.exec_module(module)
    return module.PROGRAMS


def _export(model, example, dynamic, strict):
    return unbranch.export(model, example, dynamic_shapes=dynamic, strict=strict)


def _named(model) -> list:
    """Every function the model's file defines: its modules' attributes (methods, properties) and its functions."""
    module = sys.modules[type(model).__module__]
    targets = []
    for value in vars(module).values():
        if inspect.isclass(value) and issubclass(value, torch.nn.Module) and value.__module__ == module.__name__:
            targets += [
                (value, k)
                for k, v in vars(value).items()
                if isinstance(v, (property, staticmethod, classmethod)) or inspect.isfunction(v)
            ]
        elif inspect.isfunction(value) and value.__module__ == module.__name__:
            targets.append(value)
    return targets


def _explicit(model, example, dynamic, strict):
    with unbranch.torch_export_rewrite(rewrite=_named(model)):
        return torch.export.export(model, example, dynamic_shapes=dynamic, strict=strict)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", help="a file defining PROGRAMS (default: benchmarks/programs/families.py)")
    parser.add_argument("--name", default="", help="results/families_<name>.json")
    parser.add_argument("--explicit", action="store_true", help="also export naming every function of the set")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger("torch").setLevel(logging.ERROR)
    programs = _programs(args.programs)
    start = time.perf_counter()
    outcomes = {}
    for name, program in programs.items():
        outcomes[name] = {"family": program.family}
        for strict in (False, True):
            mode = "strict" if strict else "nonstrict"
            outcomes[name][mode] = check(program, strict, _export)
            if args.explicit:
                outcomes[name][f"explicit_{mode}"] = check(program, strict, _explicit)
        print(f"  {program.family} {name:50s} {outcomes[name]['nonstrict'][:60]:60s} {outcomes[name]['strict'][:40]}")
    tally: dict = {}
    for outcome in outcomes.values():
        row = tally.setdefault(outcome["family"], Counter())
        row["programs"] += 1
        for mode in ("nonstrict", "strict"):
            row[mode] += outcome[mode] == "ok"
            row["wrong"] += outcome[mode].startswith(("differs", "state"))
    print(f"\n{'family':>6} {'programs':>8} {'non-strict ok':>13} {'strict ok':>9} {'wrong':>5}")
    for family in sorted(tally):
        row = tally[family]
        print(f"{family:>6} {row['programs']:>8} {row['nonstrict']:>13} {row['strict']:>9} {row['wrong']:>5}")
    total = sum(tally.values(), Counter())
    if args.explicit:
        only_named = [
            f"{name} ({mode})"
            for name, outcome in outcomes.items()
            for mode in ("nonstrict", "strict")
            if outcome[f"explicit_{mode}"] == "ok" and outcome[mode] != "ok"
        ]
        total["only_named"] = len(only_named)
        print(f"passing only when named ({len(only_named)}): {', '.join(only_named) or '-'}")
    print(f"{'all':>6} {total['programs']:>8} {total['nonstrict']:>13} {total['strict']:>9} {total['wrong']:>5}")
    result = {
        "seconds": time.perf_counter() - start,
        "programs": args.programs or "benchmarks/programs/families.py",
        "totals": dict(total),
        "by_family": {str(k): dict(v) for k, v in sorted(tally.items())},
        "outcomes": outcomes,
        "machine": machine(),
    }
    print("->", write("_".join(["families", *([args.name] if args.name else [])]), result))


if __name__ == "__main__":
    main()
