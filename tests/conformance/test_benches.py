"""Every registered bench (``DeviceInfo.bench``) is runnable by the device-neutral runner
(tb/core/run.py): its cocotb test modules exist, its shell (DUT=tlm) and stand-in (DUT=rtl,
if any) sources and include folders exist, and the env, trace adapter and runner options it
names resolve. Checked without a simulator; the benches themselves run in their device's
tests (and ``make sim DEVICE=<name>``)."""
import importlib.util

import pytest

from tb.core import run, simtools
from tlm.core import registry

BENCHES = sorted(n for n, d in registry.devices().items() if d.bench is not None)


def _module_exists(ref: str) -> bool:
    return importlib.util.find_spec(ref.partition(":")[0]) is not None


@pytest.mark.parametrize("name", BENCHES)
def test_bench_is_runnable(name):
    bench = registry.get(name).bench
    mods = run.test_modules(name)
    assert mods and all(_module_exists(m) for m in mods), mods
    for dut in ("tlm", "rtl") if bench.rtl_toplevel else ("tlm",):
        srcs = simtools.dut_sources(name, dut)
        assert srcs and all(p.is_file() for p in srcs)
        assert all(p.is_dir() for p in simtools.dut_includes(name, dut))
        assert simtools.dut_toplevel(name, dut)
    for ref in (bench.env, bench.trace_adapter, bench.options, bench.defines, bench.parameters):
        assert ref is None or _module_exists(ref), ref
    for cfg in registry.get(name).configs:            # HDL macros and parameters of every configuration
        assert all(isinstance(k, str) for k in simtools.dut_defines(name, cfg))
        for dut in ("tlm", "rtl") if bench.rtl_toplevel else ("tlm",):
            assert all(isinstance(k, str) for k in simtools.dut_parameters(name, cfg, dut))


@pytest.mark.parametrize("name", [n for n in BENCHES if registry.get(n).bench.rtl_toplevel is None])
def test_dut_rtl_without_a_stand_in_is_one_clear_error(name):
    with pytest.raises(simtools.SetupError, match="no RTL stand-in"):
        simtools.dut_sources(name, "rtl")


def _example_traces_with_adapter() -> list:
    """One example trace (tests/<device>/traces/) per device whose bench has a trace adapter."""
    from tests.support import REPO
    from tlm.core.trace import TraceFormatError, parse
    out = {}
    for p in sorted(REPO.glob("tests/*/traces/**/*.txt")):
        try:
            dev = parse(p).device
        except TraceFormatError:
            continue
        info = registry.devices().get(dev)
        if info and info.bench and info.bench.trace_adapter and dev not in out:
            out[dev] = p
    return [pytest.param(p, id=d) for d, p in sorted(out.items())]


@pytest.mark.sim
@pytest.mark.parametrize("path", _example_traces_with_adapter())
def test_example_trace_through_the_pins(path):
    """`make sim TRACE=path` (the trace picks the device) replays with every check passing."""
    import re
    import subprocess
    import sys

    from tests.support import REPO, tool_missing
    from tlm.core.trace import parse
    reason = simtools.sim_problem("icarus")
    if reason:
        tool_missing(reason)
    p = subprocess.run([sys.executable, "-m", "tb.core.run", "--sim", "icarus", "--dut", "tlm", "--trace", str(path)],
                       cwd=REPO, capture_output=True, text=True, timeout=900)
    checks = parse(path).checks
    assert re.search(rf"^replay: {checks} checks passed, 0 failed$", p.stdout, re.M), p.stdout[-3000:] + p.stderr
    assert p.returncode == 0
