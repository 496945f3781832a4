"""The fast regression tools/mutate.py runs on each mutant of the DTPU stand-in (``--device
dtpu``; cocotb test module, DUT=rtl on Icarus, the TLM as scoreboard: tb/dtpu/scoreboard.py
predicts every output packet word for word, TLAST included, and every AXI4-Lite response).

The bench's own tests, run once per configuration of the contract (tools/mutate.py runs this
module in each, NPU_CONFIG; the stand-in's generate branches depend on ROWS, COLUMNS and
PRECISIONS, so one configuration cannot judge the others' code):

* tb/dtpu/test_dtpu_streams.py: every built precision x signedness x row grouping, weights
  shared over runs (test_runs_every_precision); random backpressure on all streams
  (test_backpressure); the output FIFO full with a paused sink; continuous mode; the
  software output length mode;
* tb/dtpu/test_dtpu_regs.py: STATUS/irq and soft reset with buffers held; the command
  queue full with runs pending; every core error code the configuration can raise, the
  input tail, UNDERRUN and OVERFLOW; every argument's buffers full.

Left out: test_register_map and test_command_errors (the adapter's register map and command
decoding, dtpu.v, not in the mutated datapath). Every test is bounded in simulated time
(MUTATE_MAX_US, default 200 us: 20,000 clock cycles, about six times the longest test), so a
mutant that hangs fails. Environment: DTPU_SEED (the bench's seed, default 1).
"""
from __future__ import annotations

import os

import cocotb

from tb.dtpu import test_dtpu_regs as R
from tb.dtpu import test_dtpu_streams as S

MAX_US = float(os.environ.get("MUTATE_MAX_US", "200"))


def _bounded(test):
    """The bench's test object with a simulated-time bound (this process runs only this module)."""
    return cocotb.test(timeout_time=MAX_US, timeout_unit="us")(test)


test_runs_every_precision = _bounded(S.test_runs_every_precision)
test_core_errors = _bounded(R.test_core_errors)
test_backpressure = _bounded(S.test_backpressure)
test_output_fifo_full = _bounded(S.test_output_fifo_full)
test_continuous = _bounded(S.test_continuous)
test_software_length = _bounded(S.test_software_length)
test_status_irq_and_soft_reset = _bounded(R.test_status_irq_and_soft_reset)
test_command_queue_backpressure = _bounded(R.test_command_queue_backpressure)
test_argument_buffers_full = _bounded(R.test_argument_buffers_full)
