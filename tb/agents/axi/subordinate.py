"""AXI subordinate memories on a design's AXI manager ports (device-neutral).

The bench's system memory is one sparse 40-bit byte store, ``BenchMemory`` (a
``tlm.core.memory.Memory``), served on every AXI manager port of the design (SRAM0, EXT0, ...) by
an ``AxiSubordinate``: the memory model of the bench and the single source of truth for
memory contents, for DUT=rtl and DUT=tlm alike.

* Binding: ``PortView(dut, "SRAM0")`` presents the TRM's suffix-named signals
  (``ARADDRSRAM0``) under cocotbext-axi's names (``araddr``), so the channel models bind with
  ``from_prefix(view, "")`` exactly as they do to a prefix-named bus.
* Channels: cocotbext-axi's stream models (``AxiWSink``, ``AxiBSource``, ``AxiRSource``) and
  two AW/AR sinks defined with cocotbext-axi's ``define_stream`` that also capture AxDOMAIN
  (AXI5), which cocotbext-axi's AXI4 channel definitions lack. The burst engine follows
  cocotbext-axi's ``AxiSlaveRead``/``AxiSlaveWrite`` (behind ``AxiRam``), with error
  responses chosen per address range (``inject_fault``), DECERR as well as SLVERR.
* Backpressure: ``set_pause_generator`` on every channel (cocotbext-axi pause generators);
  ``random_pause(seed, p)`` makes one.
* Latency: ``set_latency(read=, write=)`` per port (``AxiMemory.set_latency`` for all or some
  ports): extra cycles from the AR handshake to the first R beat, and from the AW handshake
  to the B response (never before the last W beat). A latency is an int (fixed), a
  ``(lo, hi)`` pair (uniform per burst, seeded) or ``callable(AxiBurst) -> int``. Latencies
  overlap as in a pipelined memory: a burst's wait runs while earlier bursts transfer.
* Read reordering: ``set_reorder(True)``: among the bursts whose latency has elapsed, the
  oldest burst of each ARID is a candidate and one is picked at random (seeded), so reads
  with different ARIDs complete out of order while reads with the same ARID stay in order.
  Whole bursts are reordered; beats of different bursts are never interleaved. B responses
  stay in AW order. A manager that uses one ARID (the DUT=tlm adapter issues one
  transaction, one ID, at a time) sees no reordering. ``stats`` counts the choices.
  The default is no extra latency and in-order service.
* Record: every burst is recorded as an ``AxiBurst`` (port, direction, ID, address,
  AxLEN/AxSIZE/AxBURST, AxPROT/AxCACHE/AxDOMAIN, response, the bytes moved, times) and
  handed to ``listeners`` (the scoreboard); AXI rule violations (4 KB crossing, AxSIZE
  wider than the bus, WLAST, strobes outside the beat, illegal WRAP) are collected in
  ``errors``.

Faults: a fault covers ``[lo, hi)`` for reads, writes or both, on some ports or all. A read
beat answers the fault's response when the bytes it addresses (from the burst address on the
first beat, the whole beat after) overlap the range; a write burst whose strobed bytes
overlap the range answers with the fault's BRESP and writes nothing (as
``tlm.core.memory.Memory`` treats a faulting access). Make fault ranges 16-byte aligned so that
"addressed bytes" means the same for any burst shape.

Usage::

    mem = BenchMemory()
    axi = AxiMemory(dut, mem)          # every port the design has; CLK/nRESET via the pin map
    mem.write(0x1000, data)                                     # backdoor
    axi.inject_fault(0x6000_0000, 0x6000_1000, "DECERR", kind="r", ports=("EXT0",))
    axi.set_backpressure(random_pause(seed=1, p=0.3))
    axi.set_latency(read=(0, 20), write=4, seed=3)                 # random 0..20 / fixed 4
    axi.set_reorder(True, seed=3)                                  # reads out of order by ID

Binding goes through the pin map (tb/core/pinmap.py): ``AxiMemory(dut, ..., pinmap=...)``.
"""
from __future__ import annotations

import itertools
import logging
import random
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterable

