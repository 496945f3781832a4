"""Networks of several layers, converted from float by tlm.k210_kpu.convert, run through the
register path with the seed's KPU RAM ping-pong, under the three host flows (nncase's
calc_done per layer, kpu.c's kpu_run, all layers at once), checked layer by layer against
the reference (test_k210_reference.py) and end to end against the float network."""
from __future__ import annotations

import numpy as np
import pytest

from tests.k210_kpu import test_k210_cases as cases
from tests.k210_kpu import test_k210_reference as ref
from tlm.k210_kpu import convert, driver
from tlm.k210_kpu.layout import RAM_SIZE
from tlm.k210_kpu.registers import (
    OFFSET,
    POOL_BY_NAME,
    bytes_to_words,
    decode_activation,
    decode_batchnorm,
    encode_activation,
    encode_batchnorm,
)
from tlm.k210_kpu.trace_target import K210TraceTarget

# (depthwise, kernel, out channels, activation, pool)
SPECS = {
    "mixed": [(False, 3, 8, "relu", "max_2_s2"), (True, 3, 8, "relu6", "bypass"),
              (False, 1, 12, "leaky", "mean_2_s2"), (False, 3, 4, "linear", "bypass")],
    "pools": [(False, 3, 6, "relu", "left_top_2_s2"), (False, 1, 6, "leaky", "max_2_s1"),
              (True, 3, 6, "relu", "right_top_2_s2"), (False, 3, 5, "relu6", "mean_2_s1")],
    "wide": [(False, 3, 4, "relu", "max_4_s4"), (False, 1, 7, "linear", "mean_4_s4"),
             (True, 1, 7, "relu", "left_top_4_s4")],
}
SHAPES = {"mixed": (3, 24, 40), "pools": (4, 20, 36), "wide": (2, 64, 144)}


def build(name: str, eight_bit: bool, seed: int):
    """(converted layers, float weights/biases/bn, float calibration input)."""
    rng = np.random.default_rng(seed)
    c, h, w = SHAPES[name]
    x = rng.uniform(-1.0, 1.0, (c, h, w))
    layers, params, cur, rng_in = [], [], x, None
    for dw, k, oc, act, pool in SPECS[name]:
        oc = cur.shape[0] if dw else oc
        wts = rng.normal(0, 0.5, (oc, 1 if dw else cur.shape[0], k, k))
        bias = rng.normal(0, 0.2, oc)
        bn = None
        if rng.integers(0, 2):
            bn = dict(mean=rng.normal(0, 0.1, oc), var=rng.uniform(0.5, 2, oc),
                      gamma=rng.uniform(0.5, 1.5, oc), beta=rng.normal(0, 0.1, oc), eps=1e-5)
        layer = convert.from_float(wts, cur, bias=bias, bn=bn, activation=act, pool=pool,
                                   eight_bit=eight_bit, depthwise=dw, input_range=rng_in)
        layers.append(layer)
        params.append((wts, bias, bn, act, pool, dw))
        cur = convert.float_reference(wts, cur, bias=bias, bn=bn, activation=act, pool=pool,
                                      depthwise=dw)
        rng_in = (layer.y_bias, layer.y_bias + 255 * layer.y_scale)
    return layers, params, x


def reference_chain(net: driver.Network, x: np.ndarray) -> list:
    """Each layer's output by the reference, from the tables as they sit in memory."""
    outs = []
    for p in net.layers:
        la = p.la
        dw = bool(la.depth_wise_layer)
        k = 3 if la.kernel_type else 1
        wts = np.frombuffer(p.weights, "<u1" if net.eight_bit else "<u2").reshape(
            la.o_ch_num + 1, 1 if dw else la.i_ch_num + 1, k, k)
        bn = decode_batchnorm(bytes_to_words(p.bn))
        act = decode_activation(bytes_to_words(p.act))
        x, _, _ = ref.layer(x, wts, dw, la.pad_value, la.arg_x, la.shr_x, la.arg_w, la.shr_w,
                            la.arg_add, bn, act, la.pool_type)
        outs.append(x)
    return outs


def quantize(layer, x):
    return np.clip(np.round((x - layer.x_bias) / layer.x_scale), 0, 255).astype(np.uint8)


def run(net, xq, flow):
    t = K210TraceTarget()
    got = []
    t.kpu.layer_hooks.append(lambda plan, out: got.append(out))
    driver.load(t, net, xq)
    ok = driver.run_flow(t, net, flow)
    assert ok or flow == "burst", f"{flow}: an interrupt did not come"
    stream = driver.read_output(t, net.out_bytes())
    return t, got, stream


@pytest.mark.parametrize("flow", ["calc_done", "kpu_run", "burst"])
@pytest.mark.parametrize("eight_bit", [True, False], ids=["w8", "w16"])
@pytest.mark.parametrize("name", sorted(SPECS))
def test_network_layer_by_layer(name, eight_bit, flow):
    seed = cases.SEED + sum(map(ord, name)) + eight_bit
    print(f"seed {seed}")
    layers, params, x = build(name, eight_bit, seed)
    net = driver.place(layers)
    xq = quantize(layers[0], x)
    t, got, stream = run(net, xq, flow)
    assert not t.faults()
    expect = reference_chain(net, xq)
    assert len(got) == len(expect)
    for i, (g, e) in enumerate(zip(got, expect, strict=True)):
        assert g is not None and np.array_equal(g, e), f"layer {i} differs (seed {seed})"
    final = driver.read_map(t, net.out_map)
    assert np.array_equal(final, expect[-1])
    assert stream == expect[-1].tobytes()
    assert t.read_reg(OFFSET["fifo_data_out"]) == 0 and not t.faults()  # used up: reads 0
    assert t.kpu.events[-1].kind == "fifo_empty_read"


