"""APB5 manager agent (AMBA APB protocol issue E: PPROT, PSTRB, PSLVERR, PWAKEUP).

A small agent written for this bench rather than cocotbext-axi's ``ApbMaster``: that one
aligns every access down to a word address, so it cannot put an unaligned PADDR on the bus
(the U85 must answer those with PSLVERR), and it has no PCLKEN or PWAKEUP.

Timing convention, used by every agent in tb/ and by the TLM-behind-pins adapter:

* the bench **drives** right after a rising edge of CLK;
* the bench **samples** at the falling edge before the rising edge it is interested in.

Between those two points every pin is stable, on an event simulator (Icarus) and on a
cycle simulator (Verilator, where a RisingEdge resumes after the edge has been evaluated)
alike, and two Python agents that talk through pins (manager and TLM adapter) never race.
PCLKEN qualifies edges: an edge at which PCLKEN was low is not an APB edge.

Usage::

    apb = Apb5Manager.from_entity(dut)            # binds PADDR, PSEL, ... by TRM name (pin map)
    r = await apb.read(0x000)                     # ApbResult(data=..., slverr=...)
    r = await apb.write(0x010, 0x1000, prot=0b011, strb=0xF)
"""
from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import Callable

from cocotb.triggers import FallingEdge, Lock, RisingEdge

# PPROT encodings (APB5): bit 0 privileged, bit 1 non-secure, bit 2 instruction.
PROT_SECURE_PRIV = 0b001
PROT_SECURE_USER = 0b000
PROT_NONSECURE_PRIV = 0b011
PROT_NONSECURE_USER = 0b010


class ApbTimeout(Exception):
    """The completer held PREADY low for longer than the agent's limit."""


@dataclass(frozen=True)
class ApbResult:
    """One completed APB transfer, as seen on the pins."""
    addr: int
    write: bool
    data: int            # PWDATA for a write, PRDATA for a read
    slverr: bool
    prot: int
    strb: int
    wait_states: int     # PCLKEN-qualified cycles with PREADY low in the access phase

    def __str__(self) -> str:
        kind = "W" if self.write else "R"
        err = " SLVERR" if self.slverr else ""
        return (f"APB {kind} 0x{self.addr:04x} data=0x{self.data:08x} prot={self.prot:03b} "
                f"strb={self.strb:04b} waits={self.wait_states}{err}")