import cocotb
from cocotb.simtime import get_sim_time
from cocotb.triggers import Event, RisingEdge
from cocotbext.axi.axi_channels import AxiBBus, AxiBSource, AxiRBus, AxiRSource, AxiWBus, AxiWSink
from cocotbext.axi.reset import Reset
from cocotbext.axi.stream import define_stream

from tb.agents.axi.burst import (
    BURST_FIXED,
    BURST_INCR,
    BURST_WRAP,
    AxiBurst,
    beat_span,
    bus_bytes,
    lane_mask,
    random_pause,
    strobe_runs,
    to_int,
)
from tb.agents.axi.memory import BenchFault, BenchMemory
from tb.agents.axi.signals import PortView, port_present
from tlm.core.memory import Resp

# AW and AR with the AXI5 AxDOMAIN captured (cocotbext-axi's AXI4 definitions lack it).
NpuAxiAWBus, NpuAxiAWTransaction, _AWSource, NpuAxiAWSink, _ = define_stream(
    "NpuAxiAW",
    signals=["awid", "awaddr", "awlen", "awsize", "awburst", "awvalid", "awready"],
    optional_signals=["awcache", "awprot", "awdomain", "awlock", "awqos"],
    signal_widths={"awlen": 8, "awsize": 3, "awburst": 2, "awcache": 4, "awprot": 3,
                   "awdomain": 2})
NpuAxiARBus, NpuAxiARTransaction, _ARSource, NpuAxiARSink, _ = define_stream(
    "NpuAxiAR",
    signals=["arid", "araddr", "arlen", "arsize", "arburst", "arvalid", "arready"],
    optional_signals=["arcache", "arprot", "ardomain", "arlock", "arqos"],
    signal_widths={"arlen": 8, "arsize": 3, "arburst": 2, "arcache": 4, "arprot": 3,
                   "ardomain": 2})


class _StampedAWSink(NpuAxiAWSink):
    """AW sink that stamps each request with the simulation time of its handshake (``t_ns``)."""

    def _transaction_obj(self):
        t = NpuAxiAWTransaction()
        t.t_ns = get_sim_time("ns")
        return t


class _StampedARSink(NpuAxiARSink):
    def _transaction_obj(self):
        t = NpuAxiARTransaction()
        t.t_ns = get_sim_time("ns")
        return t


# cocotbext-axi's channel models log every reset edge at INFO; the bench's own AXI messages
# (rule violations) are errors and still show.
logging.getLogger("cocotb.tb.axi").setLevel(logging.WARNING)


def latency_fn(spec, rng: random.Random) -> "Callable[[AxiBurst], int] | None":
    """A latency spec (None/0, int, (lo, hi), or callable(AxiBurst) -> int) as a function,
    or None for no extra latency."""
    if spec is None or (isinstance(spec, int) and spec == 0):
        return None
    if callable(spec):
        return lambda rec: max(0, int(spec(rec)))
    if isinstance(spec, int):
        if spec < 0:
            raise ValueError(f"latency {spec} < 0")
        return lambda rec: spec
    try:
        lo, hi = (int(v) for v in spec)
    except (TypeError, ValueError):
        raise ValueError(f"latency {spec!r}: an int, a (lo, hi) pair or a callable") from None
    if not 0 <= lo <= hi:
        raise ValueError(f"latency range {spec!r}: need 0 <= lo <= hi")
    return lambda rec: rng.randint(lo, hi)


@dataclass
class _ReadReq:
    """A read burst accepted on AR and not yet served."""
    rec: AxiBurst
    ready_ns: float          # earliest time its first R beat may be handed to the channel


