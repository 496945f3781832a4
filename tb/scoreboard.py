"""Scoreboard: the DUT's observable behaviour against the TLM (``tlm.device.Device``).

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
  error; a burst that crosses a multiple of the reference's ``burst_boundary`` for its port
  group (AXI_SRAM/AXI_EXT max_beats, 4 KB) is an error; a burst that starts inside a
  reference transaction of the same port and direction must carry its AxPROT, AxCACHE and
  AxDOMAIN.

* **Functional coverage** (tb/coverage.py): every APB transfer and AXI burst the scoreboard
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

from tb import coverage as _coverage
from tlm import registers as R
from tlm.memory import Resp

_O = {r.ident: r.offset for r in R.iter_registers()}
CMD, STATUS, QREAD = _O["CMD"], _O["STATUS"], _O["QREAD"]
ST_STATE, ST_IRQ, ST_BUS, ST_PARSE, ST_END, ST_ECC, ST_BRANCH = 0, 1, 2, 4, 5, 8, 9
# A stopped NPU has raised its IRQ (every stop but a reset does) or holds a fault bit;
# cmd_end_reached is not evidence: it stays set until QBASE/QSIZE are written. Clear the IRQ
# (CMD.clear_irq) before starting a job, or a STATUS read before the DUT reaches RUNNING
# would end the job early.
STOP_EVIDENCE = (1 << ST_IRQ) | (1 << ST_BUS) | (1 << ST_PARSE) | (1 << ST_ECC) | (1 << ST_BRANCH)


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
    ref_stop: object = None             # tlm.device.StopReason
    ref_status: int = 0
    ref_qread: int = 0
    ref_irq_rises: int = 0
    ref_irq: bool = False
    ref_writes: dict = field(default_factory=dict)      # port -> IntervalSet (OKAY writes)
    ref_dontcare: IntervalSet = field(default_factory=IntervalSet)
    ref_txns: dict = field(default_factory=dict)        # (port, write) -> sorted [(addr, end, txn)]
    ref_txn_count: int = 0
    dut_writes: dict = field(default_factory=dict)      # port -> IntervalSet (OKAY writes)
    dut_bursts: int = 0
    dut_irq_rises: int = 0
    dut_status: "int | None" = None
    closed: bool = False
    mismatches_before: int = 0

    def ref_all_writes(self) -> IntervalSet:
        s = IntervalSet()
        for v in self.ref_writes.values():
            s = s | v
        return s

    def dut_all_writes(self) -> IntervalSet:
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

    *memory* is the bench memory (``tb.axi.BenchMemory``); the reference device is given with
    ``set_reference(device)`` and must run on its own memory (a ``BenchMemory`` copy).
    """

    def __init__(self, memory=None, log: "logging.Logger | None" = None,
                 irq_level: "Callable[[], int | None] | None" = None,
                 coverage: "_coverage.BenchCoverage | None | bool" = True):
        self.memory = memory
        # functional coverage: True = this process's model (tb.coverage.current())
        self.coverage = _coverage.current() if coverage is True else (coverage or None)
        self.log = log or logging.getLogger("cocotb.tb.scoreboard")
        self.ref = None
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

    # ------------------------------------------------------------------ plumbing
    def set_reference(self, device) -> None:
        self.ref = device
        self.job = None
        if self.coverage is not None and isinstance(getattr(device, "hooks", None), list):
            device.hooks.append(_coverage.JobRecorder(device, self.coverage))

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
        """APB listener (tb.apb.Apb5Manager.listeners)."""
        if self.coverage is not None:
            self.coverage.sample_apb(r)
        ref = self.ref
        if not self.enabled or ref is None:
            return
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
        if job is None or not job.closed or not job.ref_status & (1 << ST_BUS) or exp_err:
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
        return not status & 1 and bool(status & STOP_EVIDENCE)

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

        def hook(event, details):
            if event == "irq":
                if details.get("level") and not level[0]:
                    rises[0] += 1
                level[0] = bool(details.get("level"))
        ref.hooks.append(hook)
        try:
            job.ref_stop = ref.run()
        finally:
            ref.hooks.remove(hook)
            mem.log_enabled = was_log
        job.ref_irq_rises = rises[0]
        job.ref_irq = bool(ref.irq)
        job.ref_status = ref.status_word
        job.ref_qread = ref.qread
        txns = list(mem.log)
        mem.log.clear()
        job.ref_txn_count = len(txns)
        for t in txns:
            key = (t.port, t.write)
            job.ref_txns.setdefault(key, []).append((t.addr, t.addr + t.length, t))
            if t.write:
                if t.resp == Resp.OKAY:
                    job.ref_writes.setdefault(t.port, IntervalSet()).add(t.addr, t.addr + t.length)
                else:
                    job.ref_dontcare.add(t.addr, t.addr + t.length)
        for v in job.ref_txns.values():
            v.sort(key=lambda e: e[0])
        self.jobs.append(job)
        self.job = job
        self.log.info("job %d: reference ran %s; %d transactions, writes %s", job.index,
                      job.ref_stop, len(txns), job.ref_all_writes().describe())

    def close_job(self) -> "Job | None":
        """End the job in flight and run the end-of-job checks (see the module docstring)."""
        job = self.job
        if job is None or job.closed:
            return job
        job.closed = True
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
            self._mismatch(f"{tag}: the DUT never wrote {missing.describe()} that the model "
                           "writes")
        if self.memory is not None:
            self._compare_memory(tag, (ref_all | dut_all) - job.ref_dontcare)
        n = len(self.mismatches) - job.mismatches_before
        job._mismatch_count = n
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
        tag = f"job {job.index} ({what})"
        ref_all, dut_all = self._check_footprint(job, tag)
        if self.memory is not None:
            self._compare_memory(tag, dut_all - job.ref_dontcare)
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
                self._mismatch(f"{tag}: the DUT wrote {wrong.describe()} on {port}; the model "
                               "writes it on another port")
        return ref_all, dut_all

    def _compare_memory(self, tag: str, span: IntervalSet) -> None:
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
                           f"0x{addr:010x}: 0x{got:02x}, model 0x{want:02x}")

    # ------------------------------------------------------------------ AXI / IRQ monitors
    def on_burst(self, b) -> None:
        """AXI monitor listener (tb.axi.AxiSubordinate.listeners)."""
        if self.coverage is not None:
            self.coverage.sample_burst(b)
        job = self.job
        if job is None or job.closed:
            if b.write:
                self._mismatch(f"AXI write with the NPU not running a job: {b}")
            else:
                self.stray_reads += 1
            return
        job.dut_bursts += 1
        if b.write and b.resp == Resp.OKAY:
            s = job.dut_writes.setdefault(b.port, IntervalSet())
            for a, d in b.runs:
                s.add(a, a + len(d))
        self._check_burst_shape(b)
        self._check_attributes(job, b)

    def _check_burst_shape(self, b) -> None:
        ref = self.ref
        if ref is None or not hasattr(ref, "burst_boundary"):
            return
        from tlm.memory import Interface
        iface = Interface.ext if b.port.startswith("EXT") else Interface.sram
        bb = ref.burst_boundary(iface)
        nbytes = 1 << b.size
        lo = b.addr
        hi = (b.addr - b.addr % nbytes) + nbytes * b.beats
        if b.burst == 1 and (lo // bb != (hi - 1) // bb):
            self._mismatch(f"AXI burst crosses the {bb}-byte burst boundary of "
                           f"{iface.name.upper()} (AXI_x.max_beats): {b}")

    def _check_attributes(self, job: Job, b) -> None:
        entries = job.ref_txns.get((b.port, b.write))
        start = b.runs[0][0] if b.runs else b.addr
        t = None
        if entries:
            i = self._find(entries, start)
            if 0 <= i < len(entries) and entries[i][0] <= start < entries[i][1]:
                t = entries[i][2]
        if t is None:
            return
        want = (t.prot & 7, t.cache & 0xF, t.domain & 3)
        got = (b.prot, b.cache, b.domain)
        if want != got:
            self._mismatch(f"AXI {b}: attributes prot/cache/domain {got}, the model's "
                           f"{t.channel.name} transaction has {want}")

    @staticmethod
    def _find(entries, start: int) -> int:
        lo, hi = 0, len(entries)
        while lo < hi:
            mid = (lo + hi) // 2
            if entries[mid][0] <= start:
                lo = mid + 1
            else:
                hi = mid
        # the covering entry may start earlier than the last one starting <= start
        i = lo - 1
        while i >= 0 and entries[i][1] <= start and i > lo - 64:
            i -= 1
        return i

    def outstanding_limit(self, port: str, write: bool) -> "int | None":
        """The reference's limit on outstanding bursts of a port (Device.max_outstanding)."""
        ref = self.ref
        if ref is None or not hasattr(ref, "max_outstanding"):
            return None
        from tlm.memory import Interface
        iface = Interface.ext if port.startswith("EXT") else Interface.sram
        rd, wr = ref.max_outstanding(iface)
        return wr if write else rd

    def on_irq_rise(self) -> None:
        if self.job is not None and not self.job.closed:
            self.job.dut_irq_rises += 1

    # ------------------------------------------------------------------ end of test
    def check(self, allow_open_job: bool = False) -> None:
        if self.coverage is not None:
            _coverage.flush()
        if self.in_flight and not allow_open_job:
            self._mismatch(f"job {self.job.index} never seen to finish (no STATUS read showed "
                           "the DUT stopped)")
        assert not self.mismatches, (f"{len(self.mismatches)} scoreboard mismatch(es), "
                                     f"first: {self.mismatches[0]}")


# Backwards-compatible name (the APB-only scoreboard of the first bench).
ApbScoreboard = Scoreboard
