"""pytest set-up of the Ethos-U85 tests: Vela fixtures over the test networks (tests/nets)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import nets
from tlm.ethos_u85.ops import KERNEL_OPS

DEFAULT_ACCEL = "ethos-u85-256"


@pytest.fixture(scope="session")
def vela_cache_dir() -> Path:
    """The compile cache directory (``build/vela-cache`` or $NETS_VELA_CACHE)."""
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


@pytest.fixture
def kernel_ops():
    """The kernel-op table every Device uses by default (tests patch it with monkeypatch)."""
    return KERNEL_OPS
