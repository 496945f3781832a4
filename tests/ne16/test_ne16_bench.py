"""The NE16 cocotb bench (tb/ne16/tests/bench_ne16.py) with DUT=tlm on Verilator and Icarus:
the TLM behind the port-only shell's pins, driven through the HWPE peripheral and TCDM agents,
checked by the scoreboard (the TLM as predictor) and the numpy reference. Built and run with
tb.core.simtools.run_fixture (until the shared `make sim DEVICE=ne16` runner lands)."""
import os
from pathlib import Path

import pytest
from tests.support import tool_missing

from tb.core import simtools
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
    assert n >= 9 and failed == 0, f"{sim}: {n} cocotb tests ran, {failed} failed"


# ---- the same bench bound through a pin map ---------------------------------------------------
RENAME = {"clk_i": "clk", "rst_ni": "rst_n", "test_mode_i": "scan_mode", "evt_o": "ne16_events",
          "busy_o": "ne16_busy"}


def _renamed(name: str) -> str:
    if name in RENAME:
        return RENAME[name]
    bus, _, sig = name.partition("_")
    return {"periph": "cfg", "tcdm": "l1"}[bus] + "_" + sig.upper()


def _write_wrapper(build_dir: Path) -> Path:
    """A top level with other port names around the shell (what a licensee's netlist
    looks like to the bench): every port renamed, the NE16 one level down."""
    from tb.ne16.ports import PORTS, TOPLEVEL
    rng = lambda w: f"[{w - 1}:0] " if w > 1 else ""                        # noqa: E731
    decl = ",\n".join(f"  {p.direction} wire {rng(p.width)}{_renamed(p.name)}" for p in PORTS)
    conns = ",\n".join(f"    .{p.name}({_renamed(p.name)})" for p in PORTS)
    path = build_dir / "ne16_renamed.v"
    path.write_text(f"module ne16_renamed (\n{decl}\n);\n  {TOPLEVEL} u_ne16 (\n{conns}\n  );\n"
                    "endmodule\n")
    return path


@pytest.mark.sim
def test_bench_through_a_pin_map(tmp_path):
    """Every agent, monitor and the scoreboard bind through NE16_PINMAP; the model drives the
    shell inside the wrapper (NE16_TLM_SCOPE). Without the map the bench cannot bind."""
    import json

    from tb.ne16.ports import PORTS
    sim = "icarus"
    reason = simtools.sim_problem(sim)
    if reason:
        tool_missing(reason)
    pm = tmp_path / "pinmap.json"
    pm.write_text(json.dumps({p.name: _renamed(p.name) for p in PORTS}))
    sources = [REPO / s for s in BENCH.tlm_sources]
    tests = "test_random_layers|test_two_jobs_in_flight|test_trace_replay"
    env = {"TB_DUT": "tlm", "NE16_PINMAP": str(pm), "NE16_TLM_SCOPE": "u_ne16",
           "NE16_BENCH_LAYERS": "4"}
    n, failed = simtools.run_fixture(sim, "ne16-pinmap", sources, "ne16_renamed", MODULE, env,
                                     write_top=_write_wrapper, test_filter=tests)
    assert n == 3 and failed == 0, f"pin map: {n} cocotb tests ran, {failed} failed"
    env["NE16_PINMAP"] = ""
    n, failed = simtools.run_fixture(sim, "ne16-pinmap", sources, "ne16_renamed", MODULE, env,
                                     write_top=_write_wrapper, test_filter="test_two_jobs_in_flight")
    assert failed == n == 1, "without the map the bench must fail to bind"


def test_coverage_file_is_the_one_the_runner_merges(tmp_path, monkeypatch):
    """The NE16 bench's coverage file is named as tb/core/run.py merges it (coverage-<pid>.json),
    so `make sim DEVICE=ne16` reports it (it said "no coverage file" before)."""
    from tb.core.coverage import merge_files
    from tb.ne16.coverage import Ne16Coverage
    monkeypatch.setenv("TB_COVERAGE_DIR", str(tmp_path))
    cov = Ne16Coverage()
    cov.sample_outcome("done")
    path = cov.flush()
    assert path == tmp_path / f"coverage-{os.getpid()}.json"
    merged = merge_files(sorted(tmp_path.glob("coverage-*.json")))
    assert merged["job_outcome"].hits["done"] == 1
