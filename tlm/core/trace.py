"""Register-and-memory traces (docs/trace-format.md): parse, replay on a target, write.

A trace is a text file of host actions on one device: `load_mem`/`fill_mem` (back door),
`write_reg`/`read_reg`/`poll_reg` (the control port), `wait_irq` and `check_mem`. This
module is device-neutral: a device supplies a `TraceTarget` (its TLM behind the five
primitives below); `replay()` runs a parsed `Trace` on it and counts checks. The cocotb
trace player drives the same `Trace` through a DUT's pins and uses the same check
functions (`read_mismatch`, `mem_mismatch`), so a verdict means the same thing on the
model and on RTL.

`TraceWriter` produces traces; `RecordingTarget` wraps a target and records what host
code does to it, so any TLM run becomes a trace whose expectations come from the model.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

# command -> (minimum, maximum) argument count; argument kinds are checked in _parse_args
COMMANDS: dict[str, tuple[int, int]] = {
    "device": (1, 1),
    "config": (1, 1),
    "load_mem": (2, 2),
    "fill_mem": (3, 3),
    "write_reg": (2, 2),
    "read_reg": (2, 3),
    "poll_reg": (3, 4),
    "wait_irq": (0, 1),
    "check_mem": (2, 2),
}
CHECKS = ("read_reg", "poll_reg", "wait_irq", "check_mem")   # the commands counted as checks
POLL_MAX = 100_000                                           # poll_reg's default MAX
_NUMBER = re.compile(r"0[xX][0-9a-fA-F]+|[0-9]+")


class TraceFormatError(Exception):
    """A malformed trace: `file:line: what is wrong` (replay exit status 2)."""

    def __init__(self, path: str, line: int, what: str):
        super().__init__(f"{path}:{line}: {what}" if line else f"{path}: {what}")
        self.path, self.line, self.what = path, line, what


@dataclass(frozen=True)
class Step:
    """One command of a trace. `args` are ints, except the FILE of load_mem/check_mem,
    which is a `Path` resolved against the trace's folder, and NAME of device/config."""
    op: str
    args: tuple
    line: int
    text: str


@dataclass
class Trace:
    path: str
    device: str
    config: "str | None"
    steps: list[Step] = field(default_factory=list)     # everything after device/config
    device_line: int = 1
    config_line: int = 0

    @property
    def checks(self) -> int:
        return sum(s.op in CHECKS for s in self.steps)


def _number(tok: str, path: str, line: int, what: str) -> int:
    if not _NUMBER.fullmatch(tok):
        raise TraceFormatError(path, line, f"{what} {tok!r} is not a decimal or 0x hexadecimal number")
    return int(tok, 0) if tok[:2].lower() == "0x" else int(tok, 10)


def _parse_args(op: str, toks: list[str], path: str, line: int, base: Path) -> tuple:
    lo, hi = COMMANDS[op]
    if not lo <= len(toks) <= hi:
        want = f"{lo}" if lo == hi else f"{lo} to {hi}"
        raise TraceFormatError(path, line, f"{op} takes {want} argument{'s' if hi != 1 else ''}, "
                                           f"got {len(toks)}")
    if op in ("device", "config"):
        return (toks[0],)
    if op in ("load_mem", "check_mem"):
        f = base / toks[1]
        if not f.is_file():
            raise TraceFormatError(path, line, f"{op}: file {toks[1]!r} not found (looked in {base})")
        return (_number(toks[0], path, line, "address"), f)
    names = {"fill_mem": ("address", "length", "byte"), "write_reg": ("offset", "value"),
             "read_reg": ("offset", "expected value", "mask"),
             "poll_reg": ("offset", "expected value", "mask", "maximum read count"),
             "wait_irq": ("maximum step count",)}[op]
    vals = tuple(_number(t, path, line, n) for t, n in zip(toks, names))
    if op == "fill_mem" and vals[2] > 0xFF:
        raise TraceFormatError(path, line, f"fill_mem byte 0x{vals[2]:x} does not fit in 8 bits")
    if op in ("poll_reg", "wait_irq") and len(vals) == hi and vals[-1] == 0:
        raise TraceFormatError(path, line, f"{op}: a maximum of 0 can never succeed")
    return vals


