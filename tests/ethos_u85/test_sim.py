"""pytest entries for the cocotb regression: build and run tb/tests through tb.core.run.

Each case runs ``python -m tb.core.run`` in a subprocess (the simulator embeds its own Python, and
the run must not inherit pytest's state), exactly as ``make sim`` does, and reuses the
build folders under sim_build/ (tb.core.run builds under an exclusive lock; runs share an
up-to-date build, each in its own runs/<pid>/ folder, so pytest-xdist workers can run them at once).

* ``test_cocotb_regression[sim-dut]``: the whole regression, Verilator and Icarus, DUT=tlm
  and DUT=rtl (rtl_stub/ethos_u85/ethosu85.v must lint with Verilator). Tests of features the
  stand-in lacks are expected failures there. A missing simulator skips locally and fails
  under CI (conftest.tool_missing).
  Expected failures (tb/core/expect.py: verified, marked in results.xml, ``tb.run: XFAIL``
  lines): none on DUT=tlm, on DUT=rtl only tests marked ``rtl_unsupported`` (found in
  tb/ethos_u85/tests by `rtl_unsupported_tests`); they never count as passes. The tests that
  must run are looked up in results.xml and must have *passed* (a skip or an expected failure
  does not do). The default network (test_npu_model with tests/data/sim_default_vela.npz)
  must have run and passed.
  Each run must print the functional-coverage summary (tb/ethos_u85/coverage.py) and write its JSON
  report with hits in every key cover point.
* ``test_rtl_several_weight_decoders[config]``: the stand-in as ethos-u85-512 and -1024 (2 and 4
  weight decoders; the regression's -256 has one), random CONV and the stream/LUT CONV tests.
* ``test_npu_model_through_pins[sim]``: ``make sim NPU_MODEL=... NPU_MODEL_REF=...`` on the
  catalog network maxpool_2x2_s2_valid (Vela for ethos-u85-256, LiteRT BUILTIN_REF
  reference), DUT=tlm: every output byte against the TLM scoreboard and LiteRT.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tb.core import simtools
from tests.support import tool_missing

REPO = Path(__file__).resolve().parents[2]

STANDIN = REPO / "rtl_stub" / "ethos_u85" / "ethosu85.v"
POOL_NET = "maxpool_2x2_s2_valid"

pytestmark = pytest.mark.sim


@functools.lru_cache(maxsize=1)
def _standin_problem() -> str | None:
    """None if the RTL stand-in exists and Verilator lints it without error."""
    if not STANDIN.is_file():
        return "RTL stand-in rtl_stub/ethos_u85/ethosu85.v is not built yet"
    env = dict(os.environ)
    try:
        exe = simtools.verilator_exe(env)
        srcs = simtools.dut_sources("ethos-u85", "rtl")
    except simtools.SetupError as e:
        return f"cannot lint the stand-in: {e}"
    p = subprocess.run([exe, "--lint-only", "-Wno-fatal", "-Wno-lint", "-Wno-style",
                        f"-I{STANDIN.parent}", "--top-module", "ethosu85",
                        *map(str, srcs)], capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0:
        first = next((ln for ln in p.stderr.splitlines() if "%Error" in ln), p.stderr[:200])
        return f"rtl_stub/ethos_u85/ethosu85.v does not lint: {first}"
    return None


def run_sim(*args: str, timeout: int = 900, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "tb.core.run", "--device", "ethos-u85", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _explain(p: subprocess.CompletedProcess) -> str:
    out = (p.stdout + p.stderr).splitlines()
    keep = [ln for ln in out if ln.startswith("tb.run") or " FAIL " in ln or "Error" in ln
            or "assert" in ln.lower() or "mismatch" in ln]
    return "\n".join(keep[-40:] or out[-40:])


def _summary(p: subprocess.CompletedProcess) -> tuple[int, int, int, int]:
    """(tests, failed, skipped, expected failures) of tb.run's summary line."""
    m = re.search(r"tb\.run: (\d+) tests, (\d+) failed, (\d+) skipped, (\d+) expected failures", p.stdout)
    assert m, _explain(p)
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4))


