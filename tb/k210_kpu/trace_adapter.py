"""The K210's pin-level trace adapter (tb/core/trace_player.py, ``make sim DEVICE=k210-kpu
TRACE=...``): the bench env is already a trace-style host (``K210Env``: 64-bit AXI register
accesses at 0x40800000 + offset, system memory's back door or the KPU's AXI port for the
KPU RAM windows, the ``irq`` pin); the scoreboard checks every access besides.

``wait_irq`` waits at least ``MIN_WAIT_CYCLES`` clock cycles: a trace's MAX counts the TLM's
steps, not cycles.
"""
from __future__ import annotations

from tb.k210_kpu.env import K210Env
from tlm.k210_kpu.trace_target import K210TraceTarget

MIN_WAIT_CYCLES = 100000


class K210PinTarget:
    device = K210TraceTarget.device
    reg_bits = K210TraceTarget.reg_bits
    addr_bits = K210TraceTarget.addr_bits
    reg_align = K210TraceTarget.reg_align
    wait_default = MIN_WAIT_CYCLES

    def __init__(self, dut, config: "str | None" = None, plant=None):
        self.env = K210Env(dut, plant=plant)

    @classmethod
    def of(cls, env: K210Env) -> "K210PinTarget":
        """The adapter over an existing env (tests that drive it themselves)."""
        self = cls.__new__(cls)
        self.env = env
        return self

    async def start(self) -> None:
        await self.env.restart()

    async def finish(self) -> None:
        await self.env.finish()

    async def write_reg(self, offset: int, value: int) -> None:
        await self.env.write_reg(offset, value)

    async def read_reg(self, offset: int) -> int:
        return await self.env.read_reg(offset)

    async def load_mem(self, addr: int, data: bytes) -> None:
        await self.env.load_mem(addr, data)

    async def read_mem(self, addr: int, length: int) -> bytes:
        return await self.env.read_mem(addr, length)

    async def wait_irq(self, max_cycles: int) -> bool:
        return await self.env.wait_irq(max(max_cycles, MIN_WAIT_CYCLES))

    async def idle(self) -> None:
        self.env.host_waits()                  # a poll pause is the host waiting
        await self.env.settle(8)

    def faults(self) -> list:
        return []
