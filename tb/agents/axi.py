"""AXI subordinate memories on the NPU's AXI5 manager ports (TRM 5.8), and a passive monitor.

The bench's system memory is one sparse 40-bit byte store, ``BenchMemory`` (a
``tlm.memory.Memory``), served on every AXI manager port of the design (SRAM0, EXT0, ...) by
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

``AxiMonitor(dut, port, clock, reset)`` is the passive monitor of one port: it rebuilds the
same ``AxiBurst`` records from the pins alone (whoever serves the port), counts handshakes
and checks the manager's VALID/payload stability (tb/env.py starts one on every port).

Faults: a fault covers ``[lo, hi)`` for reads, writes or both, on some ports or all. A read
beat answers the fault's response when the bytes it addresses (from the burst address on the
first beat, the whole beat after) overlap the range; a write burst whose strobed bytes
overlap the range answers with the fault's BRESP and writes nothing (as
``tlm.memory.Memory`` treats a faulting access). Make fault ranges 16-byte aligned so that
"addressed bytes" means the same for any burst shape.

Usage::

    mem = BenchMemory()
    axi = AxiMemory(dut, mem)          # every port the design has; CLK/nRESET via the pin map
    mem.write(0x1000, data)                                     # backdoor
    axi.inject_fault(0x6000_0000, 0x6000_1000, "DECERR", kind="r", ports=("EXT0",))
    axi.set_backpressure(random_pause(seed=1, p=0.3))
    axi.set_latency(read=(0, 20), write=4, seed=3)                 # random 0..20 / fixed 4
    axi.set_reorder(True, seed=3)                                  # reads out of order by ID

Binding goes through the pin map (tb/pinmap.py): ``AxiMemory(dut, ..., pinmap=...)``.
"""
from __future__ import annotations

import itertools
import logging
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable

import cocotb
from cocotb.simtime import get_sim_time
from cocotb.triggers import Event, FallingEdge, First, RisingEdge
from cocotbext.axi.axi_channels import AxiBBus, AxiBSource, AxiRBus, AxiRSource, AxiWBus, AxiWSink
from cocotbext.axi.reset import Reset
from cocotbext.axi.stream import define_stream

from tb.ethos_u85.ports import AXI_PORT_NAMES, AXI_PORT_SIGNALS
from tlm.memory import ADDR_MASK, Memory, Resp, Transaction

BURST_FIXED, BURST_INCR, BURST_WRAP = 0, 1, 2

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


# ----------------------------------------------------------------------------- binding
class PortView:
    """One AXI manager port of *dut* seen with cocotbext-axi's lower-case channel names:
    ``view.araddr`` is the pin the pin map (tb/pinmap.py) gives for ``ARADDR<port>`` (TRM 5.8
    suffix naming; the identity map: ``dut.ARADDRSRAM0``)."""

    def __init__(self, dut, port: str, pinmap=None):
        from tb.core.pinmap import PinMap
        pm = PinMap.coerce(pinmap)
        self._dut = dut
        self._port = port
        self._name = f"tb.agents.axi.{port}"          # cocotbext-axi logs as cocotb.<_name>.
        self._log = logging.getLogger(f"cocotb.tb.agents.axi.{port}")
        self._handles = {n.lower(): h for n, _ in AXI_PORT_SIGNALS
                         if (h := pm.axi(dut, n, port)) is not None}

    def __dir__(self):
        return list(self._handles)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._handles[name]
        except KeyError:
            raise AttributeError(f"{self._port}: no AXI signal {name.upper()}{self._port}") from None


def port_present(dut, port: str, pinmap=None) -> bool:
    from tb.core.pinmap import PinMap
    pm = PinMap.coerce(pinmap)
    return pm.axi(dut, "ARVALID", port) is not None and pm.axi(dut, "AWVALID", port) is not None


# ----------------------------------------------------------------------------- memory
@dataclass(frozen=True)
class BenchFault:
    """Accesses overlapping [lo, hi) answer *resp*; *kind* 'r', 'w' or 'rw'; *ports* None = all."""
    lo: int
    hi: int
    resp: Resp
    kind: str = "rw"
    ports: "frozenset | None" = None

    def hits(self, addr: int, length: int, write: bool, port: "str | None" = None) -> bool:
        if ("w" if write else "r") not in self.kind:
            return False
        if self.ports is not None and port is not None and port not in self.ports:
            return False
        return addr < self.hi and addr + length > self.lo


