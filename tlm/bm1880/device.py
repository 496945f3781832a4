"""The chip model: gmem, sliced lmem, and the execution of command buffers.

`Bm1880` holds gmem (the shared sparse `Memory`, 40-bit, every GDMA access a bus
transaction) and lmem (`npu_num` slices of `lmem_size` bytes, one byte array; the address
of a datum follows guide 2.3). `Program.load(buf)` decodes a command buffer, checks every
command with the rules the API applies, builds the schedule and runs the hazard check;
`Job` executes it one command per step in the schedule's order. Every problem is a `Fault`
(code from `regs.FAULTS`, the command, one line of text), never a Python exception.

`CommandProcessor` puts the model behind the register window of `regs.py` (used by traces).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

from ..core.memory import Memory, Resp, Transaction
from . import regs
from .checks import ArgError, check
from .chip import CHIP, GMEM_ADDR_BITS, bmk1880_chip_info_t
from .descriptors import DEPENDENCY, MAX_CMDBUF, DecodeError, Record, decode
from .ops import DataFault, execute, operands
from .schedule import CycleError, HazardBudgetError, Schedule, footprint
from .tensors import TG, TL

PORT = "GDMA"
GDMA_LS = ("gdma_load", "gdma_store", "gdma_load_stride", "gdma_store_stride")


class Channel(enum.IntEnum):
    """What a gmem transaction is for."""
    cmd = 0                       # command-buffer fetch
    gdma_rd = 1
    gdma_wr = 2


class GmemBusError(Exception):
    def __init__(self, txn: Transaction):
        super().__init__(f"{txn.resp.name} on gmem {'write' if txn.write else 'read'} "
                         f"0x{txn.addr:x}+{txn.length} ({Channel(txn.channel).name})")
        self.txn = txn


@dataclass
class Fault:
    code: str                     # regs.FAULTS name
    message: str
    index: int = -1               # computation command index, -1: none
    offset: int = -1              # byte offset in the buffer, -1: none

    def __str__(self) -> str:
        return f"FAULT_{self.code}: {self.message}"


class FaultError(Exception):
    def __init__(self, fault: Fault):
        super().__init__(str(fault))
        self.fault = fault


class Bm1880:
    """gmem + lmem of one chip."""

    def __init__(self, chip: bmk1880_chip_info_t = CHIP, gmem: "Memory | None" = None):
        self.chip = chip
        self.gmem = gmem if gmem is not None else Memory(log=False)
        self.lmem = np.zeros(chip.lmem_total, np.uint8)

    @property
    def slices(self) -> np.ndarray:
        """lmem as (npu_num, lmem_size): slice k is NPU k's local memory (a view)."""
        return self.lmem.reshape(self.chip.npu_num, self.chip.lmem_size)

    # ---- gmem through the front door (bus transactions, one per contiguous run) --------------------
    @staticmethod
    def _runs(sorted_addr: np.ndarray):
        brk = np.flatnonzero(np.diff(sorted_addr) != 1) + 1
        starts = np.concatenate(([0], brk))
        ends = np.concatenate((brk, [sorted_addr.size]))
        return zip(starts.tolist(), ends.tolist())

    def gmem_read(self, addr: np.ndarray, channel: Channel = Channel.gdma_rd) -> np.ndarray:
        flat = addr.reshape(-1)
        if not flat.size:
            return np.zeros(addr.shape, np.uint8)
        u, inv = np.unique(flat, return_inverse=True)
        data = np.empty(u.size, np.uint8)
        for s, e in self._runs(u):
            txn, d = self.gmem.access(Transaction(PORT, channel, False, int(u[s]), e - s))
            if txn.resp != Resp.OKAY:
                raise GmemBusError(txn)
            data[s:e] = d
        return data[inv].reshape(addr.shape)

    def gmem_write(self, addr: np.ndarray, values: np.ndarray) -> None:
        flat = addr.reshape(-1)
        order = np.argsort(flat, kind="stable")
        u, vals = flat[order], np.asarray(values, np.uint8).reshape(-1)[order]
        for s, e in self._runs(u):
            txn, _ = self.gmem.access(Transaction(PORT, Channel.gdma_wr, True, int(u[s]), e - s), vals[s:e])
            if txn.resp != Resp.OKAY:
                raise GmemBusError(txn)

    def fetch(self, addr: int, size: int) -> bytes:
        """Read a command buffer from gmem (one transaction)."""
        if addr < 0 or addr + size > 1 << GMEM_ADDR_BITS:
            raise GmemBusError(Transaction(PORT, Channel.cmd, False, addr, size, resp=Resp.DECERR))
        if size == 0:
            return b""
        txn, d = self.gmem.access(Transaction(PORT, Channel.cmd, False, addr, size))
        if txn.resp != Resp.OKAY:
            raise GmemBusError(txn)
        return d.tobytes()

    # ---- programs ---------------------------------------------------------------------------------------
    def run(self, buf: bytes) -> "RunResult":
        """Load and run a whole command buffer; the result says done or which fault."""
        job = Job(self, buf)
        while job.step():
            pass
        return job.result()


