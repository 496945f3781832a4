"""cocotb: replay a `device dtpu` trace (docs/trace-format.md) through the pins.

TRACE names the trace file. Register offsets and memory addresses are those of the TLM
system (tlm/dtpu/system.py): the DTPU window goes to the DUT's AXI4-Lite port, the DMA
windows to the bench's DMA models (tb/dtpu/system.py), load_mem/check_mem to the bench's
DDR. Every check of the trace is evaluated with the same functions as `npu-tlm replay`
(tlm.core.trace.read_mismatch, mem_mismatch); the TLM scoreboard checks the streams and
AXI4-Lite responses besides. The test fails if a check fails, the trace's device is not
dtpu, or the system reported a fault. DTPU_TRACE_RESULT (optional) receives the summary.
"""
from __future__ import annotations

import os

import cocotb

from tlm.core.trace import POLL_MAX, mem_mismatch, parse, read_mismatch, validate

from .env import DtpuEnv
from .system import PinSystem


@cocotb.test()
async def test_trace(dut):
    path = os.environ.get("TRACE")
    assert path, "TRACE is not set"
    tr = parse(path)
    assert tr.device == "dtpu", f"{path}: a trace of device {tr.device!r}, not dtpu"
    env = DtpuEnv(dut, config=tr.config)
    await env.reset()
    sysm = PinSystem(env)
    validate(tr, sysm)
    passed, failed, lines = 0, 0, []
    for s in tr.steps:
        a, bad = s.args, None
        if s.op == "load_mem":
            sysm.load_mem(a[0], a[1].read_bytes())
        elif s.op == "fill_mem":
            sysm.load_mem(a[0], bytes([a[2]]) * a[1])
        elif s.op == "write_reg":
            await sysm.awrite_reg(a[0], a[1])
        elif s.op == "read_reg":
            bad = read_mismatch(await sysm.aread_reg(a[0]), a[1], a[2] if len(a) > 2 else None, 32)
        elif s.op == "poll_reg":
            if not await sysm.apoll_reg(a[0], a[1], a[2], a[3] if len(a) > 3 else POLL_MAX):
                bad = f"offset 0x{a[0]:x} never read 0x{a[1]:x} under mask 0x{a[2]:x}"
        elif s.op == "wait_irq":
            if not await sysm.await_irq(a[0] if a else sysm.wait_default):
                bad = "interrupt not raised"
        elif s.op == "check_mem":
            expect = a[1].read_bytes()
            bad = mem_mismatch(a[0], sysm.read_mem(a[0], len(expect)), expect)
        if bad:
            failed += 1
            lines.append(f"{path}:{s.line}: {s.op}: {bad}")
            env.log.error(lines[-1])
        elif s.op in ("read_reg", "poll_reg", "wait_irq", "check_mem"):
            passed += 1
        for f in sysm.faults():
            lines.append(f"{path}:{s.line}: device fault after {s.op}: {f}")
            env.log.error(lines[-1])
            failed += 1
    summary = f"replay: {passed} checks passed, {failed} failed"
    env.log.info(summary)
    if os.environ.get("DTPU_TRACE_RESULT"):
        with open(os.environ["DTPU_TRACE_RESULT"], "w") as f:
            f.write("\n".join(lines + [summary]) + "\n")
    env.sb.check(drained=False)
    assert failed == 0, lines[0]
