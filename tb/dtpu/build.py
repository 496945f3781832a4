"""What the bench runner (tb/core/run.py) needs to build the DTPU in a configuration.

Module ``dtpu``'s parameters default to the ``DTPU_*`` macros (rtl_stub/dtpu/gen/dtpu_config.vh
defines them for the default configuration unless a build defined them first); the registry
entry's ``BenchInfo.defines`` names ``defines`` below, so ``make sim DEVICE=dtpu CONFIG=...``
builds each configuration with its own values. ``PLANTED_BUG`` is the test-only macro that
plants a bug in the RTL (tests/dtpu/test_dtpu_bench.py: the bench must catch it)."""
from __future__ import annotations

from tlm.dtpu import contract as C

PLANTED_BUG = "DTPU_PLANTED_BUG"


def defines(config: str, bug: bool = False) -> dict:
    """The ``DTPU_*`` macros of configuration *config* (name -> value)."""
    out = {f"DTPU_{k}": v for k, v in C.CONFIGS[config].verilog_params().items()}
    if bug:
        out[PLANTED_BUG] = 1
    return out


def lint_cases() -> "list[dict]":
    """The parameter sets ``verilator --lint-only -Wall`` must pass on (tests/dtpu/test_dtpu_rtl.py;
    tools/mutate.py --device dtpu --lint): every configuration of the contract and two edge
    configurations (1x1 with three buffers and a one-command queue; 2x3 int64 only)."""
    return [c.verilog_params() for c in C.CONFIGS.values()] + [
        {"ROWS": 1, "COLUMNS": 1, "BUFFER_DEPTH": 3, "CMDQ_DEPTH": 1, "OUTFIFO_DEPTH": 1},
        {"ROWS": 2, "COLUMNS": 3, "PRECISIONS": 8}]