def parse_text(text: str, path: str = "<trace>", base: "str | Path | None" = None) -> Trace:
    """Parse trace text. FILE arguments are resolved against `base` (default: the folder
    of `path`). Raises TraceFormatError naming the line."""
    base = Path(base) if base is not None else Path(path).parent
    device = config = None
    steps: list[Step] = []
    first = True
    lines = [0, 0]
    for n, raw in enumerate(text.splitlines(), 1):
        body = raw.split("#", 1)[0].strip()
        if not body:
            continue
        op, *toks = body.split()
        if op not in COMMANDS:
            raise TraceFormatError(path, n, f"unknown command {op!r} (commands: {', '.join(COMMANDS)})")
        args = _parse_args(op, toks, path, n, base)
        if first:
            if op != "device":
                raise TraceFormatError(path, n, f"the first command must be 'device NAME', got {op!r}")
            device, first, lines[0] = args[0], False, n
            continue
        if op == "device":
            raise TraceFormatError(path, n, "'device' may appear only once, as the first command")
        if op == "config":
            if steps or config is not None:
                raise TraceFormatError(path, n, "'config' may appear only once, right after 'device'")
            config, lines[1] = args[0], n
            continue
        steps.append(Step(op, args, n, body))
    if device is None:
        raise TraceFormatError(path, 0, "empty trace: no 'device NAME' command")
    return Trace(path, device, config, steps, lines[0], lines[1])


