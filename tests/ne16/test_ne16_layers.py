"""NE16 data results: every CONFIG0 field value, padding, filter masks, weight widths and the
two remainder styles, TLM (registers + memory only) against the numpy reference on logical
tensors (tlm.ne16.reference) and against hand-computed values. Random layers print their
seeds (`pytest -s`; a failure message names the seed too)."""
import os

import numpy as np
import pytest

from tlm.core.memory import Memory
from tlm.ne16 import builder, host, layers, weights
from tlm.ne16 import registers as R
from tlm.ne16.job import JobConfig
from tlm.ne16.trace_target import Ne16TraceTarget

CONFIG0 = R.by_name("CONFIG0")
N_RANDOM = int(os.environ.get("NE16_RANDOM", "120"))


def run(lay, style="gapsdk", literal=False):
    prog = builder.build(lay, style)
    out = host.run_program(prog, Ne16TraceTarget(literal=literal))
    return prog, out


def check(lay, style="gapsdk", what=""):
    prog, out = run(lay, style)
    ref = lay.reference()
    assert out.shape == ref.shape
    bad = np.argwhere(out != ref)
    assert bad.size == 0, (f"{what}: {len(bad)} of {out.size} outputs differ, first at "
                           f"{tuple(bad[0])}: TLM {out[tuple(bad[0])]} reference {ref[tuple(bad[0])]}")
    return prog


def config_fields(prog):
    return [CONFIG0.decode(j[CONFIG0.index]) for j in prog.jobs]


# ---- hand-computed values ------------------------------------------------------------------
def one(x, w, **kw):
    kw.setdefault("qw", 8)
    return builder.Layer("conv1x1", np.array(x, np.uint8).reshape(1, 1, -1),
                         np.array(w).reshape(len(w), -1, 1, 1), **kw)


@pytest.mark.parametrize("style", builder.STYLES)
def test_hand_computed_1x1(style):
    # acc = 3*5 = 15; *2 >> 1 = 15
    assert run(one([3], [5], qw=3, scale=[2], shift=1), style)[1].item() == 15
    # layer-wise offset -4: w_eff = 1 -> 3*1*2 >> 1 = 3
    assert run(one([3], [5], qw=3, scale=[2], shift=1, weight_offset=-4), style)[1].item() == 3
    # bias -20: 15 - 20 = -5 -> rectified 0, signed -5
    assert run(one([3], [5], qw=3, scale=[1], bias=[-20]), style)[1].item() == 0
    assert run(one([3], [5], qw=3, scale=[1], bias=[-20], relu=False), style)[1].item() == -5
    # saturation: 200*255 = 51000 -> 8-bit 255, signed 127, 16-bit 51000
    assert run(one([200], [255], relu=True), style)[1].item() == 255
    assert run(one([200], [255], relu=False), style)[1].item() == 127
    assert run(one([200], [255], out_bits=16), style)[1].item() == 51000
    # raw 32-bit accumulators with a negative offset: 200*(1-256) = -51000
    assert run(one([200], [1], weight_offset=-256, quant=False, out_bits=32), style)[1].item() == -51000
    # no rounding for either value of CONFIG0 bit 11 (digest §9): 7 >> 1 = 3
    for rb in (0, 1):
        assert run(one([7], [1], scale=[1], shift=1, rounding_bit=rb), style)[1].item() == 3


def test_hand_computed_padding_value_and_mask():
    """1x1 input of value 1, padded by 1 on every side with value 2, 3x3 weights all 1 ->
    1 + 8*2 = 17; masking the top row and the left column leaves 1 + 3*2 = 7."""
    x = np.ones((1, 1, 1), np.uint8)
    w = np.ones((1, 1, 3, 3), np.int64)
    lay = builder.Layer("conv3x3", x, w, qw=1, padding=(1, 1, 1, 1), pad_value=2, quant=False,
                        out_bits=32)
    assert run(lay, "gapsdk")[1].item() == 17
    lay.filter_mask = (1, 0, 1, 0)
    assert run(lay, "gapsdk")[1].item() == 7
    lay.filter_mask = (0, 1, 0, 1)       # bottom row and right column
    assert run(lay, "gapsdk")[1].item() == 7
    lay.filter_mask = (3, 0, 0, 0)       # all taps
    assert run(lay, "gapsdk")[1].item() == 0