class BenchMemory(Memory):
    """The system memory of the bench: a sparse 40-bit ``tlm.memory.Memory`` whose faults are
    per AXI port (``BenchFault``).

    ``read``/``write`` are the back door. ``access(txn)`` is a front door with
    ``tlm.memory.Memory`` semantics (a faulting access has no effect), used by a reference
    model on a copy (``snapshot``); when an executor is attached for the calling thread
    (``attach``, DUT=tlm), the access is instead performed on the AXI pins by that executor.
    """

    def __init__(self, log: bool = False):
        super().__init__(log=log)
        self.faults: list[BenchFault] = []
        self._front = {}              # thread ident -> callable(txn, data) -> (resp, data)

    # faults ------------------------------------------------------------------------
    def inject_fault(self, lo: int, hi: int, resp="SLVERR", kind: str = "rw",
                     ports: "Iterable[str] | None" = None) -> BenchFault:
        resp = Resp[resp] if isinstance(resp, str) else Resp(resp)
        if resp not in (Resp.SLVERR, Resp.DECERR):
            raise ValueError("an injected fault answers SLVERR or DECERR")
        if kind not in ("r", "w", "rw"):
            raise ValueError("fault kind is 'r', 'w' or 'rw'")
        if not 0 <= lo < hi <= 1 << 40:
            raise ValueError(f"fault range 0x{lo:x}..0x{hi:x} is empty or outside 40 bits")
        f = BenchFault(int(lo), int(hi), resp, kind, None if ports is None else frozenset(ports))
        self.faults.append(f)
        return f

    def remove_fault(self, f: BenchFault) -> None:
        self.faults.remove(f)

    def fault_for(self, port: str, addr: int, length: int, write: bool) -> "Resp | None":
        for f in self.faults:
            if f.hits(addr, length, write, port):
                return f.resp
        return None

    # front door --------------------------------------------------------------------
    def attach(self, ident: int, front: Callable) -> None:
        self._front[ident] = front

    def detach(self, ident: int) -> None:
        self._front.pop(ident, None)

    def access(self, txn: Transaction, data=None):
        import threading
        front = self._front.get(threading.get_ident()) if self._front else None
        if front is not None:
            resp, rdata = front(txn, data)
            if resp != txn.resp:
                txn = Transaction(txn.port, txn.channel, txn.write, txn.addr, txn.length,
                                  txn.prot, txn.cache, txn.domain, Resp(resp))
            self._post(txn)
            return txn, rdata
        resp = self.fault_for(txn.port, txn.addr, txn.length, txn.write)
        if txn.addr + txn.length > (1 << 40):
            resp = Resp.DECERR
        if resp is not None:
            txn = Transaction(txn.port, txn.channel, txn.write, txn.addr, txn.length,
                              txn.prot, txn.cache, txn.domain, resp)
        self._post(txn)
        if txn.resp != Resp.OKAY:
            return txn, None
        if txn.write:
            self.write(txn.addr, data)
            return txn, None
        return txn, self.read_array(txn.addr, txn.length)

    def _post(self, txn: Transaction) -> None:
        if self.log_enabled:
            self.log.append(txn)
        for cb in self.listeners:
            cb(txn)

    # copies ------------------------------------------------------------------------
    def snapshot(self, log: bool = True) -> "BenchMemory":
        """A detached copy (contents and faults) for a reference model."""
        m = BenchMemory(log=log)
        m._pages = {k: v.copy() for k, v in self._pages.items()}
        m.faults = list(self.faults)
        return m

    def load_from(self, other: Memory) -> None:
        """Make the contents equal to *other*'s (faults: *other*'s if it has bench faults)."""
        self._pages = {k: v.copy() for k, v in other._pages.items()}
        if isinstance(other, BenchMemory):
            self.faults = list(other.faults)

    def pages(self) -> set:
        return set(self._pages)


