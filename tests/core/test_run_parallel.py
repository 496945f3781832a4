"""tb/core/run.py's parallel pieces: JOBS (test modules split over simulator processes, JUnit
XML merged), the build lock (runs share an up-to-date build, a rebuild waits for them) and
the per-run folders.

* ``test_split_modules_*``: every module in exactly one group, no more groups than JOBS or
  modules, the same groups every time (SEED and JOBS reproduce a run), module order kept.
* ``test_merge_results``: the merged XML holds every job's test cases (counts from cocotb's
  own reader).
* ``test_build_lock_*``: two shared holders at once; an exclusive request waits for a shared
  holder (checked in a child process with a non-blocking attempt).
* ``test_jobs_run_icarus``: ``--jobs 2`` on the Ethos-U85 bench (Icarus, DUT=tlm, a filter
  picking one test in each of two modules): two processes, both tests counted, coverage
  merged from both, each run's results in its own folder and a copy in the build folder.
"""
from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tb.core import run as tbrun
from tb.core import simtools
from tests.support import tool_missing

REPO = Path(__file__).resolve().parents[2]
U85_MODULES = tbrun.test_modules("ethos-u85")


@pytest.mark.parametrize("jobs", [1, 2, 3, 5, 100])
def test_split_modules_partition(jobs):
    groups = tbrun.split_modules(U85_MODULES, jobs)
    assert 1 <= len(groups) <= min(jobs, len(U85_MODULES))
    flat = [m for g in groups for m in g]
    assert sorted(flat) == sorted(U85_MODULES) and len(flat) == len(set(flat))
    for g in groups:                                    # the registry's order within a group
        assert g == sorted(g, key=U85_MODULES.index)
    assert groups == tbrun.split_modules(list(U85_MODULES), jobs)


def test_split_modules_balances():
    groups = tbrun.split_modules(U85_MODULES, 2)
    size = lambda g: sum(Path(sys.modules[m].__file__ if m in sys.modules else
                              __import__("importlib").util.find_spec(m).origin).stat().st_size for m in g)
    a, b = sorted(size(g) for g in groups)
    biggest = max(size([m]) for m in U85_MODULES)
    assert b - a <= biggest, (a, b)


def _suite(name: str, cases: list) -> ET.Element:
    s = ET.Element("testsuite", name=name, tests=str(len(cases)), failures=str(sum(f for _, f in cases)),
                   errors="0")
    for case, failed in cases:
        tc = ET.SubElement(s, "testcase", classname=name, name=case)
        if failed:
            ET.SubElement(tc, "failure", message="x")
    return s


def test_merge_results(tmp_path):
    from cocotb_tools.check_results import get_results
    files = []
    for i, cases in enumerate([[("a", False), ("b", True)], [("c", False)], []]):
        root = ET.Element("testsuites")
        root.append(_suite(f"job{i}", cases))
        f = tmp_path / f"j{i}.xml"
        ET.ElementTree(root).write(f)
        files.append(f)
    out = tmp_path / "results.xml"
    tbrun.merge_results(files, out)
    assert get_results(out) == (3, 1)
    names = sorted(tc.get("name") for tc in ET.parse(out).iter("testcase"))
    assert names == ["a", "b", "c"]


def _try_lock(path: Path, kind: str) -> bool:
    """In a child process: can *kind* ('sh' or 'ex') be taken on *path* without waiting?"""
    code = (f"import fcntl,sys\nf=open({str(path)!r},'a+')\n"
            f"try:\n fcntl.lockf(f, fcntl.LOCK_{kind.upper()}|fcntl.LOCK_NB)\nexcept OSError:\n sys.exit(3)\n")
    return subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_build_lock_shared_then_exclusive(tmp_path):
    lockfile = tmp_path / ".x.lock"
    with tbrun.BuildLock(lockfile, tmp_path / "x") as lock:
        assert _try_lock(lockfile, "sh")                # another run may share the build
        assert not _try_lock(lockfile, "ex")            # a rebuild waits
        lock.exclusive()
        assert not _try_lock(lockfile, "sh")            # nobody runs while we build
        lock.share()
        assert _try_lock(lockfile, "sh") and not _try_lock(lockfile, "ex")
    assert _try_lock(lockfile, "ex")                    # released on exit
    f = open(lockfile, "a+")
    fcntl.lockf(f, fcntl.LOCK_EX)
    f.close()


@pytest.mark.sim
def test_jobs_run_icarus():
    reason = simtools.sim_problem("icarus")
    if reason:
        tool_missing(reason)
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    p = subprocess.run([sys.executable, "-m", "tb.core.run", "--device", "ethos-u85", "--sim", "icarus",
                        "--dut", "tlm", "--jobs", "2", "--seed", "7",
                        "--tests", r"test_reset_values$|test_dma/mode=1d/backpressure=none"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    out = p.stdout
    assert p.returncode == 0, (out + p.stderr)[-3000:]
    assert "tb.run: 2 simulator processes (JOBS=2)" in out
    assert re.search(r"tb\.run: 2 tests, 0 failed, 0 skipped, 0 expected failures;.*JOBS=2", out), out[-2000:]
    for name in ("test_registers.test_reset_values", "test_jobs.test_dma/mode=1d/backpressure=none"):
        assert f"tb.ethos_u85.tests.{name} passed" in out, name
    groups = tbrun.split_modules(U85_MODULES, 2)
    ran = {i for i, g in enumerate(groups) for m in g if m.endswith((".test_registers", ".test_jobs"))}
    assert re.search(rf"functional coverage \({len(ran)} process file\(s\)", out), out[-2000:]
    m = re.search(r"results: (\S+)", out)
    results = REPO / m.group(1)
    assert results.parent.parent.name == "runs" and results.is_file()
    from cocotb_tools.check_results import get_results
    assert get_results(results) == (2, 0)
    published = results.parent.parent.parent / "results.xml"
    assert published.is_file()
