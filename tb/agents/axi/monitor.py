"""Passive monitor of one AXI manager port (device-neutral).

``AxiMonitor(dut, port, clock, reset)`` rebuilds the same ``AxiBurst`` records as the
subordinates from the pins alone (whoever serves the port), counts handshakes and checks the
manager's VALID/payload stability.
"""
from __future__ import annotations

import logging
from collections import deque
from typing import Callable

import cocotb
from cocotb.simtime import get_sim_time
from cocotb.triggers import Event, FallingEdge, RisingEdge

from tb.agents.axi.burst import BURST_INCR, AxiBurst, beat_span, bus_bytes, lane_mask, strobe_runs
from tb.agents.axi.signals import pin_int, port_signals
from tlm.core.memory import Resp

# (channel, VALID, READY, LAST, payload the manager must hold while VALID waits for READY)
AXI_CHANNELS = (
    ("ar", "ARVALID", "ARREADY", None, ("ARID", "ARADDR", "ARLEN", "ARSIZE", "ARBURST", "ARPROT",
                                        "ARCACHE")),
    ("r", "RVALID", "RREADY", "RLAST", ()),
    ("aw", "AWVALID", "AWREADY", None, ("AWID", "AWADDR", "AWLEN", "AWSIZE", "AWBURST", "AWPROT",
                                        "AWCACHE")),
    ("w", "WVALID", "WREADY", "WLAST", ("WDATA", "WSTRB", "WLAST")),
    ("b", "BVALID", "BREADY", None, ()),
)
MANAGER_CHANNELS = ("ar", "aw", "w")


