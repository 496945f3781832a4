"""Test marks of the Ethos-U85 cocotb tests: which DUT runs (TB_DUT), timeouts, features the RTL
stand-in lacks (``rtl_unsupported``), known bugs, skipping, parameter names, seeded RNGs."""
from __future__ import annotations

import os
import random

import cocotb

DUT = os.environ.get("TB_DUT", "rtl").lower()

TIMEOUT = dict(timeout_time=5, timeout_unit="ms")

# ---------------------------------------------------------------- RTL stand-in coverage
# What rtl_stub/ethos_u85/ethosu85.v (phase 1: control plane + DMA, including indexed and LUT-RAM
# DMA) does not implement, from its header and npu_cmd_decode.v (rtl_stub/ethos_u85/README.md when it
# exists). Tests of these
# features are expected to fail on DUT=rtl (cocotb xfail), so they report "failed as expected"
# until the stand-in grows the feature, and then fail loudly ("passed but we expected a
# failure") so that the marker is removed.
RTL_UNSUPPORTED = {
    "kernel_ops": "kernel operations the stand-in lacks (NPU_OP_RESIZE, and the CONV/DEPTHWISE, "
                  "POOL and ELEMENTWISE configurations of rtl_stub/ethos_u85/README.md stop with "
                  "cmd_parse_error)",
    # One key per kernel operation, for tests of a single op: delete the key when the stand-in
    # implements that op, and its tests must then pass. (NPU_OP_CONV and NPU_OP_DEPTHWISE:
    # rtl_stub/ethos_u85/npu_conv.v; NPU_OP_POOL and NPU_OP_ELEMENTWISE: rtl_stub/ethos_u85/npu_kernel.v)
    "NPU_OP_RESIZE": "NPU_OP_RESIZE (stops with cmd_parse_error)",
}

def rtl_unsupported(feature: str, condition: bool = True):
    """cocotb.xfail for DUT=rtl when the stand-in lacks *feature* (RTL_UNSUPPORTED key).
    A key that is no longer in the table (the feature exists now) marks nothing."""
    if feature not in RTL_UNSUPPORTED:
        return cocotb.xfail(False)
    return cocotb.xfail(DUT == "rtl" and condition,
                        reason=f"RTL stand-in does not implement {RTL_UNSUPPORTED[feature]}")


# ---------------------------------------------------------------- known bugs
# Disagreements between the stand-in and the TLM that the bench found and that are bugs in
# one of them (not TRM freedom): id -> (DUT that has it, description with test and TRM
# section). A test that hits one is marked with ``known_bug(id)``: an expected failure on that
# DUT until the bug is fixed, then it fails loudly ("passed but we expected a failure") and
# the entry goes.
KNOWN_BUGS: dict = {
}

def known_bug(bug: str, condition: bool = True):
    """cocotb.xfail on the DUT that has *bug* (KNOWN_BUGS key)."""
    if bug not in KNOWN_BUGS:
        return cocotb.xfail(False)
    dut, what = KNOWN_BUGS[bug]
    return cocotb.xfail(DUT == dut and condition, reason=f"known bug {bug} ({dut}): {what}")

def skip_now(reason: str) -> None:
    """Skip the running test. ``cocotb.test(skip=...)``/``cocotb.skipif`` are ignored for a
    test that a TESTS filter selects explicitly; this is not."""
    import pytest
    pytest.skip(reason)

def named(values, fmt=str) -> list:
    """cocotb.parametrize values named by *fmt* (cocotb numbers long strings instead)."""
    return [cocotb.Param(value=v, name=fmt(v)) for v in values]

def seeded_rng() -> random.Random:
    seed = random.getrandbits(32)
    cocotb.log.info("test seed %d", seed)
    return random.Random(seed)
