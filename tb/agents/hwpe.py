"""HWPE peripheral (register) port agents, built on cocotb-bus: an initiator (the cluster side
that programs an HWPE) and a passive monitor with protocol checks.

Signals (pulp-platform hwpe-ctrl `hwpe_ctrl_intf_periph`): req, gnt, add[31:0], wen (1 =
read, 0 = write), be[3:0], data[31:0], id[ID-1:0] from the initiator; r_data[31:0], r_valid,
r_id[ID-1:0] back. Protocol (hwpe-ctrl `hwpe_ctrl_slave`): a transfer is accepted in the
cycle where req and gnt are both high; its response (r_valid with r_data for a read, r_valid
alone for a write) comes the next cycle, with r_id equal to the request's id.

Binding: `Bus` names are `<prefix>_<signal>`; a pin map `{"periph_req": "my_req", ...}`
rebinds any of them (names of the port table, tb/ne16/ports.py).

Timing convention of the bench: drive right after a rising edge, sample at the falling edge.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from cocotb.triggers import FallingEdge, RisingEdge
from cocotb_bus.drivers import BusDriver
from cocotb_bus.monitors import BusMonitor
from tb.agents.pins import pin_int

SIGNALS = ("req", "gnt", "add", "wen", "be", "data", "id", "r_data", "r_valid", "r_id")


def bus_signals(prefix: str, pinmap: "dict | None" = None) -> dict:
    """{attribute: top-level name} for cocotb_bus.Bus with name=None."""
    pm = pinmap or {}
    return {s: pm.get(f"{prefix}_{s}", f"{prefix}_{s}") for s in SIGNALS}



@dataclass
class PeriphTransfer:
    addr: int
    write: bool
    data: int              # write data, or the read data of the response
    be: int
    id: int
    cycle: int = 0


class ProtocolError(AssertionError):
    pass


class HwpePeriphMaster(BusDriver):
    """Initiator: `await write(addr, data)`, `await read(addr) -> int`, one transfer at a time."""

    def __init__(self, entity, clock, prefix: str = "periph", pinmap=None, core_id: int = 0,
                 timeout: int = 1000):
        self._signals = bus_signals(prefix, pinmap)
        super().__init__(entity, None, clock)
        self.id = 1 << core_id
        self.timeout = timeout
        self.bus.req.value = 0
        self.bus.wen.value = 1
        self.bus.add.value = 0
        self.bus.be.value = 0
        self.bus.data.value = 0
        self.bus.id.value = 0

    async def _transfer(self, addr: int, write: bool, data: int, be: int) -> int:
        await self._acquire_lock()
        try:
            b = self.bus
            await RisingEdge(self.clock)
            b.req.value, b.add.value, b.wen.value = 1, addr & 0xFFFFFFFF, 0 if write else 1
            b.be.value, b.data.value, b.id.value = be, data & 0xFFFFFFFF, self.id
            for _ in range(self.timeout):
                await FallingEdge(self.clock)
                if pin_int(b.gnt, None) == 1:
                    break
            else:
                raise ProtocolError(f"periph: no gnt for 0x{addr:x} within {self.timeout} cycles")
            await RisingEdge(self.clock)               # the handshake edge
            b.req.value = 0
            for _ in range(self.timeout):
                await FallingEdge(self.clock)
                if pin_int(b.r_valid, None) == 1:
                    rid = pin_int(b.r_id, None)
                    if rid != self.id:
                        raise ProtocolError(f"periph: r_id {rid} for a request with id {self.id}")
                    return pin_int(b.r_data, 0) if not write else 0
                await RisingEdge(self.clock)
            raise ProtocolError(f"periph: no r_valid for 0x{addr:x} within {self.timeout} cycles")
        finally:
            self._release_lock()

    async def write(self, addr: int, data: int, be: int = 0xF) -> None:
        await self._transfer(addr, True, data, be)

    async def read(self, addr: int) -> int:
        return await self._transfer(addr, False, 0, 0xF)


class HwpePeriphMonitor(BusMonitor):
    """Passive: emits a `PeriphTransfer` per response and records protocol violations in
    `errors` (a request dropped or changed before its grant, a response that is not exactly
    one cycle after its handshake, a wrong r_id, X on a control signal after reset)."""

    def __init__(self, entity, clock, prefix: str = "periph", pinmap=None, reset_n=None,
                 latency: int = 1, **kw):
        self._signals = bus_signals(prefix, pinmap)
        self.latency = latency
        self.errors: list[str] = []
        super().__init__(entity, None, clock, reset_n=reset_n, **kw)
        self.log = logging.getLogger(f"cocotb.{prefix}_monitor")

    def _error(self, cycle: int, text: str) -> None:
        self.errors.append(f"cycle {cycle}: periph: {text}")
        self.log.error("cycle %d: periph: %s", cycle, text)

    async def _monitor_recv(self):
        b = self.bus
        pending: list = []                  # (due cycle, PeriphTransfer)
        waiting = None                      # payload of a request not yet granted
        cycle = 0
        while True:
            await FallingEdge(self.clock)
            cycle += 1
            if self.in_reset:
                pending, waiting = [], None
                continue
            req, gnt, rv = pin_int(b.req, None), pin_int(b.gnt, None), pin_int(b.r_valid, None)
            if None in (req, gnt, rv):
                self._error(cycle, f"X/Z on req/gnt/r_valid ({req}, {gnt}, {rv})")
                continue
            payload = tuple(pin_int(h, None) for h in (b.add, b.wen, b.be, b.data, b.id))
            if waiting is not None:
                if not req:
                    self._error(cycle, "req dropped before gnt")
                elif payload != waiting:
                    self._error(cycle, "request changed while waiting for gnt")
            due = [p for p in pending if p[0] == cycle]
            if rv and not due:
                self._error(cycle, "r_valid without a request one cycle earlier")
            for d in due:
                pending.remove(d)
                tr = d[1]
                if not rv:
                    self._error(cycle, f"no r_valid {self.latency} cycle(s) after the request "
                                       f"to 0x{tr.addr:x}")
                    continue
                if pin_int(b.r_id, None) != tr.id:
                    self._error(cycle, f"r_id {pin_int(b.r_id, None)} for request id {tr.id}")
                if not tr.write:
                    tr.data = pin_int(b.r_data, 0)
                self._recv(tr)
            if req and gnt:
                add, wen, be, data, ident = payload
                pending.append((cycle + self.latency,
                                PeriphTransfer(add, wen == 0, data if wen == 0 else 0, be, ident, cycle)))
                waiting = None
            else:
                waiting = payload if req else None
