"""Shared by the benchmark scripts: statistics, the machine's state, and writing results."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

import libcst
import torch
import transformers

import unbranch

SRC = Path(unbranch.__file__).parent  # the package measured, wherever it was imported from

RESULTS = Path(__file__).parent / "results"


def stats(seconds: list[float]) -> dict:
    """Total, mean, median, p95 and max, in milliseconds (what the README tables show)."""
    if not seconds:
        return {"n": 0}
    ordered = sorted(seconds)
    ms = 1e3
    return {
        "n": len(ordered),
        "total_ms": sum(ordered) * ms,
        "mean_ms": statistics.fmean(ordered) * ms,
        "median_ms": statistics.median(ordered) * ms,
        "p95_ms": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] * ms,
        "max_ms": ordered[-1] * ms,
    }


def machine() -> dict:
    """Versions and load: another process may share the two cores, so every result says how busy they were."""
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "libcst": importlib.metadata.version("libcst"),
        "unbranch": unbranch.__version__,
        "git_head": _git_head(),
        "src_sha256": source_digest(),
        "loadavg": os.getloadavg(),
    }


def _git_head() -> str:
    """HEAD's short commit; empty where no git runs (a copy of the tree on another machine)."""
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=SRC
        ).stdout.strip()
    except OSError:
        return ""


def source_digest() -> str:
    """The source measured: the working tree may hold uncommitted changes, so HEAD alone does not say."""
    digest = hashlib.sha256()
    for path in sorted(SRC.rglob("*.py")):
        digest.update(path.relative_to(SRC).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def parse_floor(source: str) -> str:
    """What any libcst-based rewrite must pay at least: parse the source and generate it back."""
    return libcst.parse_module(source).code


def write(name: str, result: dict, directory: Path = RESULTS) -> Path:
    directory.mkdir(exist_ok=True)
    result["machine"]["loadavg_end"] = os.getloadavg()
    result["machine"]["src_changed_during_run"] = source_digest() != result["machine"]["src_sha256"]
    path = directory / f"{name}.json"
    path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    return path


def calls(call) -> int:
    """Function calls (Python and C) one run makes: a count the machine's load cannot disturb."""
    count = 0

    def profile(frame, event, arg):
        nonlocal count
        count += event in ("call", "c_call")

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return count
