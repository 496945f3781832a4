"""Shared pytest set-up for every device's tests: the --e2e-full option."""
from __future__ import annotations

import os


def pytest_addoption(parser):
    parser.addoption("--e2e-full", action="store_true",
                     help="run the full Vela/LiteRT matrix strictly (same as E2E_FULL=1)")


def pytest_configure(config):
    if config.getoption("--e2e-full", default=False):
        os.environ["E2E_FULL"] = "1"