class AxiRules:
    """What both subordinates (this one and lean.LeanSubordinate) share: the latency and
    reorder knobs, the AXI rules checked on a request and the outstanding-burst limit; needs
    _rng, width, byte_lanes, max_size, port, max_outstanding, outstanding_limit and _error."""

    def set_latency(self, read=None, write=None, seed: "int | None" = None) -> None:
        """Extra cycles from the AR handshake to the first R beat (*read*) and from the AW
        handshake to the B response (*write*; the B also waits for the last W beat). Each is
        0/None (none), an int, a ``(lo, hi)`` pair (uniform per burst) or
        ``callable(AxiBurst) -> int``. *seed* reseeds the random choices."""
        if seed is not None:
            self._rng.seed(seed)
        self._rd_lat = latency_fn(read, self._rng)
        self._wr_lat = latency_fn(write, self._rng)

    def set_reorder(self, enabled: bool = True, seed: "int | None" = None) -> None:
        """Serve reads out of order across ARIDs (whole bursts; same-ID order kept)."""
        if seed is not None:
            self._rng.seed(seed)
        self.reorder = bool(enabled)

    def _check_w_beat(self, addr: int, length: int, n: int, strb: int, xlanes: int, last: int,
                      baddr: int, end: int, word: int) -> int:
        """AXI rules of W beat *n* of the AW burst at *addr*; returns the strobes limited to
        the beat's lanes (strobes may not cover lanes outside the transfer)."""
        if xlanes & strb:
            self._error(f"AW addr=0x{addr:x} beat {n}: X/Z on strobed WDATA lanes 0x{xlanes & strb:04x}")
        if last != int(n == length):
            self._error(f"AW addr=0x{addr:x} len={length}: WLAST={last} on beat {n}")
        allowed = lane_mask(baddr, end, word)
        if strb & ~allowed:
            self._error(f"AW addr=0x{addr:x} beat {n}: WSTRB 0x{strb:04x} outside the "
                        f"beat's lanes 0x{allowed:04x}")
            strb &= allowed
        return strb

    def _note_outstanding(self, n: int, write: bool) -> None:
        key = "w" if write else "r"
        if n > self.max_outstanding[key]:
            self.max_outstanding[key] = n
            lim = self.outstanding_limit(self.port, write) if self.outstanding_limit else None
            if lim is not None and n > lim:
                self._error(f"{n} {'write' if write else 'read'} bursts outstanding, the limit "
                            f"is {lim} (min(AXI_x, CFG_x_CAP) + 1)")

    def _check_shape(self, kind: str, addr: int, length: int, size: int, burst: int) -> int:
        """AXI rules of one request; returns the aligned start address."""
        nbytes = 1 << size
        if size > self.max_size:
            self._error(f"{kind} addr=0x{addr:x}: AxSIZE={size} wider than the {self.width}-bit bus")
            nbytes = self.byte_lanes
        beats = length + 1
        aligned = addr - addr % nbytes
        if burst == BURST_INCR:
            if (aligned & 0xFFF) + nbytes * beats > 0x1000:
                self._error(f"{kind} addr=0x{addr:x} len={length} size={size}: INCR burst crosses a "
                            "4 KB boundary")
        elif burst == BURST_WRAP:
            if beats not in (2, 4, 8, 16) or addr % nbytes:
                self._error(f"{kind} addr=0x{addr:x} len={length}: illegal WRAP burst")
        elif burst != BURST_FIXED:
            self._error(f"{kind} addr=0x{addr:x}: reserved AxBURST={burst}")
        return aligned


