"""Hostile traces for every device: the shipped traces (``tests/<device>/traces/*/trace.txt``) mutated one
to four edits at a time and replayed on the device's TLM under the fuzz engine's watchdogs
(tlm/core/fuzz.py: CPU and wall limits, an escaping exception is a violation).

A mutated trace may fail its checks or raise device faults - that is what hostile input
should get. It must never end in an "internal error" line (a model exception that replay
caught), an exception, a hang or a case above the CPU limit.

Edits: a register value (one bit flipped or random), a register offset moved by a few
registers, a line dropped, duplicated or swapped with the next, a write of a random value to
a register the trace writes, a smaller wait_irq/poll_reg budget, corrupted or truncated
memory images.

  python -m tools.trace_fuzz [--device NAME|all] [--cases N] [--seed S] [--case I]
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tlm.core import fuzz as F
from tlm.core import registry
from tlm.core.trace import TraceFormatError, parse, replay

REPO = Path(__file__).resolve().parents[1]


def corpus(device: str) -> list[Path]:
    """The shipped traces of *device* (folders holding trace.txt), sorted."""
    root = REPO / "tests" / device.replace("-", "_") / "traces"
    return sorted(p.parent for p in root.rglob("trace.txt")) if root.is_dir() else []


@dataclass
class Case:
    seed: int
    index: int
    gen: str
    trace: Path = None
    lines: list = field(default_factory=list)
    mem: dict = field(default_factory=dict)        # file name -> replacement bytes
    edits: list = field(default_factory=list)


def _body(c: Case) -> list[int]:
    return [i for i, ln in enumerate(c.lines) if ln.split() and ln.split()[0] not in ("device", "config")
            and not ln.lstrip().startswith("#")]


def _tok(c: Case, i: int) -> list[str]:
    return c.lines[i].split("#")[0].split()


def _edit_value(rng, c: Case, bits: int) -> None:
    rows = [i for i in _body(c) if _tok(c, i)[0] == "write_reg"]
    if rows:
        i = F.pick(rng, rows)
        t = _tok(c, i)
        v = int(t[2], 0)
        v = v ^ (1 << int(rng.integers(bits))) if rng.random() < 0.6 else int(rng.integers(1 << min(bits, 62)))
        c.lines[i] = f"write_reg {t[1]} 0x{v:x}"
        c.edits.append(f"line {i + 1}: value -> 0x{v:x}")


def _edit_offset(rng, c: Case, align: int) -> None:
    rows = [i for i in _body(c) if _tok(c, i)[0] in ("write_reg", "read_reg", "poll_reg")]
    if rows:
        i = F.pick(rng, rows)
        t = _tok(c, i)
        t[1] = hex(max(0, int(t[1], 0) + align * int(rng.integers(-8, 9))))
        c.lines[i] = " ".join(t)
        c.edits.append(f"line {i + 1}: offset -> {t[1]}")


def _edit_lines(rng, c: Case, how: str) -> None:
    rows = _body(c)
    if not rows:
        return
    i = F.pick(rng, rows)
    if how == "drop":
        c.lines[i] = "# dropped: " + c.lines[i]
    elif how == "dup":
        c.lines.insert(i, c.lines[i])
    elif i + 1 < len(c.lines):
        c.lines[i], c.lines[i + 1] = c.lines[i + 1], c.lines[i]
    c.edits.append(f"line {i + 1}: {how}")


def _edit_insert(rng, c: Case, bits: int) -> None:
    regs = sorted({_tok(c, i)[1] for i in _body(c) if _tok(c, i)[0] == "write_reg"})
    rows = _body(c)
    if regs and rows:
        i = F.pick(rng, rows)
        v = int(rng.integers(1 << min(bits, 62)))
        c.lines.insert(i, f"write_reg {F.pick(rng, regs)} 0x{v:x}")
        c.edits.append(f"line {i + 1}: inserted {c.lines[i]}")


def _edit_budget(rng, c: Case) -> None:
    rows = [i for i in _body(c) if _tok(c, i)[0] in ("wait_irq", "poll_reg")]
    if rows:
        i = F.pick(rng, rows)
        t = _tok(c, i)
        n = str(F.pick(rng, [1, 2, 10, 1000]))
        t = ["wait_irq", n] if t[0] == "wait_irq" else t[:4] + [n]
        c.lines[i] = " ".join(t)
        c.edits.append(f"line {i + 1}: budget -> {n}")


def _edit_mem(rng, c: Case, truncate: bool) -> None:
    files = sorted(f for f in c.trace.iterdir() if f.name != "trace.txt")
    if files:
        f = F.pick(rng, files)
        data = bytearray(c.mem.get(f.name, f.read_bytes()))
        if truncate:
            data = data[:int(rng.integers(len(data) + 1))]
        else:
            for _ in range(int(rng.integers(1, 9))):
                if data:
                    data[int(rng.integers(len(data)))] = int(rng.integers(256))
        c.mem[f.name] = bytes(data)
        c.edits.append(f"{f.name}: {'truncated to' if truncate else 'corrupted,'} {len(data)} bytes")


class TraceFuzz:
    """A FuzzTarget (tlm/core/fuzz.py) over one device's shipped traces."""

    def __init__(self, device: str):
        self.device = device
        self.info = registry.get(device)
        self.traces = corpus(device)
        probe = self.info.make_target(None)
        bits, align = probe.reg_bits, probe.reg_align
        one = {
            "value": (lambda rng, c: _edit_value(rng, c, bits), 4),
            "offset": (lambda rng, c: _edit_offset(rng, c, align), 2),
            "drop": (lambda rng, c: _edit_lines(rng, c, "drop"), 2),
            "dup": (lambda rng, c: _edit_lines(rng, c, "dup"), 1),
            "swap": (lambda rng, c: _edit_lines(rng, c, "swap"), 1),
            "insert": (lambda rng, c: _edit_insert(rng, c, bits), 2),
            "budget": (lambda rng, c: _edit_budget(rng, c), 1),
            "mem": (lambda rng, c: _edit_mem(rng, c, False), 1),
            "truncate_mem": (lambda rng, c: _edit_mem(rng, c, True), 1),
        }
        fns = [f for f, _ in one.values()]

        def several(rng, c):
            for _ in range(int(rng.integers(2, 5))):
                F.pick(rng, fns)(rng, c)
        self.generators = {**one, "several": (several, 4)}

    def new_case(self, seed: int, index: int, gen: str) -> Case:
        rng = np.random.default_rng([seed & 0xFFFF_FFFF, index, 1])
        c = Case(seed, index, gen, trace=self.traces[int(rng.integers(len(self.traces)))])
        c.lines = (c.trace / "trace.txt").read_text().split("\n")
        return c

    def extend_case(self, rng, case: Case) -> None:
        pass

    def describe(self, case: Case, res=None) -> str:
        return f"{case.trace.relative_to(REPO)}: " + "; ".join(case.edits or ["no edit"])

    def session(self, case: Case, res, guard, **kw):
        return _Session(self, case, res, guard)


