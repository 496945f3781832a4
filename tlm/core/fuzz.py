"""Hostile-input fuzz engine (device-neutral): deterministic cases, guarded device calls,
watchdogs, worker processes, the report.

Usage::

    python -m tlm.core.fuzz [--device NAME] --cases 20000 [--seed S] [--jobs J]   # exit 1 on violations
    python -m tlm.core.fuzz [--device NAME] --seed S --case I                     # one case, verbosely
    make fuzz [DEVICE=NAME] N=20000 [SEED=S] [JOBS=J]

A device takes part by registering a `FuzzTarget` (`DeviceInfo.fuzz`, "module:attribute"):
its generators (name -> (function(rng, case), weight)), its case type, the session that
runs one case on a fresh model and checks the device's invariants, and a description of a
case. The engine owns what is common: every case is a pure function of ``(seed, index)``
(`make_case`), each device call goes through a `Guard` (CPU time, an escaping exception is
a violation), `run_case` adds the watchdogs (CPU and wall time; a hang is a violation), and
`run` spreads ranges of cases over worker processes with a capped address space and merges
their `Summary`.

A `FuzzTarget` provides:

* ``device`` (registry name), ``generators``;
* ``prepare() -> list[str]``: per process, before the first case (problems for the report);
* ``notes() -> list[str]``: report header lines (e.g. a corpus fingerprint);
* ``new_case(seed, index, gen)``: the case object (with ``seed``, ``index``, ``gen``);
* ``extend_case(rng, case)``: orthogonal extras drawn after the generator ran;
* ``session(case, res, guard, **kw)``: an object with ``go()`` (run and check; device calls
  through ``guard.call``; violations with ``res.violation``), ``close()`` (after the case,
  also after an abort) and ``where() -> str`` (what was running, for a hang);
* ``describe(case, res) -> str``; ``ci_problem() -> str | None`` (why CI cannot run it).
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["CaseResult", "Summary", "Guard", "make_case", "run_case", "run", "main", "target_of"]

DEFAULT_SEED_ENV = "FUZZ_SEED"


def pick(rng, items, p=None):
    return items[int(rng.choice(len(items), p=p))]


def norm(s: str, n: int = 96) -> str:
    """Event text with numbers blanked, for counting by kind."""
    s = re.sub(r"0x[0-9a-fA-F]+", "X", str(s))
    s = re.sub(r"-?\d+", "N", s)
    return s[:n]


def target_of(device: str):
    """The FuzzTarget a registered device names (`DeviceInfo.fuzz`), or "module:attr"."""
    from .registry import get, resolve
    if ":" in device:
        return resolve(device)
    info = get(device)
    if not info.fuzz:
        raise LookupError(f"device {device} registers no fuzz target")
    return resolve(info.fuzz)


@dataclass
class CaseResult:
    seed: int
    index: int
    gen: str
    outcome: str = ""
    steps: int = 0
    cpu: float = 0.0
    wall: float = 0.0
    faults: Counter = field(default_factory=Counter)
    events: Counter = field(default_factory=Counter)       # "kind: text" -> n
    violations: list = field(default_factory=list)
    slowest_op: tuple = (0.0, "")
    crossing: set = field(default_factory=set)              # channels seen crossing 4 KB

    def violation(self, msg: str) -> None:
        if len(self.violations) < 8 and msg not in self.violations:
            self.violations.append(msg)


def make_case(target, seed: int, index: int, gen: "str | None" = None):
    """The case (seed, index) of *target*: deterministic."""
    rng = np.random.default_rng([seed & 0xFFFF_FFFF_FFFF_FFFF, index])
    names = list(target.generators)
    weights = np.array([w for _, w in target.generators.values()])
    name = gen or pick(rng, names, p=weights / weights.sum())
    c = target.new_case(seed, index, name)
    target.generators[name][0](rng, c)
    target.extend_case(rng, c)
    return c


# ============================================================================================
# Running one case
# ============================================================================================
class Hang(BaseException):
    """Raised by the watchdog; BaseException so the device's `except Exception` lets it by."""


