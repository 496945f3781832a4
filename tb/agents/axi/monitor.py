"""Passive monitor of one AXI manager port (device-neutral).

``AxiMonitor(dut, port, clock, reset)`` rebuilds the same ``AxiBurst`` records as the
subordinates from the pins alone (whoever serves the port), counts handshakes and checks the
manager's VALID/payload stability; or, fed by the bench's lean subordinate on the port
(``tb.agents.axi.lean``), does the same from that subordinate's samples.
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
_VALID_READY = {name: (v, r) for name, v, r, _, _ in AXI_CHANNELS}


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
    their B, AW without their WLAST).

    Fed (``fed``, set by ``LeanSubordinate.feed``): when the bench's own subordinate serves
    the port, the monitor starts no loop; the subordinate hands it, at each rising edge it
    samples, its samples of each channel with a VALID high (``channel``), nRESET
    (``fed_reset``) and each burst it completes (``record``): the counts, ``outstanding()``,
    ``busy`` and the VALID/payload-stability rule as before (now at the rising edge that
    completes a handshake; error messages carry the simulation time), the records being the
    subordinate's own instead of a second reconstruction from the same samples. A bench
    whose memory model is not this subordinate (``Env(axi_source="monitor")``,
    ``axi_monitor="pins"``) keeps the monitor sampling the pins and rebuilding bursts."""

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
        self.fed = False                    # True: a subordinate feeds it its samples (``feed_from``)

    def start(self) -> "AxiMonitor":
        if self._task is None and not self.fed:
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
        when = f"{get_sim_time('ns'):.0f} ns" if self.fed else f"cycle {self.cycle}"
        msg = f"{when} {self.port}: {msg}"
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
            if valid:
                any_valid = True
                hs = bool(pin_int(sigs[rdy]) and en)
                self.channel(name, True, hs, hs and last is not None and pin_int(sigs[last]),
                             now, self._pin)
            elif held is not None or name in pend:
                self.channel(name, False, False, False, now, self._pin)
        return any_valid

    def _pin(self, name: str, default=0):
        h = self.sigs.get(name)
        if h is None:
            return default
        return h.value if name in ("RDATA", "WDATA") else pin_int(h, default)

    def channel(self, name: str, valid: bool, hs: bool, last, now, get) -> None:
        """One channel at one sampling point: VALID, the handshake, LAST, the payload (a
        sequence compared with the next sample's while VALID waits; -1 for X/Z) and
        *get(signal, default)* for the values of a handshake, from which the burst records
        are rebuilt (RDATA/WDATA: an int or the handle's value). The pin-sampling loop calls
        it; so does a subordinate that feeds the monitor (``fed``) with *get* None: the
        counts and the VALID/payload rule, the records being the subordinate's (``record``)."""
        pend = self._pend
        held = pend.get(name)
        if held is not None and (not valid or now != held):
            v, rdy = _VALID_READY[name]
            self._error(f"{v} dropped or payload changed before {rdy} (AXI: a manager "
                        "keeps VALID and the payload stable)")
        if not valid:
            pend.pop(name, None)
            return
        if hs:
            self.fed_handshake(name, last)
            pend.pop(name, None)
            if get is not None:
                getattr(self, "_on_" + name)(get)
        elif name in MANAGER_CHANNELS:
            pend[name] = now

    def fed_handshake(self, name: str, last) -> None:
        """A handshake on channel *name* counted (with its LAST). A feeding subordinate calls
        it for an R beat or B response it handed over: ``channel(name, True, True, last,
        None, None)`` for a subordinate channel (never held, so no stability check)."""
        c = self.count
        c[name] += 1
        if last:
            c[name + "last"] += 1

    def record(self, b: AxiBurst) -> None:
        """A burst the feeding subordinate completed (fed mode)."""
        self.bursts.append(b)
        for fn in self.listeners:
            fn(b)

    def fed_reset(self) -> None:
        """nRESET seen low by the subordinate that feeds this monitor."""
        if self.handshakes() or self._pend or self._wbuf:
            self.resets += 1
            self._clear()

    # ------------------------------------------------------------------ bursts
    def _request(self, d: str, get) -> AxiBurst:
        def g(n, default=0):
            return get(d + n, default)
        return AxiBurst(self.port, d == "AW", g("ID"), g("ADDR"), g("LEN"),
                        g("SIZE", (self.lanes - 1).bit_length()), g("BURST", BURST_INCR),
                        g("PROT"), g("CACHE"), g("DOMAIN"), start_ns=get_sim_time("ns"))

    def _publish(self, b: AxiBurst) -> None:
        b.end_ns = get_sim_time("ns")
        self.bursts.append(b)
        for fn in self.listeners:
            fn(b)

    def _on_ar(self, get) -> None:
        rec = self._request("AR", get)
        self._reads.setdefault(rec.id, deque()).append([rec, 0])

    def _on_r(self, get) -> None:
        rid = get("RID", 0)
        q = self._reads.get(rid)
        if not q:
            self._error(f"R beat with RID={rid} and no read outstanding")
            return
        entry = q[0]
        rec, n = entry
        lo, hi, word = beat_span(rec.addr, n, rec.size, rec.beats, rec.burst, self.lanes, self.addr_mask)
        resp = Resp(get("RRESP", 3) & 3) if "RRESP" in self.sigs else Resp.OKAY
        if resp == Resp.OKAY:
            data, _ = bus_bytes(get("RDATA", 0), self.lanes)
            rec.runs.append((lo, data[lo - word:hi - word]))
        elif rec.resp == Resp.OKAY:
            rec.resp = resp
        entry[1] = n + 1
        if entry[1] == rec.beats:
            q.popleft()
            self._publish(rec)

    def _on_aw(self, get) -> None:
        self._aws.append([self._request("AW", get), 0])
        self._match_w()

    def _on_w(self, get) -> None:
        full = (1 << self.lanes) - 1
        strb = get("WSTRB", full)
        self._wbuf.append((bus_bytes(get("WDATA", 0), self.lanes)[0], strb))
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

    def _on_b(self, get) -> None:
        bid = get("BID", 0)
        q = self._writes.get(bid)
        if not q:
            self._error(f"B with BID={bid} and no write burst complete")
            return
        rec = q.popleft()
        rec.resp = Resp(get("BRESP", 3) & 3) if "BRESP" in self.sigs else Resp.OKAY
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
