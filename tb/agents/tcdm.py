"""TCDM (HWPE-Mem) agents for an HWPE's initiator ports, built on cocotb-bus: the memory that
answers them (with grant backpressure) and a passive monitor with protocol checks.

Signals per port (pulp-platform hci `hci_core_intf`, flattened: port i is bits
[32*i+31:32*i], [4*i+3:4*i]): req, gnt, add[31:0], wen (1 = read, 0 = write), be[3:0],
data[31:0] from the initiator; r_data[31:0], r_valid back. Protocol (hci `protocols.rst`,
HWPE-Mem): a transfer happens in the cycle where req and gnt are high; r_valid (with r_data)
comes the cycle after a read handshake, so a memory that cannot answer delays its grant; the
initiator keeps req and the request unchanged until the grant. The NE16 drives its ports in
lockstep (ne16_top_wrap: one request at add + 4*i on every port, gnt = AND of the grants,
r_valid = AND of the r_valids), which the monitor checks too: equal req and wen on all ports,
word-aligned consecutive addresses.

`TcdmMemory` answers from a `tlm.core.memory.Memory` (the bench's TCDM): all ports granted
together after a stall drawn from `stall` (a callable returning the cycles to wait before the
next grant; default 0), r_valid the next cycle (for writes too, as PULP clusters do, unless
`write_r_valid=False`). Timing: drives right after a rising edge, samples at the falling edge.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from cocotb.triggers import FallingEdge, RisingEdge
from cocotb_bus.bus import Bus
from cocotb_bus.monitors import BusMonitor
from tb.agents.pins import pin_int

SIGNALS = ("req", "gnt", "add", "wen", "be", "data", "r_data", "r_valid")


def bus_signals(prefix: str, pinmap: "dict | None" = None) -> dict:
    pm = pinmap or {}
    return {s: pm.get(f"{prefix}_{s}", f"{prefix}_{s}") for s in SIGNALS}



def lanes(value: int, ports: int, width: int) -> list:
    """Split a flat vector into `ports` fields of `width` bits (port 0 = least significant)."""
    m = (1 << width) - 1
    return [(value >> (width * i)) & m for i in range(ports)]


def join(fields, width: int) -> int:
    v = 0
    for i, f in enumerate(fields):
        v |= (f & ((1 << width) - 1)) << (width * i)
    return v


@dataclass
class TcdmAccess:
    """One lockstep access of all ports: `addr` of port 0, byte enables (4 per port, port 0
    lowest) and the bytes (write data, or the read data of the response)."""
    addr: int
    write: bool
    be: int
    data: bytes
    cycle: int = 0
    stall: int = 0           # cycles the request waited for its grant

    def bytes_enabled(self) -> list:
        """[(address, byte)] of the enabled bytes."""
        return [(self.addr + i, self.data[i]) for i in range(len(self.data)) if (self.be >> i) & 1]


class TcdmMemory:
    """The memory side of the ports: grants with backpressure, answers from `memory`."""

    def __init__(self, entity, clock, memory, ports: int = 9, prefix: str = "tcdm",
                 pinmap=None, stall: "Callable[[], int] | None" = None, write_r_valid: bool = True,
                 reset_n=None):
        self.bus = Bus(entity, None, bus_signals(prefix, pinmap))
        self.clock = clock
        self.memory = memory
        self.ports = ports
        self.stall = stall or (lambda: 0)
        self.write_r_valid = write_r_valid
        self.reset_n = reset_n
        self.accesses = 0
        self._all = (1 << ports) - 1
        self.bus.gnt.value = 0
        self.bus.r_valid.value = 0
        self.bus.r_data.value = 0

    async def run(self) -> None:
        b, n = self.bus, self.ports
        wait = None                        # stall cycles left for the pending request
        while True:
            await FallingEdge(self.clock)
            if self.reset_n is not None and pin_int(self.reset_n, None) != 1:
                wait = None
                await RisingEdge(self.clock)
                b.gnt.value, b.r_valid.value = 0, 0
                continue
            req, gnt = pin_int(b.req, 0), pin_int(b.gnt, 0)
            handshake = None
            if req and gnt == self._all and (req & self._all) == self._all:
                handshake = (pin_int(b.add, 0), pin_int(b.wen, 1), pin_int(b.be, 0), pin_int(b.data, 0))
            await RisingEdge(self.clock)
            # the handshake (if any) happened at this edge: perform it, answer next cycle
            if handshake is not None:
                add, wen, be, data = handshake
                adds = lanes(add, n, 32)              # every port has its own word address
                if wen:
                    raw = b"".join(self.memory.read(a & ~3, 4) for a in adds)
                    b.r_data.value = int.from_bytes(raw, "little")
                    b.r_valid.value = self._all
                else:
                    buf = data.to_bytes(4 * n, "little")
                    for i, a in enumerate(adds):
                        bb = (be >> (4 * i)) & 0xF
                        k = 0
                        while k < 4:                  # one write per run of enabled bytes
                            if (bb >> k) & 1:
                                j = k
                                while j < 4 and (bb >> j) & 1:
                                    j += 1
                                self.memory.write((a & ~3) + k, buf[4 * i + k:4 * i + j])
                                k = j
                            else:
                                k += 1
                    b.r_valid.value = self._all if self.write_r_valid else 0
                self.accesses += 1
                wait = None
            else:
                b.r_valid.value = 0
            # grant decision for the next cycle (the request seen now stays until granted)
            if req and handshake is None:
                wait = self.stall() if wait is None else wait
                if wait > 0:
                    wait -= 1
                    b.gnt.value = 0
                else:
                    b.gnt.value = self._all
            elif handshake is not None:
                wait = self.stall()            # back-to-back requests: stall again if drawn
                b.gnt.value = self._all if wait == 0 else 0
                wait = None if wait == 0 else wait - 1
            else:
                b.gnt.value = 0


class TcdmMonitor(BusMonitor):
    """Passive: emits a `TcdmAccess` per write handshake and per read response; records
    protocol violations in `errors`."""

    def __init__(self, entity, clock, ports: int = 9, prefix: str = "tcdm", pinmap=None,
                 reset_n=None, **kw):
        self._signals = bus_signals(prefix, pinmap)
        self.ports = ports
        self.errors: list[str] = []
        self.stalls: list[int] = []
        super().__init__(entity, None, clock, reset_n=reset_n, **kw)
        self.log = logging.getLogger(f"cocotb.{prefix}_monitor")

    def _error(self, cycle: int, text: str) -> None:
        self.errors.append(f"cycle {cycle}: tcdm: {text}")
        self.log.error("cycle %d: tcdm: %s", cycle, text)

    async def _monitor_recv(self):
        b, n = self.bus, self.ports
        full = (1 << n) - 1
        cycle = 0
        waiting = None                      # (payload, first cycle) of an ungranted request
        read_due = None                     # a read handshake of the previous cycle
        while True:
            await FallingEdge(self.clock)
            cycle += 1
            if self.in_reset:
                waiting = read_due = None
                continue
            req, gnt, rv = pin_int(b.req, None), pin_int(b.gnt, None), pin_int(b.r_valid, None)
            if None in (req, gnt, rv):
                self._error(cycle, "X/Z on req/gnt/r_valid")
                continue
            if req not in (0, full):
                self._error(cycle, f"ports not in lockstep: req 0b{req:0{n}b}")
            rv_all = rv == full
            if read_due is not None:
                acc = read_due
                if not rv_all:
                    self._error(cycle, f"no r_valid the cycle after the read of 0x{acc.addr:08x}")
                else:
                    acc.data = pin_int(b.r_data, 0).to_bytes(4 * n, "little")
                    self._recv(acc)
                read_due = None
            payload = None
            if req:
                add, wen, be, data = (pin_int(h, None) for h in (b.add, b.wen, b.be, b.data))
                if None in (add, wen, be):
                    self._error(cycle, "X/Z on add/wen/be of a request")
                    continue
                adds = lanes(add, n, 32)
                if wen not in (0, full):
                    self._error(cycle, f"ports not in lockstep: wen 0b{wen:0{n}b}")
                if adds[0] % 4 or any(adds[i] != (adds[0] + 4 * i) & 0xFFFFFFFF for i in range(n)):
                    self._error(cycle, "addresses not word-aligned and consecutive: "
                                       + " ".join(f"{a:08x}" for a in adds))
                payload = (adds[0], wen == full, be, data if wen == 0 else 0)
            if waiting is not None:
                if payload is None:
                    self._error(cycle, "req dropped before gnt")
                elif payload != waiting[0]:
                    self._error(cycle, "request changed while waiting for gnt")
            if payload is not None and gnt == full:
                stall = cycle - waiting[1] if waiting is not None else 0
                self.stalls.append(stall)
                addr, is_read, be, data = payload
                acc = TcdmAccess(addr, not is_read, be, (data or 0).to_bytes(4 * n, "little"),
                                 cycle, stall)
                if is_read:
                    read_due = acc
                else:
                    self._recv(acc)
                waiting = None
            elif payload is not None:
                waiting = waiting if waiting is not None else (payload, cycle)
            else:
                waiting = None
