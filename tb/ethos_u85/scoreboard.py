"""Scoreboard: the DUT's observable behaviour against the TLM (``tlm.ethos_u85.device.Device``).

``Scoreboard`` keeps a reference ``Device`` in step with the bench and compares:

* **APB** - every transfer of the bench's APB manager is replayed on the reference (same
  PADDR, PWDATA, PSTRB, PPROT) and PRDATA/PSLVERR are compared. While a job is in flight
  (from the CMD write that starts the NPU until the DUT is seen stopped) STATUS and QREAD
  reads that show the DUT still running are not compared: the reference has already run the
  job to its end.
* **Jobs** - the CMD write that moves the reference to RUNNING starts a job: the reference's
  memory (a copy, a "mirror") is refreshed from the bench memory, with the bench's fault
  ranges, and the reference runs the stream to its stop in zero simulated time. Its memory
  transactions are the job's *footprint*. The job ends at the first STATUS read that shows
  the DUT stopped (state 0 and irq_raised or a fault bit), or at
  ``close_job()`` (``abandon_job()`` ends a job cut short by a reset, with the checks that
  still apply: write containment and contents of what was written, no IRQ). Then:
  - STATUS (that very read) must equal the reference's; QREAD reads are compared from then
    (after a bus error: model QREAD <= QREAD <= QSIZE, see ``_lenient_qread``);
  - IRQ: the DUT's rising IRQ edges during the job must equal the reference's;
  - write containment: every byte the DUT wrote with an OKAY response must lie in the
    reference's write footprint, on the same port;
  - write completeness: every byte of the reference's (OKAY) write footprint must have been
    written by the DUT;
  - contents: the bench memory must equal the reference's mirror over both;
  - bytes of a write transaction that faulted in the reference are "don't care" (a burst
    of it that the subordinate accepted before the faulting one may have landed).
* **AXI bursts** (from tb/axi.py's monitor), as they happen: a write outside a job is an
  error, so is a read issued outside one (a read issued before the job ended is the job's);
  a burst that crosses a multiple of the reference's ``burst_boundary`` for its port group
  (AXI_SRAM/AXI_EXT max_beats, 4 KB) is an error. Every burst must carry AxPROT from the
  PROT state (CPL/CSL) and the port group, AxCACHE and AxDOMAIN of the route by which the
  reference accesses those bytes (the TLM's rules: REGIONCFG -> MEM_ATTR, ``Device.route``,
  ``tlm.ethos_u85.memory.axcache``), or, outside its footprint, of some region's or the command
  stream's route; the port of a striped group follows ``RegionRoute.port_of``. A read must
  lie inside the reference's read footprint on that route, widened to whole 16-byte beats,
  plus the command stream's window (QBASE up to the next multiple of 128 bytes past QBASE +
  QSIZE, TRM 3.3.1.8) - unless the reference stopped at a fault (the DUT may have run ahead).
  A reference on the literal paths (``Device(reference_paths=True)``, the literal model) reads
  one transaction per element run where the fast path reads a block's span in one masked
  transaction: its reads of one operation on one channel less than ``READ_GAP`` bytes apart
  count as one span.
  Cost per burst (a stand-in issues tens of thousands of one-beat bursts): the common case,
  a burst inside the reference's footprint on its own route with the right AxPROT and port,
  is decided by one dictionary lookup and one interval search; anything else takes the full
  check and its message. The DUT's write runs are merged once, when the job ends.
* **IRQ** outside jobs: at every APB transfer (not ``ignore``d) the pin's level must be the
  reference's before or after that transfer, and a rising edge since the previous transfer
  needs the reference's IRQ high (a CMD.clear_irq that does not drop the pin fails one
  transfer later at the latest).
* **Context**: the reference's transactions are tagged with the command (offset, operation)
  that made them; memory, footprint and attribute mismatches name the model's access at the
  first bad byte or burst (command offset, operation, channel, port, address).

* **Functional coverage** (tb/ethos_u85/coverage.py): every APB transfer and AXI burst the scoreboard
  listens to is sampled, and a ``JobRecorder`` on the reference device samples the commands
  it executes, the kernel-op configuration and how each job ends; ``check()`` writes the
  process's coverage file (``coverage=None`` turns sampling off).

Mismatches are collected (``mismatches``) and logged; ``check()`` asserts there are none.
Writes to the NPU while a job is in flight are forwarded to the reference but not compared
(the reference has already finished; CMD.stop_request is not modelled by this scoreboard).
"""
from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from tb.core import coverage as engine
from tb.ethos_u85 import coverage as bench_coverage
from tlm.ethos_u85 import registers as R
from tlm.ethos_u85.memory import Interface, Resp, axcache

