"""The regression catches a wrong output byte of a supported CONV (rtl_stub/ethos_u85/npu_conv_out.v,
test-only define ``PLANT_CONV_BUG``: the OFM's last element is written with bit 0 flipped).

The stand-in is built on Icarus with and without the define and the bench's own catalog test
(tb/ethos_u85/tests/test_rtl_networks.py ``test_catalog_networks``, mode default) runs one small CONV
network on each: clean it passes, planted the scoreboard (the TLM) fails it.

Skipped (with the reason) when Icarus is not installed, failing instead under CI."""
from __future__ import annotations

import pytest

from tb.core import simtools
from tests.support import tool_missing

NET = "conv2d_3x3_s2_same_relu6_pc"
pytestmark = pytest.mark.sim


def _run(planted: bool) -> tuple[int, int]:
    name = "rtl-plant" if planted else "rtl-plant-control"
    env = {"TB_DEVICE": "ethos-u85", "TB_DUT": "rtl", "NPU_CONFIG": "ethos-u85-256", "KERNEL_NETS": NET}
    return simtools.run_fixture("icarus", name, simtools.dut_sources("ethos-u85", "rtl"), "ethosu85",
                                "tb.ethos_u85.tests.test_rtl_networks", env,
                                test_filter="test_catalog_networks/mode=default$",
                                includes=simtools.dut_includes("ethos-u85", "rtl"),
                                defines={"PLANT_CONV_BUG": 1} if planted else None)


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