class _Session:
    def __init__(self, fz: TraceFuzz, case: Case, res, guard):
        self.fz, self.case, self.res, self.guard = fz, case, res, guard
        self.tmp = Path(tempfile.mkdtemp(prefix="trace-fuzz-"))

    def go(self) -> None:
        c = self.case
        for f in c.trace.iterdir():
            if f.name != "trace.txt":
                (self.tmp / f.name).write_bytes(c.mem.get(f.name, f.read_bytes()))
        (self.tmp / "trace.txt").write_text("\n".join(c.lines))
        try:
            tr = parse(self.tmp / "trace.txt")
        except TraceFormatError:
            self.res.outcome = "MALFORMED"           # one clear line: what hostile text gets
            return
        target = self.guard.call("make_target", self.fz.info.make_target, tr.config)
        out = self.guard.call("replay", replay, tr, target)      # (an exception: F.Abort, recorded)
        for m in out.messages:
            if "internal error" in m:
                self.res.violation(m.replace(str(self.tmp), "<case>"))
        self.res.outcome = "FAULT" if out.faulted else ("FAIL" if out.failed else "PASS")

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def where(self) -> str:
        return f" in {self.fz.describe(self.case)}"


def devices_with_traces() -> list[str]:
    return [d for d in registry.devices() if corpus(d)]


def run(device: str, cases: int, seed: int, first: int = 0, cpu_limit: float = 10.0,
        wall_limit: float = 120.0) -> F.Summary:
    fz = TraceFuzz(device)
    summ = F.Summary(seed, device)
    for i in range(first, first + cases):
        case = F.make_case(fz, seed, i)
        r = F.run_case(fz, case, cpu_limit=cpu_limit, abort_cpu=3 * cpu_limit, wall_limit=wall_limit)
        r.violations = [f"{v} [{fz.describe(case)}]" for v in r.violations]
        summ.add(r)
    return summ


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="all", help="a device with shipped traces, or 'all'")
    ap.add_argument("--cases", "-n", type=int, default=200, help="cases per device (default 200)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--case", type=int, help="run this one case and print its edits")
    args = ap.parse_args(argv)
    devs = devices_with_traces() if args.device == "all" else [args.device]
    for d in devs:
        if not corpus(d):
            print(f"trace_fuzz: no shipped traces for device {d!r} (tests/{d.replace('-', '_')}/traces)",
                  file=sys.stderr)
            return 2
    bad = 0
    for d in devs:
        if args.case is not None:
            fz = TraceFuzz(d)
            print(fz.describe(F.make_case(fz, args.seed, args.case)))
            s = run(d, 1, args.seed, args.case)
        else:
            s = run(d, args.cases, args.seed)
        print(f"{d}: {s.cases} cases, outcomes {dict(s.outcomes)}, {s.violating_cases} with violations")
        for _, _, v in s.violations[:10]:
            print(f"  {v}")
        bad += s.violating_cases
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