def test_hand_computed_mode16_and_linear():
    x = np.array([[[1000, 3]]], np.uint16)                 # MODE16: unsigned 16-bit inputs
    lay = builder.Layer("conv1x1", x, np.array([[2, 7]]).reshape(1, 2, 1, 1), qw=3, quant=False,
                        out_bits=32)
    assert run(lay)[1].item() == 2021
    xl = np.arange(32, dtype=np.uint8)
    wl = np.zeros((2, 32), np.int64)
    wl[0, 31], wl[1, :] = 1, 1
    lay = builder.Layer("linear", xl, wl, qw=1, quant=False, out_bits=32)
    np.testing.assert_array_equal(run(lay)[1].reshape(-1), [31, sum(range(32))])


# ---- every CONFIG0 field value -------------------------------------------------------------
def _base(seed, **kw):
    kw.setdefault("kind", "conv3x3")
    kw.setdefault("h", 5)
    kw.setdefault("w", 4)
    kw.setdefault("cin", 18)
    kw.setdefault("cout", 35)
    kw.setdefault("stride", 1)
    kw.setdefault("mode16", False)
    kw.setdefault("quant", True)
    kw.setdefault("out_bits", 8)
    kw.setdefault("use_streamin", False)
    return layers.random_layer(seed, **kw)


FIELD_CASES = (
    [("QWM1", q - 1, dict(qw=q)) for q in range(1, 9)]
    + [("MODE16", 0, dict(mode16=False)), ("MODE16", 1, dict(mode16=True)),
       ("MODE16", 1, dict(mode16=True, kind="conv1x1")),
       ("STREAMOUT", 0, dict(quant=False, out_bits=32)), ("STREAMOUT", 0, dict(quant=False, out_bits=8)),
       ("STREAMOUT", 0, dict(quant=False, out_bits=16, relu=False)),
       ("STREAMOUT", 1, dict(quant=True)),
       ("FILTER_MODE", 0, dict(kind="conv3x3")), ("FILTER_MODE", 1, dict(kind="dw3x3", cin=21)),
       ("FILTER_MODE", 2, dict(kind="conv1x1")), ("FILTER_MODE", 3, dict(kind="linear", cin=272)),
       ("LINEAR", 0, dict(kind="conv1x1")), ("LINEAR", 1, dict(kind="linear", cin=48)),
       ("LINEAR", 1, dict(kind="linear", cin=528, mode16=True)),
       ("STRIDED_2X2", 0, dict(stride=1)), ("STRIDED_2X2", 1, dict(stride=2, h=7, w=6, cout=36)),
       ("STRIDED_2X2", 1, dict(stride=2, kind="dw3x3", h=6, w=5, cin=18)),
       ("ROUNDING", 0, dict(rounding_bit=0)), ("ROUNDING", 1, dict(rounding_bit=1)),
       ("NORM_BITS", 0, dict(norm_bits=8)), ("NORM_BITS", 1, dict(norm_bits=16)),
       ("NORM_BITS", 2, dict(norm_bits=32)),
       ("STREAMIN", 0, dict(use_streamin=False)), ("STREAMIN", 1, dict(use_streamin=True, out_bits=32)),
       ("STREAMIN", 1, dict(use_streamin=True, out_bits=32, kind="dw3x3", cin=20)),
       ("STREAMIN", 1, dict(use_streamin=True, out_bits=32, kind="linear", cin=64)),
       ("WEIGHT_OFFS", 0, dict(weight_offset=None)), ("WEIGHT_OFFS", 1, dict(weight_offset=-128)),
       ("WEIGHT_OFFS", 1, dict(weight_offset=255)), ("WEIGHT_OFFS", 1, dict(weight_offset=-256))]
    + [("RIGHT_SHIFT", s, dict(shift=s)) for s in range(32)]
    + [("QUANT_BITS", 0, dict(out_bits=8)), ("QUANT_BITS", 1, dict(out_bits=16)),
       ("QUANT_BITS", 2, dict(out_bits=32)),
       ("QUANT_RECT", 0, dict(relu=True)), ("QUANT_RECT", 1, dict(relu=False)),
       ("NORM_SHIFT", 0, dict(shift=5)), ("NORM_SHIFT", 1, dict(shift=np.arange(35) % 32)),
       ("NORM_BIAS", 0, dict(bias=None)), ("NORM_BIAS", 1, dict(bias=np.arange(35) * 1000 - 17000))]
)


@pytest.mark.parametrize("field,value,kw", FIELD_CASES,
                         ids=[f"{f}={v}-{i}" for i, (f, v, _) in enumerate(FIELD_CASES)])
@pytest.mark.parametrize("style", builder.STYLES)
def test_config0_field_value(field, value, kw, style):
    seed = 1000 + FIELD_CASES.index((field, value, kw))
    kw = dict(kw)
    if "pad_value" not in kw:
        kw["pad_value"] = 0
    lay = _base(seed, **kw)
    prog = check(lay, style, f"seed {seed} {field}={value}")
    for fields in config_fields(prog):
        assert fields[field] == value
    # the rounding bit never changes a result (project decision, digest §9)
    if field == "ROUNDING":
        lay.rounding_bit ^= 1
        check(lay, style, f"seed {seed} ROUNDING flipped")


