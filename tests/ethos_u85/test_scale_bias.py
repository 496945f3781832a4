"""Scale/bias stream (TRM 3.7): record layout, set ordering, errors, and Vela streams."""

from __future__ import annotations

import numpy as np
import pytest

from tests.ethos_u85.support.stream_state import kernel_op_states
from tlm.ethos_u85 import isa
from tlm.core.errors import Unpredictable
from tlm.ethos_u85.scale_bias import (
    RECORD_BYTES,
    ScaleBiasError,
    channels_in_set,
    decode_scale_bias,
    encode_scale_bias,
    stream_size,
)


def test_channels_in_set_table():
    # align_up(microblock_depth, 16) for each (macs, microblock) Vela uses.
    table = {(128, 0): 16, (128, 1): 16, (256, 1): 16, (256, 2): 16, (256, 3): 16,
             (512, 2): 16, (512, 3): 16, (1024, 2): 32, (1024, 3): 32, (1024, 4): 16,
             (2048, 2): 64, (2048, 3): 64, (2048, 5): 16}
    for (macs, mb), n in table.items():
        assert channels_in_set(macs, mb) == n


def test_known_record():
    # Record from a Vela U85 stream: bias 300, scale 0x55633097, shift 40 (acc32).
    rec = bytes.fromhex("2c010000" "97306355" "28" "00")
    sb = decode_scale_bias(rec + bytes(15 * RECORD_BYTES), 1, acc48=False, set_channels=16)
    assert (sb.bias[0], sb.scale[0], sb.shift[0]) == (300, 0x55633097, 40)
    assert encode_scale_bias([300], [0x55633097], [40], acc48=False, set_channels=16)[:10] == rec


def test_bit_layout_by_hand():
    # acc32: bias bits 0..31, scale 32..62, shift 64..69.
    v = (0xFFFFFFFE) | (0x7FFFFFFF << 32) | (63 << 64)
    sb = decode_scale_bias(v.to_bytes(10, "little") * 16, 16, acc48=False, set_channels=16)
    assert sb.bias[0] == -2 and sb.scale[0] == 0x7FFFFFFF and sb.shift[0] == 63
    # acc48: bias bits 0..47, scale 48..62.
    v = (0x800000000001) | (0x4001 << 48) | (5 << 64)
    sb = decode_scale_bias(v.to_bytes(10, "little") * 16, 16, acc48=True, set_channels=16)
    assert sb.bias[0] == -(1 << 47) + 1 and sb.scale[0] == 0x4001 and sb.shift[0] == 5


