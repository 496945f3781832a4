"""The fast regression tools/mutate.py runs on each mutant of the RTL stand-in (cocotb test
module; DUT=rtl, the bench's configuration).

A fixed, seeded list of jobs from the bench's own random generator
(tb/ethos_u85/tests/test_random_ops.py OpGen with the stand-in's subset): CONV/DEPTHWISE
operations and ELEMENTWISE/POOL operations (with LUT loads; RESIZE too), then the softmax_1x10 Vela network
(a chain), each checked by the scoreboard's TLM exactly as the regression does (one CONV job
with a reserved bit set in a scale/bias record: no effect); test_smoke_parse_errors
(tb/ethos_u85/tests/test_rtl_smoke.py): the operations the stand-in refuses stop with
cmd_parse_error; test_round_double_term (tb/ethos_u85/tests/test_rtl_kernels.py): rounding cases
where the double-rounding term of rounded_shift_right decides the result;
test_resize_integer_y_step and test_sigmoid_rounding_tie (same file): RESIZE with an integer y
step (one_step_int > 0) and lut_sigmoid inputs where its rounding constant decides; and
test_conv_unpredictable (same file): CONV and DEPTHWISE with a failed register-only TRM assert
complete without effect; test_conv_lut and test_conv_chained (test_random_ops.py): every LUT
function on CONV/DEPTHWISE OFMs, chained CONV/DEPTHWISE OFMs read by an ELEMENTWISE;
test_ofm_perms (same file): every write_ofm transpose and reverse on CONV, DEPTHWISE, POOL,
ELEMENTWISE and RESIZE; test_ofm_blk_depth (same file): OFM_BLK_DEPTH at write_ofm's reverse-C
and transpose limits, both sides; test_ofm_write_unpredictable (test_rtl_kernels.py): write_ofm's
register-only asserts (no effect); test_ofm_bursts and test_conv_ofm_runs: the CONV output
stage's OFM write bursts, bytes and burst shapes; test_conv_ofm_stalled: a three-block CONV
with WREADY held low, its write queue full. The
CONV/DEPTHWISE jobs are picked from the generator's sequence so
that each feature of CONV_FEATURES occurs (FWD, sparse, part-kernel-first, d4x4, i32 and i48
accumulators, per-channel and global scale, every microblock, ...): a short list of plain random
draws can miss a whole block (e.g. no FWD job at all). The first failing job ends the test (the
mutant is killed). Every job has a bound on its simulated cycles (MUTATE_MAX_CYCLES), so a
mutant that hangs fails too.

Environment: MUTATE_SEED (default 1), MUTATE_CONV / MUTATE_KERNEL (numbers of jobs, default
14 / 30), MUTATE_FIRST=conv|kernel (which part runs first: the mutated file's), and
MUTATE_MAX_CYCLES (default 200000).
"""
from __future__ import annotations

import os
import random
import re

import numpy as np

import cocotb
from cocotb.triggers import ClockCycles

from tb.ethos_u85.testlib.memmap import REGION_BASE, STREAM_ADDR
from tb.ethos_u85.testlib.netjob import run_network, vela_model
from tb.ethos_u85.testlib.regs import status_fields
from tb.ethos_u85.tests.test_random_ops import (CMD, NONE, QREAD, OpGen, build_job, reserved_scale_bit_job,
                                                start_bench)
# run here too: every LUT function on CONV/DEPTHWISE OFMs, and CONV/DEPTHWISE chained OFMs read
# by an ELEMENTWISE (npu_act.v, the serial lane path of npu_conv_out.v, the FIFO write port)
from tb.ethos_u85.tests.test_random_ops import test_conv_chained, test_conv_lut  # noqa: F401
# runs here too: every write_ofm transpose and reverse on each operation that allows them
# (npu_ofm_addr.v, the elem paths of npu_conv_out.v and npu_kernel.v)
from tb.ethos_u85.tests.test_random_ops import test_ofm_perms  # noqa: F401
# and write_ofm's OFM_BLK_DEPTH rules at their boundaries (reverse C <= 16, the C-moving transposes
# <= 128): the generator never draws those block depths (npu_kernel.v/npu_conv.v blk_d, npu_ofm_addr.v)
from tb.ethos_u85.tests.test_random_ops import test_ofm_blk_depth  # noqa: F401
from tb.ethos_u85.tests.test_rtl_kernels import test_ofm_write_unpredictable  # noqa: F401
# and the CONV output stage's OFM write bursts: their shapes (runs of consecutive lines up to 16
# beats in the max_beats window) on contiguous, strided, reversed and transposed OFMs (npu_conv_out.v)
from tb.ethos_u85.tests.test_random_ops import test_ofm_bursts  # noqa: F401
from tb.ethos_u85.tests.test_rtl_kernels import test_conv_ofm_runs  # noqa: F401
# and the MAC array waiting for the output stage's AB reader while its write queue is full (W held)
from tb.ethos_u85.tests.test_rtl_kernels import test_conv_ofm_stalled  # noqa: F401
# runs here too: what the stand-in refuses (div, argmax, CONV with upscale, b64 OFM DEPTHWISE, ...) must
# stop with cmd_parse_error at the operation, never run
from tb.ethos_u85.tests.test_rtl_smoke import test_smoke_parse_errors  # noqa: F401
# run here too: directed rounding values (the random jobs rarely land where D decides),
# RESIZE with an integer y step and lut_sigmoid inputs on its rounding ties (the random jobs
# rarely draw them), CONV/DEPTHWISE TRM asserts (no effect), average pooling at the 8-tap
# kernel limit
from tb.ethos_u85.tests.test_rtl_kernels import (test_conv_unpredictable, test_pool_avg_kernel_limits,  # noqa: F401
                                                  test_resize_integer_y_step, test_round_double_term,
                                                  test_sigmoid_rounding_tie)
