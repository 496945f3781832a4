"""cocotb: replay a `device dtpu` trace (docs/trace-format.md) through the pins.

TRACE names the trace file (tools/dtpu_bench_runner.py; `make sim DEVICE=dtpu TRACE=...`
runs tb/core/trace_test.py with the same adapter). The steps go through the device-neutral
trace player (tb/core/trace_player.py) and the DTPU's pin adapter (tb/dtpu/trace_adapter.py):
every check is judged by the same functions as `npu-tlm replay` (tlm.core.trace.Verdicts:
read_mismatch, mem_mismatch); the TLM scoreboard checks the streams and AXI4-Lite responses
besides. The test fails if a check fails, the trace's device is not dtpu, or the system
reported a fault. DTPU_TRACE_RESULT (optional) receives the failure lines and the summary.
"""
from __future__ import annotations

import os

import cocotb

from tb.core.trace_player import play
from tlm.core.trace import parse

from .trace_adapter import DtpuPinTarget


@cocotb.test()
async def test_trace(dut):
    path = os.environ.get("TRACE")
    assert path, "TRACE is not set"
    tr = parse(path)
    assert tr.device == "dtpu", f"{path}: a trace of device {tr.device!r}, not dtpu"
    adapter = DtpuPinTarget(dut, tr.config)
    await adapter.start()
    res = await play(tr, adapter, on_line=adapter.env.log.error)
    adapter.env.log.info(res.summary)
    if os.environ.get("DTPU_TRACE_RESULT"):
        with open(os.environ["DTPU_TRACE_RESULT"], "w") as f:
            f.write("\n".join(res.messages + [res.summary]) + "\n")
    adapter.finish()
    assert res.exit_status == 0, res.messages[0] if res.messages else res.summary
