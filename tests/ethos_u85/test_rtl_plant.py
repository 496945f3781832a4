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


# The mutant of issue 19 that kept `make sim` running for 15 minutes: npu_kernel.v's token
# push with `&& !need_b` turned into `|| !need_b` (the kernel unit waits for data that never
# comes). With the bench's bound (tb/ethos_u85/driver.py: no AXI beat for env.stall_cycles,
# or max_cycles in all) it must end as one failed test naming the test, STATUS, QREAD and the
# last bus activity.
HANG_FILE = "npu_kernel.v"
HANG_FROM = "(g == G_A1 && a_issue)) && !need_b\n"
HANG_TO = "(g == G_A1 && a_issue)) || !need_b\n"
HANG_TEST = "test_elementwise/backpressure=none$"


def test_hang_is_a_bounded_failure(tmp_path):
    import os
    import shutil
    import xml.etree.ElementTree as ET

    reason = simtools.sim_problem("icarus")
    if reason:
        tool_missing(reason)
    src = simtools.REPO / "rtl_stub" / "ethos_u85"
    dst = tmp_path / "ethos_u85"
    shutil.copytree(src, dst)
    text = (dst / HANG_FILE).read_text()
    assert text.count(HANG_FROM) == 1, f"{HANG_FILE}: the mutation site moved; update HANG_FROM"
    (dst / HANG_FILE).write_text(text.replace(HANG_FROM, HANG_TO))
    sources = [dst / p.relative_to(src) for p in simtools.dut_sources("ethos-u85", "rtl")]
    includes = [dst / p.relative_to(src) for p in simtools.dut_includes("ethos-u85", "rtl")]
    env = {"TB_DEVICE": "ethos-u85", "TB_DUT": "rtl", "NPU_CONFIG": "ethos-u85-256", "KERNEL_CASES": "1"}
    n, failed = simtools.run_fixture("icarus", "rtl-hang", sources, "ethosu85",
                                     "tb.ethos_u85.tests.test_rtl_kernels", env,
                                     test_filter=HANG_TEST, includes=includes)
    assert (n, failed) == (1, 1), f"the hanging stand-in gave {n} tests, {failed} failed"
    runs = simtools.REPO / "sim_build" / "icarus-rtl-hang" / "runs"      # run_fixture: this process's run
    results = max(runs.glob(f"{os.getpid()}-*/results.xml"), key=lambda p: p.stat().st_mtime)
    fail = next(ET.parse(results).iter("failure"))
    msg = fail.get("message", "")
    assert fail.get("type") == "Hang", (fail.get("type"), msg)
    assert "test_rtl_kernels.test_elementwise" in msg and "no AXI beat" in msg, msg
    assert "STATUS 0x" in msg and "QREAD 0x" in msg and "AXI:" in msg and "last bursts" in msg, msg


def test_make_sim_fails_with_planted_conv_bug():
    """``make sim DUT=rtl DEFINES=PLANT_CONV_BUG`` (tb.core.run --define): the runner builds the
    stand-in with the define and exits non-zero, its FAIL line naming the data mismatch (here
    only the catalog test on one CONV network, for time)."""
    import os
    import re
    import subprocess
    import sys

    reason = simtools.sim_problem("icarus")
    if reason:
        tool_missing(reason)
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["KERNEL_NETS"] = NET
    p = subprocess.run([sys.executable, "-m", "tb.core.run", "--device", "ethos-u85", "--sim", "icarus",
                        "--dut", "rtl", "--define", "PLANT_CONV_BUG", "--tests", "test_catalog_networks/mode=default$"],
                       cwd=simtools.REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-2000:]
    fails = re.findall(r"^tb\.run: FAIL (\S+): (.*)$", p.stdout, re.M)
    assert len(fails) == 1 and fails[0][0].endswith("test_catalog_networks/mode=default"), p.stdout[-3000:]
    assert "differ" in fails[0][1], fails[0][1]
    assert re.search(r"results: sim_build/ethos-u85/icarus-rtl-def-PLANT_CONV_BUG/runs/\d+/results\.xml",
                     p.stdout), p.stdout[-3000:]
