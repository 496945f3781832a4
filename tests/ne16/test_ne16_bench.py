"""The NE16 cocotb bench (tb/ne16/tests/bench_ne16.py) with DUT=tlm on Verilator and Icarus:
the TLM behind the port-only shell's pins, driven through the HWPE peripheral and TCDM agents,
checked by the scoreboard (the TLM as predictor) and the numpy reference. Built and run with
tb.simtools.run_fixture (until the shared `make sim DEVICE=ne16` runner lands)."""
import os
from pathlib import Path

import pytest
from conftest import tool_missing

from tb import simtools
from tlm.core import registry

REPO = Path(__file__).resolve().parents[2]
BENCH = registry.get("ne16").bench
MODULE = BENCH.test_modules[0]


@pytest.mark.sim
@pytest.mark.parametrize("sim", simtools.SIMS)
def test_bench_dut_tlm(sim):
    reason = simtools.sim_problem(sim)
    if reason:
        tool_missing(reason)
    sources = [REPO / s for s in BENCH.tlm_sources]
    env = {"TB_DUT": "tlm", "NE16_BENCH_LAYERS": os.environ.get("NE16_BENCH_LAYERS", "8")}
    n, failed = simtools.run_fixture(sim, "ne16-tlm", sources, BENCH.tlm_toplevel, MODULE, env)
    assert n >= 7 and failed == 0, f"{sim}: {n} cocotb tests ran, {failed} failed"
