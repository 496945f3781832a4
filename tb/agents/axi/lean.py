"""A lean AXI subordinate memory (device-neutral): the bench's default server of its memory.

``LeanSubordinate`` does what ``tb.agents.axi.subordinate.AxiSubordinate`` (built on
cocotbext-axi's channel models) does, with the same controls, records and checks, at a
fraction of its cost per clock cycle:

* one coroutine per clock (``LeanGroup``, shared by every port of an ``AxiMemory``) resumes
  at each rising edge and steps every port: it reads the raw pins (handles looked up once),
  completes the handshakes of that edge, and drives the next cycle's READY/VALID and
  payloads, writing a pin only when its value changes;
* a port sleeps while its AW/W/AR VALIDs are low and nothing is pending on it (no burst
  accepted and not answered, no backpressure pattern running) and is skipped until one of
  its VALIDs rises, a control changes (pause, pause generator) or the reset is asserted; the
  coroutine sleeps while every port does;
* a read burst is served from one memory read when no fault overlaps it (faults are then
  checked beat by beat); a write burst is checked and written when its last W beat arrives.

The same as ``AxiSubordinate``: ``memory`` (a ``BenchMemory``), its faults per port (SLVERR /
DECERR per read beat, per write burst), ``set_latency`` / ``set_reorder`` (same semantics,
seeded), backpressure by pause generators per channel (``aw``, ``w``, ``b``, ``ar``, ``r``:
``set_pause_generator``, ``pause``; ``set_pause_generator`` on the subordinate sets all five),
``listeners`` / ``bursts`` (``AxiBurst`` records), ``errors`` (the AXI rules of
``AxiSubordinate``: 4 KB crossing, AxSIZE wider than the bus, illegal WRAP, reserved AxBURST,
WLAST, strobes outside the beat, X/Z on strobed WDATA lanes, more bursts outstanding than
``outstanding_limit`` allows), ``counts``, ``stats``, ``max_outstanding``.

Differences (all within AXI): the first R beat can come the cycle after the AR handshake
(one cycle earlier than the cocotbext-axi channel pipeline), B the cycle after the last W
beat; B responses queue without a limit (the manager's outstanding limit is what bounds
them); up to 64 read and 64 write bursts are accepted ahead. Outstanding bursts are counted
from the AR/AW handshake to the last R beat / B handshake (the manager's own count).

``feed(monitor)`` makes an ``AxiMonitor`` on the same port take its samples from this
subordinate (``AxiMonitor.channel``) instead of sampling the pins itself: the same records,
counts and VALID/payload-stability checks, without a second coroutine per port.

Pins are written through cocotb's deferred-write queue (``cocotb.handle._schedule_write``,
applied in the ReadWrite phase, as ``handle.value = x`` does) and read through the GPI
handle's bit string (as ``tb.agents.axi.signals.pin_int``): both are cocotb 2.1 internals
(pyproject pins cocotb <2.2), used here because they are most of the cost of a cycle.
"""
from __future__ import annotations

import logging
import random
from collections import deque
from typing import Callable, Iterable

import cocotb
from cocotb import simulator
from cocotb.simtime import get_sim_time
from cocotb.triggers import Event, FallingEdge, RisingEdge

from tb.agents.axi.burst import (
    BURST_INCR,
    AxiBurst,
    beat_span,
    strobe_runs,
)
from tb.agents.axi.memory import BenchMemory
from tb.agents.axi.signals import port_signals
from tb.agents.axi.subordinate import AxiRules
from tlm.core.memory import Resp

try:                                     # cocotb 2.1: the deferred write of ``handle.value = x``
    from cocotb.handle import _GPISetAction, _schedule_write
    _DEPOSIT = _GPISetAction.DEPOSIT
except ImportError:                      # pragma: no cover - another cocotb: the public setter
    _schedule_write = None

_REQ = ("ID", "ADDR", "LEN", "SIZE", "BURST", "PROT", "CACHE", "DOMAIN")
QUEUE_LIMIT = 64                         # AR / AW requests accepted ahead
W_AHEAD = 2                              # W beats accepted ahead of their AW