def _outcomes(p: subprocess.CompletedProcess) -> dict:
    """'module.test[/params]' (under tb.ethos_u85.tests) -> passed/failed/skipped/xfail, from
    the results.xml the run's summary line names."""
    from tb.core.expect import outcomes
    m = re.search(r"results: (\S+)", p.stdout)
    assert m, _explain(p)
    pre = "tb.ethos_u85.tests."
    return {k[len(pre):]: v for k, v in outcomes(REPO / m.group(1)).items() if k.startswith(pre)}


def _passed(outcomes: dict, name: str) -> bool:
    """Did test *name* pass? *name*: 'module.test/params' or its tail from the test name on,
    the parameters given in full or as a leading part ('test_dma/mode=3d' is every
    'test_dma/mode=3d/...'); at least one test must match and every one must have passed."""
    def match(k: str) -> bool:
        return any(t == name or t.startswith(name + "/") for t in (k, k.split(".", 1)[-1]))
    hits = [v for k, v in outcomes.items() if match(k)]
    return bool(hits) and all(v == "passed" for v in hits)


# cover points of tb/ethos_u85/coverage.py that the regression must hit on both DUTs (APB/AXI from the
# pins, job_end/bus_fault from the DUT's STATUS, commands and kernel settings of the jobs the DUT
# completed without a scoreboard mismatch)
KEY_COVER_POINTS = ("opcode", "kernel_op_mode", "ifm_precision x ifm_format",
                    "ofm_precision x ofm_format", "activation_function", "ofm_round_mode",
                    "acc_format", "axi_burst_len", "axi_burst_size", "axi_resp", "axi_prot",
                    "job_end", "bus_fault", "apb_prot")


# kernel-operation modes the RTL stand-in does not implement at all (tb/ethos_u85/testlib/rtl_support.py)
RTL_REFUSED_MODES = ("NPU_OP_ELEMENTWISE.div", "NPU_OP_POOL.none", "NPU_OP_POOL.argmax_x", "NPU_OP_POOL.argmax_y")


def _coverage(p: subprocess.CompletedProcess) -> dict:
    """The coverage summary tb.core.run printed (one line a cover point) and its JSON report."""
    assert "tb.run: functional coverage" in p.stdout, _explain(p)
    m = re.search(r"tb\.run: coverage report: (\S+)", p.stdout)
    assert m, f"no coverage report path printed:\n{_explain(p)}"
    path = REPO / m.group(1)
    assert path.is_file(), f"coverage report {path} missing"
    rep = json.loads(path.read_text())
    assert rep["format"] == "tb-coverage/1-report"
    for name, pt in rep["points"].items():
        assert re.search(rf"^  {re.escape(name)} +{pt['covered']}/{pt['bins']} ", p.stdout, re.M), \
            f"no summary line for cover point {name}"
    assert re.search(r"^  total +\d+/\d+ ", p.stdout, re.M)
    return rep


# tb/ethos_u85/tests/test_faults.py: number of tests and a few that must be among them
FAULT_TESTS = 60
FAULT_NAMES = (
    "test_dma_index_fault/iface=sram/resp=SLVERR", "test_dma_index_fault/iface=ext/resp=DECERR",
    "test_soft_reset_mid_job/kind=pool", "test_soft_reset_mid_job/kind=elementwise",
    "test_fetch_fault/where=mid_stream/resp=DECERR/iface=sram",
    "test_fetch_fault/where=cmd1_payload/resp=SLVERR/iface=ext",
    "test_conv_fault/operand=weights/resp=SLVERR", "test_conv_fault/operand=scale/resp=DECERR",
    "test_depthwise_fault/operand=weights/resp=DECERR", "test_depthwise_fault/operand=scale/resp=SLVERR",
    "test_conv_fault_datapath/operand=ifm/resp=SLVERR", "test_pool_fault/operand=ifm/resp=DECERR",
    "test_elementwise_fault/operand=ofm/resp=SLVERR",
    "test_dma_fault/where=write/iface=sram/resp=DECERR", "test_soft_reset_mid_job/kind=dma",
    "test_soft_reset_mid_job/kind=stream", "test_qsize/case=past_end", "test_qsize/case=zero",
    "test_qsize/case=unaligned_cmd1", "test_prot_matrix_full",
    "test_apb_in_reset_sequence/after=nreset", "test_apb_in_reset_sequence/after=soft_reset",
    "test_reset_write_in_nreset_sequence", "test_apb_in_reset_drain")