# ----------------------------------------------------------------------------- monitor
@dataclass
class AxiBurst:
    """One burst as seen on a manager port."""
    port: str
    write: bool
    id: int
    addr: int
    len: int                 # AxLEN (beats - 1)
    size: int                # AxSIZE
    burst: int               # AxBURST
    prot: int
    cache: int
    domain: int
    resp: Resp = Resp.OKAY   # worst response (BRESP, or the first non-OKAY RRESP)
    # (address, bytes) runs actually moved: strobed bytes of a write, addressed bytes of a read
    runs: list = field(default_factory=list)
    start_ns: float = 0.0     # AW/AR accepted
    end_ns: float = 0.0       # last R beat / B response handed to the channel

    @property
    def beats(self) -> int:
        return self.len + 1

    @property
    def nbytes(self) -> int:
        return sum(len(d) for _, d in self.runs)

    def __str__(self) -> str:
        kind = "W" if self.write else "R"
        return (f"{self.port} {kind} id={self.id} addr=0x{self.addr:010x} len={self.len} "
                f"size={self.size} burst={self.burst} prot={self.prot:03b} cache={self.cache:04b} "
                f"domain={self.domain} resp={self.resp.name}")


def random_pause(seed: int = 0, p: float = 0.3) -> Iterable[int]:
    """Endless pause pattern: each cycle paused with probability *p*."""
    rng = random.Random(seed)
    while True:
        yield int(rng.random() < p)


def _lanes(value, lanes: int) -> "tuple[bytes, int]":
    """Bytes of a data bus value and a mask of the byte lanes holding X/Z (read as 0)."""
    try:
        return int(value).to_bytes(lanes, "little"), 0
    except ValueError:
        bits = str(value).lower()[-8 * lanes:].rjust(8 * lanes, "0")
        out, xmask = bytearray(lanes), 0
        for i in range(lanes):
            chunk = bits[len(bits) - 8 * (i + 1):len(bits) - 8 * i]
            if any(c not in "01" for c in chunk):
                xmask |= 1 << i
                chunk = "".join(c if c in "01" else "0" for c in chunk)
            out[i] = int(chunk, 2)
        return bytes(out), xmask


def _int(v, default=0) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


# ----------------------------------------------------------------------------- beats
def beat_addr(addr: int, aligned: int, n: int, nbytes: int, beats: int, burst: int) -> int:
    """Address of beat *n* of a burst (AXI A3.4.1): FIXED, WRAP or INCR."""
    if burst == BURST_FIXED:
        return addr
    if burst == BURST_WRAP:
        total = nbytes * beats
        lo = addr - addr % total
        return lo + (addr - lo + n * nbytes) % total if n else addr
    return addr if n == 0 else aligned + n * nbytes


def beat_span(addr: int, n: int, size: int, beats: int, burst: int, lanes: int):
    """Beat *n* of a burst on a *lanes*-byte bus: (first addressed byte, end of the
    transfer's container, address of the bus word)."""
    nbytes = min(1 << size, lanes)
    baddr = beat_addr(addr, addr - addr % nbytes, n, nbytes, beats, burst) & ADDR_MASK
    return baddr, baddr - baddr % nbytes + nbytes, baddr - baddr % lanes


def lane_mask(lo: int, hi: int, word: int) -> int:
    """WSTRB bits of the bytes [lo, hi) in the bus word at *word*."""
    return ((1 << (hi - word)) - 1) & ~((1 << (lo - word)) - 1)


def strobe_runs(word: int, data: bytes, strb: int) -> list:
    """(address, bytes) runs of the strobed bytes of one W beat."""
    runs, i, lanes = [], 0, len(data)
    while i < lanes:
        if strb >> i & 1:
            j = i
            while j < lanes and strb >> j & 1:
                j += 1
            runs.append((word + i, data[i:j]))
            i = j
        else:
            i += 1
    return runs


# ----------------------------------------------------------------------------- subordinate
# cocotbext-axi's channel models log every reset edge at INFO; the bench's own AXI messages
# (rule violations) are errors and still show.
logging.getLogger("cocotb.tb.agents.axi").setLevel(logging.WARNING)


def _latency_fn(spec, rng: random.Random) -> "Callable[[AxiBurst], int] | None":
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


