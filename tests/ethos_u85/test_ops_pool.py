"""NPU_OP_POOL (TRM 3.10.5) and the shared kernel-op machinery (tlm/ops/common.py).

Streams are built with tlm.ethos_u85.isa.encode and run on tlm.ethos_u85.device.Device over the memory model
(:class:`OpBench`, also used by test_ops_elementwise.py and test_ops_resize.py).  Checks:
hand-computed cases, the vectorised fast path against the literal per-element TRM loop
(``pool_ref``) on random register configurations, the TRM asserts (Unpredictable), bus
faults, the work budget, AXI channels, chaining, accumulator keep/restore, and bit-exact
end-to-end runs of Vela-compiled catalog networks against LiteRT.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.ethos_u85.support.opbench import (
    ARGMAX_X,
    ARGMAX_Y,
    AVERAGE,
    MAX,
    MIN,
    NONE,
    REDUCE_SUM,
    REF_OPS,
    REGION_BASE,
    SUM,
    TYPE_RANGE,
    OpBench,
    clean,
    e2e,
    e2e_names,
    limits,
    pool_bench,
    unlayout,
    unpredictable,
)
from tlm.ethos_u85 import arith
from tlm.ethos_u85.memory import Channel, Resp
from tlm.ethos_u85.ops.common import OpState


# =========================================================================== hand-computed
def test_maxpool_2x2_stride2_hand():
    ifm = np.array([[1, 5, -3, 2], [7, 0, 4, 4], [-8, -9, 0, 1], [-2, -1, 127, -128]], np.int8)[:, :, None]
    b = pool_bench(ifm, (2, 2, 1), k=(2, 2), s=(2, 2))
    clean(b.run("NPU_OP_POOL", pooling_mode=MAX))
    assert b.output()[:, :, 0].tolist() == [[7, 4], [-1, 127]]


def test_maxpool_same_padding_never_wins_and_zero_point():
    # uint8 IFM with zero point 200: every value is below the zero point (negative after the
    # subtraction), so padding as 0 would win; the TRM pads with the identity instead.
    ifm = np.array([[10, 20], [30, 40]], np.uint8)[:, :, None]
    b = pool_bench(ifm, (2, 2, 1), ofm_dtype=np.uint8, k=(3, 3), pads=(1, 1, 1, 1), zp=200, ofm_zp=200)
    clean(b.run("NPU_OP_POOL", pooling_mode=MAX))
    assert b.output()[:, :, 0].tolist() == [[40, 40], [40, 40]]
    clean(b.run("NPU_OP_POOL", pooling_mode=MIN))
    assert b.output()[:, :, 0].tolist() == [[10, 10], [10, 10]]


def test_average_pool_counts_only_valid_taps():
    ifm = np.arange(9, dtype=np.int8).reshape(3, 3, 1) * 3       # 0 3 6 / 9 12 15 / 18 21 24
    b = pool_bench(ifm, (3, 3, 1), k=(3, 3), pads=(1, 1, 1, 1))
    clean(b.run("NPU_OP_POOL", pooling_mode=AVERAGE))
    # corner: (0+3+9+12)/4 = 6; edge top middle: (0+3+6+9+12+15)/6 = 7.5 -> 8 (natural); centre 12
    out = b.output()[:, :, 0]
    assert out.tolist() == [[6, 8, 9], [11, 12, 14], [15, 17, 18]]


def test_average_rounding_comes_from_ofm_scale():
    ifm = np.array([[1, 2]], np.int8)[:, :, None]              # mean 1.5
    for rm, want in ((1, 2), (5, 1), (4, 1), (3, 2)):         # natural, truncate_to_lower, to zero, symmetric
        b = pool_bench(ifm, (1, 1, 1), k=(1, 2), round_mode=rm)
        clean(b.run("NPU_OP_POOL", pooling_mode=AVERAGE))
        assert int(b.output()[0, 0, 0]) == want, rm
    ifm = -ifm                                                  # mean -1.5
    for rm, want in ((5, -2), (4, -1), (3, -2)):
        b = pool_bench(ifm, (1, 1, 1), k=(1, 2), round_mode=rm)
        clean(b.run("NPU_OP_POOL", pooling_mode=AVERAGE))
        assert int(b.output()[0, 0, 0]) == want, rm


def test_sum_and_global_scale_and_ofm_zero_point():
    ifm = np.full((4, 4, 2), 3, np.int8)
    ifm[:, :, 1] = -5
    # sum of 16 taps, times 1/16 via OFM_SCALE (scale 1<<16, shift 20), OFM zero point 10
    b = pool_bench(ifm, (1, 1, 2), k=(4, 4), scale=(1 << 16, 20), ofm_zp=10)
    clean(b.run("NPU_OP_POOL", pooling_mode=SUM))
    assert b.output()[0, 0].tolist() == [13, 5]


def test_reduce_sum_over_channels():
    ifm = np.arange(2 * 3 * 5, dtype=np.int16).reshape(2, 3, 5) - 10
    b = pool_bench(ifm, (2, 3, 1), ofm_dtype=np.int16)
    b.set("NPU_SET_ACTIVATION", activation_function=0, table=0, activation_clip_range=1)
    clean(b.run("NPU_OP_POOL", pooling_mode=REDUCE_SUM))
    assert np.array_equal(b.output()[:, :, 0], ifm.astype(int).sum(axis=2))


def test_clip_and_wrap():
    ifm = np.array([[100, 100]], np.int8)[:, :, None]
    b = pool_bench(ifm, (1, 1, 1), k=(1, 2))
    clean(b.run("NPU_OP_POOL", pooling_mode=SUM))               # 200 clamps to 127 (clip b16)
    assert int(b.output()[0, 0, 0]) == 127
    b.set("NPU_SET_ACTIVATION", activation_function=0, table=0, activation_clip_range=1)
    clean(b.run("NPU_OP_POOL", pooling_mode=SUM))               # clip none: 200 wraps to -56
    assert int(b.output()[0, 0, 0]) == -56


def test_argmax_literal_e12():
    # argmax_x over a 1x6 window with Vela's OFM_SCALE (scale 1, shift 16, truncate_to_lower)
    ifm = np.array([[[3, -1], [9, -7], [2, -2], [9, -9], [-4, -3], [0, -5]]], np.int8)
    b = pool_bench(ifm, (1, 1, 2), ofm_dtype=np.int32, k=(1, 6), scale=(1, 16), round_mode=5)
    b.set("NPU_SET_ACTIVATION", activation_function=0, table=0, activation_clip_range=1)
    clean(b.run("NPU_OP_POOL", pooling_mode=ARGMAX_X))
    out = b.output()[0, 0]
    assert out[0] == 1                      # first maximum (strict >), index 1
    # channel 1: every value < 0 never beats sign_extend(-(1<<31), 16) == 0 -> identity kept;
    # (-(1<<31)) >> 16 = -32768 (E-12, literal)
    assert out[1] == -32768
    # a negative winner borrows from the index field: v + 65536*k with v = -1 at k = 2
    ifm2 = np.array([[[-5], [-3], [-1]]], np.int8).transpose(0, 1, 2)
    b = pool_bench(ifm2.reshape(1, 3, 1), (1, 1, 1), ofm_dtype=np.int32, k=(1, 3), scale=(1, 16), round_mode=5)
    b.set("NPU_SET_ACTIVATION", activation_function=0, table=0, activation_clip_range=1)
    b.acc(acc_input=0)
    clean(b.run("NPU_OP_POOL", pooling_mode=ARGMAX_X))
    assert int(b.output()[0, 0, 0]) == -32768


def test_argmax_y_index():
    col = np.array([1, 4, 4, 2, 3], np.int16).reshape(5, 1, 1)
    b = pool_bench(col, (1, 1, 1), ofm_dtype=np.int32, k=(5, 1), scale=(1, 16), round_mode=5)
    b.set("NPU_SET_ACTIVATION", activation_function=0, table=0, activation_clip_range=1)
    clean(b.run("NPU_OP_POOL", pooling_mode=ARGMAX_Y))
    assert int(b.output()[0, 0, 0]) == 1


def test_upscale_nearest_and_zeros():
    ifm = np.array([[10, 20], [30, 40]], np.int8)[:, :, None]
    # nearest: the 4x4 upscaled IFM, 1x1 "sum" copies it
    b = pool_bench(ifm, (4, 4, 1))
    b.set("NPU_SET_IFM_UPSCALE", mode=1)
    clean(b.run("NPU_OP_POOL", pooling_mode=SUM))
    assert np.array_equal(b.output()[:, :, 0], np.kron(ifm[:, :, 0], np.ones((2, 2), int)))
    b.set("NPU_SET_IFM_UPSCALE", mode=2)
    clean(b.run("NPU_OP_POOL", pooling_mode=SUM))
    want = np.zeros((4, 4), int)
    want[::2, ::2] = ifm[:, :, 0]
    assert np.array_equal(b.output()[:, :, 0], want)
    # upscale zeros with max pooling: UNPREDICTABLE
    b.run("NPU_OP_POOL", pooling_mode=MAX)
    assert any("IFM_UPSCALE.mode != zeros" in w for w in unpredictable(b.dev))


def test_per_channel_scale_and_bias_stream():
    from tlm.ethos_u85.scale_bias import channels_in_set, encode_scale_bias
    C = 20
    ifm = (np.arange(2 * 2 * C) % 7 - 3).astype(np.int8).reshape(2, 2, C)
    bias = np.arange(C) * 3 - 20
    scale = np.full(C, 1 << 20)
    shift = np.full(C, 21)                                       # x0.5
    b = pool_bench(ifm, (1, 1, C), ofm_dtype=np.int16, k=(2, 2))
    b.set("NPU_SET_OFM_PRECISION", activation_type=1, activation_precision=1, activation_format=0,
          activation_storage=0, scale_mode=0)
    cis = channels_in_set(256, 1)
    stream = encode_scale_bias(bias, scale, shift, acc48=False, set_channels=cis)
    b.put(3, 0x40, stream)
    b.set("NPU_SET_SCALE_REGION", region=3)
    b.set("NPU_SET_SCALE_BASE", addr=0x40)
    b.set("NPU_SET_SCALE_LENGTH", length=len(stream))
    d = clean(b.run("NPU_OP_POOL", pooling_mode=SUM))
    s = ifm.astype(int).sum(axis=(0, 1)) + bias
    want = np.floor(s / 2 + 0.5).astype(int)                      # natural rounding of x/2
    assert np.array_equal(b.output()[0, 0], want)
    assert Channel.rd_scale_bias in {t.channel for t in d.memory.log}
    # too short a stream is UNPREDICTABLE
    b.set("NPU_SET_SCALE_LENGTH", length=len(stream) - 16)
    b.run("NPU_OP_POOL", pooling_mode=SUM)
    assert any("scale/bias stream" in w for w in unpredictable(b.dev))


# =========================================================================== accumulators
def test_acc_keep_and_restore_from_ifm2():
    ifm = np.arange(2 * 3 * 4, dtype=np.int8).reshape(2, 3, 4)
    b = pool_bench(ifm, (2, 3, 4), ofm_dtype=np.int16)
    b.acc(acc_output=1)                                  # keep the accumulators
    ops = [("NPU_OP_POOL", {"pooling_mode": SUM})]
    d = b.run(None, ops=ops)
    clean(d)
    assert np.array_equal(d.op_state.load_acc(2, 3, 4), ifm.astype(int))
    # second op on the same device: acc_input keep, add the IFM again, write out
    b2 = pool_bench(ifm, (2, 3, 4), ofm_dtype=np.int16)
    b2.acc(acc_input=1, acc_output=0)
    clean(b2.run(None, ops=ops, device=d))
    assert np.array_equal(b2.output(d), 2 * ifm.astype(int))
    # acc_input ifm2: restore 32-bit accumulators from memory, null pooling writes them out
    accs = (np.arange(2 * 3 * 4, dtype=np.int32).reshape(2, 3, 4) - 5) * 1000
    b3 = pool_bench(ifm, (2, 3, 4), ofm_dtype=np.int32)
    b3.set("NPU_SET_ACTIVATION", activation_function=0, table=0, activation_clip_range=1)
    b3.fmap("IFM2", accs, region=4)
    b3.acc(acc_input=2)
    d3 = clean(b3.run("NPU_OP_POOL", pooling_mode=NONE))
    assert np.array_equal(b3.output(), accs)
    assert Channel.rd_ifm_stream in {t.channel for t in d3.memory.log}
    assert Channel.rd_ifm not in {t.channel for t in d3.memory.log}    # mode none reads no IFM


def test_null_pooling_does_not_check_the_unused_ifm_precision():
    """Pooling mode none reads no IFM: another op's IFM_PRECISION left behind (here b64,
    which no pooling mode may read) is no UNPREDICTABLE; for every other mode it is."""
    accs = (np.arange(2 * 3 * 4, dtype=np.int32).reshape(2, 3, 4) - 5) * 1000
    b = pool_bench(np.zeros((2, 3, 4), np.int8), (2, 3, 4), ofm_dtype=np.int32)
    b.set("NPU_SET_ACTIVATION", activation_function=0, table=0, activation_clip_range=1)
    b.set("NPU_SET_IFM_PRECISION", activation_type=1, activation_precision=3, activation_format=0,
          activation_storage=0)
    b.fmap("IFM2", accs, region=4)
    b.acc(acc_input=2)
    clean(b.run("NPU_OP_POOL", pooling_mode=NONE))
    assert np.array_equal(b.output(), accs)
    b.run("NPU_OP_POOL", pooling_mode=SUM)
    assert any("IFM precision" in w for w in unpredictable(b.dev))


def test_acc_keep_outside_block_is_unpredictable():
    ifm = np.zeros((2, 2, 4), np.int8)
    b = pool_bench(ifm, (2, 2, 4))
    b.set("NPU_SET_OFM_BLK_DEPTH_M1", depth_m1=1)
    b.acc(acc_output=1)
    b.run("NPU_OP_POOL", pooling_mode=SUM)
    assert any("accumulator storage" in w for w in unpredictable(b.dev))


# =========================================================================== asserts, faults
@pytest.mark.parametrize("mode, setup, what", [
    (AVERAGE, dict(k=(9, 1)), "kernel_height <= 8"),
    (AVERAGE, dict(k=(2, 2), pads=(2, 0, 0, 0)), "max(pad_top, pad_bottom) < kernel_height"),
    (MAX, dict(k=(1, 1), acc_format=1), "accumulator format must be i32"),
    (REDUCE_SUM, dict(k=(1, 2)), "kernel_height == 1 && kernel_width == 1"),
    (ARGMAX_X, dict(k=(2, 1)), "kernel_height == 1"),
    (MAX, dict(k=(1, 1), dilation_x=1), "dilation_x + 1 == 1"),
])
def test_pool_asserts(mode, setup, what):
    ifm = np.zeros((8, 8, 2), np.int8)
    setup = dict(setup)
    k = setup.pop("k")
    b = pool_bench(ifm, (4, 4, 2), k=k, **setup)
    b.run("NPU_OP_POOL", pooling_mode=mode)
    msgs = unpredictable(b.dev)
    assert msgs and msgs[0].startswith("NPU_OP_POOL") and what in msgs[0], msgs


def test_pad_range_assert():
    ifm = np.zeros((2, 2, 1), np.int8)
    b = pool_bench(ifm, (1, 1, 1), k=(2, 2), pads=(0, 0, 2, 0))     # derived IFM height 0
    b.run("NPU_OP_POOL", pooling_mode=MAX)
    assert any("pad range" in w for w in unpredictable(b.dev))


def test_ifm_zero_point_assert():
    ifm = np.zeros((2, 2, 1), np.int8)
    b = pool_bench(ifm, (2, 2, 1), zp=300)                           # int8 zero point outside -128..127
    b.run("NPU_OP_POOL", pooling_mode=MAX)
    assert any("zero point" in w for w in unpredictable(b.dev))


def test_bus_faults_surface_with_channel():
    ifm = np.ones((4, 4, 8), np.int8)
    b = pool_bench(ifm, (2, 2, 8), k=(2, 2), s=(2, 2))
    b.faults.append((REGION_BASE[1] + 40, REGION_BASE[1] + 41, Resp.SLVERR, "r"))
    d = b.run("NPU_OP_POOL", pooling_mode=MAX)
    assert d.status.bus_status and d.status.faulting_channel == Channel.rd_ifm
    b.faults[:] = [(REGION_BASE[2] + 8, REGION_BASE[2] + 9, Resp.DECERR, "w")]
    d = b.run("NPU_OP_POOL", pooling_mode=MAX)
    assert d.status.bus_status and d.status.faulting_channel == Channel.wr_ofm


def test_budget():
    b = OpBench()
    b.fmap("IFM", shape=(1, 1, 1), dtype=np.int8, region=1)
    b.fmap("OFM", shape=(65536, 65536, 1), dtype=np.int8, region=2)
    b.kernel(1, 1)
    b.run("NPU_OP_POOL", pooling_mode=MAX)
    assert any("BudgetExceeded" in e for e in limits(b.dev))


def test_transactions_are_contiguous_runs():
    ifm = (np.arange(6 * 6 * 16) % 100).astype(np.int8).reshape(6, 6, 16)
    b = pool_bench(ifm, (3, 3, 16), k=(2, 2), s=(2, 2))
    d = clean(b.run("NPU_OP_POOL", pooling_mode=MAX))
    rd = [t for t in d.memory.log if t.channel == Channel.rd_ifm]
    wr = [t for t in d.memory.log if t.channel == Channel.wr_ofm]
    assert sum(t.length for t in rd) == ifm.size and len(rd) <= 2
    assert sum(t.length for t in wr) == 3 * 3 * 16 and len(wr) == 1


def test_cond_status_result_flag_and_branch():
    ifm = np.array([[[3]]], np.int8)
    b = pool_bench(ifm, (1, 1, 1))
    d = clean(b.run("NPU_OP_POOL", pooling_mode=MAX))
    assert d.cond_status == 1
    b = pool_bench(ifm - 3, (1, 1, 1))
    d = clean(b.run("NPU_OP_POOL", pooling_mode=MAX))
    assert d.cond_status == 0


def test_chained_pool_output_feeds_elementwise():
    # POOL (max, OFM chained into FIFO 1) -> ELEMENTWISE add reading IFM from FIFO 1
    ifm = (np.arange(4 * 4 * 3) % 11 - 5).astype(np.int8).reshape(4, 4, 3)
    other = (np.arange(2 * 2 * 3) % 5).astype(np.int8).reshape(2, 2, 3)
    b = pool_bench(ifm, (2, 2, 3), k=(2, 2), s=(2, 2))
    b.fmap("OFM", shape=(2, 2, 3), dtype=np.int8, region=1, storage="chained")
    ops = [("NPU_OP_POOL", {"pooling_mode": MAX})]
    # elementwise: IFM = FIFO 1, IFM2 = memory, OFM = memory region 2
    e = [("NPU_SET_IFM_PRECISION", dict(activation_type=1, activation_precision=0, activation_format=0,
                                        activation_storage=2)),
         ("NPU_SET_IFM_REGION", dict(region=1)),
         ("NPU_SET_OFM_PRECISION", dict(activation_type=1, activation_precision=0, activation_format=0,
                                        activation_storage=0, scale_mode=1)),
         ("NPU_SET_OFM_REGION", dict(region=2)),
         ("NPU_SET_IFM_SCALE", dict(scale=1, shift=0)), ("NPU_SET_IFM2_SCALE", dict(scale=1, shift=0)),
         ("NPU_OP_ELEMENTWISE", dict(elementwise_mode=1))]
    b.put(4, 0, other.tobytes())
    b2 = OpBench()
    b2.fmap("IFM2", other, region=4)
    ops += [(n, f) for n, f in b2.cmds] + e
    b.fmap("OFM", shape=(2, 2, 3), dtype=np.int8, region=1, storage="chained")
    d = clean(b.run(None, ops=ops))
    want = ifm.reshape(2, 2, 2, 2, 3).max(axis=(1, 3)).astype(int) + other
    got = unlayout(d.memory.read(REGION_BASE[2], 12), (2, 2, 3), np.int8, "nhwc")
    assert np.array_equal(got, want)
    assert d.op_state.chain_length == 0 and d.op_state.fifo_count == [0, 0, 0]


def test_opstate_fifo_and_storage_units():
    st = OpState()
    st.write_chaining_fifo(2, [1, 2, 3])
    st.write_chaining_fifo(2, np.array([4, 5]))
    assert st.read_chaining_fifo(2, 2).tolist() == [1, 2]
    assert st.read_chaining_fifo(2, 3).tolist() == [3, 4, 5]
    with pytest.raises(arith.Unpredictable):
        st.read_chaining_fifo(2, 1)
    with pytest.raises(arith.Unpredictable):
        st.write_chaining_fifo(3, [1])
    st.store_acc(np.ones((2, 2, 2), np.int64))
    assert st.load_acc(3, 1, 2).tolist() == [[[1, 1]], [[1, 1]], [[0, 0]]]


# =========================================================================== fast vs literal
def _random_pool_case(rng):
    mode = int(rng.choice([MAX, AVERAGE, SUM, MIN, REDUCE_SUM, ARGMAX_X, ARGMAX_Y, NONE]))
    dt = np.dtype(rng.choice([np.int8, np.uint8, np.int16]))
    if mode in (ARGMAX_X, ARGMAX_Y):
        dt = np.dtype(np.int8)
    C = int(rng.integers(1, 20))
    sy, sx = (1, 1) if mode in (REDUCE_SUM, ARGMAX_X, ARGMAX_Y) else (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    if mode == AVERAGE:
        kh, kw = int(rng.integers(1, 9)), int(rng.integers(1, 9))
    elif mode == REDUCE_SUM:
        kh = kw = 1
    elif mode == ARGMAX_X:
        kh, kw = 1, int(rng.integers(1, 12))
    elif mode == ARGMAX_Y:
        kh, kw = int(rng.integers(1, 12)), 1
    else:
        kh, kw = int(rng.integers(1, 6)), int(rng.integers(1, 6))
    pads = [int(rng.integers(0, kh)), int(rng.integers(0, kw)), int(rng.integers(0, kh)), int(rng.integers(0, kw))]
    if mode in (REDUCE_SUM, ARGMAX_X, ARGMAX_Y):
        pads = [0, 0, 0, 0]
    oh, ow = int(rng.integers(1, 6)), int(rng.integers(1, 6))
    if mode == ARGMAX_X:
        ow = 1
    if mode == ARGMAX_Y:
        oh = 1
    ih = (oh - 1) * sy + kh - pads[0] - pads[2]
    iw = (ow - 1) * sx + kw - pads[1] - pads[3]
    if ih < 1 or iw < 1:
        pads = [0, 0, 0, 0]
        ih, iw = (oh - 1) * sy + kh, (ow - 1) * sx + kw
    lo, hi = TYPE_RANGE[dt]
    ifm = rng.integers(lo, hi + 1, size=(ih, iw, C)).astype(dt)
    zp = 0 if mode == REDUCE_SUM or dt == np.int16 else \
        int(rng.integers(-128, 128) if dt == np.int8 else rng.integers(0, 256))
    oc = 1 if mode == REDUCE_SUM else C
    odt = np.dtype(rng.choice([np.int8, np.int16, np.uint8]))
    fmt = str(rng.choice(["nhwc", "nhcwb16"]))
    ofmt = str(rng.choice(["nhwc", "nhcwb16"]))
    scale = (int(rng.integers(1, 1 << 20)), int(rng.integers(10, 30)))
    b = pool_bench(ifm, (oh, ow, oc), ofm_dtype=odt, k=(kh, kw), s=(sy, sx), pads=pads, zp=zp,
                   scale=scale, round_mode=int(rng.integers(0, 6)), fmt=fmt, ofm_fmt=ofmt,
                   ofm_zp=int(rng.integers(-5, 5)) if odt != np.uint8 else 3)
    b.set("NPU_SET_ACTIVATION", activation_function=0, table=0, activation_clip_range=int(rng.integers(0, 2)))
    if mode == NONE:
        acc = rng.integers(-1000, 1000, size=(oh, ow, oc)).astype(np.int32)
        b.fmap("IFM2", acc, region=4)
        b.acc(acc_input=2)
    return b, mode


@pytest.mark.parametrize("seed", range(40))
def test_fast_path_matches_literal_pseudocode(seed):
    rng = np.random.default_rng(seed)
    b, mode = _random_pool_case(rng)
    fast = b.run("NPU_OP_POOL", pooling_mode=mode)
    out_fast = b.output(fast)
    ref = b.run("NPU_OP_POOL", pooling_mode=mode, kernel_ops=REF_OPS)
    out_ref = b.output(ref)
    assert unpredictable(fast) == unpredictable(ref)
    assert np.array_equal(out_fast, out_ref), (seed, mode)
    assert fast.cond_status == ref.cond_status
    clean(fast)


POOL_NETS = e2e_names("pool", "mean")


@pytest.mark.vela
@pytest.mark.parametrize("name", POOL_NETS)
def test_e2e_pool_networks(name):
    e2e(name)


@pytest.mark.vela
@pytest.mark.parametrize("accel", ["ethos-u85-128", "ethos-u85-512", "ethos-u85-1024", "ethos-u85-2048"])
@pytest.mark.parametrize("name", ["avgpool_3x3_s2_same", "maxpool_3x3_s2_valid_c21", "avgpool_global_7x7",
                                  "mean_hw_keepdims", "avgpool_3x3_int16"])
def test_e2e_pool_other_configs(name, accel):
    e2e(name, accel)


@pytest.mark.vela
@pytest.mark.parametrize("mode", ["shared_sram", "sram_only", "separate_io"])
def test_e2e_pool_memory_modes(mode):
    e2e("avgpool_5x5_s1_same_relu6", mode=mode)