@functools.lru_cache(maxsize=1)
def rtl_unsupported_tests() -> frozenset:
    """'module.function' of every cocotb test in tb/ethos_u85/tests decorated with
    ``rtl_unsupported`` (read from the source): the only tests that may be expected failures
    on DUT=rtl."""
    import ast

    def is_mark(d) -> bool:
        d = d.func if isinstance(d, ast.Call) else d
        return getattr(d, "id", None) == "rtl_unsupported"

    out = set()
    for path in sorted((REPO / "tb" / "ethos_u85" / "tests").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.AsyncFunctionDef, ast.FunctionDef)) and any(map(is_mark, node.decorator_list)):
                out.add(f"{path.stem}.{node.name}")
    return frozenset(out)


def check_xfails(stdout: str, dut: str) -> list:
    """The expected failures of a regression run ('module.function/params', from tb.run's
    ``XFAIL`` lines): none on DUT=tlm (the TLM has every feature), on DUT=rtl only tests
    marked rtl_unsupported."""
    xfails = re.findall(r"^tb\.run: XFAIL tb\.ethos_u85\.tests\.(\w+\.\w+)(\S*): ", stdout, re.M)
    allowed = rtl_unsupported_tests() if dut == "rtl" else frozenset()
    stray = sorted(f"{t}{params}" for t, params in xfails if t not in allowed)
    assert not stray, f"expected failures on DUT={dut} of tests not marked rtl_unsupported there: {stray}"
    return [f"{t}{params}" for t, params in xfails]


def test_check_xfails_allows_only_rtl_unsupported_tests():
    marked = rtl_unsupported_tests()
    assert "test_rtl_networks.test_unclaimed_network" in marked, marked
    name = sorted(marked)[0]
    line = f"tb.run: XFAIL tb.ethos_u85.tests.{name}/x=1: expected failure: the RTL stand-in stopped ...\n"
    assert check_xfails(line, "rtl") == [f"{name}/x=1"]
    with pytest.raises(AssertionError, match="DUT=tlm"):
        check_xfails(line, "tlm")
    with pytest.raises(AssertionError, match="test_faults.test_qsize/case=zero"):
        check_xfails("tb.run: XFAIL tb.ethos_u85.tests.test_faults.test_qsize/case=zero: x\n", "rtl")


def test_passed_is_not_satisfied_by_a_skip_or_an_xfail():
    oc = {"test_jobs.test_dma/mode=3d": "skipped", "test_jobs.test_end_of_queue": "passed",
          "test_rtl_networks.test_unclaimed_network": "xfail"}
    assert _passed(oc, "test_end_of_queue")
    assert not _passed(oc, "test_dma/mode=3d")
    assert not _passed(oc, "test_unclaimed_network")
    assert not _passed(oc, "test_missing")
    oc.update({"test_jobs.test_dma/mode=1d/bp=none": "passed", "test_jobs.test_dma/mode=1d/bp=yes": "passed",
               "test_jobs.test_dma_fault/x=1": "failed"})
    assert _passed(oc, "test_dma/mode=1d") and _passed(oc, "test_jobs.test_dma/mode=1d")
    assert not _passed(oc, "test_dma/mode=1")          # a partial parameter value is no match


def _cases():
    for dut in ("tlm", "rtl"):
        for sim in ("verilator", "icarus"):
            yield pytest.param(sim, dut, id=f"{sim}-{dut}")


