"""One channel of a Xilinx AXI DMA (PG021) in simple mode: the registers, not the engine.

The thesis feeds the adapter's streams with single-channel AXI DMAs (axi_dma_infifo,
axi_dma_weight_mem, axi_dma_csr_mem, axi_dma_outfifo). `DmaChannel` is the register side
of one of them (contract.DMA_REGS, the subset this project implements): DMACR, DMASR,
SA/DA, LENGTH. Writing LENGTH while running starts a transfer; the engine that moves the
bytes is the user's: the TLM system (`system.py`) moves them at once, the cocotb bench
through AxiStreamSource/AxiStreamSink. The engine takes a started transfer with
`take_start()` and reports its end with `complete(nbytes, error)`.
"""
from __future__ import annotations

import enum
from typing import Optional

from . import contract as C

_F = {f.name: f for f in C.DMACR_FIELDS + C.DMASR_FIELDS}


class DmaDir(enum.IntEnum):
    """The transaction channel of a DMA memory access (Transaction.channel)."""
    mm2s = 0
    s2mm = 1


class DmaChannel:
    def __init__(self, window: C.Window):
        if window.kind not in ("mm2s", "s2mm"):
            raise ValueError(f"{window.name} is not a DMA window")
        self.window, self.kind = window, window.kind
        self.regs = {r.offset: r for r in C.DMA_REGS}
        self.reset()

    def reset(self) -> None:
        self.cr = 0
        self.errors = 0             # DMAINTERR | DMASLVERR | DMADECERR bits
        self.ioc_irq = self.err_irq = False
        self.addr = self.length = 0
        self.busy = False
        self.pending: "Optional[tuple[int, int]]" = None   # started, not yet taken by the engine
        self.generation = 0         # bumped by a channel reset: an engine drops older transfers

    # ---------------------------------------------------------------- state
    def _bit(self, name: str, value: int) -> bool:
        return bool(_F[name].get(value))

    @property
    def running(self) -> bool:
        return self._bit("RS", self.cr) and not self.errors

    @property
    def halted(self) -> bool:
        return not self.running

    @property
    def idle(self) -> bool:
        return self.running and not self.busy

    @property
    def irq(self) -> bool:
        return ((self.ioc_irq and self._bit("IOC_IRQEN", self.cr))
                or (self.err_irq and self._bit("ERR_IRQEN", self.cr)))

    def sr(self) -> int:
        v = self.errors
        for name, on in (("HALTED", self.halted), ("IDLE", self.idle), ("IOC_IRQ", self.ioc_irq),
                         ("ERR_IRQ", self.err_irq)):
            v |= int(on) << _F[name].lsb
        return v

    def _error(self, name: str) -> None:
        self.errors |= _F[name].mask
        self.err_irq = True
        self.busy, self.pending = False, None

    # ---------------------------------------------------------------- registers
    def read(self, offset: int) -> "int | None":
        """Register value, or None for an offset this DMA does not decode."""
        r = self.regs.get(offset)
        if r is None:
            return None
        if r.channel != self.kind:
            return 0
        return {"cr": lambda: self.cr & sum(f.mask for f in C.DMACR_FIELDS), "sr": self.sr,
                "addr": lambda: self.addr, "addr_msb": lambda: 0,
                "length": lambda: self.length}[r.role]()

    def write(self, offset: int, value: int) -> bool:
        """False for an offset this DMA does not decode."""
        r = self.regs.get(offset)
        if r is None:
            return False
        if r.channel != self.kind:
            return True
        value &= 0xFFFFFFFF
        if r.role == "cr":
            if self._bit("RESET", value):
                self.reset()
                self.generation += 1
                return True
            self.cr = value & (_F["RS"].mask | _F["IOC_IRQEN"].mask | _F["ERR_IRQEN"].mask)
        elif r.role == "sr":
            if self._bit("IOC_IRQ", value):
                self.ioc_irq = False
            if self._bit("ERR_IRQ", value):
                self.err_irq = False
        elif r.role == "addr":
            self.addr = value
        elif r.role == "length":
            n = value & ((1 << C.DMA_LENGTH_BITS) - 1)
            if not self.running:
                return True                         # ignored while halted (PG021)
            if self.busy or n == 0 or n % (C.STREAM_BITS // 8):
                self._error("DMAINTERR")
                return True
            self.length, self.busy = n, True
            self.pending = (self.addr, n)
        return True

    # ---------------------------------------------------------------- engine side
    def take_start(self) -> "Optional[tuple[int, int]]":
        """The (address, length) of a transfer started since the last call, else None."""
        p, self.pending = self.pending, None
        return p

    def complete(self, nbytes: int, error: "str | None" = None) -> None:
        """The engine finished the transfer: `error` None, 'DMAINTERR', 'DMASLVERR' or
        'DMADECERR'. S2MM: `nbytes` received (LENGTH then reads it)."""
        if not self.busy:
            return
        if self.kind == "s2mm":
            self.length = nbytes
        if error:
            self._error(error)
        else:
            self.busy, self.ioc_irq = False, True
