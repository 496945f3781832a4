"""The Ethos-U85 TLM as a trace target (docs/trace-format.md).

`write_reg`/`read_reg` are APB transfers with PPROT privileged+secure (the driver's); the
device executes its command stream during `wait_irq` and between the reads of `poll_reg`,
one command a step. Faults reported: a PSLVERR response, and every job that ends with a
sticky fault bit (bus_status, cmd_parse_error, branch_fault, ecc_fault) or an UNPREDICTABLE
event, with the STATUS word and the command offset."""
from __future__ import annotations

from ..core.trace import TraceTarget
from .device import STICKY_FAULTS, Device, StopKind
from .memory import ADDR_BITS, Memory

PPROT = 0b01                      # privileged, secure: what the Ethos-U driver uses
POLL_STEPS = 64                   # commands executed between two reads of poll_reg


class U85TraceTarget(TraceTarget):
    device = "ethos-u85"
    reg_bits = 32
    addr_bits = ADDR_BITS
    reg_align = 4
    wait_default = 10_000_000

    def __init__(self, config: str = "ethos-u85-256", memory: "Memory | None" = None):
        self.dev = Device(config, memory=memory if memory is not None else Memory(log=False), settle=True)
        self.dev.hooks.append(self._on_event)
        self._faults: list[str] = []

    def _on_event(self, event: str, details: dict) -> None:
        if event == "unpredictable":
            self._faults.append(f"UNPREDICTABLE: {details.get('what', '')}")

    def _job_end(self, stop) -> None:
        if stop is not None and stop.kind is StopKind.ERROR:
            bits = [b for b in STICKY_FAULTS if getattr(self.dev, b)]
            self._faults.append(f"job stopped with {', '.join(bits) or stop.error} "
                                f"(STATUS 0x{stop.status:08x}, QREAD 0x{stop.qread:x}): {stop.detail}")

    def write_reg(self, offset: int, value: int) -> None:
        if self.dev.apb_write(offset, value, PPROT):
            self._faults.append(f"PSLVERR on write of 0x{value:08x} to offset 0x{offset:x}")

    def read_reg(self, offset: int) -> int:
        data, err = self.dev.apb_read(offset, PPROT)
        if err:
            self._faults.append(f"PSLVERR on read of offset 0x{offset:x}")
        return data

    def load_mem(self, addr: int, data: bytes) -> None:
        self.dev.memory.write(addr, data)

    def read_mem(self, addr: int, length: int) -> bytes:
        return self.dev.memory.read(addr, length)

    def _steps(self, n: int, until_irq: bool) -> bool:
        dev = self.dev
        for _ in range(n):
            if until_irq and dev.irq:
                return True
            if dev.in_reset:
                dev.tick(1)
                continue
            if not dev.running:
                break
            self._job_end(dev.step())
        return dev.irq

    def wait_irq(self, max_steps: int) -> bool:
        return self._steps(max_steps, until_irq=True)

    def idle(self) -> None:
        self._steps(POLL_STEPS, until_irq=False)

    def faults(self) -> list[str]:
        out, self._faults = self._faults, []
        return out
