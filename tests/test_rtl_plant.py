"""The regression catches a wrong output byte of a supported CONV (rtl_stub/npu_conv_out.v,
test-only define ``PLANT_CONV_BUG``: the OFM's last element is written with bit 0 flipped).

The stand-in is built on Icarus with and without the define and the bench's own catalog test
(tb/tests/test_rtl_networks.py ``test_catalog_networks``, mode default) runs one small CONV
network on each: clean it passes, planted the scoreboard (the TLM) fails it.

Skipped (with the reason) when Icarus is not installed, failing instead under CI."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from conftest import tool_missing

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from tb import simtools  # noqa: E402

NET = "conv2d_3x3_s2_same_relu6_pc"


def _run(planted: bool) -> tuple[int, int]:
    srcs = list(simtools.dut_sources("rtl"))
    name = "rtl-plant" if planted else "rtl-plant-control"
    build = REPO / "sim_build" / f"icarus-{name}"
    build.mkdir(parents=True, exist_ok=True)
    if planted:
        # a define in the first source file holds for the whole compilation
        d = build / "plant_define.v"
        d.write_text("`define PLANT_CONV_BUG\n")
        srcs = [d] + srcs
    env = {"TB_DUT": "rtl", "NPU_CONFIG": "ethos-u85-256", "KERNEL_NETS": NET,
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return simtools.run_fixture("icarus", name, srcs, "ethosu85", "tb.tests.test_rtl_networks", env,
                                test_filter="test_catalog_networks/mode=default$",
                                includes=[REPO / "rtl_stub"])


@pytest.mark.parametrize("planted", [False, True], ids=["clean", "planted"])
def test_planted_conv_bug_fails_the_regression(planted):
    reason = simtools.sim_problem("icarus")
    if reason:
        tool_missing(reason)
    n, failed = _run(planted)
    assert n == 1, f"expected one test to run, got {n}"
    if planted:
        assert failed == 1, "the regression passed with PLANT_CONV_BUG: a wrong OFM byte went unnoticed"
    else:
        assert failed == 0, "the catalog test fails on the clean stand-in"
