"""The DTPU in its system, as a trace target (docs/trace-format.md, `device dtpu`).

The accelerator takes its data from AXI4-Streams, not from memory. A trace reaches it the
way the thesis' PYNQ system does: DDR memory (`load_mem`/`check_mem`, 32-bit addresses)
and four single-channel Xilinx AXI DMAs in simple mode (contract.WINDOWS, registers
contract.DMA_REGS) that stream DDR buffers into the adapter's CSR, weight and input
arguments and the output back into DDR. Trace register offsets are from
contract.SYSTEM_BASE (0x40000000): the adapter at +0x03C00000 (0x43C00000, as in the
thesis), the DMAs at +0x00400000 (input FIFO) and +0x00410000 (weights), as in the
thesis, +0x00420000 (CSR) and +0x00430000 (output), chosen (the thesis gives none).

The interrupt `wait_irq` waits for is the OR of the DMAs' interrupt outputs (DMACR
IOC_IRQEN/ERR_IRQEN) and the adapter's (CTRL.GIE & STATUS.DONE); a host enables IOC on
the output DMA to be woken at the end of the output transfer. The model has no clock:
after every register write everything that can move moves (DMA transfers, commands,
runs). Faults reported: SLVERR on the adapter's AXI4-Lite port, accesses outside every
window, a CMD write that would stall forever, DMA error bits and the adapter's sticky
error bits (CORE_ERR with its code, CMD_ERR, OVERFLOW, UNDERRUN) when they get set.
"""
from __future__ import annotations

import numpy as np

from ..core.memory import Memory, Resp, Transaction
from ..core.trace import TraceTarget
from . import contract as C
from .adapter import CmdQueueFull, Dtpu
from .dma import DmaChannel, DmaDir

ARG_INDEX = {a.name: a.index for a in C.IN_ARGS}
_STATUS_ERRORS = ("CORE_ERR", "CMD_ERR", "OVERFLOW", "UNDERRUN")