class AxiMonitor:
    """Passive monitor of one AXI manager port (TRM 5.8 names through the pin map): it only
    reads the pins, so it works whoever serves the port (the bench's ``AxiSubordinate`` or
    another bench's memory model).

    It samples at every falling edge of CLK while a VALID is high and sleeps until a VALID
    rises or nRESET falls otherwise (VALIDs change with the rising edge, as AXI drives
    them; a handshake needs a VALID high, so an edge with every VALID low has nothing to
    sample even while bursts are outstanding). Per handshake it counts (``count``: ``ar``, ``r``, ``rlast``, ``aw``,
    ``w``, ``wlast``, ``b``; zeroed while nRESET is low) and rebuilds bursts: AR + its R beats
    (per ID, in order), AW + its W beats (in AW order, W may lead AW) + B (per ID) become
    ``AxiBurst`` records with the same fields, byte runs and response as the subordinate
    records (``listeners`` get each at its last R beat / B; ``bursts`` keeps them). It checks
    the manager's rule that a VALID, once raised, stays high with a stable payload until
    READY (AR, AW, W), and that every R/B answers an outstanding request; violations go to
    ``errors``. ``outstanding()`` is (reads without their last R beat, writes without
    their B, AW without their WLAST)."""

    def __init__(self, dut, port: str, clock, reset=None, pinmap=None, keep: int = 10_000,
                 log: "logging.Logger | None" = None):
        self.port = port
        self.clock = clock
        self.reset = reset
        self.sigs = port_signals(dut, port, pinmap)
        if self.sigs is None:
            raise ValueError(f"the design has no AXI port {port}")
        self.lanes = len(self.sigs["WDATA"]) // 8
        self.addr_mask = (1 << len(self.sigs["ARADDR"])) - 1
        self.log = log or logging.getLogger(f"cocotb.tb.axi.{port}")
        self.count = {k: 0 for k in ("ar", "r", "rlast", "aw", "w", "wlast", "b")}
        self.errors: list[str] = []
        self.listeners: list[Callable[[AxiBurst], None]] = []
        self.bursts: deque = deque(maxlen=keep)
        self.cycle = 0
        self.resets = 0                     # times the counts were zeroed by nRESET
        self._pend: dict = {}               # channel -> payload held while VALID waits
        self._clear()
        self._task = None
        self._watchers: list = []
        self._wake = Event()

    def start(self) -> "AxiMonitor":
        if self._task is None:
            # one watcher a VALID (and nRESET) that wakes the sampling loop: cheaper than a
            # First() of their edges each time it sleeps (First starts a task per trigger)
            edges = [RisingEdge(self.sigs[v]) for _, v, _, _, _ in AXI_CHANNELS]
            if self.reset is not None:
                edges.append(FallingEdge(self.reset))
            self._watchers = [cocotb.start_soon(self._watch(e)) for e in edges]
            self._task = cocotb.start_soon(self._run())
        return self

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        for t in self._watchers:
            t.cancel()
        self._watchers = []

    async def _watch(self, edge) -> None:
        while True:
            await edge
            self._wake.set()

    def _clear(self) -> None:
        for k in self.count:
            self.count[k] = 0
        self._pend.clear()
        self._reads: dict = {}              # ARID -> deque of [AxiBurst, beats seen]
        self._aws: deque = deque()          # [AxiBurst, beats seen] waiting for W beats
        self._wbuf: deque = deque()         # W beats ahead of their AW
        self._writes: dict = {}             # AWID -> deque of AxiBurst waiting for B

    def _error(self, msg: str) -> None:
        msg = f"cycle {self.cycle} {self.port}: {msg}"
        if len(self.errors) < 50:
            self.log.error("AXI monitor: %s", msg)
        self.errors.append(msg)

    # ------------------------------------------------------------------ sampling
    async def _run(self) -> None:
        fall = FallingEdge(self.clock)
        while True:
            await fall
            self.cycle += 1
            if self.reset is not None and pin_int(self.reset, 0) != 1:
                if self.handshakes() or self._pend or self._wbuf:
                    self.resets += 1
                    self._clear()
                continue
            if not self._sample():
                # no VALID high: nothing can happen on the port before a VALID rises (bursts
                # still outstanding only wait for one), so sleep until then or a reset
                self._wake.clear()
                await self._wake.wait()

    def _sample(self) -> bool:
        """One falling edge; True if any VALID is high."""
        sigs, pend = self.sigs, self._pend
        en = pin_int(sigs["ACLKEN"], 1) if "ACLKEN" in sigs else 1
        any_valid = False
        for name, v, rdy, last, payload in AXI_CHANNELS:
            valid = pin_int(sigs[v])
            held = pend.get(name)
            now = None
            if held is not None or (valid and payload):
                now = tuple(pin_int(sigs[s], -1) for s in payload if s in sigs)
            if held is not None and (not valid or now != held):
                self._error(f"{v} dropped or payload changed before {rdy} (AXI: a manager "
                            "keeps VALID and the payload stable)")
            if not valid:
                pend.pop(name, None)
                continue
            any_valid = True
            if pin_int(sigs[rdy]) and en:
                self.count[name] += 1
                if last is not None and pin_int(sigs[last]):
                    self.count[name + "last"] += 1
                pend.pop(name, None)
                getattr(self, "_on_" + name)()
            elif name in MANAGER_CHANNELS:
                pend[name] = now
        return any_valid

    # ------------------------------------------------------------------ bursts
    def _request(self, d: str) -> AxiBurst:
        s = self.sigs

        def g(n, default=0):
            h = s.get(d + n)
            return default if h is None else pin_int(h, default)
        return AxiBurst(self.port, d == "AW", g("ID"), g("ADDR"), g("LEN"),
                        g("SIZE", (self.lanes - 1).bit_length()), g("BURST", BURST_INCR),
                        g("PROT"), g("CACHE"), g("DOMAIN"), start_ns=get_sim_time("ns"))

    def _publish(self, b: AxiBurst) -> None:
        b.end_ns = get_sim_time("ns")
        self.bursts.append(b)
        for fn in self.listeners:
            fn(b)

    def _on_ar(self) -> None:
        rec = self._request("AR")
        self._reads.setdefault(rec.id, deque()).append([rec, 0])

    def _on_r(self) -> None:
        s = self.sigs
        rid = pin_int(s["RID"]) if "RID" in s else 0
        q = self._reads.get(rid)
        if not q:
            self._error(f"R beat with RID={rid} and no read outstanding")
            return
        entry = q[0]
        rec, n = entry
        lo, hi, word = beat_span(rec.addr, n, rec.size, rec.beats, rec.burst, self.lanes, self.addr_mask)
        resp = Resp(pin_int(s["RRESP"], 3)) if "RRESP" in s else Resp.OKAY
        if resp == Resp.OKAY:
            data, _ = bus_bytes(s["RDATA"].value, self.lanes)
            rec.runs.append((lo, data[lo - word:hi - word]))
        elif rec.resp == Resp.OKAY:
            rec.resp = resp
        entry[1] = n + 1
        if entry[1] == rec.beats:
            q.popleft()
            self._publish(rec)

    def _on_aw(self) -> None:
        self._aws.append([self._request("AW"), 0])
        self._match_w()

    def _on_w(self) -> None:
        s = self.sigs
        full = (1 << self.lanes) - 1
        strb = pin_int(s["WSTRB"], full) if "WSTRB" in s else full
        self._wbuf.append((bus_bytes(s["WDATA"].value, self.lanes)[0], strb))
        self._match_w()

    def _match_w(self) -> None:
        while self._aws and self._wbuf:
            entry = self._aws[0]
            rec, n = entry
            data, strb = self._wbuf.popleft()
            baddr, end, word = beat_span(rec.addr, n, rec.size, rec.beats, rec.burst, self.lanes, self.addr_mask)
            rec.runs += strobe_runs(word, data, strb & lane_mask(baddr, end, word))
            entry[1] = n + 1
            if entry[1] == rec.beats:
                self._aws.popleft()
                self._writes.setdefault(rec.id, deque()).append(rec)

    def _on_b(self) -> None:
        s = self.sigs
        bid = pin_int(s["BID"]) if "BID" in s else 0
        q = self._writes.get(bid)
        if not q:
            self._error(f"B with BID={bid} and no write burst complete")
            return
        rec = q.popleft()
        rec.resp = Resp(pin_int(s["BRESP"], 3)) if "BRESP" in s else Resp.OKAY
        self._publish(rec)

    # ------------------------------------------------------------------ queries
    def outstanding(self) -> tuple:
        c = self.count
        return c["ar"] - c["rlast"], c["aw"] - c["b"], c["aw"] - c["wlast"]

    @property
    def busy(self) -> bool:
        return any(self.outstanding()) or bool(self._pend)

    @property
    def writes_sending(self) -> bool:
        """An AW without its WLAST yet, or an AW/W VALID waiting for READY."""
        return self.count["aw"] != self.count["wlast"] or "aw" in self._pend or "w" in self._pend

    def handshakes(self) -> int:
        c = self.count
        return c["ar"] + c["r"] + c["aw"] + c["w"] + c["b"]