@pytest.mark.parametrize("sim,dut", list(_cases()))
def test_cocotb_regression(sim, dut):
    reason = simtools.sim_problem(sim) or (simtools.sim_problem("verilator") if dut == "rtl" else None)
    if reason:
        tool_missing(reason)
    if dut == "rtl":
        problem = _standin_problem()
        assert problem is None, problem
    p = run_sim("--sim", sim, "--dut", dut, "--waves", "0")
    assert p.returncode == 0, f"tb.core.run --sim {sim} --dut {dut} failed:\n{_explain(p)}"
    n, failed, skipped, xfailed = _summary(p)
    assert n > 0 and failed == 0, _explain(p)
    oc = _outcomes(p)
    assert sum(v == "xfail" for v in oc.values()) == xfailed
    ran = sum(v == "passed" for v in oc.values())
    # the job tests (DMA, stop/resume, end of queue, reserved opcode, bus errors) must run
    assert ran >= 30, f"only {ran} tests passed on {sim}-{dut}:\n{_explain(p)}"
    for name in ("test_dma/mode=3d", "test_stop_and_resume", "test_end_of_queue",
                 "test_reserved_opcode", "test_bus_error/where=dma_write"):
        assert _passed(oc, name), f"{name} did not run and pass on {sim}-{dut}"
    if dut == "tlm":
        assert _passed(oc, "test_scoreboard_catches/bug=stray_write")
    # the data checks the README names (random kernel ops against the literal model or the
    # stand-in against the TLM; networks against the TLM and LiteRT) ran and passed
    must = ["test_random_ops", "test_random_conv"]
    if dut == "tlm":                    # the bench's self-checks (bugs planted in the TLM adapter)
        must += ["test_scoreboard_catches", "test_checker_catches_bad_completer", "test_monitor_catches"]
    if dut == "rtl":
        must += ["test_conv_streams", "test_elementwise", "test_pool", "test_vela_networks",
                 "test_catalog_networks"]
    for name in must:
        assert _passed(oc, name), f"{name} did not run and pass on {sim}-{dut}"
    # the hostile-input tests (tb/ethos_u85/tests/test_faults.py) ran and passed
    faults = [k.split(".", 1)[1] for k, v in oc.items() if k.startswith("test_faults.") and v == "passed"]
    assert len(faults) >= FAULT_TESTS, (f"only {len(faults)} of the {FAULT_TESTS} test_faults "
                                        f"tests passed on {sim}-{dut}:\n{_explain(p)}")
    for name in FAULT_NAMES:
        assert name in faults, f"test_faults.{name} did not pass on {sim}-{dut}"
    # expected failures: none on DUT=tlm; on DUT=rtl only the tests marked rtl_unsupported
    assert len(check_xfails(p.stdout, dut)) == xfailed
    # the shipped default network ran through the pins and passed (not skipped, not an
    # expected failure: it uses only POOL and ELEMENTWISE, which the stand-in has)
    assert (REPO / "tests" / "ethos_u85" / "data" / "sim_default_vela.npz").is_file(), \
        "tests/ethos_u85/data/sim_default_vela.npz missing"
    assert _passed(oc, "test_network.test_npu_model"), \
        f"test_npu_model did not run and pass on {sim}-{dut}:\n{_explain(p)}"
    # functional coverage: summary printed, report written, every key point hit
    assert _passed(oc, "test_coverage_sampled"), f"test_coverage_sampled on {sim}-{dut}"
    rep = _coverage(p)
    empty = [k for k in KEY_COVER_POINTS if rep["points"][k]["covered"] == 0]
    assert not empty, f"no coverage on {sim}-{dut} for {empty}"
    pts = rep["points"]
    assert pts["opcode"]["hits"]["NPU_OP_DMA_START"] > 0 and pts["job_end"]["hits"]["bus_status"] > 0
    assert pts["apb_prot"]["hits"]["nonsecure_user/write/PSLVERR"] > 0     # the PROT matrix
    assert pts["axi_resp"]["covered"] == pts["axi_resp"]["bins"]          # every port/dir/resp
    if dut == "rtl":
        # modes the stand-in refuses (rtl_support) are never completed by it, so never credited
        refused = {k: pts["kernel_op_mode"]["hits"][k] for k in RTL_REFUSED_MODES}
        assert not any(refused.values()), f"coverage credits operations the DUT did not complete: {refused}"
        assert pts["job_end"]["hits"]["cmd_parse_error"] > 0            # the refusals it did see


@pytest.mark.parametrize("config", ["ethos-u85-512", "ethos-u85-1024"])
def test_rtl_several_weight_decoders(config):
    """The regression runs the stand-in as ethos-u85-256 (one weight decoder); its walker's
    brick positions for 2 (-512) and 4 (-1024) decoders (npu_conv_walk.v bpos) are exercised
    here: random CONV/DEPTHWISE jobs, the stream and LUT CONV tests, DUT=rtl on Icarus against
    the TLM scoreboard. (Two mutants of that path survived a -256-only mutation run.)"""
    reason = simtools.sim_problem("icarus")
    if reason:
        tool_missing(reason)
    p = run_sim("--sim", "icarus", "--dut", "rtl", "--config", config, "--waves", "0",
                "--tests", "test_random_conv|test_conv_streams|test_conv_lut")
    assert p.returncode == 0, _explain(p)
    n, failed, skipped, xfailed = _summary(p)
    assert n >= 5 and failed == skipped == xfailed == 0, _explain(p)
    oc = _outcomes(p)
    for name in ("test_random_ops.test_random_conv", "test_conv_streams", "test_conv_lut"):
        assert _passed(oc, name), f"{name} did not run and pass on {config}:\n{_explain(p)}"


