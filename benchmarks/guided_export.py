"""One retry per failing place, or one ``torch.export.draft_export`` that lists them all first?

``unbranch.export`` learns where to rewrite from torch's failures. Two ways to learn it:

- **retry** (what ``unbranch.export`` does): export; on a failure at control flow on data,
  rewrite the function torch names and export again; k places cost k failed exports (each
  stops at its place) and the one that works;
- **draft**: one ``draft_export``, which traces the whole model past every data-dependent
  failure and reports each (with its user stack), then rewrite them all and export once
  (retrying as above if the rewritten code fails somewhere draft_export did not see).

Measured on models with k = 1, 2, 4, 8 places (each a module function with a tensor ``if``,
behind a stack of linear layers that every trace goes through), non-strict (draft_export has
no strict mode), interleaved over ``--repeats`` rounds, each from a clean cache.

    python benchmarks/guided_export.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import linecache
import statistics
import time

import torch
from _common import machine, write
from torch.export import Dim

import unbranch
from unbranch.exporting.failures import Site, is_user_file
from unbranch.exporting.guided import Attempt, Guide
from unbranch.exporting.quiet import quiet
from unbranch.load import cache

SITES = (1, 2, 4, 8)
LAYERS = 24


def _helpers(k: int) -> list:
    """k module-level functions, each with its own ``if`` on data (distinct code: k places)."""
    out = []
    for i in range(k):
        namespace = {"torch": torch}
        text = f"def helper_{i}(x):\n    if x.sum() > {i}:\n        return x * 0.5\n    return x + {i}\n"
        code = compile(text, f"<bench helper {i}>", "exec")
        exec(code, namespace)
        fn = namespace[f"helper_{i}"]
        # its source, where unbranch reads it: the text registered with linecache under its file name
        linecache.cache[fn.__code__.co_filename] = (len(text), None, text.splitlines(True), fn.__code__.co_filename)
        out.append(fn)
    return out


class Model(torch.nn.Module):
    def __init__(self, k: int):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(32, 32) for _ in range(LAYERS))
        self.helpers = _helpers(k)

    def forward(self, x):
        for n, layer in enumerate(self.layers):
            x = torch.relu(layer(x))
            if n % (LAYERS // len(self.helpers)) == 0 and n // (LAYERS // len(self.helpers)) < len(self.helpers):
                x = self.helpers[n // (LAYERS // len(self.helpers))](x)
        return x


def retry(model, args, shapes):
    return unbranch.export(model, args, dynamic_shapes=shapes)


def draft(model, args, shapes):
    from torch._logging.structured import INTERN_TABLE

    with quiet():
        drafted = torch.export.draft_export(model, args, dynamic_shapes=shapes)
    files = {index: path for path, index in INTERN_TABLE.items()}
    guide, attempt = Guide(model=model), Attempt()
    for failure in drafted._report.failures:
        stack = [f for f in failure.data.get("user_stack", ()) if is_user_file(files.get(f["filename"], "<?>"))]
        if stack:
            frame = stack[-1]
            guide._rewrite(Site(files[frame["filename"]], frame["line"], frame["name"]), attempt)
    return guide.run(lambda: torch.export.export(model, args, dynamic_shapes=shapes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    x = torch.randn(8, 32)
    shapes = ({0: Dim.DYNAMIC},)
    rows = {}
    for k in SITES:
        model = Model(k).eval()
        times: dict[str, list] = {"retry": [], "draft": []}
        for r in range(args.repeats):
            for way in ("retry", "draft") if r % 2 == 0 else ("draft", "retry"):
                cache.clear()
                start = time.perf_counter()
                ep = (retry if way == "retry" else draft)(model, (x,), shapes)
                times[way].append(time.perf_counter() - start)
                other = torch.randn(5, 32)
                torch.testing.assert_close(ep.module()(other), model(other))
        rows[k] = {way: statistics.median(t) for way, t in times.items()}
        print(f"{k} places: retry {rows[k]['retry']:.2f} s, draft {rows[k]['draft']:.2f} s", flush=True)
    path = write("guided_export", {"machine": machine(), "layers": LAYERS, "seconds_median": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