@pytest.mark.parametrize("value", [3])
@pytest.mark.parametrize("field", ["FILTER_MODE", "NORM_BITS", "QUANT_BITS"])
def test_config0_reserved_values(field, value):
    """The reserved encodings (seed) reject the job: see test_ne16_device for the outcome."""
    prog = builder.build(_base(7), "gapsdk")
    regs = list(prog.jobs[0])
    regs[CONFIG0.index] = CONFIG0.field(field).put(regs[CONFIG0.index], value)
    assert "reserved" in JobConfig.from_regs(regs).problem()


def test_weight_offset_register_uses_bit31_as_sign():
    """EXT (RTL, §9): the multiplier sees bits 7:0 with bit 31 as the sign."""
    lay = one([1], [0], qw=1, quant=False, out_bits=32, weight_offset=0)
    prog = builder.build(lay, "gapsdk")
    wo = R.by_name("WEIGHT_OFFSET")
    for word, eff in ((0x00000005, 5), (0xFFFFFF80, -128), (0x80000080, -128), (0x7FFFFF05, 5),
                      (0x800000FF, -1), (0xFFFFFFFF, -1)):
        regs = list(prog.jobs[0])
        regs[wo.index] = word
        assert JobConfig.from_regs(regs).weight_offset == eff
        t = Ne16TraceTarget()
        h = host.Host(t)
        h.load(prog)
        h.dispatch(regs)
        assert t.wait_irq(1000)
        assert h.output(prog).item() == eff


# ---- padding and the two remainder styles -----------------------------------------------------
@pytest.mark.parametrize("kind", ["conv3x3", "dw3x3"])
@pytest.mark.parametrize("padding", [(1, 1, 1, 1), (2, 0, 0, 2), (0, 2, 2, 0), (1, 0, 0, 1), (0, 1, 1, 0)])
@pytest.mark.parametrize("hw", [(1, 1), (2, 4), (3, 3), (4, 5), (7, 8), (9, 10)])
def test_padding_value_and_borders(kind, padding, hw):
    h, w = hw
    seed = 2000 + h * 31 + w + 7 * sum(padding)
    for style, value in (("gapsdk", 77), ("pulpnnx", 0), ("gapsdk", 0)):
        lay = _base(seed, kind=kind, h=h, w=w, cin=13, cout=13 if kind == "dw3x3" else 20,
                    padding=padding, pad_value=value, filter_mask=(0, 0, 0, 0))
        if min(lay.out_shape[:2]) < 1:
            return
        try:
            prog = builder.build(lay, style)
        except ValueError as e:
            assert "interior subtile" in str(e)      # the only refusal here
            continue
        out = host.run_program(prog)
        np.testing.assert_array_equal(out, lay.reference(), err_msg=f"seed {seed} {style}")


def test_pulpnnx_style_refuses_a_bottom_right_padding_value():
    with pytest.raises(ValueError, match="implicitly with 0"):
        builder.build(_base(3, padding=(0, 1, 0, 0), pad_value=9), "pulpnnx")


def test_remainder_styles_differ_in_registers_not_results():
    lay = _base(11, h=6, w=8, padding=(1, 1, 1, 1), pad_value=0)
    a, b = builder.build(lay, "pulpnnx"), builder.build(lay, "gapsdk")
    rem0, rem1 = R.by_name("SUBTILE_REM0"), R.by_name("SUBTILE_REM1")
    assert a.jobs[0][rem1.index] != b.jobs[0][rem1.index]
    assert rem0.decode(b.jobs[0][rem0.index])["KO"] == lay.cout % 32
    np.testing.assert_array_equal(host.run_program(a), host.run_program(b))


@pytest.mark.parametrize("mask", [(1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1), (1, 1, 1, 1),
                                  (2, 0, 0, 2), (0, 3, 0, 0)])
@pytest.mark.parametrize("kind", ["conv3x3", "dw3x3"])
def test_filter_mask(mask, kind):
    lay = _base(3000 + sum(m << (2 * i) for i, m in enumerate(mask)), kind=kind, filter_mask=mask,
                cin=16, padding=(1, 1, 1, 1), pad_value=0)
    prog = check(lay, "gapsdk", f"mask {mask}")
    fm = R.by_name("FILTER_MASK").decode(prog.jobs[0][R.by_name("FILTER_MASK").index])
    assert (fm["TOP"], fm["BOTTOM"], fm["LEFT"], fm["RIGHT"]) == mask


