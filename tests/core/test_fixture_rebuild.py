"""tb.core.simtools.run_fixture rebuilds a build folder whose stamp changed only in its Verilog
defines: cocotb's Icarus runner by itself skips iverilog when no source is newer than the
binary, and the old binary (built with the other defines) would run under the new stamp (seen
with a changed DTPU configuration: a stale stand-in against a TLM of the new one)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import tool_missing

HERE = Path(__file__).resolve().parent / "fixture_defines"


@pytest.mark.sim
def test_define_change_rebuilds():
    if shutil.which("iverilog") is None:
        tool_missing("Icarus Verilog not installed (apt-get install -y iverilog)")
    from tb.core import simtools
    name = "fixture-defines"
    shutil.rmtree(simtools.REPO / "sim_build" / f"icarus-{name}", ignore_errors=True)
    try:
        for v in (3, 7):
            n, failed = simtools.run_fixture("icarus", name, [HERE / "fx_defines.v"], "fx_defines",
                                             "tests.core.fixture_defines.fx_test", {"FX_WANT": str(v)},
                                             defines={"FX_VALUE": v})
            assert (n, failed) == (1, 0), f"FX_VALUE={v}: {n} tests, {failed} failed"
    finally:
        shutil.rmtree(simtools.REPO / "sim_build" / f"icarus-{name}", ignore_errors=True)
        (simtools.REPO / "sim_build" / f".icarus-{name}.lock").unlink(missing_ok=True)