class Abort(Exception):
    """A device call raised: stop the case (the violation is already recorded)."""


class Guard:
    """Device calls of one case: CPU time summed, the CPU watchdog armed around each call
    (when `abort_cpu`), an escaping exception recorded as a violation and the case aborted."""

    def __init__(self, res: CaseResult, abort_cpu: float = 0.0):
        self.res = res
        self.cpu = 0.0
        self.abort_cpu = abort_cpu

    def call(self, what: str, fn, *a, **kw):
        if self.abort_cpu:
            signal.setitimer(signal.ITIMER_PROF, max(0.001, self.abort_cpu - self.cpu))
        t0 = time.process_time()
        try:
            return fn(*a, **kw)
        except Exception as e:
            tb = traceback.extract_tb(e.__traceback__)
            where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno} {tb[-1].name}" if tb else "?"
            self.res.violation(f"exception escaped {what}: {type(e).__name__}: {e} [{where}]")
            raise Abort() from e
        finally:
            self.cpu += time.process_time() - t0
            if self.abort_cpu:
                signal.setitimer(signal.ITIMER_PROF, 0)


def _alarm(_sig, _frame):
    raise Hang()


def run_case(target, case, cpu_limit: float = 5.0, abort_cpu: float = 15.0, wall_limit: float = 120.0,
             **session_kw) -> CaseResult:
    """Run one case of *target* and check every invariant. A case whose device calls take
    more than `cpu_limit` CPU seconds is a violation ('slow'); a watchdog aborts it when its
    device calls have used `abort_cpu` CPU seconds (SIGPROF; a single long numpy call is only
    interrupted when it returns) or after `wall_limit` wall seconds (SIGALRM) and reports a
    hang. The watchdogs need the main thread (else only the 'slow' check applies)."""
    res = CaseResult(case.seed, case.index, case.gen)
    use_alarm = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    guard = Guard(res, abort_cpu if use_alarm else 0.0)
    session = target.session(case, res, guard, **session_kw)
    old = {}
    hung = False
    t0 = time.perf_counter()
    try:
        if use_alarm:
            if abort_cpu:                     # armed by Guard.call around each device call
                old[signal.SIGPROF] = (signal.ITIMER_PROF, signal.signal(signal.SIGPROF, _alarm))
            if wall_limit:
                old[signal.SIGALRM] = (signal.ITIMER_REAL, signal.signal(signal.SIGALRM, _alarm))
                signal.setitimer(signal.ITIMER_REAL, wall_limit)
        session.go()
    except Abort:
        pass
    except Hang:
        hung = True
    except MemoryError as e:
        res.violation(f"out of memory outside the device calls (fuzzer checks; the process address space is "
                      f"exhausted): {e}")
    except Exception as e:  # noqa: BLE001 - a fuzzer bug: report it as such
        res.violation(f"fuzzer error: {type(e).__name__}: {e} "
                      f"[{traceback.extract_tb(e.__traceback__)[-1].name}]")
    finally:
        for sig, (timer, handler) in old.items():
            signal.setitimer(timer, 0)
            signal.signal(sig, handler)
    res.wall = time.perf_counter() - t0
    res.cpu = guard.cpu
    session.close()
    if hung:
        res.violation(f"hang: case aborted after {res.wall:.1f} s wall / {abort_cpu:g} s CPU{session.where()}")
    if res.cpu > cpu_limit:
        worst = f"; slowest command {res.slowest_op[1]}: {res.slowest_op[0]:.2f} s" if res.slowest_op[1] else ""
        res.violation(f"slow: the device took {res.cpu:.2f} s CPU (limit {cpu_limit:g} s), {res.steps} steps{worst}")
    if not res.outcome:
        res.outcome = "ABORTED"
    return res


