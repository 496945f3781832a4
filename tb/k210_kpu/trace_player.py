"""Replay a trace (docs/trace-format.md) through the K210 bench's pins.

Every command becomes the host agent's operation (``K210Env``): write_reg/read_reg are
64-bit AXI accesses to 0x40800000 + offset, load_mem/fill_mem/check_mem go to system
memory's back door or through the KPU's AXI port for the KPU RAM windows, wait_irq watches
the ``irq`` pin for up to max(MAX, ``MIN_WAIT_CYCLES``) clock cycles (MAX counts the TLM's
steps, not cycles); a wait and a poll pause are the host waiting (``K210Env.host_waits``).
The checks use the same functions as ``npu-tlm replay``
(``read_mismatch``, ``mem_mismatch``); the scoreboard checks every access besides.
"""
from __future__ import annotations

from tlm.core.trace import POLL_MAX, ReplayResult, Trace, mem_mismatch, read_mismatch

MIN_WAIT_CYCLES = 100000


async def play(env, trace: Trace) -> ReplayResult:
    res = ReplayResult()
    for s in trace.steps:
        a, bad = s.args, None
        if s.op == "load_mem":
            await env.load_mem(a[0], a[1].read_bytes())
        elif s.op == "fill_mem":
            await env.load_mem(a[0], bytes([a[2]]) * a[1])
        elif s.op == "write_reg":
            await env.write_reg(a[0], a[1])
        elif s.op == "read_reg":
            bad = read_mismatch(await env.read_reg(a[0]), a[1], a[2] if len(a) > 2 else None, 64)
            bad = bad and f"offset 0x{a[0]:x}: {bad}"
        elif s.op == "poll_reg":
            n_max = a[3] if len(a) > 3 else POLL_MAX
            v = 0
            for _ in range(n_max):
                v = await env.read_reg(a[0])
                if (v & a[2]) == a[1]:
                    break
                env.host_waits()
                await env.settle(8)
            else:
                bad = f"offset 0x{a[0]:x}: never read 0x{a[1]:x} under mask 0x{a[2]:x} (last 0x{v:x})"
        elif s.op == "wait_irq":
            n = max(a[0] if a else 0, MIN_WAIT_CYCLES)
            if not await env.wait_irq(n):
                bad = f"interrupt not raised within {n} cycles"
        elif s.op == "check_mem":
            expect = a[1].read_bytes()
            bad = mem_mismatch(a[0], await env.read_mem(a[0], len(expect)), expect)
            bad = bad and f"{a[1].name}: {bad}"
        if bad:
            res.failed += 1
            res.messages.append(f"{trace.path}:{s.line}: {s.op}: {bad}")
        elif s.op in ("read_reg", "poll_reg", "wait_irq", "check_mem"):
            res.passed += 1
    return res