CMD, STATUS, QREAD = R.OFFSET["CMD"], R.OFFSET["STATUS"], R.OFFSET["QREAD"]
_ST = R.get("STATUS")
# A stopped NPU has raised its IRQ (every stop but a reset does) or holds a fault bit;
# cmd_end_reached is not evidence: it stays set until QBASE/QSIZE are written. Clear the IRQ
# (CMD.clear_irq) before starting a job, or a STATUS read before the DUT reaches RUNNING
# would end the job early.
STOP_EVIDENCE = sum(_ST.field(f).mask for f in ("irq_raised", "bus_status", "cmd_parse_error", "ecc_fault",
                                                 "branch_fault"))
# The reference stopped at a fault: an NPU that runs ahead (DMA behind the command stream) may
# have read what the reference never reached.
FAULT_STOP = STOP_EVIDENCE & ~_ST.field("irq_raised").mask
# a literal-path reference's reads of one operation and channel closer than this many bytes
# count as one span (Scoreboard.set_reference)
READ_GAP = 4096
BEAT = 16                                  # bytes of a 128-bit AXI data beat (TRM 5.8)


def _beat_floor(a: int) -> int:
    return a - a % BEAT


def _beat_ceil(a: int) -> int:
    return -(-a // BEAT) * BEAT


_IFACE: dict = {}                          # port name -> Interface (memo of _iface)


def _iface(port: str) -> Interface:
    i = _IFACE.get(port)
    if i is None:
        i = _IFACE[port] = Interface.ext if port.startswith("EXT") else Interface.sram
    return i


def _fmt(attrs) -> str:
    iface, cache, domain = attrs
    return f"{Interface(iface).name.upper()}/cache={cache:04b}/domain={domain}"


class IntervalSet:
    """A set of integers as sorted, disjoint, non-touching [lo, hi) intervals."""

    def __init__(self, ranges=()):
        self._lo: list[int] = []
        self._hi: list[int] = []
        for lo, hi in ranges:
            self.add(lo, hi)

    def add(self, lo: int, hi: int) -> None:
        if hi <= lo:
            return
        i = bisect.bisect_left(self._hi, lo)
        j = bisect.bisect_right(self._lo, hi)
        if i < j:
            lo = min(lo, self._lo[i])
            hi = max(hi, self._hi[j - 1])
        self._lo[i:j] = [lo]
        self._hi[i:j] = [hi]

    @classmethod
    def from_ranges(cls, ranges) -> "IntervalSet":
        """The union of [lo, hi) *ranges* (any order), merged in one sort."""
        s = cls()
        los, his = s._lo, s._hi
        for lo, hi in sorted(r for r in ranges if r[1] > r[0]):
            if his and lo <= his[-1]:
                if hi > his[-1]:
                    his[-1] = hi
            else:
                los.append(lo)
                his.append(hi)
        return s

    def __iter__(self):
        return iter(zip(self._lo, self._hi))

    def __len__(self) -> int:
        return len(self._lo)

    def __bool__(self) -> bool:
        return bool(self._lo)

    @property
    def total(self) -> int:
        return sum(h - l for l, h in self)

    def copy(self) -> "IntervalSet":
        s = IntervalSet()
        s._lo, s._hi = list(self._lo), list(self._hi)
        return s

    def __or__(self, other: "IntervalSet") -> "IntervalSet":
        s = self.copy()
        for lo, hi in other:
            s.add(lo, hi)
        return s

    def __sub__(self, other: "IntervalSet") -> "IntervalSet":
        out = IntervalSet()
        for lo, hi in self:
            i = bisect.bisect_right(other._hi, lo)
            cur = lo
            while i < len(other._lo) and other._lo[i] < hi:
                if other._lo[i] > cur:
                    out.add(cur, other._lo[i])
                cur = max(cur, other._hi[i])
                i += 1
            if cur < hi:
                out.add(cur, hi)
        return out

    def __and__(self, other: "IntervalSet") -> "IntervalSet":
        return self - (self - other)

    def overlaps(self, lo: int, hi: int) -> bool:
        i = bisect.bisect_right(self._hi, lo)
        return i < len(self._lo) and self._lo[i] < hi

    def contains(self, lo: int, hi: int) -> bool:
        i = bisect.bisect_right(self._lo, lo) - 1
        return i >= 0 and self._hi[i] >= hi

    def describe(self, limit: int = 3) -> str:
        parts = [f"0x{lo:010x}..0x{hi:010x}" for lo, hi in list(self)[:limit]]
        more = f" (+{len(self) - limit} more)" if len(self) > limit else ""
        return ", ".join(parts) + more + f" [{self.total} bytes]"


@dataclass
class Job:
    """One RUNNING period of the NPU as the scoreboard sees it."""
    index: int
    start_ns: float
    ref_stop: object = None             # tlm.ethos_u85.device.StopReason
    ref_status: int = 0
    ref_qread: int = 0
    ref_irq_rises: int = 0
    ref_irq: bool = False
    ref_writes: dict = field(default_factory=dict)      # port -> IntervalSet (OKAY writes)
    ref_dontcare: IntervalSet = field(default_factory=IntervalSet)
    ref_txn_count: int = 0
    ref_log: list = field(default_factory=list)         # the reference's transactions, in order
    ref_ops: list = field(default_factory=list)         # [(index of its first txn, offset, name)]
    ref_prot: "int | None" = None                       # AxPROT from PROT (CPL/CSL) at the start
    ref_routes: list = field(default_factory=list)      # [(what, RegionRoute)]: regions, stream
    ref_fp: dict = field(default_factory=dict)          # (write, iface, cache, domain) -> IntervalSet
    end_ns: "float | None" = None                       # when the job was closed / abandoned
    dut_writes: dict = field(default_factory=dict)      # port -> IntervalSet (OKAY writes)
    dut_runs: dict = field(default_factory=dict)        # port -> [(lo, hi)] not yet in dut_writes
    route_of: "dict | None" = None      # Interface -> (first of ref_routes on it, its port if one)
    dut_bursts: int = 0
    dut_irq_rises: int = 0
    dut_status: "int | None" = None
    closed: bool = False
    mismatches_before: int = 0
    cov_pending: list = field(default_factory=list)     # coverage samples (JobRecorder.take)

    def ref_all_writes(self) -> IntervalSet:
        s = IntervalSet()
        for v in self.ref_writes.values():
            s = s | v
        return s

    def settle_writes(self) -> None:
        """Fold the DUT's write runs collected per burst (``dut_runs``) into ``dut_writes``."""
        for port, runs in self.dut_runs.items():
            old = self.dut_writes.get(port)
            self.dut_writes[port] = IntervalSet.from_ranges(runs + (list(old) if old else []))
        self.dut_runs = {}

    def dut_all_writes(self) -> IntervalSet:
        self.settle_writes()
        s = IntervalSet()
        for v in self.dut_writes.values():
            s = s | v
        return s

    @property
    def mismatches_in_job(self) -> "int | None":
        """Set when the job closes: mismatches reported by its end-of-job checks and
        during it (None while in flight)."""
        return getattr(self, "_mismatch_count", None)


class Scoreboard:
    """Compares the DUT with a reference ``Device``; see the module docstring.

    *memory* is the bench memory (``tb.agents.axi.BenchMemory``); the reference device is given with
    ``set_reference(device)`` and must run on its own memory (a ``BenchMemory`` copy).
    """

    def __init__(self, memory=None, log: "logging.Logger | None" = None,
                 irq_level: "Callable[[], int | None] | None" = None,
                 coverage: "bench_coverage.BenchCoverage | None | bool" = True):
        self.memory = memory
        self.read_gap = 0                           # set_reference
        # functional coverage: True = this process's model (tb.ethos_u85.coverage.current())
        self.coverage = bench_coverage.current() if coverage is True else (coverage or None)
        self.log = log or logging.getLogger("cocotb.tb.ethos_u85.scoreboard")
        self.ref = None
        self._recorder = None
        self.enabled = True
        self.ignore: Callable = lambda r: False      # ApbResult -> True: replay, do not compare
        self.checked = 0
        self.skipped_in_flight = 0
        self.mismatches: list[str] = []
        self.jobs: list[Job] = []
        self.job: "Job | None" = None                # the job in flight
        self.irq_level = irq_level
        self.max_report = 200
        self.stray_reads = 0
        self._dut_idle_rises = 0                     # pin rises since the last transfer, no job

    # ------------------------------------------------------------------ plumbing
    def set_reference(self, device) -> None:
        self.ref = device
        # a reference on the literal paths (Device(reference_paths=True), tlm.ethos_u85.literal)
        # reads element runs one transaction each, where the fast path reads a block's span
        # (runs and the gaps between them) in one masked transaction: its reads of one
        # operation on one channel closer than READ_GAP bytes count as one span
        self.read_gap = READ_GAP if getattr(device, "reference_paths", False) else 0
        if self.job is not None and self.job.end_ns is None:
            self.job.end_ns = self._now()           # dropped by a reset, unchecked
        self.job = None
        self._dut_idle_rises = 0
        self._recorder = None
        if self.coverage is not None and isinstance(getattr(device, "hooks", None), list):
            # deferred: a job's intent samples count at close_job, if the DUT completed it
            self._recorder = bench_coverage.JobRecorder(device, self.coverage, deferred=True)
            device.hooks.append(self._recorder)

    def _mismatch(self, msg: str) -> None:
        if len(self.mismatches) < self.max_report:
            self.log.error("scoreboard mismatch: %s", msg)
        self.mismatches.append(msg)

    @staticmethod
    def _now() -> float:
        try:
            from cocotb.simtime import get_sim_time
            return get_sim_time("ns")
        except Exception:  # noqa: BLE001 - outside a simulation
            return 0.0

    @property
    def in_flight(self) -> bool:
        return self.job is not None and not self.job.closed

    # ------------------------------------------------------------------ APB
    def __call__(self, r) -> None:
        """APB listener (tb.agents.apb.Apb5Manager.listeners)."""
        if self.coverage is not None:
            self.coverage.sample_apb(r)
        ref = self.ref
        if not self.enabled or ref is None:
            return
        idle = not self.in_flight
        before = bool(ref.irq)
        self._apb(r)
        if idle and self.in_flight:
            # an edge after the previous transfer: the DUT acted on the CMD write before the
            # transfer completed, the edge is the job's
            self.job.dut_irq_rises += self._dut_idle_rises
            self._dut_idle_rises = 0
        elif idle and not self.in_flight and not self.ignore(r):
            self._check_irq(r, before, bool(ref.irq))
        elif not self.in_flight:
            self._dut_idle_rises = 0

    def _check_irq(self, r, before, after) -> None:
        """Outside jobs the IRQ pin follows the reference: at each APB transfer its level is
        the reference's before or after that transfer (which one depends on when the pin is
        sampled; the next transfer pins it down), so a CMD.clear_irq that does not drop the
        IRQ fails at the latest one transfer later; and a rising edge seen since the last
        transfer needs the reference's IRQ high before or after it."""
        lvl = self.irq_level() if self.irq_level is not None else None
        if lvl is not None and bool(lvl) not in (before, after):
            self._mismatch(f"IRQ pin {int(bool(lvl))} at {r}, the model's IRQ is {int(after)}"
                           + (f" (was {int(before)})" if before != after else ""))
        if self._dut_idle_rises and not (before or after):
            self._mismatch(f"rising IRQ edge before {r}, the model's IRQ stayed low")
        self._dut_idle_rises = 0

    def _apb(self, r) -> None:
        ref = self.ref
        if r.write:
            data = r.data
            if self.in_flight and r.addr == CMD:
                data &= ~1                      # the DUT is running: a start has no effect
            was_running = bool(ref.running)
            if r.addr == CMD and data & 1 and not was_running:
                self._refresh_mirror()
            exp_err = bool(ref.apb_write(r.addr, data, pprot=r.prot, pstrb=r.strb))
            exp_data = r.data
            if self.in_flight:
                return                          # written while the DUT runs: not compared
            if ref.running and not was_running:
                if not self.ignore(r):
                    self._compare(r, exp_data, exp_err)
                self._start_job()
                return
        else:
            exp_data, exp_err = ref.apb_read(r.addr, pprot=r.prot)
            exp_err = bool(exp_err)
            if exp_err:
                exp_data = 0
            if self.in_flight and r.addr in (STATUS, QREAD):
                if r.addr == STATUS and not r.slverr and self._stopped(r.data):
                    self.job.dut_status = r.data
                    self._compare(r, exp_data, exp_err)
                    self.close_job()
                    return
                self.skipped_in_flight += 1
                return
        if self.ignore(r):
            return
        if not r.write and r.addr == QREAD and self._lenient_qread(r, exp_data, exp_err):
            return
        self._compare(r, exp_data, exp_err)

    def _lenient_qread(self, r, exp_data: int, exp_err: bool) -> bool:
        """After a job that ended with bus_status, QREAD may lie past the model's: the model
        stops at the command whose access faulted (a sequential DMA), an NPU whose DMA runs
        behind the command stream reports the fault where the stream has got to (the TRM
        does not pin this down). Accept model QREAD <= QREAD <= QSIZE there."""
        job = self.jobs[-1] if self.jobs else None
        if job is None or not job.closed or not _ST.field("bus_status").get(job.ref_status) or exp_err:
            return False
        self.checked += 1
        if r.slverr or not exp_data <= r.data <= self.ref.qsize:
            self._mismatch(f"{r}: after a bus error the model expects QREAD in "
                           f"0x{exp_data:x}..0x{self.ref.qsize:x}")
        elif r.data != exp_data:
            self.log.info("QREAD 0x%x after a bus error, the model's 0x%x (accepted: the DMA "
                          "runs behind the command stream)", r.data, exp_data)
        return True

    @staticmethod
    def _stopped(status: int) -> bool:
        return not _ST.field("state").get(status) and bool(status & STOP_EVIDENCE)

    def _compare(self, r, exp_data: int, exp_err: bool) -> None:
        self.checked += 1
        if exp_err != r.slverr or (not r.write and exp_data != r.data):
            self._mismatch(f"{r}: model expects data=0x{exp_data:08x} slverr={int(exp_err)}")

    # ------------------------------------------------------------------ jobs
    def _refresh_mirror(self) -> None:
        mirror = self.ref.memory
        if self.memory is not None and hasattr(mirror, "load_from"):
            mirror.load_from(self.memory)

    def _start_job(self) -> None:
        ref = self.ref
        job = Job(len(self.jobs), self._now(), mismatches_before=len(self.mismatches))
        mem = ref.memory
        was_log = mem.log_enabled
        mem.log_enabled = True
        mem.log.clear()
        rises = [0]
        level = [bool(ref.irq)]
        ops = job.ref_ops

        def hook(event, details):
            if event == "irq":
                if details.get("level") and not level[0]:
                    rises[0] += 1
                level[0] = bool(details.get("level"))
            elif event == "op":                     # tag what follows with the command
                ops.append((len(mem.log), details.get("offset"), details.get("name")))
        ref.hooks.append(hook)
        try:
            job.ref_stop = ref.run()
        finally:
            ref.hooks.remove(hook)
            mem.log_enabled = was_log
        if self._recorder is not None:
            job.cov_pending = self._recorder.take()
        job.ref_irq_rises = rises[0]
        job.ref_irq = bool(ref.irq)
        job.ref_status = ref.status_word
        job.ref_qread = ref.qread
        txns = job.ref_log = list(mem.log)
        mem.log.clear()
        job.ref_txn_count = len(txns)
        self._job_routes(job)
        runs: dict = {}                             # read_gap: (op, channel, route) -> read runs
        starts = [o[0] for o in job.ref_ops]
        for i, t in enumerate(txns):
            if t.write:
                if t.resp == Resp.OKAY:
                    job.ref_writes.setdefault(t.port, IntervalSet()).add(t.addr, t.addr + t.length)
                else:
                    job.ref_dontcare.add(t.addr, t.addr + t.length)
                lo, hi = t.addr, t.addr + t.length
            else:                                   # a read may move whole bus beats
                lo, hi = _beat_floor(t.addr), _beat_ceil(t.addr + t.length)
            key = (t.write, _iface(t.port), t.cache & 0xF, t.domain & 3)
            if self.read_gap and not t.write:
                op = bisect.bisect_right(starts, i) - 1
                runs.setdefault((op, getattr(t, "channel", None), key), []).append((lo, hi))
                continue
            job.ref_fp.setdefault(key, IntervalSet()).add(lo, hi)
        for (_, _, key), rs in runs.items():        # runs closer than read_gap bytes: one span
            rs.sort()
            lo, hi = rs[0]
            for a, b in rs[1:]:
                if a - hi > self.read_gap:
                    job.ref_fp.setdefault(key, IntervalSet()).add(lo, hi)
                    lo = a
                hi = max(hi, b)
            job.ref_fp.setdefault(key, IntervalSet()).add(lo, hi)
        self.jobs.append(job)
        self.job = job
        self.log.info("job %d: reference ran %s; %d transactions, writes %s", job.index,
                      job.ref_stop, len(txns), job.ref_all_writes().describe())

    def _job_routes(self, job: Job) -> None:
        """The routes the reference gives the job's accesses, by the TLM's own rules
        (``Device.route``: REGIONCFG -> MEM_ATTR -> port group, AxCACHE, AxDOMAIN; AxPROT from
        PROT), and the command stream's read window (QBASE to the next multiple of 128 bytes
        past QBASE + QSIZE, TRM 3.3.1.8) as part of the read footprint."""
        ref = self.ref
        if hasattr(ref, "prot_word"):
            job.ref_prot = ref.prot_word & 7
        elif job.ref_log:
            job.ref_prot = job.ref_log[0].prot & 7
        if not (hasattr(ref, "route") and hasattr(ref, "_attr_route")):
            return
        for region in range(8):
            try:
                job.ref_routes.append((f"region {region}", ref.route(region)))
            except Exception:  # noqa: BLE001 - an unroutable region: not a candidate
                pass
        cmd = ref._attr_route(ref.qconfig, 0)
        job.ref_routes.append(("command stream", cmd))
        end = ref.qbase + (ref.qsize & ~3)
        if ref.qsize:
            key = (False, cmd.interface, axcache(cmd.memtype, False), cmd.domain)
            job.ref_fp.setdefault(key, IntervalSet()).add(_beat_floor(ref.qbase), -(-end // 128) * 128)

    def _context(self, job: Job, addr: int, write: bool) -> str:
        """Which reference access covers *addr*: command offset and operation, channel, port."""
        for i in range(len(job.ref_log) - 1, -1, -1):
            t = job.ref_log[i]
            if t.write == write and t.addr <= addr < t.addr + t.length:
                break
        else:
            return "no model access there"
        k = bisect.bisect_right([o[0] for o in job.ref_ops], i) - 1
        chan = getattr(t.channel, "name", t.channel)
        if chan == "rd_cmd":
            what = "command fetch"
        elif k >= 0:
            _, off, name = job.ref_ops[k]
            what = f"{name} at command offset 0x{off:x}"
        else:
            what = "before the first operation"
        return (f"{what}, channel {chan}, model {t.port} {'W' if t.write else 'R'} "
                f"0x{t.addr:010x}+{t.length}")

    def close_job(self) -> "Job | None":
        """End the job in flight and run the end-of-job checks (see the module docstring)."""
        job = self.job
        if job is None or job.closed:
            return job
        job.closed = True
        job.end_ns = self._now()
        tag = f"job {job.index}"
        if job.dut_irq_rises != job.ref_irq_rises:
            self._mismatch(f"{tag}: {job.dut_irq_rises} rising IRQ edge(s) on the pin, the model "
                           f"raised {job.ref_irq_rises}")
        if self.irq_level is not None:
            lvl = self.irq_level()
            if lvl is not None and bool(lvl) != job.ref_irq:
                self._mismatch(f"{tag}: IRQ pin {lvl} at the end of the job, model {int(job.ref_irq)}")
        ref_all, dut_all = self._check_footprint(job, tag)
        missing = ref_all - dut_all - job.ref_dontcare
        if missing:
            first = next(iter(missing))[0]
            self._mismatch(f"{tag}: the DUT never wrote {missing.describe()} that the model "
                           f"writes; first byte 0x{first:010x}: {self._context(job, first, True)}")
        if self.memory is not None:
            self._compare_memory(job, tag, (ref_all | dut_all) - job.ref_dontcare)
        n = len(self.mismatches) - job.mismatches_before
        job._mismatch_count = n
        if self._recorder is not None:
            self._recorder.commit(job.cov_pending, job.dut_status, job.ref_stop, n)
        job.cov_pending = []
        self.log.info("%s closed: %d DUT write bursts, IRQ edges %d/%d, %s", tag, job.dut_bursts,
                      job.dut_irq_rises, job.ref_irq_rises,
                      "OK" if n == 0 else f"{n} mismatch(es)")
        return job

    def abandon_job(self, what: str = "reset") -> "Job | None":
        """End the job in flight without the end-of-job checks that assume it ran to its stop
        (the NPU was reset in the middle of it; *what* says how, for the messages). Checked
        instead: what the DUT wrote lies inside the reference's write footprint, on the same
        port, with the reference's bytes, and the DUT raised no IRQ (TRM 3.5.2: a
        reset-induced stop raises none; the stream must have no NPU_OP_IRQ before the reset).
        Raises AssertionError if no job is in flight."""
        job = self.job
        assert job is not None and not job.closed, "no job in flight to abandon"
        job.closed = True
        job.end_ns = self._now()
        tag = f"job {job.index} ({what})"
        ref_all, dut_all = self._check_footprint(job, tag)
        if self.memory is not None:
            self._compare_memory(job, tag, dut_all - job.ref_dontcare)
        if job.dut_irq_rises:
            self._mismatch(f"{tag}: {job.dut_irq_rises} rising IRQ edge(s) before the reset")
        job._mismatch_count = len(self.mismatches) - job.mismatches_before
        self.log.info("%s abandoned: %d DUT bursts, %s written of the model's %s", tag,
                      job.dut_bursts, dut_all.describe(), ref_all.describe())
        return job

    def _check_footprint(self, job: Job, tag: str) -> "tuple[IntervalSet, IntervalSet]":
        """Write containment: every byte the DUT wrote (OKAY) lies in the reference's write
        footprint (or its don't-care bytes), on the port the reference wrote it on. Returns
        (reference writes, DUT writes) over all ports."""
        ref_all = job.ref_all_writes()
        dut_all = job.dut_all_writes()
        outside = dut_all - ref_all - job.ref_dontcare
        if outside:
            self._mismatch(f"{tag}: the DUT wrote outside the model's write footprint: "
                           f"{outside.describe()}")
        for port, s in job.dut_writes.items():
            wrong = (s & ref_all) - job.ref_writes.get(port, IntervalSet()) - job.ref_dontcare
            if wrong:
                first = next(iter(wrong))[0]
                self._mismatch(f"{tag}: the DUT wrote {wrong.describe()} on {port}; the model "
                               f"writes it on another port ({self._context(job, first, True)})")
        return ref_all, dut_all

    def _compare_memory(self, job: Job, tag: str, span: IntervalSet) -> None:
        mirror = self.ref.memory
        bad = 0
        first = None
        for lo, hi in span:
            a = self.memory.read_array(lo, hi - lo)
            b = mirror.read_array(lo, hi - lo)
            diff = np.flatnonzero(a != b)
            if diff.size:
                bad += int(diff.size)
                if first is None:
                    i = int(diff[0])
                    first = (lo + i, int(a[i]), int(b[i]))
        if bad:
            addr, got, want = first
            self._mismatch(f"{tag}: {bad} byte(s) of memory differ from the model; first at "
                           f"0x{addr:010x}: 0x{got:02x}, model 0x{want:02x} "
                           f"({self._context(job, addr, True)})")

    # ------------------------------------------------------------------ AXI / IRQ monitors
    def on_burst(self, b) -> None:
        """AXI monitor listener (tb.agents.axi.AxiSubordinate.listeners)."""
        if self.coverage is not None:
            self.coverage.sample_burst(b)
        job = self.job
        if job is None or job.closed:
            if b.write:
                self._mismatch(f"AXI write with the NPU not running a job: {b}")
                return
            # a read issued before the job ended (the STATUS read that saw the stop, or a
            # reset) may complete after it
            # (its shape was checked by the limits of then: a reset may have changed them)
            if job is not None and job.end_ns is not None and b.start_ns <= job.end_ns:
                self._check_attributes(job, b)
                return
            self.stray_reads += 1
            if self.enabled and self.ref is not None:
                self._mismatch(f"AXI read with the NPU not running a job: {b}")
            return
        job.dut_bursts += 1
        if b.write and b.resp == Resp.OKAY:       # merged at the end of the job (settle_writes)
            runs = job.dut_runs.get(b.port)
            if runs is None:
                runs = job.dut_runs[b.port] = []
            runs.extend([(a, a + len(d)) for a, d in b.runs])
        self._check_burst_shape(b)
        self._check_attributes(job, b)

    def _check_burst_shape(self, b) -> None:
        if b.burst != 1:                          # INCR bursts only
            return
        nbytes = 1 << b.size
        lo = b.addr
        hi = (lo - lo % nbytes) + nbytes * (b.len + 1)
        if lo // 64 == (hi - 1) // 64:            # boundaries are 64 << n bytes: none crossed
            return
        ref = self.ref
        if ref is None or not hasattr(ref, "burst_boundary"):
            return
        iface = _iface(b.port)
        bb = ref.burst_boundary(iface)
        if lo // bb != (hi - 1) // bb:
            self._mismatch(f"AXI burst crosses the {bb}-byte burst boundary of "
                           f"{iface.name.upper()} (AXI_x.max_beats): {b}")

    @staticmethod
    def _span(b) -> "tuple[int, int]":
        """Bytes a burst moved (strobed for a write, addressed for a read)."""
        runs = b.runs
        if len(runs) == 1:
            a, d = runs[0]
            return a, a + len(d)
        if runs:
            return min(a for a, _ in runs), max(a + len(d) for a, d in runs)
        nbytes = 1 << b.size
        return b.addr, b.addr - b.addr % nbytes + nbytes * b.beats

    def _check_attributes(self, job: Job, b) -> None:
        """Every burst: AxPROT from the PROT state; port group, AxCACHE and AxDOMAIN of the
        route (REGIONCFG -> MEM_ATTR) by which the reference accesses those bytes, the port of
        a striped group by the address (``RegionRoute.port_of``); a read must lie inside the
        reference's read footprint of that route (whole bus beats, plus the command stream's
        read window), unless the reference stopped at a fault and the DUT may have run ahead."""
        lo, hi = self._span(b)
        # the common case, decided without building anything: the bytes lie inside the
        # reference's footprint on the burst's own route (so that route is the one the
        # reference used, and a read is not stray); AxPROT and the striped port still checked
        iface = _iface(b.port)
        fp = job.ref_fp.get((b.write, iface, b.cache, b.domain))
        if fp is not None and hi > lo and fp.contains(lo, hi) and (
                job.ref_prot is None or b.prot == job.ref_prot):
            routes = job.route_of
            if routes is None:
                routes = job.route_of = {}
                for _, r in job.ref_routes:
                    if r.interface not in routes:
                        routes[r.interface] = (r, r.port_of(0) if getattr(r, "nports", 0) == 1 else None)
            route, port = routes.get(iface, (None, None))
            if route is None or (port or route.port_of(b.addr)) == b.port:
                return
        ctx = lambda: self._context(job, lo, b.write)  # noqa: E731
        what = lambda: f"AXI {b} bytes 0x{lo:010x}..0x{hi:010x}"  # noqa: E731 - only on a mismatch
        if job.ref_prot is not None and b.prot != job.ref_prot:
            self._mismatch(f"{what()}: AxPROT {b.prot:03b}, PROT gives {job.ref_prot:03b} "
                           f"({ctx()})")
        got = (iface, b.cache, b.domain)
        hit = {k[1:]: s for k, s in job.ref_fp.items()
               if k[0] == b.write and s.overlaps(lo, hi)}
        if hit:
            if got not in hit:
                want = next(iter(hit))
                self._mismatch(f"{what()}: port group/AxCACHE/AxDOMAIN {_fmt(got)}, the model's "
                               f"route for these bytes gives {_fmt(want)} ({ctx()})")
                return
            route = next((r for _, r in job.ref_routes if r.interface == got[0]), None)
            if route is not None and route.port_of(b.addr) != b.port:
                self._mismatch(f"{what()}: on {b.port}, the striping hash gives "
                               f"{route.port_of(b.addr)} ({ctx()})")
        elif job.ref_routes:
            cands = {}
            for n, r in job.ref_routes:
                port, _, cache, domain = r.axi_attrs(b.addr, b.write)
                cands.setdefault((port, cache, domain), n)
            if (b.port, b.cache, b.domain) not in cands:
                self._mismatch(f"{what()}: port/AxCACHE/AxDOMAIN {b.port}/cache={b.cache:04b}/"
                               f"domain={b.domain} is the route of no region nor of the command "
                               "stream (" + ", ".join(f"{n}: {p}/cache={c:04b}/domain={d}"
                                                      for (p, c, d), n in cands.items()) + ")")
        if b.write or job.ref_status & FAULT_STOP:
            return
        stray = IntervalSet([(lo, hi)]) - hit.get(got, IntervalSet())
        if stray:
            self._mismatch(f"{what()}: read outside the model's read footprint on this route: "
                           f"{stray.describe()} ({ctx()})")

    def outstanding_limit(self, port: str, write: bool) -> "int | None":
        """The reference's limit on outstanding bursts of a port (Device.max_outstanding)."""
        ref = self.ref
        if ref is None or not hasattr(ref, "max_outstanding"):
            return None
        from tlm.ethos_u85.memory import Interface
        iface = Interface.ext if port.startswith("EXT") else Interface.sram
        rd, wr = ref.max_outstanding(iface)
        return wr if write else rd

    def on_irq_rise(self) -> None:
        """Feed of the IRQ pin's rising edges (``Env`` awaits ``RisingEdge(IRQ)``)."""
        if self.job is not None and not self.job.closed:
            self.job.dut_irq_rises += 1
        elif self.enabled:
            self._dut_idle_rises += 1

    # ------------------------------------------------------------------ end of test
    def check(self, allow_open_job: bool = False) -> None:
        if self.coverage is not None:
            engine.flush()
        if self.in_flight and not allow_open_job:
            self._mismatch(f"job {self.job.index} never seen to finish (no STATUS read showed "
                           "the DUT stopped)")

        assert not self.mismatches, (f"{len(self.mismatches)} scoreboard mismatch(es), "
                                     f"first: {self.mismatches[0]}")


# Backwards-compatible name (the APB-only scoreboard of the first bench).
ApbScoreboard = Scoreboard