# ============================================================================================
# Summary and report
# ============================================================================================
@dataclass
class Summary:
    seed: int
    device: str = ""
    cases: int = 0
    wall: float = 0.0
    outcomes: Counter = field(default_factory=Counter)
    gens: Counter = field(default_factory=Counter)
    faults: Counter = field(default_factory=Counter)
    events: Counter = field(default_factory=Counter)
    violations: list = field(default_factory=list)     # (index, gen, message)
    violating_cases: int = 0
    violation_kinds: Counter = field(default_factory=Counter)
    slowest: tuple = (0.0, -1)
    recycled: int = 0
    notes: list = field(default_factory=list)

    def add(self, r: CaseResult) -> None:
        self.cases += 1
        self.outcomes[r.outcome] += 1
        self.gens[r.gen] += 1
        self.faults.update(r.faults)
        self.events.update(r.events)
        if r.violations:
            self.violating_cases += 1
            self.violation_kinds.update(norm(v.split(":")[0] if v.startswith(("slow", "hang")) else v, 70)
                                        for v in r.violations)
            for v in r.violations:
                if len(self.violations) < 200:
                    self.violations.append((r.index, r.gen, v))
        if r.cpu > self.slowest[0]:
            self.slowest = (r.cpu, r.index)

    def merge(self, o: "Summary") -> None:
        self.cases += o.cases
        for a in ("outcomes", "gens", "faults", "events", "violation_kinds"):
            getattr(self, a).update(getattr(o, a))
        self.violating_cases += o.violating_cases
        self.violations += o.violations[: max(0, 200 - len(self.violations))]
        if o.slowest[0] > self.slowest[0]:
            self.slowest = o.slowest

    def repro(self, index: int) -> str:
        return f"python -m tlm.core.fuzz --device {self.device} --seed {self.seed} --case {index}"

    def format_violations(self, n: int = 10) -> str:
        out = []
        shown, seen = [], set()                 # the first case of each kind first
        for v in sorted(self.violations):
            k = norm(v[2], 40)
            if k not in seen:
                seen.add(k)
                shown.append(v)
        shown += [v for v in sorted(self.violations) if v not in shown]
        shown = list(dict.fromkeys(shown))
        for index, gen, msg in shown[:n]:
            out.append(f"  [seed {self.seed} case {index} {gen}] {msg}\n"
                       f"      reproduce: {self.repro(index)}")
        return "\n".join(out)

    def report(self) -> str:
        def table(title, counter, limit=40):
            lines = [f"{title}:"]
            items = counter.most_common()
            for k, v in items[:limit]:
                lines.append(f"  {v:8d}  {k}")
            if len(items) > limit:
                lines.append(f"  ... {len(items) - limit} more kinds")
            if not items:
                lines.append("  (none)")
            return lines

        ev = self.events
        lim = Counter({k[len("model_limit: "):]: v for k, v in ev.items() if k.startswith("model_limit: ")})
        unp = Counter({k[len("unpredictable: "):]: v for k, v in ev.items() if k.startswith("unpredictable: ")})
        other = Counter({k: v for k, v in ev.items() if not k.startswith(("model_limit: ", "unpredictable: "))})
        rate = self.wall / max(1, self.cases) * 1e3
        lines = [f"cases run: {self.cases} (device {self.device}, seed {self.seed}) in {self.wall:.1f} s wall "
                 f"({rate:.1f} ms/case); slowest case {self.slowest[1]}: {self.slowest[0]:.2f} s device CPU"]
        lines += self.notes
        lines += table("generators", self.gens)
        lines += table("run outcomes (first stop of each case)", self.outcomes)
        lines += table("faults (STATUS bit: cause)", self.faults)
        lines += table("model-limit events", lim)
        lines += table("unpredictable events", unp)
        lines += table("other events", other)
        lines.append(f"invariant violations: {sum(self.violation_kinds.values())} in {self.violating_cases} cases")
        if self.violations:
            lines += table("  by kind", self.violation_kinds)[1:]
            ids = sorted({i for i, _, _ in self.violations})
            lines.append(f"  cases: {' '.join(map(str, ids[:100]))}{' ...' if len(ids) > 100 else ''}")
            lines.append("  first case of each kind, then the others:")
            lines.append(self.format_violations(max(10, len(self.violation_kinds))))
        return "\n".join(lines)


