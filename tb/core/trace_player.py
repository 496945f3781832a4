"""Replay a trace (docs/trace-format.md) through a DUT's pins (device-neutral).

``play(trace, adapter)`` is the pin-level twin of ``tlm.core.trace.replay``: the same steps in
the same order, judged by the same ``tlm.core.trace.Verdicts`` (``read_mismatch``,
``mem_mismatch``), so a verdict means the same on the TLM and on RTL. What differs is the
adapter: a device's pin-level driver (``BenchInfo.trace_adapter``, e.g.
tb/ethos_u85/trace_adapter.py) that offers

* attributes ``device``, ``reg_bits``, ``addr_bits``, ``reg_align`` (as a ``TraceTarget``)
  and ``wait_default`` (wait_irq's budget in clock cycles when the trace gives none);
* ``start()`` (clocks, reset, agents, scoreboard), ``finish()`` (end-of-test checks: the
  scoreboard with the TLM as reference; raises AssertionError on a mismatch);
* ``async write_reg(offset, value)``, ``async read_reg(offset) -> int`` on the control port;
* ``load_mem(addr, data)``, ``read_mem(addr, length) -> bytes``: the back door of the bench's
  memory model (or a memory the host reaches through the device's port);
* ``async wait_irq(max_cycles) -> bool`` (the interrupt / end-of-job pin, a level already
  high counts), ``async idle()`` (a poll interval between the reads of poll_reg);
* ``faults() -> list[str]``: error responses etc. since the last call.

``start``, ``finish``, ``load_mem`` and ``read_mem`` may be plain or ``async``.
``tb/core/trace_test.py`` is the cocotb test that ``make sim TRACE=path`` runs.
"""
from __future__ import annotations

import inspect
from typing import Callable

from tlm.core.trace import Trace, Verdicts, poll_max, step_bytes, validate, wait_max


async def maybe(value):
    """*value*, awaited if it is awaitable (adapter methods may be plain or async)."""
    return await value if inspect.isawaitable(value) else value


async def play(trace: Trace, adapter, on_line: "Callable[[str], None] | None" = None):
    """Run every step of *trace* through *adapter*; returns the ``ReplayResult``. Values
    that do not fit the device raise ``TraceFormatError`` before anything runs."""
    validate(trace, adapter)
    v = Verdicts(trace, adapter.reg_bits, adapter.device, on_line)
    s = None
    try:
        for s in trace.steps:
            a = s.args
            if s.op in ("load_mem", "fill_mem"):
                await maybe(adapter.load_mem(a[0], step_bytes(s)))
            elif s.op == "write_reg":
                await adapter.write_reg(a[0], a[1])
            elif s.op == "read_reg":
                v.read(s, await adapter.read_reg(a[0]))
            elif s.op == "poll_reg":
                value, reads, limit = 0, 0, poll_max(s)
                while reads < limit:
                    value, reads = await adapter.read_reg(a[0]), reads + 1
                    if (value & a[2]) == a[1]:
                        break
                    await adapter.idle()
                v.poll(s, (value & a[2]) == a[1], value, reads)
            elif s.op == "wait_irq":
                n = wait_max(s, adapter)
                v.wait(s, await adapter.wait_irq(n), n, "cycles")
            elif s.op == "check_mem":
                v.mem(s, await maybe(adapter.read_mem(a[0], len(step_bytes(s)))))
            v.faults(s, adapter.faults())
    except Exception as e:      # noqa: BLE001 - a bench or model bug is a fault line
        v.internal(s, e)
    return v.result
