"""Exports from several threads at once: each program comes out and matches eager on both sides, and
the process's stdout, stderr and logging handlers are what they were (issue 40).

torch.export fails concurrent calls from threads; unbranch holds one process-wide re-entrant lock
for ``unbranch.export`` and for an open context, and quiets only the thread that exports.
"""

import logging
import sys
import threading

import pytest
import torch
from helpers import count_branches
from torch.export import Dim

import unbranch


class Scale(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            x = x * 2
        else:
            x = x - 1
        return x


class Clip(torch.nn.Module):
    def forward(self, x):
        if x.abs().max() > 3:
            return x.clamp(-3, 3)
        return x + 1


class Norm(torch.nn.Module):
    def forward(self, x):
        m = x.mean()
        if m > 0.5:
            x = x / m
        return x * 3


MODELS = [Scale, Clip, Norm]
# per model: an input taking the first side, one taking the other (both of another length than the example)
INPUTS = {
    Scale: (torch.ones(5, 3), -torch.ones(6, 3)),
    Clip: (torch.full((5, 3), 9.0), torch.zeros(6, 3)),
    Norm: (torch.full((5, 3), 2.0), torch.zeros(6, 3)),
}


def _through_export(model, strict):
    return unbranch.export(model, (torch.randn(4, 3),), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)


def _through_context(model, strict):
    with unbranch.torch_export_rewrite(model):
        return torch.export.export(model, (torch.randn(4, 3),), dynamic_shapes=({0: Dim.DYNAMIC},), strict=strict)


@pytest.mark.parametrize("strict", [False, True], ids=["non-strict", "strict"])
@pytest.mark.parametrize("how", [_through_export, _through_context], ids=["export", "context"])
def test_threads_export_at_once_and_leave_the_streams_as_they_were(how, strict):
    stdout, stderr = sys.stdout, sys.stderr
    handlers = {
        name: list(lg.handlers) for name, lg in logging.Logger.manager.loggerDict.items() if hasattr(lg, "handlers")
    }
    root = list(logging.getLogger().handlers)
    programs, errors = {}, []
    start = threading.Barrier(len(MODELS))

    def run(cls):
        try:
            start.wait()
            programs[cls] = how(cls(), strict)
        except Exception as e:  # (reported below, with the model)
            errors.append((cls.__name__, e))

    threads = [threading.Thread(target=run, args=(cls,)) for cls in MODELS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for cls in MODELS:
        ep = programs[cls]
        assert count_branches(ep) == 1
        for x in INPUTS[cls]:
            torch.testing.assert_close(ep.module()(x), cls()(x))
    assert sys.stdout is stdout and sys.stderr is stderr
    assert logging.getLogger().handlers == root
    assert all(
        lg.handlers == handlers[name]
        for name, lg in logging.Logger.manager.loggerDict.items()
        if name in handlers and hasattr(lg, "handlers")
    )


STARTED, PRINTED = threading.Event(), threading.Event()


class WaitsForAnotherThread(torch.nn.Module):
    def forward(self, x):
        STARTED.set()
        PRINTED.wait(10)  # (the other thread prints while this export captures)
        if x.sum() > 0:
            x = x * 2
        return x


def test_another_threads_print_during_an_export_reaches_stdout(capfd):
    """What another thread prints while an export is quiet is not swallowed by unbranch's capture."""

    def chatter():
        STARTED.wait(10)
        print("from another thread", flush=True)
        PRINTED.set()

    other = threading.Thread(target=chatter)
    other.start()
    ep = _through_export(WaitsForAnotherThread(), strict=False)
    other.join()
    assert "from another thread" in capfd.readouterr().out
    torch.testing.assert_close(ep.module()(-torch.ones(5, 3)), -torch.ones(5, 3))
    torch.testing.assert_close(ep.module()(torch.ones(6, 3)), 2 * torch.ones(6, 3))


def test_the_runtime_settings_are_the_exporting_threads_alone():
    """An export's settings (checks=, loops) hold in its thread only, and are as they were after it."""
    from unbranch.runtime import settings

    seen = {}
    inside, outside = threading.Event(), threading.Event()

    def other():
        inside.wait(30)
        seen["other"] = settings.current()
        outside.set()

    thread = threading.Thread(target=other)
    thread.start()
    with unbranch.torch_export_rewrite(model=Scale(), checks="sync", target="executorch", max_loop_iterations=3):
        seen["exporting"] = settings.current()
        inside.set()
        outside.wait(30)
    thread.join()
    assert (seen["exporting"].checks, seen["exporting"].target, seen["exporting"].max_iterations) == (
        "sync",
        "executorch",
        3,
    )
    assert seen["other"] == settings.Settings() and settings.current() == settings.Settings()
