"""Shared pytest setup: makes ``nets`` (tests/nets) importable and offers Vela fixtures."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parent
if str(_TESTS) not in sys.path:
    sys.path.insert(0, str(_TESTS))

import nets  # noqa: E402

DEFAULT_ACCEL = "ethos-u85-256"


@pytest.fixture(scope="session")
def vela_cache_dir() -> Path:
    """The compile cache directory (``build/vela-cache`` or $NETS_VELA_CACHE)."""
    import os

    return Path(os.environ.get("NETS_VELA_CACHE") or nets.compile.DEFAULT_CACHE)


@pytest.fixture(scope="session")
def vela_compiled(vela_cache_dir):
    """Factory: ``vela_compiled(name, accel='ethos-u85-256', memory_mode='default',
    output_format='raw') -> Path`` of the cached vela output for catalog model ``name``."""

    def _get(name, accel=DEFAULT_ACCEL, memory_mode="default", output_format="raw"):
        return nets.compiled(name, accel, memory_mode=memory_mode, output_format=output_format,
                             cache_dir=vela_cache_dir)

    return _get


@pytest.fixture(scope="session")
def net_reference():
    """Factory: ``net_reference(name, seed=nets.DEFAULT_INPUT_SEED) -> (inputs, outputs)``."""
    cache = {}

    def _get(name, seed=nets.DEFAULT_INPUT_SEED):
        key = (name, seed)
        if key not in cache:
            cache[key] = nets.reference(nets.build(name), seed=seed)
        return cache[key]

    return _get


def tool_missing(reason: str) -> None:
    """A test's tool (simulator, Yosys, ...) is not installed: skip locally, fail under CI
    (CI=true), where .ci/run installs every tool the README names."""
    import os

    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"required tool missing under CI: {reason}")
    pytest.skip(reason)


def pytest_addoption(parser):
    parser.addoption("--e2e-full", action="store_true",
                     help="run the full Vela/LiteRT matrix strictly (same as E2E_FULL=1)")


def pytest_configure(config):
    import os

    if config.getoption("--e2e-full", default=False):
        os.environ["E2E_FULL"] = "1"