from tlm.ethos_u85.config import get_config

SEED = int(os.environ.get("MUTATE_SEED", "1"))
N_CONV = int(os.environ.get("MUTATE_CONV", "14"))
N_KERNEL = int(os.environ.get("MUTATE_KERNEL", "30"))
FIRST = os.environ.get("MUTATE_FIRST", "kernel")
MAX_CYCLES = int(os.environ.get("MUTATE_MAX_CYCLES", "200000"))

# regular expressions over an operation's description (OpGen's Op.desc)
CONV_FEATURES = (r"^CONV ", r"^DEPTHWISE ", r"^CONV matmul ", r"^CONV matmul .* ifm2 u?int8/nhcwb16",
                 r"^CONV matmul .* ifm2 uint8", r"^CONV matmul .* per-channel",
                 r" fwdx", r" swdx", r" fwdx\d palette", r" swdx\d palette",
                 r" sparse ", r" pkf ", r" df ", r" d4x4 ", r" d8x8 ", r" acc48 0 ", r" acc48 1 ",
                 r" per-channel ", r" global ", r"ifm u?int8/nhcwb16", r"ifm u?int8/nhwc", r"ifm uint8",
                 r"ifm int16/nhwc", r"ifm int16/nhcwb16", r"ofm uint8", r"ofm u?int8/nhcwb16", r"ofm u?int16/",
                 r"ofm u?int32/", r" dil\(2", r" dil\(\d, 2", r" s\(3", r" s\(\d, 3",
                 *(rf" mb {k} " for k in range(5)))


def conv_jobs(gen: OpGen, n: int, draws: int = 12) -> "tuple[list, list]":
    """(*n* CONV/DEPTHWISE jobs from the first draws*n of *gen*: first those that add a
    feature not covered yet, in order, then the others in order; the features missed)."""
    cands = [build_job(gen, 1, kinds=("conv",)) for _ in range(draws * n)]
    seen, picked = set(), []
    for i, job in enumerate(cands):
        new = {f for f in CONV_FEATURES if f not in seen and re.search(f, job.ops[0].desc)}
        if new and len(picked) < n:
            seen |= new
            picked.append(i)
    picked += [i for i in range(len(cands)) if i not in picked][:n - len(picked)]
    return [cands[i] for i in sorted(picked)], [f for f in CONV_FEATURES if f not in seen]


async def _run(env, watch, job, tag: str) -> None:
    for addr, data in job.image.items():
        env.memory.write(addr, data)
    await env.write_ok(CMD, 0xC | 0x2)                   # clear_irq before the job
    await env.load_stream(STREAM_ADDR, job.words)
    watch.clear()
    status = await env.run_job(max_cycles=MAX_CYCLES, poll=32)
    f = status_fields(status)
    assert not (f["cmd_parse_error"] or f["bus_status"] or f["branch_fault"]), f"{tag}: STATUS 0x{status:08x}"
    assert await env.read_ok(QREAD) == 4 * len(job.words), f"{tag}: the job did not reach its NPU_OP_STOP"
    sb = env.scoreboard
    job_sb = sb.close_job()
    assert job_sb is not None and job_sb.closed, f"{tag}: the scoreboard saw no job"
    assert job_sb.mismatches_in_job == 0, f"{tag}: scoreboard mismatches: {sb.mismatches[-2:]}"
    mirror = sb.ref.memory
    for op in job.ops:
        if op.ofm is None or op.ofm.storage == NONE:
            continue
        for lo, hi in op.ofm.spans():
            a = REGION_BASE[op.ofm.region] + lo
            got = np.frombuffer(env.memory.read(a, hi - lo), np.uint8)
            ref = np.frombuffer(mirror.read(a, hi - lo), np.uint8)
            assert (got == ref).all(), f"{tag}: {op.desc}: OFM differs from the reference"


@cocotb.test(timeout_time=200, timeout_unit="ms")
async def mutant_regression(dut):
    rng = random.Random(SEED)
    env, watch = await start_bench(dut, seed=rng.getrandbits(16))
    macs = get_config(env.config).macs
    # the two job lists are drawn from their own generators, so their contents do not depend
    # on the order they run in
    gens = {"conv": OpGen(random.Random(SEED * 7 + 1), macs, rtl=True),
            "kernel": OpGen(random.Random(SEED * 7 + 2), macs, rtl=True)}
    kinds = {"conv": ("conv",), "kernel": ("elementwise", "pool", "resize")}
    order = ("conv", "kernel") if FIRST == "conv" else ("kernel", "conv")
    conv, missing = conv_jobs(gens["conv"], N_CONV)
    if missing:
        cocotb.log.warning("CONV features not in the fast regression: %s", missing)
    jobs = {"conv": conv,
            "kernel": [build_job(gens["kernel"], 1, kinds=kinds["kernel"]) for _ in range(N_KERNEL)]}
    for part in order:
        for j, job in enumerate(jobs[part]):
            await _run(env, watch, job, f"{part} job {j}: {job.ops[0].desc}")
    job, _, bit = reserved_scale_bit_job(gens["conv"])
    await _run(env, watch, job, f"reserved scale/bias bit {bit}: {job.ops[0].desc}")
    res = await run_network(env, vela_model("softmax_1x10", env.config, "default"), rng)
    cocotb.log.info("softmax_1x10: %d output bytes match", res.output_bytes)
    await ClockCycles(env.clock, 4)
    env.finish()
