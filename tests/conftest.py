"""Shared pytest set-up for every device's tests: the --e2e-full option."""
from __future__ import annotations

import os


def pytest_addoption(parser):
    parser.addoption("--e2e-full", action="store_true",
                     help="run the full Vela/LiteRT matrix strictly (same as E2E_FULL=1)")


def pytest_configure(config):
    if config.getoption("--e2e-full", default=False):
        os.environ["E2E_FULL"] = "1"


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (make test), tests marked ``sim`` (they build and run an HDL
    simulation: minutes, not milliseconds) or ``long`` (synthesis, surveys) go first, so that
    the many short tests fill the workers' time at the end instead of one worker finishing a
    long test alone. The order within each part is kept (stable sort)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: item.get_closest_marker("sim") is None
                   and item.get_closest_marker("long") is None)