class AxiSubordinate(Reset):
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
        self.log = logging.getLogger(f"cocotb.tb.agents.axi.{port}")
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

    def set_latency(self, read=None, write=None, seed: "int | None" = None) -> None:
        """Extra cycles from the AR handshake to the first R beat (*read*) and from the AW
        handshake to the B response (*write*; the B also waits for the last W beat). Each is
        0/None (none), an int, a ``(lo, hi)`` pair (uniform per burst) or
        ``callable(AxiBurst) -> int``. *seed* reseeds the random choices."""
        if seed is not None:
            self._rng.seed(seed)
        self._rd_lat = _latency_fn(read, self._rng)
        self._wr_lat = _latency_fn(write, self._rng)

    def set_reorder(self, enabled: bool = True, seed: "int | None" = None) -> None:
        """Serve reads out of order across ARIDs (whole bursts; same-ID order kept)."""
        if seed is not None:
            self._rng.seed(seed)
        self.reorder = bool(enabled)

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

    # ------------------------------------------------------------------ read
    def _read_burst(self, ar) -> AxiBurst:
        return AxiBurst(self.port, False, _int(ar.arid), _int(ar.araddr), _int(ar.arlen),
                        _int(ar.arsize, self.max_size), _int(ar.arburst, BURST_INCR),
                        _int(getattr(ar, "arprot", 0)), _int(getattr(ar, "arcache", 0)),
                        _int(getattr(ar, "ardomain", 0)),
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
            lo, hi, word = beat_span(addr, n, size, beats, burst, lanes)
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
            awid, addr = _int(aw.awid), _int(aw.awaddr)
            length, size = _int(aw.awlen), _int(aw.awsize, self.max_size)
            burst = _int(aw.awburst, BURST_INCR)
            rec = AxiBurst(self.port, True, awid, addr, length, size, burst,
                           _int(getattr(aw, "awprot", 0)), _int(getattr(aw, "awcache", 0)),
                           _int(getattr(aw, "awdomain", 0)), start_ns=start)
            self._check_shape("AW", addr, length, size, burst)
            beats = length + 1
            ops = []                                  # (addr, bytes) strobed runs
            for n in range(beats):
                baddr, end, word = beat_span(addr, n, size, beats, burst, lanes)
                self._check_outstanding(True)
                w = await self.w.recv()
                self.counts["w_beats"] += 1
                strb = _int(getattr(w, "wstrb", full), full)
                data, xlanes = _lanes(w.wdata, lanes)
                if xlanes & strb:
                    self._error(f"AW addr=0x{addr:x} beat {n}: X/Z on strobed WDATA lanes "
                                f"0x{xlanes & strb:04x}")
                last = _int(w.wlast)
                if last != int(n == length):
                    self._error(f"AW addr=0x{addr:x} len={length}: WLAST={last} on beat {n}")
                # strobes may only cover the lanes of this transfer (and not below the address)
                allowed = lane_mask(baddr, end, word)
                if strb & ~allowed:
                    self._error(f"AW addr=0x{addr:x} beat {n}: WSTRB 0x{strb:04x} outside the "
                                f"beat's lanes 0x{allowed:04x}")
                    strb &= allowed
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


class AxiMemory:
    """The bench's memory system: one ``AxiSubordinate`` per AXI manager port of the design,
    all serving one ``BenchMemory``. Pins are found through the pin map (tb/pinmap.py)."""

    def __init__(self, dut, memory: "BenchMemory | None" = None, clock=None, reset=None,
                 ports: "Iterable[str] | None" = None, pinmap=None,
                 clock_period_ns: "float | None" = None):
        from tb.core.pinmap import PinMap
        pm = PinMap.coerce(pinmap)
        self.dut = dut
        self.memory = memory if memory is not None else BenchMemory()
        clock = clock if clock is not None else pm.get(dut, "CLK", required=True)
        reset = reset if reset is not None else pm.get(dut, "nRESET")
        names = [p for p in (ports or AXI_PORT_NAMES) if port_present(dut, p, pm)]
        self.ports = {p: AxiSubordinate(dut, p, self.memory, clock, reset, pinmap=pm,
                                        clock_period_ns=clock_period_ns) for p in names}

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


# ----------------------------------------------------------------------------- monitor
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


def _pin(handle, default=0) -> int:
    try:
        return int(handle.value)
    except ValueError:
        return default


class AxiMonitor:
    """Passive monitor of one AXI manager port (TRM 5.8 names through the pin map): it only
    reads the pins, so it works whoever serves the port (the bench's ``AxiSubordinate`` or
    another bench's memory model).

    It samples at every falling edge of CLK while anything is in flight and sleeps until a
    VALID rises or nRESET falls otherwise (VALIDs change with the rising edge, as AXI
    drives them). Per handshake it counts (``count``: ``ar``, ``r``, ``rlast``, ``aw``,
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
        from tb.ethos_u85.tlm_pins import axi_port_signals
        self.port = port
        self.clock = clock
        self.reset = reset
        self.sigs = axi_port_signals(dut, port, pinmap)
        if self.sigs is None:
            raise ValueError(f"the design has no AXI port {port}")
        self.lanes = len(self.sigs["WDATA"]) // 8
        self.log = log or logging.getLogger(f"cocotb.tb.agents.axi.{port}")
        self.count = {k: 0 for k in ("ar", "r", "rlast", "aw", "w", "wlast", "b")}
        self.errors: list[str] = []
        self.listeners: list[Callable[[AxiBurst], None]] = []
        self.bursts: deque = deque(maxlen=keep)
        self.cycle = 0
        self.resets = 0                     # times the counts were zeroed by nRESET
        self._pend: dict = {}               # channel -> payload held while VALID waits
        self._clear()
        self._task = None

    def start(self) -> "AxiMonitor":
        if self._task is None:
            self._task = cocotb.start_soon(self._run())
        return self

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

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
    def _idle(self) -> bool:
        return not self._pend and not any(self.outstanding()) and not self._wbuf

    async def _run(self) -> None:
        fall = FallingEdge(self.clock)
        valids = [self.sigs[v] for _, v, _, _, _ in AXI_CHANNELS]
        while True:
            await fall
            self.cycle += 1
            if self.reset is not None and _pin(self.reset, 0) != 1:
                if self.handshakes() or self._pend or self._wbuf:
                    self.resets += 1
                    self._clear()
                continue
            if not self._sample() and self._idle():
                wake = [RisingEdge(v) for v in valids]
                if self.reset is not None:
                    wake.append(FallingEdge(self.reset))
                await First(*wake)

    def _sample(self) -> bool:
        """One falling edge; True if any VALID is high."""
        sigs, pend = self.sigs, self._pend
        en = _pin(sigs["ACLKEN"], 1) if "ACLKEN" in sigs else 1
        any_valid = False
        for name, v, rdy, last, payload in AXI_CHANNELS:
            valid = _pin(sigs[v])
            held = pend.get(name)
            now = None
            if held is not None or (valid and payload):
                now = tuple(_pin(sigs[s], -1) for s in payload if s in sigs)
            if held is not None and (not valid or now != held):
                self._error(f"{v} dropped or payload changed before {rdy} (AXI: a manager "
                            "keeps VALID and the payload stable)")
            if not valid:
                pend.pop(name, None)
                continue
            any_valid = True
            if _pin(sigs[rdy]) and en:
                self.count[name] += 1
                if last is not None and _pin(sigs[last]):
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
            return default if h is None else _pin(h, default)
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
        rid = _pin(s["RID"]) if "RID" in s else 0
        q = self._reads.get(rid)
        if not q:
            self._error(f"R beat with RID={rid} and no read outstanding")
            return
        entry = q[0]
        rec, n = entry
        lo, hi, word = beat_span(rec.addr, n, rec.size, rec.beats, rec.burst, self.lanes)
        resp = Resp(_pin(s["RRESP"], 3)) if "RRESP" in s else Resp.OKAY
        if resp == Resp.OKAY:
            data, _ = _lanes(s["RDATA"].value, self.lanes)
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
        strb = _pin(s["WSTRB"], full) if "WSTRB" in s else full
        self._wbuf.append((_lanes(s["WDATA"].value, self.lanes)[0], strb))
        self._match_w()

    def _match_w(self) -> None:
        while self._aws and self._wbuf:
            entry = self._aws[0]
            rec, n = entry
            data, strb = self._wbuf.popleft()
            baddr, end, word = beat_span(rec.addr, n, rec.size, rec.beats, rec.burst, self.lanes)
            rec.runs += strobe_runs(word, data, strb & lane_mask(baddr, end, word))
            entry[1] = n + 1
            if entry[1] == rec.beats:
                self._aws.popleft()
                self._writes.setdefault(rec.id, deque()).append(rec)

    def _on_b(self) -> None:
        s = self.sigs
        bid = _pin(s["BID"]) if "BID" in s else 0
        q = self._writes.get(bid)
        if not q:
            self._error(f"B with BID={bid} and no write burst complete")
            return
        rec = q.popleft()
        rec.resp = Resp(_pin(s["BRESP"], 3)) if "BRESP" in s else Resp.OKAY
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