class Apb5Manager:
    """Drives an APB5 completer. Transfers are serialised; concurrent callers queue up."""

    # TRM chapter 5 names of the APB5 completer pins of the NPU.
    SIGNALS = ("PADDR", "PSEL", "PENABLE", "PWRITE", "PWDATA", "PSTRB", "PPROT",
               "PRDATA", "PREADY", "PSLVERR")
    OPTIONAL = ("PWAKEUP", "PCLKEN")

    def __init__(self, clock, *, paddr, psel, penable, pwrite, pwdata, prdata, pready,
                 pstrb=None, pprot=None, pslverr=None, pwakeup=None, pclken=None,
                 name: str = "apb", timeout_cycles: int = 1000, wakeup_lead: int = 1):
        self.clock = clock
        self.paddr, self.psel, self.penable, self.pwrite = paddr, psel, penable, pwrite
        self.pwdata, self.prdata, self.pready = pwdata, prdata, pready
        self.pstrb, self.pprot, self.pslverr = pstrb, pprot, pslverr
        self.pwakeup, self.pclken = pwakeup, pclken
        self.log = logging.getLogger(f"cocotb.tb.{name}")
        self.addr_width = len(paddr)
        self.data_width = len(pwdata)
        self.timeout_cycles = timeout_cycles
        self.wakeup_lead = wakeup_lead
        self.listeners: list[Callable[[ApbResult], None]] = []
        self.transfers: deque[ApbResult] = deque(maxlen=100_000)   # recent history
        self.keep_history = True
        self._lock = Lock()
        self._pending = 0

        self.psel.value = 0
        self.penable.value = 0
        self.pwrite.value = 0
        self.paddr.value = 0
        self.pwdata.value = 0
        if self.pstrb is not None:
            self.pstrb.value = 0
        if self.pprot is not None:
            self.pprot.value = 0
        if self.pwakeup is not None:
            self.pwakeup.value = 0

    @classmethod
    def from_entity(cls, entity, clock=None, prefix: str = "", pinmap=None,
                    **kwargs) -> "Apb5Manager":
        """Bind to the TRM pins ``{prefix}PADDR`` ... of *entity* through the pin map
        (tb/pinmap.py: *pinmap*, else ``TB_PINMAP``, else the names themselves); clock
        defaults to ``CLK``."""
        from tb.pinmap import PinMap
        pm = PinMap.coerce(pinmap)

        def get(name, required=True):
            return pm.get(entity, prefix + name, required=required)
        sigs = {n.lower(): get(n, n not in ("PSTRB", "PPROT", "PSLVERR")) for n in cls.SIGNALS}
        sigs.update({n.lower(): get(n, False) for n in cls.OPTIONAL})
        return cls(clock if clock is not None else pm.get(entity, "CLK", required=True), **sigs,
                   **kwargs)

    # ------------------------------------------------------------------ public API
    async def read(self, addr: int, prot: int = PROT_SECURE_PRIV) -> ApbResult:
        """One read transfer. PSTRB is driven 0, as APB requires for reads."""
        return await self._transfer(addr, False, 0, prot, 0)

    async def write(self, addr: int, data: int, prot: int = PROT_SECURE_PRIV,
                    strb: int = 0xF) -> ApbResult:
        """One write transfer with the given PSTRB (sub-word strobes are legal APB)."""
        return await self._transfer(addr, True, data, prot, strb)

    @property
    def idle(self) -> bool:
        return self._pending == 0

    # ------------------------------------------------------------------ internals
    async def _sample_edge(self) -> bool:
        """Wait for the next rising edge; return whether it was a PCLKEN-qualified edge.

        PCLKEN is sampled at the falling edge before (see the module docstring)."""
        await FallingEdge(self.clock)
        en = True if self.pclken is None else bool(self.pclken.value)
        await RisingEdge(self.clock)
        return en

    async def _apb_edge(self) -> None:
        while not await self._sample_edge():
            pass

    async def _transfer(self, addr: int, write: bool, data: int, prot: int, strb: int) -> ApbResult:
        if not 0 <= addr < (1 << self.addr_width):
            raise ValueError(f"APB address 0x{addr:x} does not fit PADDR[{self.addr_width - 1}:0]")
        if not 0 <= data < (1 << self.data_width):
            raise ValueError(f"APB data 0x{data:x} does not fit PWDATA[{self.data_width - 1}:0]")
        if self.pprot is None and prot != 0:
            raise ValueError("PPROT is not connected")
        if self.pstrb is None and write and strb != 0xF:
            raise ValueError("PSTRB is not connected")
        self._pending += 1
        try:
            async with self._lock:
                return await self._do_transfer(addr, write, data, prot, strb)
        finally:
            self._pending -= 1
            if self._pending == 0 and self.pwakeup is not None:
                self.pwakeup.value = 0

    async def _do_transfer(self, addr, write, data, prot, strb) -> ApbResult:
        # PWAKEUP ahead of PSEL, so a clock-gated completer can ask for its clock back.
        if self.pwakeup is not None and not self.pwakeup.value:
            self.pwakeup.value = 1
            for _ in range(self.wakeup_lead):
                await self._apb_edge()
        await self._apb_edge()
        # Setup phase.
        self.paddr.value = addr
        self.pwrite.value = int(write)
        self.pwdata.value = data if write else 0
        if self.pstrb is not None:
            self.pstrb.value = strb if write else 0
        if self.pprot is not None:
            self.pprot.value = prot
        self.psel.value = 1
        self.penable.value = 0
        await self._apb_edge()
        # Access phase: hold until an APB edge sees PREADY high.
        self.penable.value = 1
        waits = 0
        while True:
            await FallingEdge(self.clock)
            en = True if self.pclken is None else bool(self.pclken.value)
            ready = bool(self.pready.value)
            if ready:
                try:
                    rdata = int(self.prdata.value) if not write else data
                    slverr = bool(int(self.pslverr.value)) if self.pslverr is not None else False
                except ValueError:
                    raise ValueError(f"APB {'write' if write else 'read'} 0x{addr:04x}: X/Z on "
                                     f"PRDATA/PSLVERR when PREADY is high") from None
            await RisingEdge(self.clock)
            if not en:
                continue
            if ready:
                break
            waits += 1
            if waits > self.timeout_cycles:
                self.psel.value = 0
                self.penable.value = 0
                raise ApbTimeout(f"APB {'write' if write else 'read'} 0x{addr:04x}: PREADY low "
                                 f"for {waits} cycles")
        self.psel.value = 0
        self.penable.value = 0
        result = ApbResult(addr, write, rdata, slverr, prot, strb if write else 0, waits)
        self.log.debug("%s", result)
        if self.keep_history:
            self.transfers.append(result)
        for fn in self.listeners:
            fn(result)
        return result