def _ints(getters) -> list:
    """Values of the pins read by *getters* (bit-string getters, None = absent: -2), -1 for X/Z."""
    try:                                 # no X/Z: one pass
        return [-2 if g is None else int(g(), 2) for g in getters]
    except ValueError:
        pass
    out = []
    for g in getters:
        if g is None:
            out.append(-2)
            continue
        try:
            out.append(int(g(), 2))
        except ValueError:
            out.append(-1)
    return out


def _pin(getter) -> int:
    """The value of one present pin (its bit-string getter), -1 for X/Z."""
    try:
        return int(getter(), 2)
    except ValueError:
        return -1


class _Out:
    """An output pin: written (deferred to ReadWrite, as ``handle.value = x``) only when the
    value changes."""
    __slots__ = ("handle", "write", "fmt", "last")

    def __init__(self, handle):
        self.handle = handle
        n = len(handle)
        raw = handle._handle
        self.write, self.fmt = ((raw.set_signal_val_int, None) if n <= 32
                                else (raw.set_signal_val_binstr, f"0{n}b"))
        self.last = None

    def set(self, v: int) -> None:
        if v == self.last:
            return
        self.last = v
        if _schedule_write is None:
            self.handle.value = v
        else:
            _schedule_write(self.handle, self.write, _DEPOSIT, v if self.fmt is None else format(v, self.fmt))


class Channel:
    """Backpressure control of one channel, as cocotbext-axi's ``pause`` /
    ``set_pause_generator`` (a new pause value each cycle from the generator; the last value
    stays when it ends). ``queue_occupancy_limit`` is accepted for compatibility (B
    responses queue without a limit here)."""

    def __init__(self, owner: "LeanSubordinate"):
        self._owner = owner
        self._pause = False
        self.gen = None
        self.queue_occupancy_limit = -1

    @property
    def pause(self) -> bool:
        return self._pause

    @pause.setter
    def pause(self, v) -> None:
        self._pause = bool(v)
        self._owner.poke()              # the next cycle's READY/VALID follow it

    def set_pause_generator(self, gen: "Iterable[int] | None" = None) -> None:
        self.gen = None if gen is None else iter(gen)
        self._owner._gens_changed()

    def clear_pause_generator(self) -> None:
        self.set_pause_generator(None)

    def step(self) -> None:
        try:
            self._pause = bool(next(self.gen))
        except StopIteration:
            self.gen = None
            self._owner._gens_changed()


_NO_PEND: dict = {}


class _ReadReq:
    __slots__ = ("rec", "ready_ns")

    def __init__(self, rec: AxiBurst, ready_ns: float):
        self.rec = rec
        self.ready_ns = ready_ns


