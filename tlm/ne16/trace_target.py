"""The NE16 TLM as a trace target (docs/trace-format.md).

`write_reg` / `read_reg` are single accesses on the HWPE peripheral port (a `read_reg` of
ACQUIRE acquires a job). Jobs run only while the host waits: during `wait_irq` and between
the reads of `poll_reg`, one output subtile a step. `wait_irq` waits for the next end-of-job
event that has not been consumed yet: an event that already happened returns at once, and two
jobs give two events.

Memory map (A1: the seed gives no addresses). Configuration "ne16" (the default): one flat,
sparse 32-bit byte space, every address readable and writable (unwritten bytes read 0), so
tensors may sit at GAP9 cluster L1 addresses (0x1000_0000..) or at low addresses alike; the
NE16's address arithmetic wraps at 2**32. Configuration "ne16-gap9-l1": only the cluster L1
windows the GAP9 simulator model lets the NE16 reach (EXT: 0x0000_0000-0x0001_FFFF and
0x1000_0000-0x1001_FFFF) answer; any other access gets DECERR and aborts its job (the model
there aliases instead; an error is the stricter reading, for catching bad pointers).
Faults come only from what the documents give a reason for: a rejected job (illegal
programming), an access answered with an error, an access to an unmapped register offset,
TRIGGER without ACQUIRE; each is one line from `faults()`.
"""
from __future__ import annotations

from ..core.memory import Memory
from ..core.trace import TraceTarget
from .device import Ne16
from .engine import ADDR_BITS

POLL_STEPS = 16                     # subtiles run between two reads of poll_reg
CONFIGS = ("ne16", "ne16-gap9-l1")
L1_WINDOWS = ((0x0000_0000, 0x0002_0000), (0x1000_0000, 0x1002_0000))   # EXT GAP9 sim model


def restrict_to_l1(memory: Memory) -> None:
    """Make every access outside the GAP9 L1 windows answer DECERR."""
    lo = 0
    for a, b in L1_WINDOWS:
        if a > lo:
            memory.inject_fault(lo, a, "DECERR")
        lo = b
    memory.inject_fault(lo, 1 << ADDR_BITS, "DECERR")


class Ne16TraceTarget(TraceTarget):
    device = "ne16"
    reg_bits = 32
    addr_bits = ADDR_BITS
    reg_align = 4
    wait_default = 1_000_000

    def __init__(self, config: str = "ne16", memory: "Memory | None" = None, literal: bool = False,
                 fast: bool = True):
        if config not in CONFIGS:
            raise ValueError(f"unknown NE16 configuration {config!r} (one of {', '.join(CONFIGS)})")
        self.config = config
        mem = memory if memory is not None else Memory(log=False)
        if config == "ne16-gap9-l1":
            restrict_to_l1(mem)
        self.dev = Ne16(mem, literal=literal, fast=fast)

    def write_reg(self, offset: int, value: int) -> None:
        self.dev.periph_write(offset, value)

    def read_reg(self, offset: int) -> int:
        return self.dev.periph_read(offset)

    def load_mem(self, addr: int, data: bytes) -> None:
        self.dev.memory.write(addr, data)

    def read_mem(self, addr: int, length: int) -> bytes:
        return self.dev.memory.read(addr, length)

    def wait_irq(self, max_steps: int) -> bool:
        return self.dev.wait_event(max_steps)

    def idle(self) -> None:
        for _ in range(POLL_STEPS):
            if not self.dev.step():
                break

    def faults(self) -> list[str]:
        out, self.dev.errors = self.dev.errors, []
        return out


def make_target(config: str = "ne16") -> Ne16TraceTarget:
    return Ne16TraceTarget(config)