@pytest.fixture(scope="module")
def pool_net(tmp_path_factory):
    """The Vela output of the catalog pooling network and a LiteRT reference npz."""
    if shutil.which("vela") is None and not (Path(sys.executable).parent / "vela").exists():
        tool_missing("vela not installed (pip install -e '.[test]')")
    if importlib.util.find_spec("ai_edge_litert") is None:
        tool_missing("LiteRT (ai-edge-litert) not installed")
    from tests import nets
    model = nets.compiled(POOL_NET, "ethos-u85-256", "default", "raw")
    inputs, outputs = nets.reference(nets.build(POOL_NET))
    ref = tmp_path_factory.mktemp("npu_model") / f"{POOL_NET}_ref.npz"
    np.savez(ref, **{f"input{i}": x for i, x in enumerate(inputs)},
             **{f"output{i}": y for i, y in enumerate(outputs)})
    return model, ref


@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_npu_model_through_pins(sim, pool_net):
    reason = simtools.sim_problem(sim)
    if reason:
        tool_missing(reason)
    model, ref = pool_net
    p = run_sim("--sim", sim, "--dut", "tlm", "--npu-model", str(model),
                env_extra={"NPU_MODEL_REF": str(ref)})
    assert p.returncode == 0, f"NPU_MODEL run failed:\n{_explain(p)}"
    assert _summary(p)[:2] == (1, 0), _explain(p)
    text = p.stdout + p.stderr
    assert _passed(_outcomes(p), "test_network.test_npu_model"), _explain(p)
    assert re.search(r"output0 .*bytes match the TLM and NPU_MODEL_REF", text), _explain(p)
    rep = _coverage(p)
    assert rep["points"]["kernel_op_mode"]["hits"]["NPU_OP_POOL.max"] > 0, rep["points"]["kernel_op_mode"]


def test_run_options_seed_filter_waves():
    """SEED reaches cocotb, TESTS filters, WAVES writes a waveform (Icarus: quick build)."""
    reason = simtools.sim_problem("icarus")
    if reason:
        tool_missing(reason)
    p = run_sim("--sim", "icarus", "--dut", "tlm", "--waves", "1", "--seed", "4242",
                "--tests", "test_reset_values$")
    text = p.stdout + p.stderr
    assert p.returncode == 0, _explain(p)
    assert "Seeding Python random module with 4242" in text
    assert re.search(r"tb\.run: 1 tests, 0 failed", p.stdout), _explain(p)
    assert "running tb.ethos_u85.tests.test_registers.test_reset_values" in text
    assert "test_prot_matrix" not in text
    m = re.search(r"waves: (\S+)", p.stdout)
    assert m and (REPO / m.group(1)).is_file() and (REPO / m.group(1)).stat().st_size > 0


def test_run_no_test_matched_fails():
    reason = simtools.sim_problem("icarus")
    if reason:
        tool_missing(reason)
    p = run_sim("--sim", "icarus", "--dut", "tlm", "--tests", "no_such_test_xyz")
    assert p.returncode != 0
    assert "no test ran" in p.stdout


def test_run_bad_npu_model_is_one_clear_line(tmp_path):
    reason = simtools.sim_problem("icarus")
    if reason:
        tool_missing(reason)
    bad = tmp_path / "x_vela.npz"
    bad.write_bytes(b"not an npz")
    p = run_sim("--sim", "icarus", "--dut", "tlm", "--npu-model", str(bad))
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "NPU_MODEL" in lines[0], p.stderr


def test_run_bad_npu_model_ref_is_one_clear_line(tmp_path):
    """An NPU_MODEL_REF whose keys/shapes/dtypes do not match the model: exit 2 before any
    build, one line (tb.ethos_u85.run_options.check_model_ref)."""
    from tb.ethos_u85.run_options import DEFAULT_NET
    ref = tmp_path / "ref.npz"
    np.savez(ref, input0=np.zeros(7, np.int8), output0=np.zeros(7, np.int8))
    p = run_sim("--sim", "icarus", "--dut", "tlm", "--npu-model", str(DEFAULT_NET),
                env_extra={"NPU_MODEL_REF": str(ref)})
    assert p.returncode == 2, _explain(p)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "NPU_MODEL_REF" in lines[0] and "missing" in lines[0], p.stderr