@dataclass
class Command:
    index: int                    # computation command index (dependency records not counted)
    record: Record
    chip: bmk1880_chip_info_t = field(repr=False)
    _ops: "dict | None" = field(default=None, repr=False)

    @property
    def ops(self) -> dict:
        """The operands (addresses), computed when first needed."""
        if self._ops is None:
            self._ops = operands(self.chip, self.record.kind, self.record.args)
        return self._ops

    def release(self) -> None:
        self._ops = None

    @property
    def size(self) -> int:
        """An upper bound of the bytes the command touches (its operands' data; a GDMA load or
        store also the gmem side), without computing addresses."""
        n = sum(v.count() for v in self.record.args.values() if isinstance(v, (TL, TG)))
        return 2 * n if self.record.kind.name in GDMA_LS else n


class Program:
    """A decoded, checked and scheduled command buffer."""

    def __init__(self, commands: list[Command], deps: list[tuple[int, int]], schedule: Schedule):
        self.commands, self.deps, self.schedule = commands, deps, schedule

    @classmethod
    def load(cls, buf: bytes, chip: bmk1880_chip_info_t = CHIP) -> "Program":
        """Raises `FaultError` (LIMIT, DECODE, ARG, DEP or HAZARD)."""
        if len(buf) > MAX_CMDBUF:
            raise FaultError(Fault("LIMIT", f"the command buffer holds {len(buf)} bytes; the model takes at most "
                                            f"{MAX_CMDBUF} (choice C-LIMIT)"))
        try:
            records = decode(buf)
        except DecodeError as e:
            raise FaultError(Fault("DECODE", str(e), offset=e.offset)) from None
        commands: list[Command] = []
        deps: list[tuple[int, int]] = []
        for r in records:
            if r.kind is DEPENDENCY:
                b, a = r.args["before"], r.args["after"]
                where = f"dependency record at offset 0x{r.offset:x}"
                if b >= len(commands) or a >= len(commands):
                    raise FaultError(Fault("DEP", f"{where}: names command {max(a, b)}, only {len(commands)} "
                                                  "precede it", offset=r.offset))
                if a == b:
                    raise FaultError(Fault("DEP", f"{where}: command {a} cannot precede itself", offset=r.offset))
                deps.append((b, a))
                continue
            i = len(commands)
            try:
                check(r.kind, r.args, chip)
            except ArgError as e:
                raise FaultError(Fault("ARG", f"command {i} at offset 0x{r.offset:x} ({r.kind.call}): {e}",
                                       i, r.offset)) from None
            commands.append(Command(i, r, chip))
        try:
            sched = Schedule([(c.record.kind.engine, c.record.sync, c.record.stream) for c in commands], deps)
        except CycleError as e:
            raise FaultError(Fault("DEP", str(e))) from None
        prog = cls(commands, deps, sched)
        prog.check_hazards()
        return prog

    def check_hazards(self) -> None:
        def fp(i: int):
            c = self.commands[i]
            f = footprint(c.ops)
            c.release()
            return f
        try:
            h = self.schedule.hazard(fp, lambda i: self.commands[i].size)
        except HazardBudgetError as e:
            raise FaultError(Fault("LIMIT", str(e))) from None
        if h is not None:
            i, j, mem, addr = h
            ci, cj = self.commands[i].record, self.commands[j].record
            raise FaultError(Fault("HAZARD", f"commands {i} ({ci.kind.call}) and {j} ({cj.kind.call}) may run in "
                                   f"parallel and both touch {mem} 0x{addr:x}, one writing it (choice C-HAZARD)",
                         j, self.commands[j].record.offset))


@dataclass
class RunResult:
    done: bool
    fault: "Fault | None"
    executed: int

    @property
    def ok(self) -> bool:
        return self.done and self.fault is None

    def __str__(self) -> str:
        return f"done, {self.executed} commands" if self.ok else f"{self.fault} ({self.executed} commands ran)"


class Job:
    """One command buffer running on a chip: `step()` executes one command."""

    def __init__(self, m: Bm1880, buf: bytes):
        self.m = m
        self.fault: "Fault | None" = None
        self.executed = 0
        self.program: "Program | None" = None
        self._pos = 0
        try:
            self.program = Program.load(buf, m.chip)
        except FaultError as e:
            self.fault = e.fault

    @property
    def finished(self) -> bool:
        return self.fault is not None or self.program is None or self._pos >= len(self.program.schedule.order)

    def step(self) -> bool:
        """Execute the next command; False when the job has ended (done or faulted)."""
        if self.finished:
            return False
        cmd = self.program.commands[self.program.schedule.order[self._pos]]
        r = cmd.record
        try:
            execute(self.m, r.kind, r.args, cmd.ops)
            cmd.release()
        except GmemBusError as e:
            self.fault = Fault("BUS", f"command {cmd.index} at offset 0x{r.offset:x} ({r.kind.call}): {e}",
                               cmd.index, r.offset)
            return False
        except DataFault as e:
            self.fault = Fault("DATA", f"command {cmd.index} at offset 0x{r.offset:x}: {e}", cmd.index, r.offset)
            return False
        self._pos += 1
        self.executed += 1
        return not self.finished

    def result(self) -> RunResult:
        return RunResult(self.fault is None and self.finished, self.fault, self.executed)


