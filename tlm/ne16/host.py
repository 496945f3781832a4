"""A Python host for the NE16 TLM: what the pulp-nnx driver does, over any trace target.

    from tlm.ne16 import builder, host
    prog = builder.build(layer)                      # registers and tensors of a layer
    out = host.run_program(prog)                     # on a fresh TLM; (Ho, Wo, Cout)
    host.record_trace(prog, "folder")                # the same run as a replayable trace

`Host` wraps a `TraceTarget` (the TLM's, a `RecordingTarget` around it, or a bench driver
with the same methods): `dispatch` reads ACQUIRE (a value >= 256 means "not acquired", EXT
pulp-nnx), writes the 24 job registers and TRIGGER (0: commit and start; 1: commit only),
`wait` waits for one end-of-job event, `resolve_check` is pulp-nnx's
`ne16_nnx_resolve_check` (RUNNING_JOB and STATUS).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.trace import RecordingTarget
from . import registers as R
from .builder import Program
from .trace_target import Ne16TraceTarget

OFF = R.OFFSETS
STATUS_EMPTY = 0x000


class Host:
    def __init__(self, target):
        self.t = target

    def load(self, prog: Program) -> None:
        for addr, data in prog.loads:
            self.t.load_mem(addr, data)

    def acquire(self) -> "int | None":
        v = self.t.read_reg(OFF["ACQUIRE"])
        return None if v >= 256 else v

    def program(self, regs) -> None:
        for reg, value in zip(R.JOB_REGS, regs):
            self.t.write_reg(reg.offset, value)

    def dispatch(self, regs, start: bool = True) -> "int | None":
        """Acquire, program and commit one job; None if the queue was full."""
        job_id = self.acquire()
        if job_id is None:
            return None
        self.program(regs)
        self.t.write_reg(OFF["TRIGGER"], 0 if start else 1)
        return job_id

    def wait(self, max_steps: "int | None" = None) -> bool:
        return self.t.wait_irq(self.t.wait_default if max_steps is None else max_steps)

    def status(self) -> int:
        return self.t.read_reg(OFF["STATUS"])

    def resolve_check(self, job_id: int) -> bool:
        """True when job `job_id` is finished (pulp-nnx ne16_nnx_resolve_check)."""
        last = self.t.read_reg(OFF["RUNNING_JOB"]) & 0xFF
        return not (last == ((job_id - 1) & 0xFF) or (last == job_id and self.status() != STATUS_EMPTY))

    def soft_clear(self, keep_registers: bool = False) -> None:
        self.t.write_reg(OFF["SOFT_CLEAR"], 1 if keep_registers else 0)

    def run(self, prog: Program) -> None:
        """Load a program and run its jobs one after the other, waiting for each event."""
        self.load(prog)
        for regs in prog.jobs:
            job_id = self.dispatch(regs)
            if job_id is None:
                raise RuntimeError("ACQUIRE failed: the job queue is full")
            if not self.wait():
                raise RuntimeError(f"job {job_id}: no end-of-job event")

    def output(self, prog: Program) -> np.ndarray:
        return prog.decode_output(self.t.read_mem(prog.out_addr, prog.out_size))


def run_program(prog: Program, target: "Ne16TraceTarget | None" = None) -> np.ndarray:
    """Run a program on a TLM (a fresh one by default) and return its output (Ho, Wo, Cout).
    RuntimeError if the device reported a fault."""
    t = target or Ne16TraceTarget()
    h = Host(t)
    h.run(prog)
    faults = t.faults()
    if faults:
        raise RuntimeError("; ".join(faults))
    return h.output(prog)


def record_trace(prog: Program, folder, name: str = "trace.txt", comment: str = "") -> Path:
    """Run `prog` on a fresh TLM and write the host's actions as a trace: ACQUIRE reads, job
    register writes, TRIGGER, wait_irq, STATUS read and a check of the output bytes."""
    rec = RecordingTarget(Ne16TraceTarget(), config="ne16")
    if comment:
        rec.writer.comment(comment)
    h = Host(rec)
    h.run(prog)
    rec.read_reg(OFF["STATUS"])
    rec.check_mem(prog.out_addr, prog.out_size)
    faults = rec.faults()
    if faults:
        raise RuntimeError("; ".join(faults))
    return rec.writer.save(folder, name)