class DtpuSystem(TraceTarget):
    device = "dtpu"
    reg_bits = 32
    addr_bits = C.TRACE_ADDR_BITS
    reg_align = 4
    wait_default = 1_000_000

    def __init__(self, config: str = C.DEFAULT_CONFIG, memory: "Memory | None" = None):
        self.dtpu = Dtpu(config)
        self.cfg = self.dtpu.cfg
        self.memory = memory if memory is not None else Memory(log=False)
        self.dmas = {w.name: DmaChannel(w) for w in C.WINDOWS if w.kind != "adapter"}
        self._packets: dict[str, np.ndarray] = {}            # MM2S data read, not yet delivered
        self._armed: dict[str, tuple[int, int]] = {}         # S2MM (address, length)
        self._received: dict[str, list[int]] = {}
        self._faults: list[str] = []
        self._seen = dict.fromkeys(_STATUS_ERRORS, 0)
        self._dma_seen: dict[str, int] = {}
        self._moved = True                                   # did the last advance move anything

    # ---------------------------------------------------------------- address decode
    def _window(self, offset: int) -> "tuple[C.Window, int] | tuple[None, None]":
        for w in C.WINDOWS:
            if w.offset <= offset < w.offset + w.size:
                return w, offset - w.offset
        return None, None

    def write_reg(self, offset: int, value: int) -> None:
        w, local = self._window(offset)
        if w is None:
            self._faults.append(f"write to offset 0x{offset:x}: no device there")
        elif w.kind == "adapter":
            try:
                if self.dtpu.axil_write(local, value) != C.RESP_OKAY:
                    self._faults.append(f"SLVERR on write of 0x{value:08x} to DTPU offset 0x{local:x}")
            except CmdQueueFull as e:
                self._faults.append(str(e))
        elif not self.dmas[w.name].write(local, value):
            self._faults.append(f"write to {w.name} offset 0x{local:x}: no such register")
        self.advance()

    def read_reg(self, offset: int) -> int:
        self.advance()
        w, local = self._window(offset)
        if w is None:
            self._faults.append(f"read of offset 0x{offset:x}: no device there")
            return 0
        if w.kind == "adapter":
            v, resp = self.dtpu.axil_read(local)
            if resp != C.RESP_OKAY:
                self._faults.append(f"SLVERR on read of DTPU offset 0x{local:x}")
            return v
        v = self.dmas[w.name].read(local)
        if v is None:
            self._faults.append(f"read of {w.name} offset 0x{local:x}: no such register")
            return 0
        return v

    def load_mem(self, addr: int, data: bytes) -> None:
        self.memory.write(addr, data)

    def read_mem(self, addr: int, length: int) -> bytes:
        return self.memory.read(addr, length)

    # ---------------------------------------------------------------- the DMA engines
    def _access(self, dma: DmaChannel, write: bool, addr: int, length: int, data=None):
        d = DmaDir.s2mm if write else DmaDir.mm2s
        txn = Transaction(dma.window.name, d, write, addr, length)
        if addr + length > (1 << C.TRACE_ADDR_BITS):
            return "DMADECERR", None
        txn, got = self.memory.access(txn, data)
        if txn.resp == Resp.OKAY:
            return None, got
        return ("DMADECERR" if txn.resp == Resp.DECERR else "DMASLVERR"), None

    def _step_dmas(self) -> bool:
        moved = False
        for name, dma in self.dmas.items():
            start = dma.take_start()
            arg = dma.window.arg
            if start is not None:
                moved = True
                addr, n = start
                if dma.kind == "mm2s":
                    err, data = self._access(dma, False, addr, n)
                    if err:
                        dma.complete(0, err)
                    else:
                        self._packets[name] = np.frombuffer(data.tobytes(), "<u8").copy()
                else:
                    self._armed[name], self._received[name] = (addr, n), []
            if dma.kind == "mm2s" and name in self._packets:
                i = ARG_INDEX[arg]
                if not dma.busy:                    # reset while waiting: dropped
                    del self._packets[name]
                elif self.dtpu.stream_ready(i):
                    words = self._packets.pop(name)
                    self.dtpu.stream_packet(i, words)
                    dma.complete(words.size * 8)
                    moved = True
            elif dma.kind == "s2mm" and name in self._armed:
                if not dma.busy:                    # reset while armed
                    del self._armed[name]
                    continue
                addr, n = self._armed[name]
                got, last = self._received[name], False
                while self.dtpu.out_valid():
                    word, last = self.dtpu.out_pop()
                    got.append(word)
                    moved = True
                    if last:
                        break
                if last:                            # a packet longer than LENGTH: the rest is dropped
                    data = np.array(got, "<u8").tobytes()[:n]
                    err, _ = self._access(dma, True, addr, len(data), data)
                    dma.complete(len(data), err or (None if len(got) * 8 <= n else "DMAINTERR"))
                    del self._armed[name]
        return moved

    def advance(self) -> None:
        """Move everything that can move (DMA transfers, commands, runs)."""
        self._moved = False
        while self._step_dmas():
            self._moved = True
        self._check_status()

    def _check_status(self) -> None:
        st = self.dtpu.status()
        for name in _STATUS_ERRORS:
            f = next(x for x in C.STATUS_FIELDS if x.name == name)
            on = f.get(st)
            if on and not self._seen[name]:
                what = name
                if name == "CORE_ERR":
                    code = next(x for x in C.STATUS_FIELDS if x.name == "ERR_CODE").get(st)
                    what += f" ({C.CORE_ERRORS[code].name}: {C.CORE_ERRORS[code].meaning})"
                self._faults.append(f"DTPU STATUS.{what}")
            self._seen[name] = on
        for name, dma in self.dmas.items():
            if dma.errors and dma.errors != self._dma_seen.get(name):
                bits = [f.name for f in C.DMASR_FIELDS if f.name.startswith("DMA") and dma.errors & f.mask]
                self._faults.append(f"{name}: {', '.join(bits)} (DMASR 0x{dma.sr():08x})")
            self._dma_seen[name] = dma.errors

    @property
    def irq(self) -> bool:
        return self.dtpu.interrupt or any(d.irq for d in self.dmas.values())

    def wait_irq(self, max_steps: int) -> bool:
        self.advance()
        return self.irq

    def idle(self) -> None:
        self.advance()

    def settled(self, offset: int) -> bool:
        # event-driven: when the last advance moved nothing, nothing moves until the host
        # acts; no register read has side effects
        return not self._moved

    def faults(self) -> list[str]:
        out, self._faults = self._faults, []
        return out