def test_npu_model_unclaimed_op_on_rtl_fails_naming_it():
    """``make sim DUT=rtl NPU_MODEL=<a network with an op the stand-in does not claim>`` is
    never an expected failure: non-zero exit and one FAIL line naming the operation
    rtl_support names (after the stand-in was seen to stop exactly there)."""
    reason = simtools.sim_problem("verilator")
    if reason:
        tool_missing(reason)
    if shutil.which("vela") is None and not (Path(sys.executable).parent / "vela").exists():
        tool_missing("vela not installed (pip install -e '.[test]')")
    from tb.ethos_u85.testlib.rtl_support import UNCLAIMED_NET, first_unsupported
    from tests import nets
    from tlm.ethos_u85.vela import load
    model = nets.compiled(UNCLAIMED_NET, "ethos-u85-256", "default", "raw")
    miss = first_unsupported(load(model).command_words, 256)
    assert miss is not None, f"{UNCLAIMED_NET}: the stand-in claims it now; pick a network it refuses"
    off, op, why = miss
    p = run_sim("--sim", "verilator", "--dut", "rtl", "--npu-model", str(model))
    assert p.returncode == 1, _explain(p)
    assert _summary(p)[:2] == (1, 1), _explain(p)
    fails = re.findall(r"^tb\.run: FAIL (\S+): (.*)$", p.stdout, re.M)
    assert len(fails) == 1, _explain(p)
    name, msg = fails[0]
    assert name.endswith("test_network.test_npu_model")
    assert f"does not implement {op} at command offset 0x{off:x} ({why})" in msg, msg
    assert "stopped there with cmd_parse_error" in msg, msg


def test_cocotbext_subordinate_still_serves():
    """``TB_AXI_SUBORDINATE=cocotbext``: the bench's earlier AXI subordinates (cocotbext-axi
    channel models, pin-sampling monitors) still run the driver and self-check tests; an
    unknown value is one clear line before anything is built."""
    reason = simtools.sim_problem("icarus")
    if reason:
        tool_missing(reason)
    p = run_sim("--sim", "icarus", "--dut", "tlm", "--tests", "test_driver|test_scoreboard_catches",
                env_extra={"TB_AXI_SUBORDINATE": "cocotbext"})
    assert p.returncode == 0, _explain(p)
    n, failed = _summary(p)[:2]
    assert n >= 20 and failed == 0, _explain(p)
    p = run_sim("--sim", "icarus", "--dut", "tlm", "--tests", "test_reset_values$",
                env_extra={"TB_AXI_SUBORDINATE": "axiram"})
    assert p.returncode == 2, _explain(p)
    err = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.strip()]
    assert len(err) == 1 and "TB_AXI_SUBORDINATE" in err[0] and "cocotbext" in err[0], err


def test_tb_device_factory_swaps_the_model():
    """README: ``TB_DEVICE_FACTORY=module:callable`` swaps in another model with the Device API.
    A model that reads ID with bit 0 flipped (tests/ethos_u85/support/device_factory.py) makes
    test_reset_values fail at its ID check (test_run_options_seed_filter_waves is the clean
    run of the same test)."""
    reason = simtools.sim_problem("icarus")
    if reason:
        tool_missing(reason)
    p = run_sim("--sim", "icarus", "--dut", "tlm", "--tests", "test_reset_values$",
                env_extra={"TB_DEVICE_FACTORY": "tests.ethos_u85.support.device_factory:WrongIdDevice"})
    assert p.returncode == 1, _explain(p)
    assert _summary(p)[:2] == (1, 1), _explain(p)
    fails = re.findall(r"^tb\.run: FAIL (\S+): (.*)$", p.stdout, re.M)
    assert len(fails) == 1 and fails[0][0].endswith("test_reset_values"), _explain(p)
    assert "ID_RESET" in (p.stdout + p.stderr) or "read_ok(ID)" in (p.stdout + p.stderr), _explain(p)
