"""The NE16 TLM behind the pins of the port-only shell (rtl_stub/ne16/ne16_shell.v, DUT=tlm).

`Ne16Pins(dut, clock)` is one cocotb coroutine; once a cycle, at the rising edge, in this order:
1. reset: while rst_ni is low the model is rebuilt and every output is 0;
2. the HWPE peripheral target (hwpe-ctrl behaviour): gnt is always 1; a request sampled in the
   previous cycle is performed on `tlm.ne16.device.Ne16` (`periph_write` with its byte
   enables, or `periph_read`) and answered now: r_valid, r_data, r_id = the request's id;
3. the TCDM initiator: the model runs in a lock-step thread (tb.core.lockstep.LockstepThread);
   each `tlm.core.memory.Transaction` of its engine (every input, weight, parameter,
   streamin read and output write) suspends the thread while it is performed here as one
   lockstep request of the nine 32-bit ports (ne16_top_wrap): word address add + 4*i on
   port i, byte enables for the bytes of the transaction, held until the grant; read data
   is taken the cycle after the grant. Only one side runs at a time, so runs are repeatable;
4. evt_o: one pulse of a cycle on evt_o[core][0] per job end, core = the highest set bit of
   periph_id (below N_CORES) of the TRIGGER write that committed the job (hwpe-ctrl);
   busy_o = a job is running.

`corrupt=(n, byte, xor)` flips bits of one byte of the n-th write on the pins (the model is
not told): the bench's way to show the scoreboard catches a wrong byte. `violate` breaks the
protocol once, to show the monitors catch it: "tcdm_change" changes the address of a request
waiting for its grant, "periph_late" answers a peripheral read a cycle late.
"""
from __future__ import annotations

import logging

import numpy as np
from cocotb.triggers import FallingEdge, RisingEdge

from tb.core.lockstep import LockstepThread
from tb.ne16.ports import MP, N_CORES, N_EVT, PORTS
from tlm.core.memory import Memory, Resp, Transaction
from tlm.ne16 import registers as R
from tlm.ne16.device import Ne16
from tb.agents.pins import pin_int

TRIGGER = R.OFFSETS["TRIGGER"]
SOFT_CLEAR = R.OFFSETS["SOFT_CLEAR"]
FULL = (1 << MP) - 1



class PinMemory(Memory):
    """The model's TCDM: every access goes to the pins through the lock-step thread."""

    def __init__(self, pins: "Ne16Pins"):
        super().__init__(log=False)
        self.pins = pins

    def access(self, txn, data=None):
        ok, rdata = self.pins.thread.call((txn, None if data is None else bytes(data)))
        if not ok:                         # no response on the pins: an error response
            return Transaction(txn.port, txn.channel, txn.write, txn.addr, txn.length,
                               resp=Resp.SLVERR), None
        return txn, None if txn.write else np.frombuffer(rdata, np.uint8).copy()


