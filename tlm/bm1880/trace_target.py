"""The BM1880 model as a trace target (docs/trace-format.md), and trace writing.

The BMKernel guide documents no registers, so traces use the model's command-processor
window (`regs.py`): `load_mem` puts the gmem image and the serialized command buffer in
gmem, `write_reg` sets CMDBUF_ADDR_LO/HI and CMDBUF_SIZE and rings DOORBELL, `wait_irq`
runs the buffer (one command a step) until the end-of-buffer (or fault) interrupt, and
`check_mem` compares gmem. The trace address space is 41 bits: gmem at 0 .. 2^40-1, and
lmem (all slices, the guide's lmem addresses) at `LMEM_WINDOW` = 2^40, so a trace can also
preload and check lmem. Faults (a bad buffer, a hazard, a bus error, a bad register
access) are reported by `faults()`, one line each.
"""
from __future__ import annotations

from pathlib import Path

from ..core.trace import RecordingTarget, TraceTarget, TraceWriter
from . import regs
from .chip import GMEM_ADDR_BITS
from .device import Bm1880, CommandProcessor

LMEM_WINDOW = 1 << GMEM_ADDR_BITS
POLL_STEPS = 16
DEFAULT_CMDBUF_ADDR = 0xF0_0000_0000        # where write_trace puts the command buffer by default


class Bm1880TraceTarget(TraceTarget):
    device = "bm1880"
    reg_bits = 32
    addr_bits = GMEM_ADDR_BITS + 1
    reg_align = 4
    wait_default = 1_000_000

    def __init__(self, config: str = "bm1880", machine: "Bm1880 | None" = None):
        self.cp = CommandProcessor(machine)
        self.m = self.cp.m

    def write_reg(self, offset: int, value: int) -> None:
        self.cp.write(offset, value)

    def read_reg(self, offset: int) -> int:
        return self.cp.read(offset)

    def _split(self, addr: int, length: int):
        """(space, address, start, end) pieces of a trace-address range."""
        lmem_end = LMEM_WINDOW + self.m.chip.lmem_total
        if addr + length <= LMEM_WINDOW:
            return [("g", addr, 0, length)]
        if addr >= LMEM_WINDOW:
            if addr + length > lmem_end:
                raise ValueError(f"0x{addr:x}+{length} runs past lmem (window 0x{LMEM_WINDOW:x}.."
                                 f"0x{lmem_end:x})")
            return [("l", addr - LMEM_WINDOW, 0, length)]
        cut = LMEM_WINDOW - addr
        return self._split(addr, cut) + [(s, a, b + cut, e + cut)
                                         for s, a, b, e in self._split(LMEM_WINDOW, length - cut)]

    def load_mem(self, addr: int, data: bytes) -> None:
        data = bytes(data)
        try:
            pieces = self._split(addr, len(data))
        except ValueError as e:
            self.cp.events.append(f"load_mem: {e}")
            return
        for space, a, b, e in pieces:
            if space == "g":
                self.m.gmem.write(a, data[b:e])
            else:
                self.m.lmem[a:a + e - b] = memoryview(data)[b:e]

    def read_mem(self, addr: int, length: int) -> bytes:
        try:
            pieces = self._split(addr, length)
        except ValueError as e:
            self.cp.events.append(f"check_mem: {e}")
            return bytes(length)
        out = bytearray()
        for space, a, b, e in pieces:
            out += self.m.gmem.read(a, e - b) if space == "g" else self.m.lmem[a:a + e - b].tobytes()
        return bytes(out)

    def wait_irq(self, max_steps: int) -> bool:
        for _ in range(max_steps):
            if self.cp.irq:
                return True
            if not self.cp.step():
                break
        return self.cp.irq

    def idle(self) -> None:
        for _ in range(POLL_STEPS):
            if not self.cp.step():
                break

    def faults(self) -> list[str]:
        out, self.cp.events = self.cp.events, []
        return out


def _offset(name: str) -> int:
    return regs.BY_NAME[name].offset


def record_run(target: TraceTarget, cmdbuf: bytes, inputs=(), outputs=(), *, cmdbuf_addr: int = DEFAULT_CMDBUF_ADDR,
               lmem_image: "bytes | None" = None, writer: "TraceWriter | None" = None,
               comment: str = "") -> RecordingTarget:
    """Run one command buffer on `target` through the register window, recording every host
    action: inputs (addr, bytes) and the buffer into gmem, registers, wait_irq, STATUS, and
    check_mem of the outputs (addr, length) with the model's bytes as expectations."""
    rec = RecordingTarget(target, writer)
    if comment:
        rec.writer.comment(comment)
    if lmem_image is not None:
        rec.load_mem(LMEM_WINDOW, lmem_image)
    for addr, data in inputs:
        rec.load_mem(addr, bytes(data))
    cmdbuf = bytes(cmdbuf)
    rec.load_mem(cmdbuf_addr, cmdbuf)
    rec.write_reg(_offset("CMDBUF_ADDR_LO"), cmdbuf_addr & 0xFFFFFFFF)
    rec.write_reg(_offset("CMDBUF_ADDR_HI"), cmdbuf_addr >> 32)
    rec.write_reg(_offset("CMDBUF_SIZE"), len(cmdbuf))
    rec.write_reg(_offset("DOORBELL"), regs.BY_NAME["DOORBELL"].field("start").put(1))
    rec.wait_irq()
    rec.read_reg(_offset("STATUS"))
    rec.read_reg(_offset("CMD_DONE"))
    irq = rec.target.read_reg(_offset("IRQ_STATUS"))
    rec.write_reg(_offset("IRQ_STATUS"), irq)
    for addr, length in outputs:
        rec.check_mem(addr, length)
    return rec


def write_trace(folder: "str | Path", cmdbuf: bytes, inputs=(), outputs=(), *, name: str = "trace.txt",
                machine: "Bm1880 | None" = None, **kw) -> Path:
    """Record a run of `cmdbuf` on a fresh model (or `machine`) as a trace in `folder`."""
    rec = record_run(Bm1880TraceTarget(machine=machine), cmdbuf, inputs, outputs, **kw)
    return rec.writer.save(folder, name)
