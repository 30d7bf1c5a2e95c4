"""The package version, read from the installed metadata so pyproject.toml stays the one place it is written."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("unbranch")
except PackageNotFoundError:  # run from a source tree that was never installed
    VERSION = "0+unknown"