def parse(path: "str | Path") -> Trace:
    """Parse a trace file (TraceFormatError if it cannot be read or is malformed)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise TraceFormatError(str(path), 0, f"cannot read trace: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise TraceFormatError(str(path), line, "not a text file (invalid UTF-8)") from None
    return parse_text(text, str(path))


# ------------------------------------------------------------------------------------------
# Targets
# ------------------------------------------------------------------------------------------
class TraceTarget:
    """What a device offers to a trace: its TLM (or a pin driver) behind five primitives.

    Subclasses set `reg_bits` (register width), `addr_bits` (back-door address space) and
    `reg_align` (register offsets must be multiples of it), and implement the methods.
    Architectural faults (a bus error response, an error status the device raised) are
    reported by `faults()`, newest first drained; they are not exceptions."""
    device = "?"
    reg_bits = 32
    addr_bits = 32
    reg_align = 4
    wait_default = 1_000_000            # wait_irq budget when the trace gives none

    def write_reg(self, offset: int, value: int) -> None:
        raise NotImplementedError

    def read_reg(self, offset: int) -> int:
        raise NotImplementedError

    def load_mem(self, addr: int, data: bytes) -> None:
        raise NotImplementedError

    def read_mem(self, addr: int, length: int) -> bytes:
        raise NotImplementedError

    def wait_irq(self, max_steps: int) -> bool:
        """Run until the interrupt / end-of-job event is raised (True) or `max_steps`
        device steps pass (False). A level that is already high returns True at once."""
        raise NotImplementedError

    def idle(self) -> None:
        """Let the device run for one poll interval (between the reads of poll_reg)."""

    def settled(self, offset: int) -> bool:
        """True when no later read of register *offset* can return another value until the
        host acts: the model has nothing left to move and the read has no side effects. A
        failing poll_reg then ends at once with the same verdict (a trace's MAX of a million
        reads would otherwise run them all). The default keeps polling."""
        return False

    def faults(self) -> list[str]:
        """Architectural faults raised since the last call (one line each)."""
        return []


def validate(trace: Trace, target: TraceTarget) -> None:
    """Check every value against the target's register width and address space before
    anything runs, so a malformed trace changes nothing (TraceFormatError)."""
    rmax, amax = 1 << target.reg_bits, 1 << target.addr_bits
    for s in trace.steps:
        def bad(what: str, s: Step = s) -> TraceFormatError:
            return TraceFormatError(trace.path, s.line, what)
        if s.op in ("write_reg", "read_reg", "poll_reg"):
            off = s.args[0]
            if off % target.reg_align:
                raise bad(f"{s.op}: offset 0x{off:x} is not a multiple of {target.reg_align}")
            for v, what in zip(s.args[1:3], ("value" if s.op == "write_reg" else "expected value", "mask")):
                if v >= rmax:
                    raise bad(f"{s.op}: {what} 0x{v:x} does not fit in the {target.device} "
                              f"registers ({target.reg_bits} bits)")
        elif s.op in ("load_mem", "check_mem", "fill_mem"):
            n = s.args[1].stat().st_size if s.op != "fill_mem" else s.args[1]
            if s.args[0] + n > amax:
                raise bad(f"{s.op}: 0x{s.args[0]:x}+{n} is outside the {target.device} address "
                          f"space ({target.addr_bits} bits)")


def read_mismatch(value: int, expect: int, mask: "int | None", bits: int) -> "str | None":
    """None if (value & mask) == expect, else the failure text."""
    m = (1 << bits) - 1 if mask is None else mask
    if (value & m) == expect:
        return None
    w = (bits + 3) // 4
    masked = f" under mask 0x{m:0{w}x} (read 0x{value:0{w}x})" if mask is not None else ""
    return f"expected 0x{expect:0{w}x}, got 0x{value & m:0{w}x}{masked}"


def mem_mismatch(addr: int, actual: bytes, expect: bytes) -> "str | None":
    """None if equal, else: first differing address, expected and actual byte, count."""
    if actual == expect:
        return None
    import numpy as np
    a = np.frombuffer(actual, np.uint8)
    e = np.frombuffer(expect, np.uint8)
    diff = np.flatnonzero(a != e)
    i = int(diff[0])
    return (f"first difference at 0x{addr + i:x}: expected 0x{e[i]:02x}, got 0x{a[i]:02x}; "
            f"{diff.size} of {e.size} bytes differ")


@dataclass
class ReplayResult:
    passed: int = 0
    failed: int = 0
    messages: list[str] = field(default_factory=list)   # one line per failed check or fault
    faulted: bool = False

    @property
    def exit_status(self) -> int:
        return 1 if self.failed or self.faulted else 0

    @property
    def summary(self) -> str:
        return f"replay: {self.passed} checks passed, {self.failed} failed"


def poll(read: Callable[[], int], idle: Callable[[], None], expect: int, mask: int,
         max_reads: int, settled: "Callable[[], bool] | None" = None) -> tuple[bool, int, int]:
    """poll_reg's loop: read until (value & mask) == expect, the device running between
    reads. Returns (matched, last value, reads). With *settled* (TraceTarget.settled of the
    register) the loop stops early once a read repeats the previous value and the target
    says no later read can differ: fewer reads, the same verdict."""
    v = prev = None
    for n in range(1, max_reads + 1):
        v = read()
        if (v & mask) == expect:
            return True, v, n
        if v == prev and settled is not None and settled():
            return False, v, n
        prev = v
        idle()
    return False, (0 if v is None else v), max_reads


def step_bytes(s: Step) -> bytes:
    """The bytes of a load_mem / fill_mem (to write) or check_mem (expected) step."""
    if s.op == "fill_mem":
        return bytes([s.args[2]]) * s.args[1]
    return s.args[1].read_bytes()


def poll_max(s: Step) -> int:
    return s.args[3] if len(s.args) > 3 else POLL_MAX


def wait_max(s: Step, target) -> int:
    return s.args[0] if s.args else target.wait_default


class Verdicts:
    """The verdicts of one replay, shared by `replay` (a TLM) and the pin-level player
    (tb/core/trace_player.py): each check step is judged here from what the target
    returned, so a failure reads the same on the model and through the pins."""

    def __init__(self, trace: Trace, reg_bits: int, device: str,
                 on_line: "Callable[[str], None] | None" = None):
        self.trace, self.reg_bits, self.device, self.on_line = trace, reg_bits, device, on_line
        self.result = ReplayResult()

    def _emit(self, line: str) -> None:
        self.result.messages.append(line)
        if self.on_line:
            self.on_line(line)

    def _judge(self, s: Step, bad: "str | None") -> None:
        if bad:
            self.result.failed += 1
            self._emit(f"{self.trace.path}:{s.line}: {s.op}: {bad}")
        else:
            self.result.passed += 1

    def read(self, s: Step, value: int) -> None:
        a = s.args
        bad = read_mismatch(value, a[1], a[2] if len(a) > 2 else None, self.reg_bits)
        self._judge(s, bad and f"offset 0x{a[0]:x}: {bad}")

    def poll(self, s: Step, matched: bool, last: int, reads: int) -> None:
        a = s.args
        early = "; the device had settled, no later read could differ" if reads < poll_max(s) else ""
        self._judge(s, None if matched else
                    f"offset 0x{a[0]:x}: never read 0x{a[1]:x} under mask 0x{a[2]:x} in {reads} reads "
                    f"(last 0x{last:x}){early}")

    def wait(self, s: Step, raised: bool, limit: int, unit: str = "steps") -> None:
        self._judge(s, None if raised else f"interrupt not raised within {limit} {unit}")

    def mem(self, s: Step, actual: bytes) -> None:
        bad = mem_mismatch(s.args[0], actual, step_bytes(s))
        self._judge(s, bad and f"{s.args[1].name}: {bad}")

    def faults(self, s: Step, lines: list) -> None:
        for f in lines:
            self.result.faulted = True
            self._emit(f"{self.trace.path}:{s.line}: device fault after {s.op}: {f}")

    def internal(self, s: "Step | None", e: BaseException) -> None:
        """A bug of the model or the bench: reported as a fault line, never a traceback."""
        self.result.faulted = True
        where = f"{self.trace.path}:{s.line}: {s.op}" if s else self.trace.path
        self._emit(f"{where}: internal error in the {self.device} model: {type(e).__name__}: {e}")


def replay(trace: Trace, target: TraceTarget, on_line: "Callable[[str], None] | None" = None) -> ReplayResult:
    """Run every step of `trace` on `target`. `on_line` gets each failure line as it
    happens (the CLI prints them). Raises TraceFormatError before running anything if a
    value does not fit the target."""
    validate(trace, target)
    v = Verdicts(trace, target.reg_bits, target.device, on_line)
    s = None
    try:
        for s in trace.steps:
            a = s.args
            if s.op in ("load_mem", "fill_mem"):
                target.load_mem(a[0], step_bytes(s))
            elif s.op == "write_reg":
                target.write_reg(a[0], a[1])
            elif s.op == "read_reg":
                v.read(s, target.read_reg(a[0]))
            elif s.op == "poll_reg":
                v.poll(s, *poll(lambda a=a: target.read_reg(a[0]), target.idle, a[1], a[2], poll_max(s),
                                lambda a=a: target.settled(a[0])))
            elif s.op == "wait_irq":
                n = wait_max(s, target)
                v.wait(s, target.wait_irq(n), n)
            elif s.op == "check_mem":
                v.mem(s, target.read_mem(a[0], len(step_bytes(s))))
            v.faults(s, target.faults())
    except Exception as e:      # noqa: BLE001 - a model bug is reported, never a traceback
        v.internal(s, e)
    return v.result


# ------------------------------------------------------------------------------------------
# Writing traces
# ------------------------------------------------------------------------------------------
class TraceWriter:
    """Builds a trace: call the commands in order, then `save(folder)`. Memory images go
    to files `mem_NNN.bin` beside the trace."""

    def __init__(self, device: str, config: "str | None" = None, reg_bits: int = 32,
                 reg_name: "Callable[[int], str | None] | None" = None):
        self.device, self.config, self.reg_bits = device, config, reg_bits
        self.reg_name = reg_name          # offset -> register name, written as a comment
        self.lines: list[str] = [f"device {device}"] + ([f"config {config}"] if config else [])
        self.blobs: list[bytes] = []

    def _reg(self, line: str, offset: int) -> str:
        name = self.reg_name(offset) if self.reg_name else None
        return f"{line:<40} # {name}" if name else line

    def _hex(self, v: int) -> str:
        return f"0x{v:0{(self.reg_bits + 3) // 4}x}"

    def _blob(self, data: bytes) -> str:
        self.blobs.append(bytes(data))
        return f"mem_{len(self.blobs) - 1:03d}.bin"

    def comment(self, text: str) -> None:
        self.lines.extend(f"# {t}" for t in str(text).splitlines() or [""])

    def load_mem(self, addr: int, data: bytes) -> None:
        data = bytes(data)
        if data and data.count(data[:1]) == len(data) and len(data) > 16:
            self.lines.append(f"fill_mem 0x{addr:x} {len(data)} 0x{data[0]:02x}")
        elif data:
            self.lines.append(f"load_mem 0x{addr:x} {self._blob(data)}")

    def fill_mem(self, addr: int, length: int, byte: int) -> None:
        self.lines.append(f"fill_mem 0x{addr:x} {length} 0x{byte & 0xFF:02x}")

    def write_reg(self, offset: int, value: int) -> None:
        self.lines.append(self._reg(f"write_reg 0x{offset:x} {self._hex(value)}", offset))

    def read_reg(self, offset: int, expect: int, mask: "int | None" = None) -> None:
        m = f" {self._hex(mask)}" if mask is not None else ""
        self.lines.append(self._reg(f"read_reg 0x{offset:x} {self._hex(expect)}{m}", offset))

    def poll_reg(self, offset: int, expect: int, mask: int, max_reads: "int | None" = None) -> None:
        n = f" {max_reads}" if max_reads is not None else ""
        self.lines.append(self._reg(f"poll_reg 0x{offset:x} {self._hex(expect)} {self._hex(mask)}{n}", offset))

    def wait_irq(self, max_steps: "int | None" = None) -> None:
        self.lines.append("wait_irq" + (f" {max_steps}" if max_steps is not None else ""))

    def check_mem(self, addr: int, data: bytes) -> None:
        self.lines.append(f"check_mem 0x{addr:x} {self._blob(data)}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    def save(self, folder: "str | Path", name: str = "trace.txt") -> Path:
        d = Path(folder)
        d.mkdir(parents=True, exist_ok=True)
        for i, b in enumerate(self.blobs):
            (d / f"mem_{i:03d}.bin").write_bytes(b)
        p = d / name
        p.write_text(self.text())
        return p


class RecordingTarget(TraceTarget):
    """Wraps a target and records every host action as trace commands: writes as they
    are, reads with the value the model returned as the expectation, `poll_reg` and
    `wait_irq` as issued. Add `check_mem(addr, length)` for the results to check."""

    def __init__(self, target: TraceTarget, writer: "TraceWriter | None" = None,
                 config: "str | None" = None, reg_name: "Callable[[int], str | None] | None" = None):
        self.target = target
        self.writer = writer or TraceWriter(target.device, config, target.reg_bits, reg_name)
        self.device, self.reg_bits = target.device, target.reg_bits
        self.addr_bits, self.reg_align = target.addr_bits, target.reg_align
        self.wait_default = target.wait_default

    def write_reg(self, offset: int, value: int) -> None:
        self.writer.write_reg(offset, value)
        self.target.write_reg(offset, value)

    def read_reg(self, offset: int, mask: "int | None" = None) -> int:
        v = self.target.read_reg(offset)
        self.writer.read_reg(offset, v if mask is None else v & mask, mask)
        return v

    def poll_reg(self, offset: int, expect: int, mask: int, max_reads: int = POLL_MAX) -> bool:
        ok, _, _ = poll(lambda: self.target.read_reg(offset), self.target.idle, expect, mask, max_reads)
        self.writer.poll_reg(offset, expect, mask, None if max_reads == POLL_MAX else max_reads)
        return ok

    def load_mem(self, addr: int, data: bytes) -> None:
        self.writer.load_mem(addr, data)
        self.target.load_mem(addr, data)

    def read_mem(self, addr: int, length: int) -> bytes:
        return self.target.read_mem(addr, length)

    def check_mem(self, addr: int, length: int) -> bytes:
        data = self.target.read_mem(addr, length)
        self.writer.check_mem(addr, data)
        return data

    def wait_irq(self, max_steps: "int | None" = None) -> bool:
        self.writer.wait_irq(max_steps)
        return self.target.wait_irq(self.wait_default if max_steps is None else max_steps)

    def idle(self) -> None:
        self.target.idle()

    def faults(self) -> list[str]:
        return self.target.faults()
