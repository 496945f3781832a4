"""Helpers shared by the pytest suites of every device (import as ``tests.support``)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def tool_missing(reason: str) -> None:
    """A test's tool (simulator, Yosys, ...) is not installed: skip locally, fail under CI
    (CI=true), where .ci/run installs every tool the README names."""
    if under_ci():
        pytest.fail(f"required tool missing under CI: {reason}")
    pytest.skip(reason)


def require(module: str, what: str = ""):
    """Import *module* (a tool's Python package, e.g. ethosu.vela); if it is not installed,
    ``tool_missing`` (skip locally, fail under CI). Project modules are imported plainly."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as e:
        tool_missing(f"{what or module} not installed ({e})")
