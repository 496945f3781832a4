"""Block-level simulations of RTL stand-in units (tb/ethos_u85/rtl_units/*_tb.py cocotb modules), on
Icarus: the weight decoders against the TLM's codecs.

Skipped (with the reason) when Icarus is not installed, failing instead under CI."""
from __future__ import annotations

import os
import random

import pytest

from tb.core import simtools
from tests.support import REPO, tool_missing

RTL = REPO / "rtl_stub" / "ethos_u85"
pytestmark = pytest.mark.sim

UNITS = {
    "npu_swd": (["npu_swd.v"], "tb.ethos_u85.rtl_units.swd_fwd_tb", "test_swd"),
    "npu_fwd": (["npu_fwd.v"], "tb.ethos_u85.rtl_units.swd_fwd_tb", "test_fwd"),
}


@pytest.mark.parametrize("top", sorted(UNITS))
def test_unit(top):
    reason = simtools.sim_problem("icarus")
    if reason:
        tool_missing(reason)
    files, module, filt = UNITS[top]
    seed = int(os.environ.get("UNIT_SEED") or random.randrange(1 << 30))
    print(f"UNIT_SEED={seed}")
    env = {"UNIT_SEED": str(seed)}
    n, failed = simtools.run_fixture("icarus", f"unit-{top}", [RTL / f for f in files], top, module,
                                     env, test_filter=filt, includes=[RTL])
    assert n > 0, "no test ran"
    assert failed == 0, f"{failed} of {n} tests failed (UNIT_SEED={seed})"