# ============================================================================================
# Many cases
# ============================================================================================
def vm_size() -> int:
    """The process's address-space size in bytes (Linux), else 0."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def worker_init(mem_limit: float) -> None:
    """Cap the address space (RLIMIT_AS), so that a stream that makes the model allocate too
    much fails inside the device instead of taking the machine down."""
    if mem_limit > 0:
        try:
            import resource

            lim = int(mem_limit * (1 << 30))
            _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            resource.setrlimit(resource.RLIMIT_AS, (lim if hard < 0 else min(lim, hard), hard))
        except (ImportError, ValueError, OSError):
            pass


def run_range(args) -> tuple:
    """Run cases lo..hi-1 of a device; returns (Summary, index to resume at or None). A
    worker whose address space has grown past half its limit stops early: freed heap memory
    stays mapped, and the next cases would fail for want of memory that another case used.
    The rest of the range is then rerun in a fresh process."""
    device, seed, lo, hi, cpu_limit, abort_cpu, wall_limit, mem_limit = args
    target = target_of(device)
    target.prepare()
    s = Summary(seed, device)
    for i in range(lo, hi):
        s.add(run_case(target, make_case(target, seed, i), cpu_limit, abort_cpu, wall_limit))
        if mem_limit > 0 and i + 1 < hi and vm_size() > mem_limit * (1 << 30) / 2:
            return s, i + 1
    return s, None


def run(device: str, seed: int, cases: int, start: int = 0, jobs: int = 1, cpu_limit: float = 5.0,
        abort_cpu: float = 15.0, wall_limit: float = 120.0, progress=None, mem_limit: float = 0.0) -> Summary:
    """Run cases start..start+cases-1 of `seed` on registered device `device`; returns the
    Summary. With jobs > 1 or a `mem_limit` (GiB per process), the cases run in worker
    processes (fresh ones for every range of cases); else in this process."""
    target = target_of(device)
    bad = target.prepare()
    t0 = time.perf_counter()
    total = Summary(seed, device)
    total.notes += target.notes()
    if bad:
        total.notes.append("modules that failed to import: " + "; ".join(bad))
    step = 100
    ranges = [(device, seed, i, min(i + step, start + cases), cpu_limit, abort_cpu, wall_limit, mem_limit)
              for i in range(start, start + cases, step)]
    if jobs > 1 or mem_limit > 0:
        import multiprocessing as mp
        from concurrent.futures import FIRST_COMPLETED, wait

        kw = {}
        if sys.version_info >= (3, 11):        # a fresh worker per range ('fork' cannot do that)
            method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
            ctx = mp.get_context(method)
            if method == "forkserver":
                ctx.set_forkserver_preload([type(target).__module__])
            kw = {"max_tasks_per_child": 1, "mp_context": ctx}
        env0 = os.environ.get("PYTHONWARNINGS")
        try:
            main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
            if kw and main_spec is not None:
                # a worker imports the modules (preload, pickled functions) before
                # multiprocessing runs the parent's __main__ (python -m tlm.core.fuzz) as
                # __mp_main__: runpy's "found in sys.modules" RuntimeWarning is noise
                quiet = f"ignore:'{main_spec.name}' found in sys.modules:RuntimeWarning"
                os.environ["PYTHONWARNINGS"] = f"{env0},{quiet}" if env0 else quiet
            with ProcessPoolExecutor(max_workers=max(1, jobs), initializer=worker_init, initargs=(mem_limit,),
                                     **kw) as ex:
                pending = {ex.submit(run_range, rg): rg for rg in ranges}
                while pending:
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in done:
                        rg = pending.pop(fut)
                        s, resume = fut.result()
                        total.merge(s)
                        if resume is not None:
                            total.recycled += 1
                            nxt = rg[:2] + (resume,) + rg[3:]
                            pending[ex.submit(run_range, nxt)] = nxt
                        if progress:
                            progress(total)
        finally:
            if env0 is None:
                os.environ.pop("PYTHONWARNINGS", None)
            else:
                os.environ["PYTHONWARNINGS"] = env0
    else:
        for rg in ranges:
            lo = rg[2]
            while lo is not None:
                s, lo = run_range(rg[:2] + (lo,) + rg[3:7] + (0.0,))
                total.merge(s)
            if progress:
                progress(total)
    total.wall = time.perf_counter() - t0
    if total.recycled:
        total.notes.append(f"worker processes recycled after a case grew the address space past "
                           f"{mem_limit / 2:g} GiB: {total.recycled}")
    return total


def main(argv: "list[str] | None" = None, device: "str | None" = None) -> int:
    from .registry import UnknownDevice, default_device
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--device", default=device or os.environ.get("DEVICE"))
    known, _ = pre.parse_known_args(argv)
    try:
        known.device = known.device or default_device("fuzz")
        target = target_of(known.device)
    except (UnknownDevice, LookupError) as e:
        print(f"tlm.fuzz: error: {e}", file=sys.stderr)
        return 2
    ap = argparse.ArgumentParser(prog="python -m tlm.core.fuzz", description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=known.device,
                    help="registered device (default: the only one with a fuzz target)")
    ap.add_argument("--cases", "-n", type=int, default=1000, help="number of cases (default 1000)")
    ap.add_argument("--seed", type=int, default=None, help="seed (default: random; printed)")
    ap.add_argument("--start", type=int, default=0, help="first case index")
    ap.add_argument("--case", type=int, default=None, help="replay this one case verbosely")
    ap.add_argument("--gen", choices=list(target.generators), default=None, help="with --case: force a generator")
    ap.add_argument("--jobs", "-j", type=int, default=min(4, os.cpu_count() or 1),
                    help="worker processes (default: CPUs, at most 4); results do not depend on it")
    ap.add_argument("--cpu-limit", type=float, default=5.0, help="device CPU seconds per case (default 5)")
    ap.add_argument("--mem-limit", type=float, default=6.0,
                    help="address-space limit per worker process in GiB (RLIMIT_AS; 0: none, and with "
                         "--jobs 1 the cases run in this process). A stream that makes the model allocate more "
                         "fails with MemoryError inside the device: a violation")
    ap.add_argument("--abort-cpu", type=float, default=15.0, help="CPU watchdog per case (default 15 s)")
    ap.add_argument("--wall-limit", type=float, default=120.0, help="wall-time watchdog per case (default 120 s)")
    a = ap.parse_args(argv)
    seed = a.seed
    if seed is None:
        seed = int(os.environ.get(DEFAULT_SEED_ENV) or np.random.SeedSequence().entropy % (1 << 32))
    if a.case is not None:
        worker_init(a.mem_limit)
        target.prepare()
        case = make_case(target, seed, a.case, a.gen)
        res = run_case(target, case, a.cpu_limit, a.abort_cpu, a.wall_limit)
        print(target.describe(case, res))
        return 1 if res.violations else 0
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        problem = target.ci_problem()
        if problem:
            print(f"tlm.fuzz: error: {problem}", file=sys.stderr)
            return 2
    print(f"tlm.fuzz: device {a.device}, seed {seed}, cases {a.start}..{a.start + a.cases - 1}, {a.jobs} job(s)",
          flush=True)
    last = [time.perf_counter()]

    def progress(s: Summary) -> None:
        if time.perf_counter() - last[0] > 15:
            last[0] = time.perf_counter()
            print(f"  ... {s.cases} cases, {len(s.violations)} violations", file=sys.stderr, flush=True)

    s = run(a.device, seed, a.cases, a.start, a.jobs, a.cpu_limit, a.abort_cpu, a.wall_limit, progress,
            a.mem_limit)
    print(s.report())
    print(f"result: {'FAIL' if s.violations else 'PASS'} (seed {seed})")
    return 1 if s.violations else 0


if __name__ == "__main__":
    sys.exit(main())
