"""The cocotb test behind ``make sim TRACE=path`` (tb/core/run.py): replay the trace of
``TB_TRACE`` through the pins of device ``TB_DEVICE`` with its trace adapter
(``BenchInfo.trace_adapter``, configuration ``NPU_CONFIG``). Prints one line per failed check
and the ``replay: N checks passed, M failed`` summary; the test fails on a failed check, a
device fault or a scoreboard mismatch (the adapter's ``finish``)."""
from __future__ import annotations

import os

import cocotb

from tb.core.trace_player import maybe, play
from tlm.core.registry import get, resolve
from tlm.core.trace import parse


@cocotb.test()
async def test_trace(dut):
    trace = parse(os.environ["TB_TRACE"])
    info = get(os.environ.get("TB_DEVICE") or trace.device)
    adapter = resolve(info.bench.trace_adapter)(dut, info.check_config(os.environ.get("NPU_CONFIG")))
    await maybe(adapter.start())
    res = await play(trace, adapter, on_line=lambda line: print(f"replay: FAIL {line}", flush=True))
    print(res.summary, flush=True)
    await maybe(adapter.finish())
    assert res.exit_status == 0, f"{res.summary}; first: {res.messages[0] if res.messages else ''}"