class LeanSubordinate(AxiRules):
    """A memory subordinate on one AXI manager port (``port``), bound through the pin map;
    see the module docstring. Stepped by a ``LeanGroup`` (its own unless *group* is given)."""

    def __init__(self, dut, port: str, memory: BenchMemory, clock, reset=None,
                 reset_active_level: bool = False, keep: int = 10_000, pinmap=None,
                 clock_period_ns: "float | None" = None, group: "LeanGroup | None" = None):
        self.port = port
        self.memory = memory
        self.clock = clock
        self.log = logging.getLogger(f"cocotb.tb.axi.{port}")
        sigs = port_signals(dut, port, pinmap)
        if sigs is None:
            raise ValueError(f"the design has no AXI port {port}")
        self.sigs = sigs
        self.width = len(sigs["WDATA"])
        self.byte_lanes = self.width // 8
        self.max_size = (self.byte_lanes - 1).bit_length()
        self.addr_mask = (1 << len(sigs["ARADDR"])) - 1
        self.full_strb = (1 << self.byte_lanes) - 1
        # inputs of the subordinate (the manager's outputs), as the GPI handles' bit-string
        # getters ("1" is high; X/Z read as low or as -1 in a payload); absent optional pins
        # read their defaults
        raw = {n: h._handle.get_signal_val_binstr for n, h in sigs.items()}
        self._arvalid, self._awvalid, self._wvalid = raw["ARVALID"], raw["AWVALID"], raw["WVALID"]
        self._rready, self._bready = raw["RREADY"], raw["BREADY"]
        # request fields in _REQ order (None: absent pin -> default)
        self._ar = tuple(raw.get("AR" + f) for f in _REQ)
        self._aw = tuple(raw.get("AW" + f) for f in _REQ)
        self._wdata = raw["WDATA"]
        self._wstrb = raw.get("WSTRB")
        self._wlast = raw.get("WLAST")
        # outputs
        self._o = {n: _Out(sigs[n]) for n in ("ARREADY", "AWREADY", "WREADY", "RVALID", "RDATA",
                                              "RID", "RRESP", "RLAST", "BVALID", "BID", "BRESP")
                   if n in sigs}
        o = self._o
        self._o_rvalid, self._o_rdata, self._o_bvalid = o["RVALID"], o["RDATA"], o["BVALID"]
        self._o_rid, self._o_rresp, self._o_rlast = o.get("RID"), o.get("RRESP"), o.get("RLAST")
        if "ACLKEN" in sigs:
            sigs["ACLKEN"].value = 1
        self.aw, self.w, self.b, self.ar, self.r = (Channel(self) for _ in range(5))
        self._chans = (self.aw, self.w, self.b, self.ar, self.r)
        self._gens: list = []
        self.outstanding_limit: "Callable[[str, bool], int | None] | None" = None
        self.max_outstanding = {"r": 0, "w": 0}
        self.listeners: list[Callable[[AxiBurst], None]] = []
        self.bursts: deque = deque(maxlen=keep)
        self.errors: list[str] = []
        self.counts = {"r": 0, "w": 0, "r_err": 0, "w_err": 0, "r_beats": 0, "w_beats": 0}
        self.stats = {"multi_id_picks": 0, "reordered": 0}
        self._rng = random.Random(0)
        self._rd_lat = self._wr_lat = None
        self.reorder = False
        self.monitor = None
        self.awake = True                   # stepped at every edge (else: until a VALID rises)
        self._clear()
        self.group = group if group is not None else LeanGroup(clock, reset, reset_active_level,
                                                               clock_period_ns)
        self.group.add(self)

    # ------------------------------------------------------------------ controls
    def set_pause_generator(self, gen_factory: "Callable[[], Iterable[int]] | None") -> None:
        """Backpressure: ``gen_factory()`` makes one pause generator per channel (AW/W/AR
        READY and B/R VALID); None removes them."""
        for ch in self._chans:
            ch.set_pause_generator(None if gen_factory is None else gen_factory())
            if gen_factory is None:
                ch.pause = False

    def _gens_changed(self) -> None:
        self._gens = [ch for ch in self._chans if ch.gen is not None]
        if self._gens:
            self.poke()

    def poke(self) -> None:
        """Step this port from the next rising edge on (a control changed)."""
        self.awake = True
        group = getattr(self, "group", None)
        if group is not None:
            group.wake()

    def feed(self, monitor) -> None:
        """Feed *monitor* (an ``AxiMonitor`` of this port, not started) with this subordinate's
        samples."""
        monitor.fed = True
        self.monitor = monitor

    # ------------------------------------------------------------------ state
    def _clear(self) -> None:
        self._rd: list = []                 # _ReadReq accepted, not yet being served
        self._rcur = None                   # [rec, beat index, beats, per-beat (data, resp) or None]
        self._rbeat = None                  # (rdata, rid, rresp, rlast) driven, or None
        self._awq: deque = deque()          # [rec, beat index, ops, start_ns, plain] waiting for W beats
        self._wbuf: deque = deque()         # (data, strb, last, xlanes) ahead of their AW
        self._bq: deque = deque()           # (due_ns, rec) in AW order, latency running
        self._bsend: deque = deque()        # recs due, published, B not yet driven
        self._bcur = None                   # rec whose B is driven
        self._last_b_due = 0.0
        self._wr_open = 0                   # write bursts from AW handshake to B handshake
        self._ready = [0, 0, 0]             # ARREADY, AWREADY, WREADY as driven

    def _reset(self) -> None:
        """nRESET asserted: drop every burst, drive the outputs inactive."""
        self._clear()
        for n in ("ARREADY", "AWREADY", "WREADY", "RVALID", "BVALID"):
            if n in self._o:
                self._o[n].set(0)
        if self.monitor is not None:
            self.monitor.fed_reset()

    def _error(self, msg: str) -> None:
        msg = f"{self.port}: {msg}"
        self.errors.append(msg)
        self.log.error("AXI rule: %s", msg)

    def _publish(self, b: AxiBurst, now: float) -> None:
        b.end_ns = now
        self.bursts.append(b)
        for fn in self.listeners:
            fn(b)
        if self.monitor is not None:
            self.monitor.record(b)

    def _request(self, v: list, write: bool, now: float) -> AxiBurst:
        """The record of an AR/AW request from its fields (``_REQ`` order; X/Z or absent:
        the default, as ``AxiSubordinate`` reads them)."""
        i, a, ln, sz, bu, pr, ca, do = v
        return AxiBurst(self.port, write, i if i >= 0 else 0, a if a >= 0 else 0, ln if ln >= 0 else 0,
                        sz if sz >= 0 else self.max_size, bu if bu >= 0 else BURST_INCR,
                        pr if pr >= 0 else 0, ca if ca >= 0 else 0, do if do >= 0 else 0, start_ns=now)

    # ------------------------------------------------------------------ one rising edge
    def step(self, now: float, period: float) -> bool:
        """The handshakes of this rising edge and the outputs of the next cycle; True while
        the port needs stepping (a VALID high, anything pending, a pause pattern running)."""
        for ch in self._gens:
            ch.step()
        mon = self.monitor
        o = self._o
        arv, awv, wv = self._arvalid() == "1", self._awvalid() == "1", self._wvalid() == "1"
        # ---- R beat / B response handed over at this edge
        if self._rbeat is not None and self._rready() == "1":
            self._r_done(now, mon)
        if self._bcur is not None and self._bready() == "1":
            self._bcur = None               # B handshake (published when it became due)
            self._wr_open -= 1
            if mon is not None:
                mon.fed_handshake("b", False)
        pend = mon._pend if mon is not None else _NO_PEND
        # ---- AR
        if arv or "ar" in pend:
            vals = _ints(self._ar) if arv else None
            hs = arv and self._ready[0]
            if mon is not None:
                mon.channel("ar", arv, hs, False, vals, None)
            if hs:
                rec = self._request(vals, False, now)
                lat = self._rd_lat(rec) if self._rd_lat is not None else 0
                self._rd.append(_ReadReq(rec, now + lat * period))
                self._note_outstanding(len(self._rd) + (self._rcur is not None), False)
        # ---- AW
        if awv or "aw" in pend:
            vals = _ints(self._aw) if awv else None
            hs = awv and self._ready[1]
            if mon is not None:
                mon.channel("aw", awv, hs, False, vals, None)
            if hs:
                rec = self._request(vals, True, now)
                self._check_shape("AW", rec.addr, rec.len, rec.size, rec.burst)
                # [rec, beat index, ops, start, plain: full-width INCR from a bus word, no wrap]
                plain = (rec.burst == BURST_INCR and rec.size == self.max_size and not rec.addr % self.byte_lanes
                         and rec.addr + (rec.len + 1) * self.byte_lanes - 1 <= self.addr_mask)
                self._awq.append([rec, 0, [], now, plain])
                self._wr_open += 1
                self._note_outstanding(self._wr_open, True)
        # ---- W
        if wv or "w" in pend:
            hs = False
            if wv:
                s = self._wdata()
                try:
                    data, xl = int(s, 2), 0
                except ValueError:
                    data, xl = _x_lanes(s, self.byte_lanes)
                strb = self.full_strb if self._wstrb is None else _pin(self._wstrb)
                last = 1 if self._wlast is None else _pin(self._wlast)
                hs = self._ready[2]
            if mon is not None:
                mon.channel("w", wv, hs, hs and last == 1, (data if not xl else -1, strb, last) if wv else None,
                            None)
            if hs:
                self.counts["w_beats"] += 1
                self._wbuf.append((data, strb, last, xl))
        if self._wbuf and self._awq:
            self._match_w(now, period)
        # ---- the next cycle's outputs
        ar_ready = 0 if self.ar._pause or len(self._rd) >= QUEUE_LIMIT else 1
        aw_ready = 0 if self.aw._pause or len(self._awq) >= QUEUE_LIMIT else 1
        w_ready = 0 if self.w._pause or (len(self._wbuf) >= W_AHEAD and not self._awq) else 1
        rdy = self._ready
        if rdy[0] != ar_ready:
            o["ARREADY"].set(ar_ready)
            rdy[0] = ar_ready
        if rdy[1] != aw_ready:
            o["AWREADY"].set(aw_ready)
            rdy[1] = aw_ready
        if rdy[2] != w_ready:
            o["WREADY"].set(w_ready)
            rdy[2] = w_ready
        if self._rbeat is None:
            if not self.r._pause and (self._rcur is not None or self._rd):
                self._r_next(now, period)
            if self._rbeat is None and self._o_rvalid.last != 0:
                self._o_rvalid.set(0)
        bq = self._bq
        while bq and bq[0][0] <= now + period / 4:        # due: written, handed to the B channel
            rec = bq.popleft()[1]
            self._bsend.append(rec)
            self.counts["w"] += 1
            if rec.resp != Resp.OKAY:
                self.counts["w_err"] += 1
            self._publish(rec, now)
        if self._bcur is None:
            if self._bsend and not self.b._pause:
                self._bcur = rec = self._bsend.popleft()
                o["BVALID"].set(1)
                if "BID" in o:
                    o["BID"].set(rec.id)
                if "BRESP" in o:
                    o["BRESP"].set(int(rec.resp))
            elif self._o_bvalid.last != 0:
                self._o_bvalid.set(0)
        return bool(arv or awv or wv or self._rd or self._rcur is not None or self._rbeat is not None
                    or self._awq or self._wbuf or self._bq or self._bsend or self._bcur is not None or self._gens
                    or (mon is not None and mon._pend))

    # ------------------------------------------------------------------ read
    def _r_next(self, now: float, period: float) -> None:
        """Drive the next R beat (picking the next burst if none is being served)."""
        cur = self._rcur
        if cur is None:
            req = self._pick_read(now, period)
            if req is None:
                return
            cur = self._rcur = self._start_read(req.rec)
        rec, n, beats, per = cur[0], cur[1], cur[2], cur[3]
        if per is None:                     # no fault on the burst: one read, sliced
            resp, data = 0, cur[4][n]
        else:
            resp, data = per[n]
        last = 1 if n == beats - 1 else 0
        self._rbeat = (data, rec.id, resp, last)
        # each pin written only when its value changes (_Out.set; the test inline saves the
        # call: RVALID, RID and RRESP hold through a burst)
        out = self._o_rvalid
        if out.last != 1:
            out.set(1)
        self._o_rdata.set(data)
        out = self._o_rid
        if out is not None and out.last != rec.id:
            out.set(rec.id)
        out = self._o_rresp
        if out is not None and out.last != resp:
            out.set(resp)
        out = self._o_rlast
        if out is not None and out.last != last:
            out.set(last)

    def _start_read(self, rec: AxiBurst) -> list:
        """Check the burst and compute its beats: [rec, beat index, beats, per-beat (resp,
        data) when a fault overlaps, per-beat data otherwise]."""
        self._check_shape("AR", rec.addr, rec.len, rec.size, rec.burst)
        lanes, mem, port = self.byte_lanes, self.memory, self.port
        beats = rec.len + 1
        addr = rec.addr
        word0 = addr - addr % lanes
        contiguous = (rec.burst == BURST_INCR and rec.size == self.max_size
                      and word0 + beats * lanes - 1 <= self.addr_mask)
        if contiguous:                      # full-width INCR: beat n is bus word n
            spans = [(word0 + n * lanes, word0 + (n + 1) * lanes, word0 + n * lanes)
                     for n in range(beats)]
            spans[0] = (addr, word0 + lanes, word0)
            lo, hi = addr, word0 + beats * lanes
        else:
            spans = [beat_span(addr, n, rec.size, beats, rec.burst, lanes, self.addr_mask)
                     for n in range(beats)]
            lo = min(s[0] for s in spans)
            hi = max(s[1] for s in spans)
        words = []
        if mem.faults and mem.fault_for(port, lo, hi - lo, False) is not None:
            per = []
            for blo, bhi, word in spans:
                resp = mem.fault_for(port, blo, bhi - blo, False)
                if resp is None:
                    data = mem.read(word, lanes)
                    rec.runs.append((blo, data[blo - word:bhi - word]))
                    per.append((0, int.from_bytes(data, "little")))
                else:
                    per.append((int(resp), 0))
                    if rec.resp == Resp.OKAY:
                        rec.resp = Resp(resp)
            return [rec, 0, beats, per, None]
        if contiguous:
            block = mem.read(spans[0][2], beats * lanes)
            for n, (blo, bhi, word) in enumerate(spans):
                off = n * lanes
                chunk = block[off:off + lanes]
                rec.runs.append((blo, chunk[blo - word:bhi - word]))
                words.append(int.from_bytes(chunk, "little"))
        else:
            for blo, bhi, word in spans:
                data = mem.read(word, lanes)
                rec.runs.append((blo, data[blo - word:bhi - word]))
                words.append(int.from_bytes(data, "little"))
        return [rec, 0, beats, None, words]

    def _r_done(self, now: float, mon) -> None:
        data, rid, resp, last = self._rbeat
        self._rbeat = None
        self.counts["r_beats"] += 1
        if mon is not None:
            mon.fed_handshake("r", last)
        cur = self._rcur
        cur[1] += 1
        if cur[1] == cur[2]:
            rec = cur[0]
            self._rcur = None
            self.counts["r"] += 1
            if rec.resp != Resp.OKAY:
                self.counts["r_err"] += 1
            self._publish(rec, now)

    def _pick_read(self, now: float, period: float) -> "_ReadReq | None":
        """The oldest pending read if in order, else one of the oldest per ARID (random), among
        those whose latency has elapsed; None if none is ready."""
        pend = self._rd
        if not pend:
            return None
        eps = period / 4
        if not self.reorder:
            head = pend[0]
            if head.ready_ns > now + eps:
                return None
            pend.pop(0)
            return head
        seen, ready = set(), []
        for req in pend:
            if req.rec.id in seen:
                continue
            seen.add(req.rec.id)
            if req.ready_ns <= now + eps:
                ready.append(req)
        if not ready:
            return None
        pick = ready[0] if len(ready) == 1 else self._rng.choice(ready)
        if len(seen) > 1:
            self.stats["multi_id_picks"] += 1
        if pick is not pend[0]:
            self.stats["reordered"] += 1
        pend.remove(pick)
        return pick

    # ------------------------------------------------------------------ write
    def _match_w(self, now: float, period: float) -> None:
        lanes = self.byte_lanes
        while self._wbuf and self._awq:
            entry = self._awq[0]
            rec, n, ops, start, plain = entry
            data, strb, last, xl = self._wbuf.popleft()
            beats = rec.len + 1
            if plain:                       # beat n is the bus word n (beat_span's result)
                word = rec.addr + n * lanes
                baddr, end = word, word + lanes
            else:
                baddr, end, word = beat_span(rec.addr, n, rec.size, beats, rec.burst, lanes, self.addr_mask)
            if strb < 0:                    # X/Z strobes: as cocotbext-axi's default (all)
                strb = self.full_strb
            strb = self._check_w_beat(rec.addr, rec.len, n, strb, xl, max(last, 0), baddr, end, word)
            if strb == self.full_strb:
                ops.append((word, data.to_bytes(lanes, "little")))
            else:
                ops += strobe_runs(word, data.to_bytes(lanes, "little"), strb)
            entry[1] = n = n + 1
            if n < beats:
                continue
            self._awq.popleft()
            mem, port = self.memory, self.port
            resp = None
            if mem.faults:
                for a, d in ops:
                    resp = mem.fault_for(port, a, len(d), True)
                    if resp is not None:
                        break
            if resp is None:
                for a, d in _merged(ops):
                    mem.write(a, d)
            else:
                rec.resp = Resp(resp)
            rec.runs = ops                     # written, or (on a fault) attempted
            lat = self._wr_lat(rec) if self._wr_lat is not None else 0
            due = max(start + lat * period, now, self._last_b_due)
            self._last_b_due = due
            self._bq.append((due, rec))


