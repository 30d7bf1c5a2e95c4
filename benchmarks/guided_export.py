"""What ``unbranch.export`` costs against naming every place up front, and how it learns the places.

``unbranch.export`` learns where to rewrite from torch's failures. The ways measured:

- **guided** (``unbranch.export``): the plain export; at its first failure at control flow on
  data, the function torch names and, speculatively, every function the model's forwards reach
  in which the classifier finds a branch on data are rewritten, and the export runs again;
- **explicit**: every place named up front (``torch_export_rewrite(rewrite=[...])``), one export:
  the floor, for a user who already knows the places;
- **per_site** (``unbranch.export`` before speculation): one retry per place torch names, k
  places cost k failed exports and the one that works (up to 8 places: 16 stop at
  ``guided.MAX_ATTEMPTS``, 16 exports);
- **plain**: the user's export as written, which fails at the first place: the guided path runs
  it first and cannot skip it (an export that works without unbranch must work the same), so
  ``plain + explicit`` is the floor of ``guided``;
- **draft**: one ``draft_export``, which traces the whole model past every data-dependent failure
  and reports each (with its user stack), then rewrite them all and export once (retrying as
  above if the rewritten code fails somewhere draft_export did not see), up to 8 places.

Measured on models with k = 1, 2, 4, 8, 16 places (each a module function with a tensor ``if``,
called by name from a forward through a stack of linear layers that every trace goes through),
non-strict (draft_export has no strict mode), interleaved over ``--repeats`` rounds, each from a
clean cache. ``exports``: the calls of torch's ``torch.export._trace._export`` each made.

    python benchmarks/guided_export.py [--repeats 3] [--transformers]

``--transformers`` also times the zoo's models that do not export plainly (``unbranch.hf.zoo``;
tiny configs, random weights, float32, and BART in float16, whose encoder layer's overflow
check is the one place): ``unbranch.export`` against the context given the model
(``torch_export_rewrite(model)``: its catalogue hooks and the functions discovery finds, rewritten
before the user's one export; it learns from torch's failures as the guided path does). Naming
the functions alone is no way for these: they need the catalogue's hooks and what the guided path
learns (lines after which a function's rest moves into both branches).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import linecache
import statistics
import time
from unittest import mock

import torch
import torch.export._trace
from _common import machine, write
from torch.export import Dim

import unbranch
from unbranch.exporting.failures import Site, is_user_file
from unbranch.exporting.guided import Attempt, Guide
from unbranch.exporting.quiet import quiet
from unbranch.load import cache

SITES = (1, 2, 4, 8, 16)
# per_site and draft up to 8 places: one retry per place stops at guided.MAX_ATTEMPTS (16 exports)
ONE_BY_ONE = 8
LAYERS = 32
WAYS = ("guided", "explicit", "plain", "per_site", "draft")


def _model(k: int) -> torch.nn.Module:
    """A model calling k module-level functions by name, each with its own ``if`` on data (k places)."""
    every = LAYERS // k
    helpers = "".join(
        f"def helper_{i}(x):\n    if x.sum() > {i}:\n        return x * 0.5\n    return x + {i}\n\n\n" for i in range(k)
    )
    calls = "".join(
        f"        x = torch.relu(self.layers[{n}](x))\n"
        + (f"        x = helper_{n // every}(x)\n" if n % every == 0 else "")
        for n in range(LAYERS)
    )
    text = (
        f"{helpers}class Model(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        f"        self.layers = torch.nn.ModuleList(torch.nn.Linear(32, 32) for _ in range({LAYERS}))\n\n"
        f"    def forward(self, x):\n{calls}        return x\n"
    )
    filename = f"<bench model {k}>"
    # its source, where unbranch reads it: the text registered with linecache under its file name
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace = {"torch": torch, "__name__": f"bench_model_{k}"}
    exec(compile(text, filename, "exec"), namespace)
    model = namespace["Model"]().eval()
    model.helpers = [namespace[f"helper_{i}"] for i in range(k)]
    return model


def guided(model, args, shapes):
    return unbranch.export(model, args, dynamic_shapes=shapes)


def explicit(model, args, shapes):
    with unbranch.torch_export_rewrite(rewrite=model.helpers):
        return torch.export.export(model, args, dynamic_shapes=shapes)


def plain(model, args, shapes):
    with quiet():
        try:
            torch.export.export(model, args, dynamic_shapes=shapes)
        except Exception:  # (torch's stop at the first branch on data)
            return None
    raise AssertionError("the plain export of a model with a branch on data worked")


def per_site(model, args, shapes):
    return Guide().run(lambda: torch.export.export(model, args, dynamic_shapes=shapes))


def draft(model, args, shapes):
    from torch._logging.structured import INTERN_TABLE

    with quiet():
        drafted = torch.export.draft_export(model, args, dynamic_shapes=shapes)
    files = {index: path for path, index in INTERN_TABLE.items()}
    guide, attempt = Guide(), Attempt()
    for failure in drafted._report.failures:
        stack = [f for f in failure.data.get("user_stack", ()) if is_user_file(files.get(f["filename"], "<?>"))]
        if stack:
            frame = stack[-1]
            guide._rewrite(Site(files[frame["filename"]], frame["line"], frame["name"]), attempt)
    return guide.run(lambda: torch.export.export(model, args, dynamic_shapes=shapes))


@contextlib.contextmanager
def counting():
    """How many exports torch ran (``torch.export.export`` imports ``_trace._export`` at each call)."""
    calls = [0]
    real = torch.export._trace._export

    def counted(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    with mock.patch.object(torch.export._trace, "_export", counted):
        yield calls


# zoo models that torch does not export plainly, with the dtype they are built in
REAL = (
    ("BartModel", torch.float16),
    ("FSMTModel", torch.float32),
    ("LEDModel", torch.float32),
    ("NllbMoeModel", torch.float16),
)


def real_models(repeats: int) -> dict:
    """unbranch.export against the context given the model: seconds (median), exports, functions rewritten."""
    from unbranch.hf import zoo

    out = {}
    for name, dtype in REAL:
        tiny = zoo.MODELS[name]
        model, kwargs = tiny.build(name, dtype), tiny.inputs(2, 7)
        shapes = tiny.dynamic_shapes(kwargs)
        # (also the warm-up: the model's first export pays for what the ways after it share)
        rewritten = len(unbranch.report_of(unbranch.export(model, (), kwargs, dynamic_shapes=shapes)).rewritten)
        ways = {
            "guided": functools.partial(unbranch.export, model, (), kwargs, dynamic_shapes=shapes),
            "context": functools.partial(_context, model, kwargs, shapes),
        }
        times: dict = {way: [] for way in ways}
        exports = {}
        for r in range(repeats):
            for way in list(ways) if r % 2 == 0 else list(ways)[::-1]:
                cache.clear()
                gc.collect()
                with counting() as calls:
                    start = time.perf_counter()
                    ep = ways[way]()
                    times[way].append(time.perf_counter() - start)
                exports[way] = calls[0]
                torch.testing.assert_close(ep.module()(**kwargs), model(**kwargs))
        seconds = {way: statistics.median(t) for way, t in times.items()}
        out[f"{name} {str(dtype).removeprefix('torch.')}"] = {
            "functions_rewritten": rewritten,
            "seconds_median": seconds,
            "exports": exports,
            "guided_over_context": seconds["guided"] / seconds["context"],
        }
        print(
            f"{name} ({dtype}): {rewritten} functions, "
            + ", ".join(f"{way} {seconds[way]:.2f} s ({exports[way]} exports)" for way in ways)
            + f"; {seconds['guided'] / seconds['context']:.2f}x",
            flush=True,
        )
    return out


def _context(model, kwargs, shapes):
    with unbranch.torch_export_rewrite(model):
        return torch.export.export(model, (), kwargs, dynamic_shapes=shapes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--transformers", action="store_true", help="also the zoo's models that need a rewrite")
    args = parser.parse_args()
    torch.set_num_threads(1)
    x = torch.randn(8, 32)
    shapes = ({0: Dim.DYNAMIC},)
    # the process's first exports pay torch's and libcst's one-time start (imports, dispatch tables):
    # no way's cost, yet it fell on the first way measured (the guided path, 1.65x at one place)
    for way in ("guided", "explicit"):
        globals()[way](_model(1), (x,), shapes)
    seconds, exports, floor = {}, {}, {}
    for k in SITES:
        model = _model(k)
        ways = WAYS if k <= ONE_BY_ONE else WAYS[:3]
        times: dict[str, list] = {way: [] for way in ways}
        for r in range(args.repeats):
            for way in ways[r % len(ways) :] + ways[: r % len(ways)]:
                cache.clear()
                gc.collect()  # (a draft_export leaves much behind: its collection fell in the next way's time)
                with counting() as calls:
                    start = time.perf_counter()
                    ep = globals()[way](model, (x,), shapes)
                    times[way].append(time.perf_counter() - start)
                exports.setdefault(k, {})[way] = calls[0]
                if ep is None:
                    continue  # (plain: no program)
                other = torch.randn(5, 32)
                torch.testing.assert_close(ep.module()(other), model(other))
        seconds[k] = {way: statistics.median(t) for way, t in times.items()}
        ratio = seconds[k]["guided"] / seconds[k]["explicit"]
        floor[k] = (seconds[k]["plain"] + seconds[k]["explicit"]) / seconds[k]["explicit"]
        print(
            f"{k} places: "
            + ", ".join(f"{way} {seconds[k][way]:.2f} s ({exports[k][way]} exports)" for way in ways)
            + f"; guided/explicit {ratio:.2f}x (floor {floor[k]:.2f}x)",
            flush=True,
        )
    ratios = {k: seconds[k]["guided"] / seconds[k]["explicit"] for k in SITES}
    real = real_models(args.repeats) if args.transformers else None
    path = write(
        "guided_export",
        {
            "machine": machine(),
            "layers": LAYERS,
            "seconds_median": seconds,
            "exports": exports,
            "guided_over_explicit": ratios,
            "plain_first_floor_over_explicit": floor,
            "transformers": real,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