class AxiSubordinate(AxiRules, Reset):
    """A memory subordinate on one AXI manager port of the design (``port`` = 'SRAM0', ...).

    Serves *memory* (a ``BenchMemory``), one burst at a time per direction, with the faults
    of *memory*; by default in order and with no extra latency, else as ``set_latency`` /
    ``set_reorder`` say. Records bursts (``listeners``, ``bursts`` if ``keep``) and AXI rule
    violations (``errors``). ``counts`` has bursts, error bursts and beats per direction.
    """

    def __init__(self, dut, port: str, memory: BenchMemory, clock, reset=None,
                 reset_active_level: bool = False, keep: int = 10_000, pinmap=None,
                 clock_period_ns: "float | None" = None):
        self.port = port
        self.memory = memory
        self.clock = clock
        self.log = logging.getLogger(f"cocotb.tb.axi.{port}")
        view = PortView(dut, port, pinmap)
        self.view = view
        self.aw = _StampedAWSink(NpuAxiAWBus.from_prefix(view, ""), clock, reset, reset_active_level)
        self.w = AxiWSink(AxiWBus.from_prefix(view, ""), clock, reset, reset_active_level)
        self.b = AxiBSource(AxiBBus.from_prefix(view, ""), clock, reset, reset_active_level)
        self.ar = _StampedARSink(NpuAxiARBus.from_prefix(view, ""), clock, reset, reset_active_level)
        self.r = AxiRSource(AxiRBus.from_prefix(view, ""), clock, reset, reset_active_level)
        for ch in (self.w, self.b, self.r):
            ch.queue_occupancy_limit = 2
        # Accept many requests ahead, as an interconnect does, so that the manager's
        # outstanding-transaction limit (not this model) is what bounds them.
        self.aw.queue_occupancy_limit = self.ar.queue_occupancy_limit = 64
        # (port, write) -> the manager's limit on outstanding bursts, or None: checked
        # against the bursts this subordinate holds (a lower bound of the true count).
        self.outstanding_limit: "Callable[[str, bool], int | None] | None" = None
        self.max_outstanding = {"r": 0, "w": 0}
        self.width = len(self.w.bus.wdata)
        self.byte_lanes = self.width // 8
        self.max_size = (self.byte_lanes - 1).bit_length()
        self.addr_mask = (1 << len(self.ar.bus.araddr)) - 1
        if hasattr(view, "aclken"):
            view.aclken.value = 1
        self.listeners: list[Callable[[AxiBurst], None]] = []
        self.bursts: deque = deque(maxlen=keep)
        self.errors: list[str] = []
        self.counts = {"r": 0, "w": 0, "r_err": 0, "w_err": 0, "r_beats": 0, "w_beats": 0}
        # latency / reordering (set_latency, set_reorder); the defaults keep the original
        # in-order, no-extra-latency service
        self.period_ns = clock_period_ns
        self._period_known = Event()
        if clock_period_ns:
            self._period_known.set()
        self._rng = random.Random(0)
        self._rd_lat = self._wr_lat = None
        self.reorder = False
        # multi_id_picks: picks made while reads of two or more ARIDs were pending;
        # reordered: picks of a burst younger than the oldest pending one
        self.stats = {"multi_id_picks": 0, "reordered": 0}
        self._rd_pending: "list[_ReadReq]" = []
        self._b_pending: deque = deque()          # (due_ns, b, rec) in AW order
        self._b_event = Event()
        self._last_b_due = 0.0
        self._read_cr = None
        self._write_cr = None
        self._b_cr = None
        self._period_cr = None
        self._init_reset(reset, reset_active_level)

    # ------------------------------------------------------------------ controls
    def set_pause_generator(self, gen_factory: "Callable[[], Iterable[int]] | None") -> None:
        """Backpressure: ``gen_factory()`` makes one pause generator per channel (AW/W/AR
        READY and B/R VALID); None removes it."""
        for ch in (self.aw, self.w, self.b, self.ar, self.r):
            ch.set_pause_generator(None if gen_factory is None else gen_factory())

    @property
    def _scheduled_reads(self) -> bool:
        return self.reorder or self._rd_lat is not None

    def _handle_reset(self, state) -> None:
        if state:
            for cr in (self._read_cr, self._write_cr, self._b_cr):
                if cr is not None:
                    cr.cancel()
            self._read_cr = self._write_cr = self._b_cr = None
            for ch in (self.aw, self.w, self.b, self.ar, self.r):
                ch.clear()
            self._rd_pending.clear()
            self._b_pending.clear()
            self._last_b_due = 0.0
        else:
            if self._read_cr is None:
                self._read_cr = cocotb.start_soon(self._process_read())
            if self._write_cr is None:
                self._write_cr = cocotb.start_soon(self._process_write())
            if self._b_cr is None:
                self._b_cr = cocotb.start_soon(self._process_b())
            if self.period_ns is None and self._period_cr is None:
                self._period_cr = cocotb.start_soon(self._measure_period())

    async def _measure_period(self) -> None:
        await RisingEdge(self.clock)
        t0 = self._now()
        await RisingEdge(self.clock)
        self.period_ns = self._now() - t0
        self._period_known.set()

    async def _cycles_to_ns(self, cycles: int) -> float:
        if cycles <= 0:
            return 0.0
        if self.period_ns is None:
            await self._period_known.wait()
        return cycles * self.period_ns

    async def _until(self, t_ns: float) -> None:
        """Wait for the first rising edge at or after *t_ns* (now, if that has passed)."""
        eps = (self.period_ns or 1.0) / 4
        while self._now() < t_ns - eps:
            await RisingEdge(self.clock)

    def _error(self, msg: str) -> None:
        msg = f"{self.port}: {msg}"
        self.errors.append(msg)
        self.log.error("AXI rule: %s", msg)

    @staticmethod
    def _now() -> float:
        return get_sim_time("ns")

    def _publish(self, b: AxiBurst) -> None:
        b.end_ns = self._now()
        self.bursts.append(b)
        for fn in self.listeners:
            fn(b)

    def _check_outstanding(self, write: bool) -> None:
        if write:
            n = self.aw.count() + 1 + self.b.count() + len(self._b_pending)
        else:
            n = self.ar.count() + 1 + len(self._rd_pending)
        self._note_outstanding(n, write)


    # ------------------------------------------------------------------ read
    def _read_burst(self, ar) -> AxiBurst:
        return AxiBurst(self.port, False, to_int(ar.arid), to_int(ar.araddr), to_int(ar.arlen),
                        to_int(ar.arsize, self.max_size), to_int(ar.arburst, BURST_INCR),
                        to_int(getattr(ar, "arprot", 0)), to_int(getattr(ar, "arcache", 0)),
                        to_int(getattr(ar, "ardomain", 0)),
                        start_ns=getattr(ar, "t_ns", None) or self._now())

    async def _read_req(self, ar) -> _ReadReq:
        rec = self._read_burst(ar)
        lat = self._rd_lat(rec) if self._rd_lat is not None else 0
        return _ReadReq(rec, rec.start_ns + await self._cycles_to_ns(lat))

    async def _process_read(self) -> None:
        while True:
            if not self._scheduled_reads:
                # the original service: in AR order, as soon as possible
                if self._rd_pending:
                    req = self._rd_pending.pop(0)
                    await self._until(req.ready_ns)
                    rec = req.rec
                else:
                    ar = await self.ar.recv()
                    if self._scheduled_reads:      # latency/reordering switched on meanwhile
                        self._rd_pending.append(await self._read_req(ar))
                        continue
                    rec = self._read_burst(ar)
                await self._serve_read(rec)
                continue
            if not self._rd_pending and self.ar.empty():
                self._rd_pending.append(await self._read_req(await self.ar.recv()))
            req = await self._pick_read()
            await self._serve_read(req.rec)

    async def _drain_ar(self) -> None:
        while not self.ar.empty():
            self._rd_pending.append(await self._read_req(self.ar.recv_nowait()))

    async def _pick_read(self) -> _ReadReq:
        """The next read burst to serve: the oldest if in order, else a random one of the
        oldest bursts per ARID whose latency has elapsed."""
        while True:
            await self._drain_ar()
            if self._rd_pending:
                now = self._now()
                eps = (self.period_ns or 1.0) / 4
                if self.reorder:
                    seen, ready = set(), []
                    for req in self._rd_pending:
                        if req.rec.id in seen:
                            continue
                        seen.add(req.rec.id)
                        if req.ready_ns <= now + eps:
                            ready.append(req)
                else:
                    head = self._rd_pending[0]
                    ready = [head] if head.ready_ns <= now + eps else []
                if ready:
                    pick = ready[0]
                    if len(ready) > 1:
                        pick = self._rng.choice(ready)
                    if self.reorder and len(seen) > 1:
                        self.stats["multi_id_picks"] += 1
                    if pick is not self._rd_pending[0]:
                        self.stats["reordered"] += 1
                    self._rd_pending.remove(pick)
                    return pick
            await RisingEdge(self.clock)

    async def _serve_read(self, rec: AxiBurst) -> None:
        lanes = self.byte_lanes
        arid, addr, length, size, burst = rec.id, rec.addr, rec.len, rec.size, rec.burst
        self._check_shape("AR", addr, length, size, burst)
        beats = length + 1
        for n in range(beats):
            lo, hi, word = beat_span(addr, n, size, beats, burst, lanes, self.addr_mask)
            r = self.r._transaction_obj()
            r.rid = arid
            r.rlast = int(n == length)
            resp = self.memory.fault_for(self.port, lo, hi - lo, False)
            if resp is None:
                data = self.memory.read(word, lanes)
                r.rresp = Resp.OKAY
                rec.runs.append((lo, data[lo - word:hi - word]))
            else:
                data = bytes(lanes)
                r.rresp = int(resp)
                if rec.resp == Resp.OKAY:
                    rec.resp = Resp(resp)
            r.rdata = int.from_bytes(data, "little")
            self._check_outstanding(False)
            await self.r.send(r)
            self.counts["r_beats"] += 1
        self.counts["r"] += 1
        if rec.resp != Resp.OKAY:
            self.counts["r_err"] += 1
        self._publish(rec)

    # ------------------------------------------------------------------ write
    async def _process_write(self) -> None:
        lanes = self.byte_lanes
        full = (1 << lanes) - 1
        while True:
            aw = await self.aw.recv()
            start = getattr(aw, "t_ns", None) or self._now()
            awid, addr = to_int(aw.awid), to_int(aw.awaddr)
            length, size = to_int(aw.awlen), to_int(aw.awsize, self.max_size)
            burst = to_int(aw.awburst, BURST_INCR)
            rec = AxiBurst(self.port, True, awid, addr, length, size, burst,
                           to_int(getattr(aw, "awprot", 0)), to_int(getattr(aw, "awcache", 0)),
                           to_int(getattr(aw, "awdomain", 0)), start_ns=start)
            self._check_shape("AW", addr, length, size, burst)
            beats = length + 1
            ops = []                                  # (addr, bytes) strobed runs
            for n in range(beats):
                baddr, end, word = beat_span(addr, n, size, beats, burst, lanes, self.addr_mask)
                self._check_outstanding(True)
                w = await self.w.recv()
                self.counts["w_beats"] += 1
                strb = to_int(getattr(w, "wstrb", full), full)
                data, xlanes = bus_bytes(w.wdata, lanes)
                strb = self._check_w_beat(addr, length, n, strb, xlanes, to_int(w.wlast), baddr, end, word)
                ops += strobe_runs(word, data, strb)
            resp = None
            for a, d in ops:
                resp = self.memory.fault_for(self.port, a, len(d), True)
                if resp is not None:
                    break
            b = self.b._transaction_obj()
            b.bid = awid
            if resp is None:
                for a, d in ops:
                    self.memory.write(a, d)
                b.bresp = Resp.OKAY
                rec.runs = ops
            else:
                b.bresp = int(resp)
                rec.resp = Resp(resp)
                rec.runs = ops                        # what was attempted (not written)
            lat = self._wr_lat(rec) if self._wr_lat is not None else 0
            if lat <= 0 and not self._b_pending:
                await self._send_b(b, rec)            # the original service
            else:
                # B no earlier than AW + latency, and in AW order (one ID or many)
                due = max(start + await self._cycles_to_ns(lat), self._last_b_due)
                self._last_b_due = due
                self._b_pending.append((due, b, rec))
                self._b_event.set()

    async def _send_b(self, b, rec: AxiBurst) -> None:
        await self.b.send(b)
        self.counts["w"] += 1
        if rec.resp != Resp.OKAY:
            self.counts["w_err"] += 1
        self._publish(rec)

    async def _process_b(self) -> None:
        """B responses held back by a write latency, each at its due time, in AW order."""
        while True:
            if not self._b_pending:
                self._b_event.clear()
                await self._b_event.wait()
                continue
            due, b, rec = self._b_pending[0]
            await self._until(due)
            self._b_pending.popleft()
            await self._send_b(b, rec)