def _merged(ops: list) -> list:
    """*ops* ((address, bytes) runs in beat order) with runs that continue one another joined:
    one memory write per contiguous stretch (the burst's records keep the runs per beat)."""
    if len(ops) < 2:
        return ops
    out, cur_a, cur = [], ops[0][0], bytearray(ops[0][1])
    for a, d in ops[1:]:
        if a == cur_a + len(cur):
            cur += d
        else:
            out.append((cur_a, cur))
            cur_a, cur = a, bytearray(d)
    out.append((cur_a, cur))
    return out


def _x_lanes(bits: str, lanes: int) -> "tuple[int, int]":
    """A bus value with X/Z bits: (the value with those bits 0, mask of lanes holding any)."""
    bits = bits.lower().rjust(8 * lanes, "0")[-8 * lanes:]
    xmask = 0
    for i in range(lanes):
        chunk = bits[len(bits) - 8 * (i + 1):len(bits) - 8 * i]
        if any(c not in "01" for c in chunk):
            xmask |= 1 << i
    return int("".join(c if c in "01" else "0" for c in bits), 2), xmask


class LeanGroup:
    """One coroutine stepping every ``LeanSubordinate`` on one clock (see the module
    docstring); started at construction, restarted by nothing (it lives as long as the test)."""

    def __init__(self, clock, reset=None, reset_active_level: bool = False,
                 clock_period_ns: "float | None" = None):
        self.clock = clock
        self.reset = reset
        self.reset_active_level = bool(reset_active_level)
        self.period = clock_period_ns
        self.ports: list = []
        self._wake = Event()
        self._watchers: list = []
        self._task = cocotb.start_soon(self._run())

    def add(self, sub: LeanSubordinate) -> None:
        self.ports.append(sub)
        for h in (sub.sigs["ARVALID"], sub.sigs["AWVALID"], sub.sigs["WVALID"]):
            self._watchers.append(cocotb.start_soon(self._watch(RisingEdge(h), sub)))

    def wake(self) -> None:
        self._wake.set()

    async def _watch(self, edge, sub: "LeanSubordinate | None" = None) -> None:
        while True:
            await edge
            if sub is not None:
                sub.awake = True
            self._wake.set()

    async def _run(self) -> None:
        edge = RisingEdge(self.clock)
        if self.reset is not None:
            assert_edge = (RisingEdge if self.reset_active_level else FallingEdge)(self.reset)
            self._watchers.append(cocotb.start_soon(self._watch(assert_edge)))
        if self.period is None:
            await edge
            t0 = get_sim_time("ns")
            await edge
            self.period = get_sim_time("ns") - t0
        in_reset = None
        # the time in ns as cocotb.simtime.get_sim_time("ns") computes it, without its calls
        exp = cocotb.simtime.time_precision + 9
        scale = 10 ** abs(exp)
        sim_time = simulator.get_sim_time
        ports = self.ports
        # in reset: the reset pin's bit string is not its inactive level (X/Z included)
        rst = None if self.reset is None else self.reset._handle.get_signal_val_binstr
        inactive = "0" if self.reset_active_level else "1"
        while True:
            await edge
            if rst is not None and rst() != inactive:
                if in_reset is not True:
                    for p in self.ports:
                        p._reset()
                        p.awake = True
                    in_reset = True
                continue
            in_reset = False
            th, tl = sim_time()
            now = (th << 32 | tl) * scale if exp > 0 else (th << 32 | tl) / scale
            busy = False
            for p in ports:
                if p.awake:
                    if p.step(now, self.period):
                        busy = True
                    else:                   # its VALIDs were low at this edge: a rise wakes it
                        p.awake = False
            if busy:
                continue
            # asleep until a VALID rises, a control changes or the reset is asserted (a VALID
            # that rose at this edge, seen by a watcher before the clear, is read here)
            self._wake.clear()
            woke = False
            for p in self.ports:
                if p.awake or p._arvalid() == "1" or p._awvalid() == "1" or p._wvalid() == "1":
                    p.awake = woke = True
            if woke:
                continue
            await self._wake.wait()