def test_filter_mask_is_ignored_in_1x1():
    lay = _base(5, kind="conv1x1")
    prog = builder.build(lay, "gapsdk")
    regs = list(prog.jobs[0])
    regs[R.by_name("FILTER_MASK").index] = 0x01010101
    t = Ne16TraceTarget()
    h = host.Host(t)
    h.load(prog)
    h.dispatch(regs)
    assert t.wait_irq(10_000)
    np.testing.assert_array_equal(h.output(prog), lay.reference())


# ---- random layers ----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", layers.KINDS)
def test_random_layers(kind):
    done = 0
    for seed in range(N_RANDOM):
        seed = 10_000 + seed * 7 + layers.KINDS.index(kind)
        lay = layers.random_layer(seed, kind=kind)
        for style in builder.STYLES:
            try:
                prog = builder.build(lay, style)
            except ValueError:
                continue
            print(f"ne16 random layer seed={seed} kind={kind} style={style}")
            out = host.run_program(prog)
            np.testing.assert_array_equal(out, lay.reference(), err_msg=f"seed {seed} {style}")
            done += 1
    assert done >= N_RANDOM           # most layers run in both styles


@pytest.mark.parametrize("seed", range(6))
def test_literal_path_agrees(seed):
    """The slow literal path (Python loops) gives the same outputs and transactions."""
    lay = layers.random_layer(500 + seed, h=4, w=4, cin=32, cout=12)
    prog = builder.build(lay, "gapsdk")
    logs, outs = [], []
    for literal in (False, True):
        mem = Memory(log=True)
        outs.append(host.run_program(prog, Ne16TraceTarget(memory=mem, literal=literal)))
        logs.append([(x.channel, x.write, x.addr, x.length) for x in mem.log])
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], lay.reference())
    assert logs[0] == logs[1] and logs[0]


# ---- the bit-plane weight encoder ---------------------------------------------------------------
def test_encoder_layout_by_hand():
    # 3x3: one output, 17 inputs (two KiMaj blocks), 2 bits; weight 3 at (cin 9, tap 4)
    w = np.zeros((1, 17, 3, 3), np.int64)
    w[0, 9, 1, 1] = 3
    w[0, 16, 0, 0] = 2
    b = np.frombuffer(weights.encode_conv(w, 2), np.uint8)
    assert b.size == 1 * 2 * 2 * 9 * 2                  # Ko, KiMaj, Qw, taps, 2 bytes
    rec = b.reshape(1, 2, 2, 9, 2)
    nz = {tuple(int(i) for i in idx): int(rec[tuple(idx)]) for idx in np.argwhere(rec)}
    # channel 9 = byte 1 bit 1; plane 0 and plane 1; channel 16 = block 1 byte 0 bit 0, plane 1
    assert nz == {(0, 0, 0, 4, 1): 0b10, (0, 0, 1, 4, 1): 0b10, (0, 1, 1, 0, 0): 0b1}
    # MODE16: 8 channels a byte
    b16 = np.frombuffer(weights.encode_conv(w, 2, mode16=True), np.uint8).reshape(1, 3, 2, 9, 1)
    assert b16[0, 1, 0, 4, 0] == 0b10 and b16[0, 2, 1, 0, 0] == 1
    # linear: (Cout, Qw, Cin/8)
    wl = np.zeros((1, 16), np.int64)
    wl[0, 10] = 1
    assert weights.encode_linear(wl, 1) == bytes([0, 0b100])
    with pytest.raises(ValueError):
        weights.encode_conv(np.full((1, 1, 1, 1), 4), 2)


@pytest.mark.parametrize("seed", range(8))
def test_fast_reads_equal_one_transaction_at_a_time(seed):
    """TcdmPort.read_many's vectorised gather (unobserved memory) has the effect and the count
    of the transactions one by one; a logging memory sees every one of them."""
    lay = layers.random_layer(700 + seed, h=6, w=5, cin=48, cout=40)
    try:
        prog = builder.build(lay, "gapsdk")
    except ValueError:
        prog = builder.build(lay, "pulpnnx")
    runs = []
    for fast, log in ((True, False), (False, False), (True, True)):
        t = Ne16TraceTarget(memory=Memory(log=log), fast=fast)
        out = host.run_program(prog, t)
        runs.append((out, t.dev.port.transactions, len(t.dev.memory.log)))
    np.testing.assert_array_equal(runs[0][0], lay.reference())
    for out, n, _ in runs[1:]:
        np.testing.assert_array_equal(out, runs[0][0])
        assert n == runs[0][1]
    assert runs[2][2] == runs[2][1] > 0               # logged: one record per transaction