class _SliceMemory:
    """The byte store cocotbext-axi's ``Memory`` slices (``mem[a:b]``, ``mem[a:b] = data``:
    one read a beat, one write a strobed run of a beat) over a ``BenchMemory``, counting R
    beats: ``BareRam``'s store."""

    def __init__(self, memory: BenchMemory, counts: dict):
        self.memory, self.counts = memory, counts

    def __len__(self) -> int:          # AxiRam takes addresses modulo this: any 40-bit one
        return 1 << 62

    def __getitem__(self, key: slice) -> bytes:
        self.counts["r_beats"] += 1
        return self.memory.read(key.start, key.stop - key.start)

    def __setitem__(self, key: slice, data) -> None:
        self.memory.write(key.start, bytes(data))


class BareRam:
    """What a bare cocotb bench puts on an AXI port: cocotbext-axi's ``AxiRam`` as it is (no
    burst records, listeners, faults, latency, reordering or rule checks), serving the
    ``BenchMemory`` and counting beats. tools/bench.py's baseline for the cost of the
    design itself under the simulator (``Env(..., bare=True)``)."""

    def __init__(self, dut, port: str, memory: BenchMemory, clock, reset=None, pinmap=None, **_):
        from cocotbext.axi import AxiBus, AxiRam
        self.port = port
        self.counts = {"r_beats": 0, "w_beats": 0}
        view = PortView(dut, port, pinmap)
        if hasattr(view, "aclken"):
            view.aclken.value = 1
        self.ram = AxiRam(AxiBus.from_prefix(view, ""), clock, reset, reset_active_level=False,
                          mem=_SliceMemory(memory, self.counts))
        w_recv = self.ram.write_if.w_channel.recv

        async def counted_recv():                # W beats (a beat may write 0..n strobe runs)
            self.counts["w_beats"] += 1
            return await w_recv()
        self.ram.write_if.w_channel.recv = counted_recv
        logging.getLogger(f"cocotb.{dut._name}").setLevel(logging.WARNING)   # per-burst INFO
        self.listeners: list = []
        self.bursts: list = []
        self.errors: list = []

    def _unsupported(self, *_, **__) -> None:
        raise ValueError(f"AXI port {self.port}: the bare AxiRam subordinate has no backpressure, "
                         "latency or reordering (TB_AXI_SUBORDINATE=lean or cocotbext)")

    set_pause_generator = set_latency = set_reorder = _unsupported


