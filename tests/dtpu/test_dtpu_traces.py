"""`device dtpu` traces on the TLM system (tlm/dtpu/system.py): the example traces of
tests/dtpu/traces replay with `npu-tlm replay`, a corrupted expectation fails, the TLM
writes traces (RecordingTarget), and the DMA models report bad programming as faults."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tlm.core import registry
from tlm.core.trace import RecordingTarget, parse, replay
from tlm.dtpu import contract as C
from tlm.dtpu.system import DtpuSystem

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TRACES = sorted((HERE / "traces").glob("*/trace.txt"))


def npu_tlm(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tlm.core.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, timeout=300)


def test_registry_entry():
    d = registry.get("dtpu")
    assert d.default_config == C.DEFAULT_CONFIG and set(d.configs) == set(C.CONFIGS)
    assert isinstance(d.make_target(), DtpuSystem)
    assert d.bench.rtl_toplevel == d.bench.tlm_toplevel == "dtpu"
    for mod in d.bench.test_modules + (d.bench.trace_adapter.partition(":")[0],):
        assert (REPO / (mod.replace(".", "/") + ".py")).is_file(), mod
    assert (REPO / d.bench.rtl_sources).is_file()
    from tb.core.simtools import dut_defines
    assert dut_defines("dtpu", "dtpu-3x5-int8-16")["DTPU_COLUMNS"] == 5


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.parent.name)
def test_example_traces_replay(trace):
    r = npu_tlm("replay", trace)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1].endswith("0 failed")


def test_example_traces_are_what_the_generator_writes(tmp_path):
    from tools import make_dtpu_traces as mod
    assert mod.main(["--out", str(tmp_path)]) == 0
    for t in TRACES:
        new = tmp_path / t.parent.name
        assert (new / "trace.txt").read_text() == t.read_text(), t.parent.name
        for f in t.parent.glob("mem_*.bin"):
            assert (new / f.name).read_bytes() == f.read_bytes(), f


def test_corrupted_check_mem_fails(tmp_path):
    src = HERE / "traces" / "depthwise_small"
    dst = tmp_path / "t"
    shutil.copytree(src, dst)
    text = (dst / "trace.txt").read_text()
    last = [ln for ln in text.splitlines() if ln.startswith("check_mem")][-1]
    blob = dst / last.split()[2]
    data = bytearray(blob.read_bytes())
    data[5] ^= 0x01
    blob.write_bytes(bytes(data))
    r = npu_tlm("replay", dst / "trace.txt")
    assert r.returncode == 1
    addr = int(last.split()[1], 16) + 5
    assert f"first difference at 0x{addr:x}" in r.stdout and "1 failed" in r.stdout


def test_corrupted_read_reg_fails(tmp_path):
    src = HERE / "traces" / "continuous_int16"
    dst = tmp_path / "t"
    shutil.copytree(src, dst)
    lines = (dst / "trace.txt").read_text().splitlines()
    i = max(k for k, ln in enumerate(lines) if ln.startswith("read_reg"))
    op, off, val, *mask = lines[i].split()
    lines[i] = " ".join([op, off, hex(int(val, 16) ^ 0x2), *mask])     # flip STATUS.DONE
    (dst / "trace.txt").write_text("\n".join(lines) + "\n")
    r = npu_tlm("replay", dst / "trace.txt")
    assert r.returncode == 1 and "1 failed" in r.stdout, r.stdout


def test_malformed_trace_exit_2(tmp_path):
    t = tmp_path / "bad.txt"
    t.write_text("device dtpu\nwrite_reg 0x3c00000 0x1 0x2\n")
    r = npu_tlm("replay", t)
    assert r.returncode == 2 and "bad.txt:2" in (r.stdout + r.stderr)
    assert "Traceback" not in r.stdout + r.stderr


def _dma(name: str, reg: str) -> int:
    return C.WINDOW[name].offset + C.DMA_REG[reg].offset


def test_dma_errors_are_reported():
    s = DtpuSystem()
    rs = C.dma_field("RS").mask
    s.write_reg(_dma("DMA_CSR", "MM2S_DMACR"), rs)
    s.write_reg(_dma("DMA_CSR", "MM2S_SA"), 0x1000)
    s.write_reg(_dma("DMA_CSR", "MM2S_LENGTH"), 12)           # not whole 64-bit beats
    sr = s.read_reg(_dma("DMA_CSR", "MM2S_DMASR"))
    assert sr & C.dma_field("DMAINTERR").mask and sr & C.dma_field("HALTED").mask
    assert any("DMAINTERR" in f for f in s.faults())
    s.write_reg(0x1234_0000, 1)                                # no device there
    s.write_reg(_dma("DMA_WM", "MM2S_DMACR"), rs)
    s.memory.inject_fault(0x8000, 0x9000, "SLVERR")
    s.write_reg(_dma("DMA_WM", "MM2S_SA"), 0x8000)
    s.write_reg(_dma("DMA_WM", "MM2S_LENGTH"), 64)
    f = s.faults()
    assert any("no device" in x for x in f) and any("DMASLVERR" in x for x in f)
    s.write_reg(C.WINDOW["DTPU"].offset + 0x8, 1)              # unmapped adapter word
    assert any("SLVERR" in x for x in s.faults())


def test_recording_target_writes_a_replayable_trace(tmp_path):
    from tlm.dtpu import host
    from tlm.dtpu.layers import DepthwiseLayer
    rng = np.random.default_rng(3)
    L = DepthwiseLayer("t", (1, 5, 5, 1), 0.05, 2, rng.integers(-127, 128, (2, 2, 3)).astype(np.int8),
                       [0.01], rng.integers(-50, 50, 3), 0.07, -1, depth_multiplier=3, padding="VALID")
    x = rng.integers(-128, 128, L.input_shape).astype(np.int8)
    plan = host.plan_depthwise(L, x)
    rec = RecordingTarget(DtpuSystem())
    outs = host.run_system(plan, rec, check=True)
    assert np.array_equal(host.finish(plan, outs), host.run_layer(L, x))
    path = rec.writer.save(tmp_path / "rec")
    res = replay(parse(path), DtpuSystem())
    assert res.exit_status == 0 and res.failed == 0 and res.passed >= len(plan.runs)
