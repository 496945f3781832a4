"""The NE16 as a device: the HWPE peripheral register port, two job contexts, the job queue,
the end-of-job event, and the engine that executes jobs on the TCDM port.

Job handshake (seed; EXT facts where the seed is silent, each marked):
* ACQUIRE read: returns the job ID (an 8-bit counter, EXT hwpe-ctrl) and locks the controller;
  the job's registers are written into the context the ID is bound to (contexts alternate,
  job N uses context N mod 2 after a clear). When a job is already acquired and not yet
  committed the read returns 0xFFFFFFFE, when both contexts hold jobs 0xFFFFFFFF (EXT
  hwpe-ctrl RESP_ANOTHER_PE_OFFLOADING / RESP_ALL_CXT_BUSY; pulp-nnx treats >= 256 as "not
  acquired"). Neither changes any state.
* TRIGGER write 0: commit the acquired job and start execution. Non-0: commit without
  starting; the queue starts when a job is committed with 0. A job committed without start
  behind a running job runs after it (the GAP9 simulator model). Committing a second job
  without start while the first also waits is the seed's "only the first job in a queue may
  be committed without triggering": both stay queued (until SOFT_CLEAR or ...) and the model
  reports it. A TRIGGER write with no acquired job is ignored and reported.
* STATUS: bit 0 / bit 8 = context 0 / 1 holds a job that is enqueued or running.
* RUNNING_JOB: the ID of the running job, else of the last job that ran (seed; 0 after reset).
* FINISHED (EXT hwpe-ctrl): jobs finished since the last access, saturating at 2; reading or
  writing it clears it.
* SOFT_CLEAR write: clears the queue, the running job (abandoned: no further access, no
  event), the lock, the job ID counter, RUNNING_JOB, FINISHED and the pending events; 0 also
  clears both contexts' job registers, non-0 keeps them (seed).
* End of job: the end-of-job event is raised once per job (counted; `take_event()` consumes
  one), STATUS drops the job's bit, FINISHED counts it.

A job starts when it is released (TRIGGER 0 with an idle engine, or the end of the job
before it): RUNNING_JOB moves to it at once, as pulp-nnx's resolve check expects; the engine
reads the job's context registers then. Execution is stepped: `step()` runs one output
subtile of the running job (tlm/ne16/engine.py); memory is accessed only during steps.

Illegal programming never raises: a job whose registers `JobConfig.problem()` refuses is
*rejected* (no memory access; it completes at once with its event), a job whose access gets
an error response from the memory is *aborted* there; both are appended to `errors` (the
trace target reports them as faults) and to `history`.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ..core.memory import Memory
from . import registers as R
from .engine import Engine, MemoryFault, TcdmPort
from .job import JobConfig

N_CONTEXTS = 2
ACQUIRE_BUSY = 0xFFFFFFFE          # EXT hwpe-ctrl: another offload in progress (-2)
ACQUIRE_FULL = 0xFFFFFFFF          # EXT hwpe-ctrl: all contexts busy (-1)
RESERVED = (0x1C,)                 # inside the mandatory block, named by nobody: read 0


@dataclass
class QueuedJob:
    job_id: int
    ctx: int
    start: bool                     # committed with TRIGGER = 0


@dataclass
class JobRecord:
    job_id: int
    ctx: int
    outcome: str = "running"        # "done", "rejected", "aborted", "cleared"
    reason: str = ""
    config: "JobConfig | None" = None
    transactions: int = 0
    subtiles: int = 0


@dataclass
class _Running:
    job: QueuedJob
    record: JobRecord
    engine: Engine
    steps: object                   # the engine's generator
    start_txns: int = 0


class Ne16:
    """The NE16 TLM. `memory` is a `tlm.core.memory.Memory` (the TCDM as seen by the NE16;
    default: a sparse 32-bit space, no faults). `literal` selects the engine's slow literal
    arithmetic, `fast=False` the port's one-transaction-at-a-time reads (both for
    cross-checks; results are the same)."""

    def __init__(self, memory: "Memory | None" = None, *, literal: bool = False,
                 fast: bool = True):
        self.memory = memory if memory is not None else Memory(log=False)
        self.port = TcdmPort(self.memory, fast=fast)
        self.literal = literal
        self.errors: list[str] = []             # drained by the trace target
        self.history: list[JobRecord] = []
        self.listeners: list = []               # fn(event, **details): "start", "end", "clear"
        self.ctx_regs = [[0] * R.N_JOB_REGS for _ in range(N_CONTEXTS)]
        self._clear_status()

    # ---- state -----------------------------------------------------------------------------
    def _clear_status(self) -> None:
        self.cfg_ctx = 0                        # context the next job is programmed into
        self.next_id = 0
        self.acquired: "int | None" = None
        self.queue: deque[QueuedJob] = deque()  # committed jobs; the head runs first
        self.running: "_Running | None" = None
        self.go = False                         # a TRIGGER 0 released the queue
        self.running_job_id = 0
        self.finished = 0
        self.events_pending = 0
        self.events_total = 0

    def _emit(self, event: str, **details) -> None:
        for fn in list(self.listeners):
            fn(event, **details)

    def _error(self, text: str) -> None:
        self.errors.append(text)

    @property
    def busy(self) -> bool:
        """busy_o: a job is running."""
        return self.running is not None

    @property
    def status(self) -> int:
        word = 0
        for j in self.queue:
            word |= R.field("STATUS", f"STATUS{j.ctx}").mask
        return word

    def regs(self, ctx: int) -> tuple:
        return tuple(self.ctx_regs[ctx])

    # ---- the peripheral port ------------------------------------------------------------------
    def periph_write(self, offset: int, value: int, be: int = 0xF) -> None:
        """One write on the HWPE peripheral port (offset from the NE16 base)."""
        off = offset & (R.WINDOW - 1) & ~3
        value &= 0xFFFFFFFF
        reg = R.by_offset(off)
        if reg is None:
            if off not in RESERVED:
                self._error(f"write of 0x{value:08x} to unmapped offset 0x{off:x} ignored")
            return
        if reg.job:
            ctx = self.cfg_ctx
            if any(j.ctx == ctx for j in self.queue):
                self._error(f"write to {reg.name} (context {ctx}) while a job of that context is "
                            f"in flight")
            bmask = sum(0xFF << (8 * b) for b in range(4) if (be >> b) & 1)
            old = self.ctx_regs[ctx][reg.index]
            self.ctx_regs[ctx][reg.index] = (old & ~bmask) | (value & bmask)
        elif reg.name == "TRIGGER":
            self._trigger(value)
        elif reg.name == "SOFT_CLEAR":
            self.soft_clear(keep_registers=value != 0)
        elif reg.name == "FINISHED":
            self.finished = 0
        # ACQUIRE, STATUS, RUNNING_JOB are read-only, SWSYNC has no effect: writes ignored

    def periph_read(self, offset: int) -> int:
        """One read on the HWPE peripheral port; a read of ACQUIRE has its side effect."""
        off = offset & (R.WINDOW - 1) & ~3
        reg = R.by_offset(off)
        if reg is None:
            if off not in RESERVED:
                self._error(f"read of unmapped offset 0x{off:x} returned 0")
            return 0
        if reg.job:
            return self.ctx_regs[self.cfg_ctx][reg.index]
        name = reg.name
        if name == "ACQUIRE":
            return self._acquire()
        if name == "STATUS":
            return self.status
        if name == "RUNNING_JOB":
            return self.running_job_id
        if name == "FINISHED":
            v, self.finished = self.finished, 0
            return v
        return 0                                # TRIGGER, SOFT_CLEAR (write-only), SWSYNC

    def _acquire(self) -> int:
        if self.acquired is not None:
            return ACQUIRE_BUSY
        if len(self.queue) >= N_CONTEXTS:
            return ACQUIRE_FULL
        self.acquired = self.next_id
        self.next_id = (self.next_id + 1) & 0xFF
        return self.acquired

    def _trigger(self, value: int) -> None:
        if self.acquired is None:
            self._error(f"TRIGGER 0x{value:x} without an acquired job ignored")
            return
        start = value == 0
        if not start and self.queue and not self.go:
            self._error(f"job {self.acquired} committed without start behind job "
                        f"{self.queue[0].job_id}, which also waits: only the first job in a "
                        f"queue may be committed without triggering; both stay queued")
        self.queue.append(QueuedJob(self.acquired, self.cfg_ctx, start))
        self.cfg_ctx = (self.cfg_ctx + 1) % N_CONTEXTS
        self.acquired = None
        if start:
            self.go = True
            if self.running is None:            # the head of the queue starts now
                self._start(self.queue[0])

    def soft_clear(self, keep_registers: bool) -> None:
        if self.running is not None:
            rec = self.running.record
            rec.outcome, rec.reason = "cleared", "abandoned by SOFT_CLEAR"
        if not keep_registers:
            self.ctx_regs = [[0] * R.N_JOB_REGS for _ in range(N_CONTEXTS)]
        self._clear_status()
        self._emit("clear", keep_registers=keep_registers)

    # ---- execution ---------------------------------------------------------------------------
    def step(self) -> bool:
        """Run one output subtile of the running job; False when there is nothing to do."""
        run = self.running
        if run is None:
            return False
        try:
            next(run.steps)
            run.record.subtiles += 1
        except StopIteration:
            self._finish("done")
        except MemoryFault as e:
            self._finish("aborted", f"memory fault: {e}")
        except Exception as e:          # noqa: BLE001 - a model bug is reported, never raised
            self._finish("aborted", f"internal model error: {type(e).__name__}: {e}")
        return True

    def run(self, max_steps: int = 1 << 30) -> int:
        """Run until idle (or `max_steps`); returns the steps taken."""
        n = 0
        while n < max_steps and self.step():
            n += 1
        return n

    def _start(self, job: QueuedJob) -> None:
        cfg = JobConfig.from_regs(self.ctx_regs[job.ctx])
        rec = JobRecord(job.job_id, job.ctx, config=cfg)
        self.history.append(rec)
        self.running_job_id = job.job_id
        self._emit("start", job_id=job.job_id, ctx=job.ctx)
        problem = cfg.problem()
        if problem is not None:
            self.running = _Running(job, rec, None, None, self.port.transactions)
            self._finish("rejected", problem)
            return
        eng = Engine(cfg, self.port, literal=self.literal)
        self.running = _Running(job, rec, eng, eng.run(), self.port.transactions)

    def _finish(self, outcome: str, reason: str = "") -> None:
        run = self.running
        rec = run.record
        rec.outcome, rec.reason = outcome, reason
        rec.transactions = self.port.transactions - run.start_txns
        self.running = None
        self.queue.popleft()
        if not self.queue:
            self.go = False
        self.finished = min(self.finished + 1, 2)
        self.events_pending += 1
        self.events_total += 1
        if reason:
            self._error(f"job {rec.job_id} {outcome}: {reason}")
        self._emit("end", job_id=rec.job_id, ctx=rec.ctx, outcome=outcome)
        if self.go and self.queue:              # the next context starts right away
            self._start(self.queue[0])

    def take_event(self) -> bool:
        """Consume one end-of-job event if one is pending."""
        if self.events_pending:
            self.events_pending -= 1
            return True
        return False

    def wait_event(self, max_steps: int) -> bool:
        """Run until an end-of-job event not yet consumed exists (consumes it)."""
        n = 0
        while not self.events_pending and n < max_steps:
            if not self.step():
                break
            n += 1
        return self.take_event()