IMPLS = ("lean", "cocotbext")
IMPL_ENV = "TB_AXI_SUBORDINATE"


def subordinate_impl(impl: "str | None" = None) -> str:
    """The subordinate implementation: *impl*, else ``$TB_AXI_SUBORDINATE``, else 'lean'
    (``tb.agents.axi.lean.LeanSubordinate``); 'cocotbext' is ``AxiSubordinate`` (cocotbext-axi's
    channel models)."""
    import os
    if impl == "bare":                 # BareRam: Env(..., bare=True) only, not a bench choice
        return impl
    impl = impl or os.environ.get(IMPL_ENV) or "lean"
    if impl not in IMPLS:
        raise ValueError(f"AXI subordinate {impl!r} (${IMPL_ENV}): one of {', '.join(IMPLS)}")
    return impl


class AxiMemory:
    """The bench's memory system: one subordinate per AXI manager port of the design, all
    serving one ``BenchMemory``: ``LeanSubordinate`` (tb/agents/axi/lean.py, one coroutine for
    every port) or, with ``impl='cocotbext'`` (or ``TB_AXI_SUBORDINATE=cocotbext``),
    ``AxiSubordinate`` (cocotbext-axi's channel models, five coroutines a port). Pins are found
    through the pin map (tb/core/pinmap.py)."""

    def __init__(self, dut, memory: "BenchMemory | None" = None, clock=None, reset=None,
                 ports: Iterable[str] = (), pinmap=None,
                 clock_period_ns: "float | None" = None, impl: "str | None" = None):
        from tb.core.pinmap import PinMap
        pm = PinMap.coerce(pinmap)
        self.dut = dut
        self.memory = memory if memory is not None else BenchMemory()
        clock = clock if clock is not None else pm.get(dut, "CLK", required=True)
        reset = reset if reset is not None else pm.get(dut, "nRESET")
        names = [p for p in ports if port_present(dut, p, pm)]
        self.impl = subordinate_impl(impl)
        if self.impl == "lean":
            from tb.agents.axi.lean import LeanGroup, LeanSubordinate
            group = LeanGroup(clock, reset, clock_period_ns=clock_period_ns)
            self.ports = {p: LeanSubordinate(dut, p, self.memory, clock, reset, pinmap=pm,
                                             clock_period_ns=clock_period_ns, group=group)
                          for p in names}
        else:
            cls = BareRam if self.impl == "bare" else AxiSubordinate
            self.ports = {p: cls(dut, p, self.memory, clock, reset, pinmap=pm,
                                 clock_period_ns=clock_period_ns) for p in names}

    def can_feed(self) -> bool:
        """True when the subordinates can feed the AXI monitors their own samples."""
        return self.impl == "lean"

    def feed(self, monitors: dict) -> None:
        """Feed each ``AxiMonitor`` of *monitors* (port -> monitor, not started) from the
        subordinate of its port (``LeanSubordinate.feed``)."""
        for port, mon in monitors.items():
            self.ports[port].feed(mon)

    # back door
    def read(self, addr: int, length: int) -> bytes:
        return self.memory.read(addr, length)

    def write(self, addr: int, data) -> None:
        self.memory.write(addr, data)

    # faults
    def inject_fault(self, lo: int, hi: int, resp="SLVERR", kind: str = "rw",
                     ports: "Iterable[str] | None" = None) -> BenchFault:
        return self.memory.inject_fault(lo, hi, resp, kind, ports)

    def clear_faults(self) -> None:
        self.memory.clear_faults()

    # monitor
    def add_listener(self, fn: Callable[[AxiBurst], None]) -> None:
        for s in self.ports.values():
            s.listeners.append(fn)

    @property
    def errors(self) -> list:
        return [e for s in self.ports.values() for e in s.errors]

    def bursts(self) -> list:
        return sorted((b for s in self.ports.values() for b in s.bursts),
                      key=lambda b: (b.end_ns, b.port))

    def beats(self) -> int:
        """R and W beats moved on every port so far."""
        return sum(s.counts["r_beats"] + s.counts["w_beats"] for s in self.ports.values())

    def _select(self, ports):
        return [s for p, s in self.ports.items() if ports is None or p in ports]

    def set_backpressure(self, gen_factory: "Callable[[], Iterable[int]] | None") -> None:
        for s in self.ports.values():
            s.set_pause_generator(gen_factory)

    def random_backpressure(self, seed: int, p: float = 0.3) -> None:
        """Independent random READY/VALID pauses on every channel of every port."""
        counter = itertools.count()
        self.set_backpressure(lambda: random_pause(seed * 7919 + next(counter), p))

    def set_latency(self, read=None, write=None, ports: "Iterable[str] | None" = None,
                    seed: int = 0) -> None:
        """``AxiSubordinate.set_latency`` on *ports* (default all), each seeded apart."""
        for i, s in enumerate(self._select(ports)):
            s.set_latency(read, write, seed=seed * 7919 + i)

    def set_reorder(self, enabled: bool = True, ports: "Iterable[str] | None" = None,
                    seed: "int | None" = None) -> None:
        """Read reordering across ARIDs on *ports* (default all)."""
        for i, s in enumerate(self._select(ports)):
            s.set_reorder(enabled, seed=None if seed is None else seed * 7919 + 101 + i)

    def configure(self, latency=None, write_latency=None, reorder: bool = False,
                  backpressure: "float | None" = None, seed: int = 0) -> None:
        """One call for a sweep point: read latency (*latency*), write latency (defaults to
        the read one), read reordering and random backpressure probability."""
        self.set_latency(latency, latency if write_latency is None else write_latency, seed=seed)
        self.set_reorder(reorder, seed=seed)
        if backpressure:
            self.random_backpressure(seed, backpressure)
        else:
            self.set_backpressure(None)

    @property
    def stats(self) -> dict:
        out = {"multi_id_picks": 0, "reordered": 0}
        for s in self.ports.values():
            for k in out:
                out[k] += s.stats[k]
        return out
