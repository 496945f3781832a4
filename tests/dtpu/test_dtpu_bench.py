"""The DTPU cocotb bench (tb/dtpu) on both simulators and both DUTs, one module at a time
through tools/dtpu_bench_runner.py (tb.core.simtools.run_fixture; `make sim DEVICE=dtpu`
runs the registered modules together).

* every module (streams, regs, host) for the default configuration: Verilator and Icarus,
  DUT=rtl and DUT=tlm; functional coverage of the RTL runs merged and checked;
* the other configurations (int8/16/32, 4x4 with int64, 3x5) on Verilator, DUT=rtl;
* the published models' depthwise layers and the test networks' through the host library
  on the RTL (Verilator), equal to LiteRT BUILTIN_REF byte for byte;
* the example traces replayed through the pins;
* a planted RTL bug (DTPU_PLANTED_BUG) is caught.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import tool_missing
from tlm.dtpu import contract as C
from tlm.dtpu.layers import from_tflite, save_cases
from tools import dtpu_bench_runner as runner

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
pytestmark = pytest.mark.sim


def _need(sim: str) -> None:
    from tb.core import simtools
    why = simtools.sim_problem(sim)
    if why:
        tool_missing(why)


def _cov_path(tag: str) -> Path:
    d = REPO / "sim_build" / "dtpu-coverage"
    d.mkdir(parents=True, exist_ok=True)
    return d / f"{tag}.json"


MODULES = ("streams", "regs", "host")


# the RTL runs write the coverage files test_coverage_of_the_rtl_runs merges: under pytest-xdist
# (make test: --dist loadgroup) they and it run on one worker, in this order
COVERAGE_GROUP = pytest.mark.xdist_group("dtpu-rtl-coverage")


@pytest.mark.parametrize("module", MODULES)
@pytest.mark.parametrize("dut", [pytest.param("rtl", marks=COVERAGE_GROUP), "tlm"])
@pytest.mark.parametrize("sim", ["verilator", "icarus"])
def test_bench_default_config(sim, dut, module):
    _need(sim)
    cov = _cov_path(f"{sim}-{dut}-{module}")
    cov.unlink(missing_ok=True)
    n, failed = runner.run(sim, dut, C.DEFAULT_CONFIG, f"tb.dtpu.test_dtpu_{module}",
                           env={"DTPU_COVERAGE_FILE": str(cov)})
    assert n > 0 and failed == 0, f"{n} tests, {failed} failed ({sim}, DUT={dut}, {module})"


@COVERAGE_GROUP
def test_coverage_of_the_rtl_runs():
    """Merged over the default configuration's RTL runs: every bin of the functional
    coverage model hit (its bins are what this configuration can do). The Verilator runs
    of test_bench_default_config are reused when they ran in this session, else made here."""
    from tb.core.coverage import Coverage
    files = []
    for module in MODULES:
        cov = _cov_path(f"verilator-rtl-{module}")
        if not cov.is_file():
            _need("verilator")
            n, failed = runner.run("verilator", "rtl", C.DEFAULT_CONFIG, f"tb.dtpu.test_dtpu_{module}",
                                   env={"DTPU_COVERAGE_FILE": str(cov)})
            assert n and not failed
        files.append(cov)
    files += [f for f in _cov_path("x").parent.glob("icarus-rtl-*.json")]
    merged = None
    for f in files:
        c = Coverage.load(f)
        merged = c if merged is None else merged.merge(c)
    print("\n".join(merged.summary()))
    missing = {p.name: p.uncovered() for p in merged if p.uncovered()}
    assert not missing, f"uncovered bins: {missing}"


@pytest.mark.parametrize("config", [c for c in C.CONFIGS if c != C.DEFAULT_CONFIG])
def test_bench_other_configs(config):
    _need("verilator")
    for module in ("streams", "regs"):
        n, failed = runner.run("verilator", "rtl", config, f"tb.dtpu.test_dtpu_{module}")
        assert n > 0 and failed == 0, f"{config} {module}: {n} tests, {failed} failed"


def test_bench_tlm_wide_config():
    _need("verilator")
    n, failed = runner.run("verilator", "tlm", "dtpu-8x8-int8-16-32", "tb.dtpu.test_dtpu_streams")
    assert n > 0 and failed == 0


@pytest.fixture(scope="module")
def real_cases(tmp_path_factory):
    """The published models' depthwise layers and the test networks', with LiteRT outputs."""
    from tests.dtpu import test_dtpu_host as hostmod
    from tests import nets
    cases = []
    for k, (name, layer) in enumerate(hostmod.published_layers()):
        x, y = hostmod.litert_case(layer, seed=300 + k)
        layer.name = name
        cases.append((layer, x, y))
    for k, name in enumerate(n for n in nets.names("depthwise") if "int16" not in n):
        for j, layer in enumerate(from_tflite(nets.build(name))):
            x, y = hostmod.litert_case(layer, seed=400 + 10 * k + j)
            layer.name = f"{name}-{j}"
            cases.append((layer, x, y))
    return save_cases(tmp_path_factory.mktemp("dtpu") / "cases.npz", cases), len(cases)


def test_real_layers_on_rtl(real_cases, tmp_path):
    """Every case through the host library and the RTL (streams, Verilator): LiteRT's
    bytes; the report gives MACs per cycle."""
    _need("verilator")
    path, count = real_cases
    out = tmp_path / "bench.json"
    n, failed = runner.run("verilator", "rtl", C.DEFAULT_CONFIG, "tb.dtpu.test_dtpu_host",
                           test_filter="test_layers_streams",
                           env={"DTPU_CASES": str(path), "DTPU_BENCH_OUT": str(out)})
    assert n == 1 and failed == 0
    report = json.loads(out.read_text())
    assert len(report) == count and all(r["equal"] for r in report)
    for r in report:
        print(f"{r['layer'][:48]:48s} {r['macs']:8d} MACs {r['cycles']:7d} cycles "
              f"{r['macs'] / r['cycles']:6.2f} MACs/cycle")


TRACES = sorted((HERE / "traces").glob("*/trace.txt"))


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.parent.name)
@pytest.mark.parametrize("sim,dut", [("verilator", "rtl"), ("icarus", "tlm")])
def test_traces_through_pins(sim, dut, trace, tmp_path):
    _need(sim)
    from tlm.core.trace import parse
    cfg = parse(trace).config or C.DEFAULT_CONFIG
    result = tmp_path / "result.txt"
    n, failed = runner.run(sim, dut, cfg, "tb.dtpu.test_dtpu_trace",
                           env={"TRACE": str(trace), "DTPU_TRACE_RESULT": str(result)})
    assert n == 1 and failed == 0, result.read_text() if result.is_file() else "no result"
    assert result.read_text().strip().endswith("0 failed")


@pytest.mark.parametrize("sim", ["verilator", "icarus"])
def test_planted_bug_is_caught(sim):
    """DTPU_PLANTED_BUG takes the last int8 activation lane from its neighbour: the
    scoreboard must fail the first data test."""
    _need(sim)
    n, failed = runner.run(sim, "rtl", C.DEFAULT_CONFIG, "tb.dtpu.test_dtpu_streams", bug=True,
                           test_filter="test_runs_every_precision")
    assert n == 1 and failed == 1, f"the planted bug was not caught ({n} tests, {failed} failed)"