class Ne16Pins:
    def __init__(self, dut, clock, pinmap: "dict | None" = None, corrupt=None, literal=False,
                 violate: "str | None" = None):
        self.violate = violate
        self._late = None
        self.dut = dut
        self.clock = clock
        self.pm = pinmap or {}
        self.corrupt = corrupt
        self.literal = literal
        self.log = logging.getLogger("cocotb.ne16.tlm_pins")
        self.out = {p.name: getattr(dut, f"tlm_{self.pm.get(p.name, p.name)}")
                    for p in PORTS if p.direction == "output"}
        self.inp = {p.name: getattr(dut, self.pm.get(p.name, p.name))
                    for p in PORTS if p.direction == "input"}
        self.writes = 0                    # write transactions put on the pins
        self.dev = None
        self.thread = None
        self._new_device()

    def _new_device(self) -> None:
        if self.thread is not None:
            self.thread.abort()
        self.dev = Ne16(PinMemory(self), literal=self.literal)
        self.dev.listeners.append(self._on_event)
        self.thread = None
        self.request = None                # (txn, data, state) of the access on the pins
        self.ends: list[int] = []          # job ends waiting for their evt_o pulse
        self.core_of: dict[int, int] = {}  # job ID -> offloading core
        self.periph = None                 # request sampled last cycle
        self.s = {}

    def _on_event(self, event: str, **d) -> None:
        if event == "end":
            self.ends.append(self.core_of.get(d["job_id"], 0))

    def _drive(self, name: str, value: int) -> None:
        self.out[name].value = value

    async def run(self) -> None:
        for name in self.out:
            self._drive(name, 0)
        while True:
            await FallingEdge(self.clock)
            s = {name: pin_int(h) for name, h in self.inp.items()}
            await RisingEdge(self.clock)
            if s["rst_ni"] != 1:
                self._new_device()
                for name in self.out:
                    self._drive(name, 0)
                continue
            self._periph(s)
            self._tcdm(s)
            self._events()

    # ---- peripheral target --------------------------------------------------------------------
    def _periph(self, s: dict) -> None:
        self._drive("periph_gnt", 1)
        if self._late is not None:                       # planted violation: a late answer
            data, ident = self._late
            self._late = None
            self._drive("periph_r_valid", 1)
            self._drive("periph_r_data", data)
            self._drive("periph_r_id", ident)
            return
        if s["periph_req"]:
            off = s["periph_add"] & (R.WINDOW - 1)
            ident = s["periph_id"]
            if s["periph_wen"]:
                data = self.dev.periph_read(off)
            else:
                data = 0
                if off == TRIGGER:
                    if self.dev.acquired is not None:
                        cores = [i for i in range(N_CORES) if (ident >> i) & 1]
                        self.core_of[self.dev.acquired] = cores[-1] if cores else 0
                running = self.dev.running
                self.dev.periph_write(off, s["periph_data"], s["periph_be"])
                if off == SOFT_CLEAR and running is not None and self.thread is not None:
                    self._abort_thread()         # the job in flight is abandoned
            if self.violate == "periph_late" and s["periph_wen"]:
                self.violate, self._late = None, (data, ident)
                self._drive("periph_r_valid", 0)
                return
            self._drive("periph_r_valid", 1)
            self._drive("periph_r_data", data)
            self._drive("periph_r_id", ident)
        else:
            self._drive("periph_r_valid", 0)

    # ---- TCDM initiator -----------------------------------------------------------------------
    def _abort_thread(self) -> None:
        self.thread.abort()
        self.thread, self.request = None, None
        self._drive("tcdm_req", 0)

    def _body(self) -> None:
        while self.dev.step():
            pass

    def _handle(self, msg) -> None:
        kind, value = msg
        if kind == "call":
            self._issue(*value)
        else:
            self.thread, self.request = None, None
            self._drive("tcdm_req", 0)
            if kind == "error":
                self.log.error("NE16 model thread failed: %r", value)

    def _issue(self, txn, data) -> None:
        """Drive one transaction as a lockstep request of the nine ports."""
        base = txn.addr & ~3
        off = txn.addr - base
        if off + txn.length > 4 * MP:
            raise AssertionError(f"transaction of {txn.length} bytes at 0x{txn.addr:x} is wider "
                                 f"than the {MP} ports")
        be = ((1 << txn.length) - 1) << off
        adds = 0
        for i in range(MP):
            adds |= ((base + 4 * i) & 0xFFFFFFFF) << (32 * i)
        self._drive("tcdm_add", adds)
        self._drive("tcdm_be", be)
        if txn.write:
            buf = bytearray(4 * MP)
            buf[off:off + txn.length] = data
            if self.corrupt is not None and self.corrupt[0] == self.writes:
                buf[off + self.corrupt[1] % txn.length] ^= self.corrupt[2]
                self.log.warning("planted a wrong byte in write %d at 0x%x", self.writes,
                                 txn.addr + self.corrupt[1] % txn.length)
            self.writes += 1
            self._drive("tcdm_data", int.from_bytes(buf, "little"))
            self._drive("tcdm_wen", 0)
        else:
            self._drive("tcdm_wen", FULL)
        self._drive("tcdm_req", FULL)
        self.request = [txn, off, "req"]

    def _tcdm(self, s: dict) -> None:
        if self.request is not None:
            txn, off, state = self.request
            if state == "req":
                if s["tcdm_gnt"] & FULL != FULL and self.violate == "tcdm_change":
                    self.violate = None                  # planted violation: payload changes
                    self._drive("tcdm_add", pin_int(self.out["tcdm_add"]) ^ (1 << 8))
                if s["tcdm_gnt"] & FULL == FULL:         # the handshake happened at this edge
                    if txn.write:
                        self._drive("tcdm_req", 0)
                        self.request = None
                        self._handle(self.thread.reply((True, None)))
                    else:
                        self._drive("tcdm_req", 0)
                        self.request[2] = "data"
            elif state == "data":
                if s["tcdm_r_valid"] & FULL == FULL:
                    raw = s["tcdm_r_data"].to_bytes(4 * MP, "little")
                    self.request = None
                    self._handle(self.thread.reply((True, raw[off:off + txn.length])))
                else:
                    self.log.error("no r_valid the cycle after a read grant (0x%x)", txn.addr)
                    self.request = None
                    self._handle(self.thread.reply((False, None)))
        if self.thread is None and self.request is None and self.dev.running is not None:
            self.thread = LockstepThread(self._body, name="ne16")
            self._handle(self.thread.start())

    # ---- events -------------------------------------------------------------------------------
    def _events(self) -> None:
        evt = 0
        if self.ends:
            core = self.ends.pop(0)
            evt = 1 << (core * N_EVT)
        self._drive("evt_o", evt)
        self._drive("busy_o", int(self.dev.running is not None))
