"""The DTPU's pin-level trace adapter (``make sim DEVICE=dtpu TRACE=...``, tb/core/trace_player.py).

Register offsets and memory addresses are those of the TLM system (tlm/dtpu/system.py): the
DTPU window goes to the DUT's AXI4-Lite port, the DMA windows to the bench's DMA models, and
load_mem/check_mem to the bench's DDR (tb/dtpu/system.py, ``PinSystem``). The TLM scoreboard
checks the streams and AXI4-Lite responses besides; ``finish`` fails on its mismatches."""
from __future__ import annotations

from .env import DtpuEnv
from .system import PinSystem


class DtpuPinTarget:
    device = PinSystem.device
    reg_bits = PinSystem.reg_bits
    addr_bits = PinSystem.addr_bits
    reg_align = PinSystem.reg_align
    wait_default = PinSystem.wait_default

    def __init__(self, dut, config: "str | None" = None):
        self.dut, self.config = dut, config
        self.env: "DtpuEnv | None" = None
        self.system: "PinSystem | None" = None

    async def start(self) -> None:
        self.env = DtpuEnv(self.dut, config=self.config)
        await self.env.reset()
        self.system = PinSystem(self.env)

    def finish(self) -> None:
        self.env.sb.check(drained=False)

    async def write_reg(self, offset: int, value: int) -> None:
        await self.system.awrite_reg(offset, value)

    async def read_reg(self, offset: int) -> int:
        return await self.system.aread_reg(offset)

    def load_mem(self, addr: int, data: bytes) -> None:
        self.system.load_mem(addr, data)

    def read_mem(self, addr: int, length: int) -> bytes:
        return self.system.read_mem(addr, length)

    async def wait_irq(self, max_cycles: int) -> bool:
        return await self.system.await_irq(max_cycles)

    async def idle(self) -> None:
        await self.system.aidle()

    def faults(self) -> list[str]:
        return self.system.faults()
