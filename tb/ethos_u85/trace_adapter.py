"""The Ethos-U85's pin-level trace adapter (tb/core/trace_player.py, ``make sim TRACE=``).

The bench env (tb/ethos_u85/env.py) with its scoreboard: register accesses are APB5
transfers with PPROT privileged+secure (what the Ethos-U driver uses; the TLM trace target's
choice too), memory is loaded and checked through the back door of the AXI subordinates'
memory (``env.memory``), ``wait_irq`` watches the IRQ pin. The TLM is the scoreboard: on
DUT=rtl a reference Device follows every APB transfer and job and compares APB responses,
IRQ, STATUS/QREAD at job end and every byte written; on DUT=tlm the TLM is the DUT and the
APB/AXI monitors check the pins. ``finish()`` runs those end-of-test checks.
"""
from __future__ import annotations

from cocotb.triggers import ClockCycles, First, RisingEdge

from tb.agents.apb import PROT_SECURE_PRIV
from tb.agents.axi import pin_int
from tb.ethos_u85.env import Env
from tlm.ethos_u85.trace_target import U85TraceTarget

POLL_CYCLES = 16                 # CLK cycles between two reads of poll_reg


class U85PinTarget:
    device = U85TraceTarget.device
    reg_bits = U85TraceTarget.reg_bits
    addr_bits = U85TraceTarget.addr_bits
    reg_align = U85TraceTarget.reg_align
    wait_default = 20_000_000    # CLK cycles of wait_irq when the trace gives no MAX

    def __init__(self, dut, config: str):
        self.env = Env(dut, config=config)
        self._faults: list[str] = []

    async def start(self) -> None:
        await self.env.start()

    def finish(self) -> None:
        self.env.finish()

    async def write_reg(self, offset: int, value: int) -> None:
        r = await self.env.write(offset, value, PROT_SECURE_PRIV)
        if r.slverr:
            self._faults.append(f"PSLVERR on write of 0x{value:08x} to offset 0x{offset:x}")

    async def read_reg(self, offset: int) -> int:
        r = await self.env.read(offset, PROT_SECURE_PRIV)
        if r.slverr:
            self._faults.append(f"PSLVERR on read of offset 0x{offset:x}")
        return r.data

    def load_mem(self, addr: int, data: bytes) -> None:
        self.env.memory.write(addr, data)

    def read_mem(self, addr: int, length: int) -> bytes:
        return self.env.memory.read(addr, length)

    async def wait_irq(self, max_cycles: int) -> bool:
        irq = self.env.irq
        if pin_int(irq, 0) == 1:
            return True
        await First(RisingEdge(irq), ClockCycles(self.env.clock, max_cycles))
        return pin_int(irq, 0) == 1

    async def idle(self) -> None:
        await ClockCycles(self.env.clock, POLL_CYCLES)

    def faults(self) -> list[str]:
        out, self._faults = self._faults, []
        return out