@pytest.mark.parametrize("acc48", [False, True])
@pytest.mark.parametrize("set_channels", [16, 32, 64])
@pytest.mark.parametrize("reverse_c", [False, True])
def test_roundtrip(acc48, set_channels, reverse_c):
    rng = np.random.default_rng(set_channels + acc48 + 2 * reverse_c)
    bb, sbits = (48, 15) if acc48 else (32, 31)
    depths = [1, 5, 16, set_channels, 3 * set_channels] + ([] if reverse_c else [set_channels + 7, 100])
    for n in depths:
        bias = rng.integers(-(1 << (bb - 1)), 1 << (bb - 1), n, dtype=np.int64)
        bias[0] = -(1 << (bb - 1))
        scale = rng.integers(0, 1 << sbits, n)
        shift = rng.integers(0, 64, n)
        data = encode_scale_bias(bias, scale, shift, acc48=acc48, set_channels=set_channels,
                                 reverse_c=reverse_c)
        assert len(data) == stream_size(n, set_channels) == -(-n // set_channels) * set_channels * 10
        sb = decode_scale_bias(data + b"\xAA" * 7, n, acc48=acc48, set_channels=set_channels,
                               reverse_c=reverse_c)
        assert np.array_equal(sb.bias, bias) and np.array_equal(sb.scale, scale)
        assert np.array_equal(sb.shift, shift)


def test_reverse_set_order():
    # 48 channels in sets of 16 with reverse == C: stream holds set 2, set 1, set 0, each
    # set in ascending channel order (TRM 3.7.2).
    n = 48
    bias = np.arange(n) * 10
    data = encode_scale_bias(bias, np.zeros(n), np.zeros(n), acc48=False, set_channels=16,
                             reverse_c=True)
    rec_bias = [int.from_bytes(data[i * 10:i * 10 + 4], "little") for i in range(n)]
    assert rec_bias == [10 * c for c in list(range(32, 48)) + list(range(16, 32)) + list(range(16))]
    # Partial single set (<= 16 channels) with reverse: padding at the end of the set.
    data = encode_scale_bias([1, 2, 3], [0] * 3, [0] * 3, acc48=False, set_channels=16,
                             reverse_c=True)
    assert [int.from_bytes(data[i * 10:i * 10 + 4], "little") for i in range(4)] == [1, 2, 3, 0]


def test_padding_records_zero_and_ignored():
    data = bytearray(encode_scale_bias([7] * 3, [1] * 3, [2] * 3, acc48=False, set_channels=16))
    assert data[30:] == bytes(130)
    data[35] = 0x5A                                   # junk in a padding record's bias
    sb = decode_scale_bias(bytes(data), 3, acc48=False, set_channels=16)
    assert sb.bias.tolist() == [7, 7, 7]


def test_errors():
    good = encode_scale_bias([1] * 20, [1] * 20, [1] * 20, acc48=False, set_channels=16)
    with pytest.raises(ScaleBiasError) as e:
        decode_scale_bias(good[:-1], 20, acc48=False, set_channels=16)
    assert e.value.offset == len(good) - 1
    assert isinstance(e.value, Unpredictable)
    for byte, bit in ((7, 7), (8, 6), (9, 0), (9, 7)):      # reserved bits 63, 70, 72, 79
        bad = bytearray(good)
        bad[10 + byte] |= 1 << bit
        with pytest.raises(ScaleBiasError, match="reserved"):
            decode_scale_bias(bytes(bad), 20, acc48=False, set_channels=16)
        decode_scale_bias(bytes(bad), 20, acc48=False, set_channels=16, check_reserved=False)
    with pytest.raises(ScaleBiasError):                  # reverse needs whole sets above 16
        decode_scale_bias(bytes(400), 20, acc48=False, set_channels=16, reverse_c=True)
    with pytest.raises(ValueError):
        encode_scale_bias([1 << 31], [0], [0], acc48=False, set_channels=16)
    with pytest.raises(ValueError):
        encode_scale_bias([0], [1 << 15], [0], acc48=True, set_channels=16)
    with pytest.raises(ValueError):
        encode_scale_bias([0], [0], [64], acc48=True, set_channels=16)


# ------------------------------------------------------------------ Vela networks

CONFIGS = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512", "ethos-u85-1024", "ethos-u85-2048"]

MODELS = {
    "conv3x3": lambda g: g.conv2d(g.input((1, 9, 9, 40)), 37, 3, 1, "SAME"),
    "fc": lambda g: g.fully_connected(g.input((1, 100)), 70),
    "dw5x5s2": lambda g: g.depthwise(g.input((1, 13, 13, 40)), 5, 2, "SAME"),
    "conv3x3_i16": lambda g: g.conv2d(g.input((1, 8, 8, 24), dtype="int16"), 20, 3, 1, "SAME"),
    "dw3x3_i16": lambda g: g.depthwise(g.input((1, 8, 8, 20), dtype="int16"), 3, 1, "SAME"),
}


@pytest.mark.vela
@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("name", list(MODELS))
def test_vela_scale_bias(name, cfg):
    from tests import nets
    g = nets.Graph(21)
    g.output(MODELS[name](g))
    tfl = g.serialize()
    tb = [t for t in g.tensors if t["name"].endswith("_b")][0]
    tw = [t for t in g.tensors if t["name"].endswith("_w")][0]
    bias = np.frombuffer(g.buffers[tb["buffer"]], np.int64 if tb["dtype"] == "int64" else np.int32)
    s_in = float(g.tensors[g.inputs[0]]["scale"][0])
    s_out = float(g.tensors[g.outputs[0]]["scale"][0])
    eff = s_in * tw["scale"].astype(np.float64) / s_out
    p = nets.compiled_bytes(tfl, "sbtest", cfg, memory_mode="sram_only")
    z = np.load(p, allow_pickle=True)
    region0 = z["weight_data"].tobytes()
    macs = int(cfg.rsplit("-", 1)[1])
    ops = kernel_op_states(z["cmd_data"].tobytes())
    assert ops
    for _, st in ops:
        F = st.field
        acc48 = F("NPU_SET_ACC_FORMAT", "acc_format") == isa.acc_format.i48
        assert acc48 == ("i16" in name)
        assert F("NPU_SET_OFM_PRECISION", "scale_mode") == isa.ofm_scale_mode.per_channel
        reverse_c = F("NPU_SET_OFM_PRECISION", "activation_reverse") == isa.activation_reverse.C
        n = F("NPU_SET_OFM_DEPTH_M1", "depth_m1") + 1
        cis = channels_in_set(macs, F("NPU_SET_ACC_FORMAT", "microblock"))
        base = F("NPU_SET_SCALE_BASE", "addr")
        length = F("NPU_SET_SCALE_LENGTH", "length")
        assert length == stream_size(n, cis)
        data = region0[base:base + length]
        sb = decode_scale_bias(data, n, acc48=acc48, set_channels=cis, reverse_c=reverse_c)
        assert np.array_equal(sb.bias, bias)
        real = sb.scale * np.exp2(-sb.shift.astype(np.float64))
        tol = 2.0 ** -14 if acc48 else 2.0 ** -29
        assert np.max(np.abs(real / eff - 1)) < tol
        # Re-encoding reproduces Vela's bytes exactly (padding records are zero).
        assert encode_scale_bias(sb.bias, sb.scale, sb.shift, acc48=acc48, set_channels=cis,
                                 reverse_c=reverse_c) == data