def test_address_swap_follows_the_seed():
    layers, _, _ = build("mixed", True, cases.SEED)
    net = driver.place(layers)
    prev_dst = 0
    for i, p in enumerate(net.layers):
        out = convert.output_bytes(p.out_shape)
        assert p.la.image_src_addr == prev_dst
        assert p.la.image_dst_addr == (0 if i & 1 else (RAM_SIZE - out)) // 64
        prev_dst = p.la.image_dst_addr
    assert net.layers[0].la.image_dst_addr != 0 and net.layers[1].la.image_dst_addr == 0


@pytest.mark.parametrize("eight_bit", [True, False], ids=["w8", "w16"])
def test_converter_tracks_the_float_network(eight_bit):
    """The converted network's output, dequantized, follows the float network (the
    converter's tables mean what the float layer means)."""
    seed = cases.SEED + 77 + eight_bit
    print(f"seed {seed}")
    layers, params, x = build("mixed", eight_bit, seed)
    net = driver.place(layers)
    xq = quantize(layers[0], x)
    t, got, _ = run(net, xq, "calc_done")
    cur = xq * layers[0].x_scale + layers[0].x_bias
    for i, ((wts, bias, bn, act, pool, dw), l) in enumerate(zip(params, layers)):
        cur = convert.float_reference(wts, cur, bias=bias, bn=bn, activation=act, pool=pool, depthwise=dw)
        codes = np.clip(np.round((cur - l.y_bias) / l.y_scale), 0, 255)
        err = np.abs(got[i].astype(np.int64) - codes)
        assert err.max() <= 3 + 2 * i and err.mean() < 0.6, (i, err.max(), err.mean())
        cur = got[i] * l.y_scale + l.y_bias               # next layer sees the KPU's codes


def test_from_uint8_layer():
    """A uint8-quantized conv (TFLite-style zero points) with relu."""
    rng = np.random.default_rng(cases.SEED + 91)
    print(f"seed {cases.SEED + 91}")
    wq = rng.integers(0, 256, (5, 3, 3, 3))
    w_scale, w_zp, x_scale, x_zp, y_scale, y_zp = 0.01, 120, 0.02, 128, 0.05, 0
    bias_q = rng.integers(-2000, 2000, 5)
    layer = convert.from_uint8(wq, w_scale, w_zp, x_scale, x_zp, y_scale, y_zp, (3, 12, 12),
                               bias_q=bias_q, activation="relu")
    xq = rng.integers(0, 256, (3, 12, 12)).astype(np.uint8)
    net = driver.place([layer])
    t, got, _ = run(net, xq, "calc_done")
    real = convert.float_reference((wq - w_zp) * w_scale, (xq.astype(float) - x_zp) * x_scale,
                                   bias=bias_q * x_scale * w_scale, activation="relu")
    codes = np.clip(np.round(real / y_scale) + y_zp, 0, 255)
    assert np.abs(got[0].astype(int) - codes).max() <= 1
    assert np.array_equal(got[0], reference_chain(net, xq)[0])


def test_mc_post_scale():
    """The MC's constant post-scale 1e8/3 ('hotfix magic') where it fits 36 bits."""
    rng = np.random.default_rng(cases.SEED + 92)
    x = rng.uniform(0, 1, (2, 8, 8))
    w = rng.normal(0, 0.2, (3, 2, 3, 3))
    layer = convert.from_float(w, x, activation="relu", post_scale=convert.MC_MAGIC)
    assert layer.post_scale == convert.MC_MAGIC
    net = driver.place([layer])
    xq = quantize(layer, x)
    t, got, _ = run(net, xq, "calc_done")
    assert not t.faults()
    assert np.array_equal(got[0], reference_chain(net, xq)[0])


def test_table_encodings_by_hand():
    """BN and activation words against hand-computed values (kpu.h positions)."""
    # norm_mul -1 (24-bit 0xffffff), norm_add 5 at bit 24, norm_shift 15 at bit 56
    assert int(encode_batchnorm([-1], [15], [5])[0]) == 0x0F00000005FFFFFF
    # x_start -2**35 (36-bit 0x800000000) at bit 24, y_mul -1 (0xffff) at bit 8, shift 3
    xs, ym, sh, bi = [-(1 << 35)] * 16, [-1] * 16, [3] * 16, list(range(16))
    words = encode_activation(xs, ym, sh, bi)
    assert int(words[0]) == 0x0800000000FFFF03
    assert int(words[16]) == 0x0706050403020100 and int(words[17]) == 0x0F0E0D0C0B0A0908
    back = decode_activation(words)
    assert back["x_start"].tolist() == xs and back["y_mul"].tolist() == ym
    assert back["result_bias"].tolist() == bi


def test_pool_names_cover_every_code():
    assert sorted(p.code for p in POOL_BY_NAME.values()) == list(range(10))
    used = {pool for spec in SPECS.values() for *_, pool in spec} | {"bypass"}
    assert {POOL_BY_NAME[n].code for n in used} == set(range(10))