class CommandProcessor:
    """The model behind the register window (regs.REGISTERS)."""

    def __init__(self, m: "Bm1880 | None" = None):
        self.m = m if m is not None else Bm1880()
        self.regs = {r.name: r.reset for r in regs.REGISTERS}
        self.job: "Job | None" = None
        self.events: list[str] = []               # register-access problems and faults, one line each

    @property
    def irq(self) -> bool:
        return bool(self.regs["IRQ_STATUS"] & self.regs["IRQ_ENABLE"])

    @property
    def busy(self) -> bool:
        return self.job is not None

    def _status(self, **kw) -> None:
        st = regs.BY_NAME["STATUS"]
        v = 0
        for name, val in kw.items():
            v |= st.field(name).put(val)
        self.regs["STATUS"] = v

    def write(self, offset: int, value: int) -> None:
        r = regs.BY_OFFSET.get(offset)
        if r is None:
            self.events.append(f"write of 0x{value:08x} to unmapped offset 0x{offset:x}")
            return
        if r.access == "ro":
            self.events.append(f"write of 0x{value:08x} to read-only register {r.name} (offset 0x{offset:x})")
            return
        if value & ~r.writable_mask:
            self.events.append(f"write of 0x{value:08x} to {r.name} sets bits outside its fields "
                               f"(mask 0x{r.writable_mask:08x}); they are ignored")
        value &= r.writable_mask
        if r.access == "w1c":
            self.regs[r.name] &= ~value
        elif r.name == "DOORBELL":
            if value & 1:
                self._start()
        else:
            self.regs[r.name] = value

    def read(self, offset: int) -> int:
        r = regs.BY_OFFSET.get(offset)
        if r is None:
            self.events.append(f"read of unmapped offset 0x{offset:x}")
            return 0
        return 0 if r.access == "wo" else self.regs[r.name]

    def _start(self) -> None:
        if self.busy:
            self.events.append("DOORBELL written while a buffer is running; ignored")
            return
        addr = self.regs["CMDBUF_ADDR_LO"] | (self.regs["CMDBUF_ADDR_HI"] << 32)
        size = self.regs["CMDBUF_SIZE"]
        self.regs.update(CMD_DONE=0, FAULT_CMD=0xFFFFFFFF, FAULT_OFFSET=0xFFFFFFFF)
        self._status(busy=1)
        if size > MAX_CMDBUF:
            self._end(Fault("LIMIT", f"CMDBUF_SIZE {size}: the model takes command buffers of at most {MAX_CMDBUF} "
                                     "bytes (choice C-LIMIT); nothing fetched"))
            return
        try:
            buf = self.m.fetch(addr, size)
        except GmemBusError as e:
            self._end(Fault("BUS", f"command-buffer fetch: {e}"))
            return
        job = Job(self.m, buf)
        if job.fault is not None:
            self._end(job.fault)
            return
        self.job = job
        if job.finished:                          # an empty buffer is done at once
            self._end(None)

    def _end(self, fault: "Fault | None") -> None:
        irq = regs.BY_NAME["IRQ_STATUS"]
        if fault is None:
            self._status(done=1)
            self.regs["IRQ_STATUS"] |= irq.field("done").put(1)
        else:
            self._status(fault=1, fault_code=regs.FAULT_CODE[fault.code])
            self.regs["IRQ_STATUS"] |= irq.field("fault").put(1)
            self.regs["FAULT_CMD"] = fault.index & 0xFFFFFFFF
            self.regs["FAULT_OFFSET"] = fault.offset & 0xFFFFFFFF
            self.events.append(str(fault))
        if self.job is not None:
            self.regs["CMD_DONE"] = self.job.executed
        self.job = None

    def step(self) -> bool:
        """Run one command of the current buffer; False if nothing is running."""
        if self.job is None:
            return False
        self.job.step()
        self.regs["CMD_DONE"] = self.job.executed
        if self.job.finished:
            self._end(self.job.fault)
        return True


def make_model(config: str = "bm1880", **kw) -> Bm1880:
    """The chip model for a registry configuration (the only one: "bm1880")."""
    if config != "bm1880":
        raise ValueError(f"bm1880 has no configuration {config!r} (configurations: bm1880)")
    return Bm1880(**kw)
