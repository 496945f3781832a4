"""The literal model (tlm.ethos_u85.literal) as the bench's reference on DUT=tlm: a bug planted
in the TLM's fast path (tests/ethos_u85/support/planted.py, behind the pins through
``TB_DEVICE_FACTORY``) makes test_random_ops fail, naming the operation. Icarus; about a
minute of simulation."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tb.core import simtools
from tests.support import tool_missing
from tlm.ethos_u85.literal import LITERAL_OPS, MISSING, literal_device
from tlm.ethos_u85.ops import KERNEL_OP_SPECS

REPO = Path(__file__).resolve().parents[2]


def test_literal_device_is_all_literal():
    dev = literal_device("ethos-u85-256")
    assert MISSING == () and set(LITERAL_OPS) == set(KERNEL_OP_SPECS)
    assert all(dev.kernel_ops[n] is s.reference and s.reference is not s.fn for n, s in KERNEL_OP_SPECS.items())
    assert dev.reference_paths and dev.dataport.reference and not dev.memory.batching


def test_planted_fast_path_bug_fails_random_ops():
    reason = simtools.sim_problem("icarus")
    if reason:
        tool_missing(reason)
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["TB_DEVICE_FACTORY"] = "tests.ethos_u85.support.planted:shr_off_by_one"
    p = subprocess.run([sys.executable, "-m", "tb.core.run", "--device", "ethos-u85", "--sim", "icarus",
                        "--dut", "tlm", "--seed", "1", "--tests", "test_random_ops/backpressure=none$"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    out = p.stdout + p.stderr
    tail = "\n".join(ln for ln in out.splitlines() if ln.startswith("tb.run"))
    assert p.returncode != 0, tail
    assert re.search(r"tb\.run: 1 tests, 1 failed", p.stdout), tail
    fails = re.findall(r"^tb\.run: FAIL (\S+): (.*)$", p.stdout, re.M)
    assert len(fails) == 1 and fails[0][0].endswith("test_random_ops/backpressure=none"), tail
    assert "NPU_OP_ELEMENTWISE" in fails[0][1], tail
