"""The K210 KPU TLM as a trace target (docs/trace-format.md, address map of digest §8).

``write_reg``/``read_reg`` take offsets from AI_BASE_ADDR (0x40800000) and 64-bit values:
``write_reg 0x0 W`` pushes one word into layer_argument_fifo, ``read_reg 0x30 V`` pops 8 bytes
of the output stream (fifo_data_out). ``load_mem``/``check_mem``/``fill_mem`` take CPU bus
addresses: system memory (0x80000000, or its alias 0x40000000) and the KPU RAM at
0x80600000 or 0x40600000. A layer runs as soon as its twelfth word is written; its
calc_done follows the device's rule (``KPU.advance``): ``wait_irq`` returns at once if the
AI interrupt is raised, else lets the KPU raise a pending calc_done and looks again; a
``poll_reg`` pause does the same. Faults reported: every fault ``Event`` of the model
(rejected layer arguments, bus errors, 36-bit overflows, accesses to missing or read-only
registers) and back-door accesses to the register window; an empty fifo_data_out read
reads 0 and is not a fault.
"""
from __future__ import annotations

from ..core.memory import Memory
from ..core.trace import TraceTarget
from .device import ADDR_BITS, KPU, in_register_window


class K210TraceTarget(TraceTarget):
    device = "k210-kpu"
    reg_bits = 64
    addr_bits = ADDR_BITS
    reg_align = 8
    wait_default = 1000

    def __init__(self, config: str = "k210", memory: "Memory | None" = None):
        self.kpu = KPU(memory)
        self._faults: list = []

    def write_reg(self, offset: int, value: int) -> None:
        self.kpu.write(offset, value)

    def read_reg(self, offset: int) -> int:
        return self.kpu.read(offset)

    def _window(self, what: str, addr: int, length: int) -> bool:
        if in_register_window(addr, length):
            self._faults.append(f"{what} 0x{addr:x}+{length} overlaps the KPU register window "
                                f"(0x40800000..0x40ffffff); use write_reg/read_reg")
            return True
        return False

    def load_mem(self, addr: int, data: bytes) -> None:
        if not self._window("load_mem", addr, len(data)):
            self.kpu.bus_write(addr, data)

    def read_mem(self, addr: int, length: int) -> bytes:
        if self._window("check_mem", addr, length):
            return bytes(length)
        return self.kpu.bus_read(addr, length)

    def wait_irq(self, max_steps: int) -> bool:
        if not self.kpu.irq and max_steps > 0:
            self.kpu.advance()
        return self.kpu.irq

    def idle(self) -> None:
        self.kpu.advance()

    def faults(self) -> list:
        out = self._faults + [str(e) for e in self.kpu.new_faults()]
        self._faults = []
        return out
