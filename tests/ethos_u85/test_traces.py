"""Vela networks as portable traces (docs/trace-format.md): `npu-tlm trace` writes them from a
TLM run, `npu-tlm replay` replays them on the TLM, `make sim TRACE=` through the pins.

* ``TRACE_NETS``: ten catalog networks compiled by Vela for ethos-u85-256. Each trace's
  check_mem expectations (what the TLM computed) must equal LiteRT BUILTIN_REF's outputs (an
  independent reference), and the trace must replay with every check passing on the TLM
  (in process and through the `npu-tlm replay` command line).
* Through the pins (Icarus; one network on Verilator too): every trace on DUT=tlm and on
  DUT=rtl (the stand-in claims every operation of these networks,
  tb/ethos_u85/testlib/rtl_support.py; ``test_standin_claims_the_trace_nets`` checks it).
* A corrupted expectation fails with the address named (TLM and pins); a malformed trace is
  one error line (exit status 2) for `npu-tlm replay` and `make sim TRACE=`.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tb.core import simtools
from tests.support import REPO, tool_missing
from tlm.core.registry import get
from tlm.core.trace import parse, replay

TRACE_NETS = ("add_8x8x16", "add_bcast_relu", "mul_bcast_relu", "sub_bcast_relu6", "maxpool_3x3_s2_same",
              "avgpool_3x3_s1_same", "sim_default", "conv2d_3x3_s1_same_relu6_pc",
              "dwconv_3x3_s1_same_relu6_pc", "resize_bilinear_8x8to16x16")
CONFIG = "ethos-u85-256"


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """{name: (trace path, LiteRT outputs)} for TRACE_NETS, written by `write_trace`."""
    from tests import nets
    from tlm.ethos_u85.vela_trace import write_trace
    root = tmp_path_factory.mktemp("traces")
    out = {}
    for name in TRACE_NETS:
        try:
            model = nets.compiled(name, CONFIG, "default", "raw")
            inputs, ref = nets.reference(nets.build(name))
        except Exception as e:  # noqa: BLE001 - vela or LiteRT missing
            tool_missing(f"Vela/LiteRT needed for the trace networks: {e}")
        out[name] = (write_trace(model, inputs, root / name), model, ref)
    return out


@pytest.mark.vela
def test_vela_traces_replay_on_the_tlm(traces):
    from tlm.ethos_u85.vela_trace import outputs_of
    for name, (path, model, ref) in traces.items():
        expect = outputs_of(path.parent, model)
        assert len(expect) == len(ref) > 0
        for e, r in zip(expect, ref):
            assert np.array_equal(e.reshape(-1), np.asarray(r).reshape(-1)), \
                f"{name}: the trace's expectation differs from LiteRT"
        tr = parse(path)
        assert tr.device == "ethos-u85" and tr.config == CONFIG and tr.checks >= 3 + len(ref)
        res = replay(tr, get(tr.device).make_target(tr.config))
        assert (res.failed, res.faulted, res.passed) == (0, False, tr.checks), (name, res.messages)


@pytest.mark.vela
def test_standin_claims_the_trace_nets(traces):
    """The DUT=rtl cases below are real runs, not expected failures: the stand-in claims
    every operation of every trace network (for the MACS of CONFIG)."""
    from tb.ethos_u85.testlib.rtl_support import first_unsupported
    from tlm.ethos_u85.config import get_config
    from tlm.ethos_u85.vela import load
    macs = get_config(CONFIG).macs
    for name, (_, model, _) in traces.items():
        miss = first_unsupported(load(model).command_words, macs)
        assert miss is None, (name, miss)


def _cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "tlm.core.cli", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.vela
def test_npu_tlm_trace_and_replay_command_line(traces, tmp_path):
    from tests import nets
    name = "add_bcast_relu"
    _, model, _ = traces[name]
    inputs, _ = nets.reference(nets.build(name))
    args = []
    for i, x in enumerate(inputs):
        np.save(tmp_path / f"in{i}.npy", x)
        args += ["--input", str(tmp_path / f"in{i}.npy")]
    p = _cli("trace", str(model), *args, "--out", str(tmp_path / "out"))
    assert p.returncode == 0 and "wrote" in p.stdout, p.stderr
    text = (tmp_path / "out" / "trace.txt").read_text()
    assert text.startswith("device ethos-u85\nconfig ethos-u85-256\n")
    assert re.search(r"^write_reg 0x8 0x0000000d +# CMD$", text, re.M)     # started by CMD
    p = _cli("replay", str(tmp_path / "out" / "trace.txt"))
    assert p.returncode == 0 and p.stdout.strip().splitlines()[-1] == "replay: 8 checks passed, 0 failed", \
        p.stdout + p.stderr
    # bad input: one line, exit 1, nothing written
    np.save(tmp_path / "bad.npy", np.zeros((1, 2, 2, 2), np.int8))
    p = _cli("trace", str(model), "--input", str(tmp_path / "bad.npy"), "--out", str(tmp_path / "o2"))
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1 and "input" in p.stderr
    assert not (tmp_path / "o2").exists()


def _corrupt(src: Path, dst: Path) -> "tuple[Path, int]":
    """A copy of trace folder *src* whose first check_mem image has byte 3 flipped; the
    address of that byte."""
    import shutil
    shutil.copytree(src.parent, dst)
    step = next(s for s in parse(dst / src.name).steps if s.op == "check_mem")
    img = bytearray(step.args[1].read_bytes())
    img[3] ^= 0x5A
    step.args[1].write_bytes(bytes(img))
    return dst / src.name, step.args[0] + 3


@pytest.mark.vela
def test_corrupted_expectation_names_the_address(traces, tmp_path):
    path, addr = _corrupt(traces["maxpool_3x3_s2_same"][0], tmp_path / "bad")
    p = _cli("replay", str(path))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "check_mem: mem_" in p.stdout and f"first difference at 0x{addr:x}" in p.stdout
    assert p.stdout.strip().splitlines()[-1].endswith("1 failed")


def test_malformed_trace_is_one_line(tmp_path):
    bad = tmp_path / "t.txt"
    bad.write_text("device ethos-u85\nwrite_reg 0x6 1\n")
    p = _cli("replay", str(bad))
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        f"npu-tlm: error: {bad}:2: write_reg: offset 0x6 is not a multiple of 4"]
    reason = simtools.sim_problem("icarus")
    if reason:
        tool_missing(reason)
    p = _sim("icarus", "tlm", bad)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        f"tb.run: error: TRACE {bad}:2: write_reg: offset 0x6 is not a multiple of 4"], p.stdout + p.stderr
    bad.write_text("device nosuchnpu\n")
    p = _sim("icarus", "tlm", bad)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "nosuchnpu" in p.stderr


# ------------------------------------------------------------------------- through the pins
def _sim(sim: str, dut: str, trace: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tb.core.run", "--sim", sim, "--dut", dut,
                           "--trace", str(trace)], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def _replayed(p: subprocess.CompletedProcess) -> str:
    m = re.search(r"^replay: \d+ checks passed, \d+ failed$", p.stdout, re.M)
    assert m, p.stdout[-3000:] + p.stderr[-2000:]
    return m.group(0)


def _cases():
    for name in TRACE_NETS:
        yield pytest.param("icarus", "tlm", name, id=f"icarus-tlm-{name}")
    for name in TRACE_NETS:
        yield pytest.param("icarus", "rtl", name, id=f"icarus-rtl-{name}")
    yield pytest.param("verilator", "tlm", "conv2d_3x3_s1_same_relu6_pc", id="verilator-tlm-conv")
    yield pytest.param("verilator", "rtl", "sim_default", id="verilator-rtl-sim_default")


@pytest.mark.sim
@pytest.mark.vela
@pytest.mark.parametrize("sim,dut,name", list(_cases()))
def test_trace_through_the_pins(sim, dut, name, traces):
    reason = simtools.sim_problem(sim)
    if reason:
        tool_missing(reason)
    path = traces[name][0]
    p = _sim(sim, dut, path)
    checks = parse(path).checks
    assert _replayed(p) == f"replay: {checks} checks passed, 0 failed"
    assert p.returncode == 0, p.stdout[-3000:]


@pytest.mark.sim
@pytest.mark.vela
@pytest.mark.parametrize("dut", ["tlm", "rtl"])
def test_corrupted_expectation_through_the_pins(dut, traces, tmp_path):
    reason = simtools.sim_problem("icarus")
    if reason:
        tool_missing(reason)
    path, addr = _corrupt(traces["add_8x8x16"][0], tmp_path / "bad")
    p = _sim("icarus", dut, path)
    assert p.returncode == 1 and _replayed(p).endswith(" 1 failed")
    assert re.search(rf"replay: FAIL {re.escape(str(path))}:\d+: check_mem: mem_\d+\.bin: first difference "
                     rf"at 0x{addr:x}", p.stdout), p.stdout[-3000:]
