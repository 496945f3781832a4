"""The NE16 TLM against acceptance-style traces and a reference written independently of it.

`ne16_indep_ref` (arithmetic and weight layouts from the digest and pulp-nnx's algorithms) and
`ne16_indep_traces` (pulp-nnx / GAP SDK host flows) do not import tlm.ne16's engine, builder
or reference. The traces under tests/ne16/traces/independent/ replay here and in
tests/conformance; random layers (seeds printed) go through the same host flows. The
regression tests pin the decisions taken where the sources disagree (docs/devices/ne16.md,
"Decisions from an independent review").
"""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.ne16 import ne16_indep_ref as ref
from tests.support import REPO
from tests.ne16 import ne16_indep_traces as gen
from tlm.core.trace import parse, replay
from tlm.ne16 import engine
from tlm.ne16 import registers as R
from tlm.ne16.job import JobConfig
from tlm.ne16.trace_target import Ne16TraceTarget

HERE = Path(__file__).resolve().parent
TRACES = sorted((HERE / "traces" / "independent").glob("*/trace.txt"))


def _replay(path):
    tr = parse(path)
    res = replay(tr, Ne16TraceTarget(tr.config or "ne16"))
    return tr, res


# ---- the reference itself ----------------------------------------------------------------
def test_reference_hand_values():
    # wrap and saturation
    assert ref.wrap32([1 << 31, -(1 << 31) - 1]).tolist() == [-(1 << 31), (1 << 31) - 1]
    assert ref.saturate([300, -300], 8, signed=True).tolist() == [127, -128]
    assert ref.saturate([300, -3], 8, signed=False).tolist() == [255, 0]
    # 3x3 conv of a 3x3 input with padding 1 and value 2: the centre output sees all 9 pixels
    x = np.arange(9).reshape(3, 3, 1)
    w = np.ones((1, 1, 3, 3), np.int64)
    out = ref.conv(x, w, pad=(1, 1, 1, 1), pad_value=2)
    assert out[1, 1, 0] == 36 and out[0, 0, 0] == 0 + 1 + 3 + 4 + 5 * 2
    # stride 2 picks every other output
    assert ref.conv(x, w, stride=2, pad=(1, 1, 1, 1))[:, :, 0].tolist() == [[8, 12], [20, 24]]
    # normalisation: exact product, bias wraps, ReLU, arithmetic shift, no rounding
    assert ref.norm_quant(np.array([-7]), scale=[1], shift=1, out_bits=8).tolist() == [-4]
    assert ref.norm_quant(np.array([(1 << 31) - 1]), scale=[2], bias=[1], shift=0, out_bits=32,
                          relu=False).tolist() == [-1]                     # wrap32(2^32-2)+1
    big = ref.norm_quant(np.array([(1 << 31) - 1]), scale=[(1 << 32) - 1], shift=31,
                         out_bits=32)
    assert big.tolist() == [(1 << 31) - 1]                                  # >= 2^47, exact
    assert ref.norm_quant(np.array([-5, 5]), scale=[3, 3], shift=0, relu=True).tolist() == [0, 15]


@pytest.mark.parametrize("seed", range(6))
def test_bitplane_encoder_roundtrip(seed):
    print(f"seed={seed}")
    rng = np.random.default_rng(seed)
    qw = int(rng.integers(1, 9))
    cin, cout = int(rng.integers(1, 40)), int(rng.integers(1, 5))
    sub = 8 if seed % 2 else 16
    w = rng.integers(0, 1 << qw, size=(cout, cin, 3, 3))
    blob = ref.encode_bitplanes(w, qw, cin_subtile=sub)
    assert len(blob) == cout * -(-cin // sub) * qw * 9 * sub // 8
    np.testing.assert_array_equal(ref.decode_bitplanes(blob, qw, cout, cin, 3, 3, sub), w)


def test_bitplane_encoder_bit_order():
    """Channel c of a 16-channel block is bit c % 8 of byte c // 8; planes bit 0 first."""
    w = np.zeros((1, 16, 1, 1), np.int64)
    w[0, 9, 0, 0] = 0b10                               # channel 9 has bit 1 set
    assert ref.encode_bitplanes(w, 2) == bytes([0, 0, 0, 0b10])
    assert ref.encode_linear(np.array([[0] * 10 + [1] + [0] * 5]), 1) == bytes([0, 0b100])


# ---- the traces ----------------------------------------------------------------------------
def test_there_are_independent_traces():
    assert len(TRACES) >= 20


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.parent.name)
def test_independent_trace_replays(path):
    tr, res = _replay(path)
    assert res.failed == 0 and not res.faulted, res.messages
    assert res.passed == tr.checks > 0


# pre-offset input pointers below 0x1000_0000 (padding at the very start of L1): the
# ne16-gap9-l1 configuration answers DECERR there (docs/devices/ne16.md)
BELOW_L1 = {"conv3x3_l1_relu_bias", "dw_stride2_pulpnnx"}


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.parent.name)
def test_independent_trace_in_the_gap9_l1_configuration(path):
    """Every tensor sits in GAP9's L1 windows; only reads below L1's start fault there."""
    tr = parse(path)
    res = replay(tr, Ne16TraceTarget("ne16-gap9-l1"))
    if path.parent.name in BELOW_L1:
        assert res.faulted and any("DECERR on infeat read @0x0fff" in m for m in res.messages)
    else:
        assert res.failed == 0 and not res.faulted, res.messages


def test_independent_traces_are_current():
    r = subprocess.run([sys.executable, "-m", "tests.ne16.ne16_indep_traces", "--check"],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr


def test_a_wrong_expected_byte_fails(tmp_path):
    s = gen.single("one wrong byte", gen.Layer("w", 5, kind="1x1", h_in=2, w_in=2, k_in=16,
                                               k_out=8), gen.L1)
    blob = bytearray(s.w.blobs[-1])
    blob[gen.GUARD + 3] ^= 1
    s.w.blobs[-1] = bytes(blob)
    tr, res = _replay(s.w.save(tmp_path))
    assert res.failed == 1 and "first difference" in res.messages[0]


# ---- random layers through the pulp-nnx / GAP SDK host flows --------------------------------
def _random_layer(seed: int) -> gen.Layer:
    rng = np.random.default_rng(seed)
    kind = ["3x3", "dw", "1x1", "linear"][seed % 4]
    mode16 = kind in ("3x3", "1x1") and rng.random() < 0.25
    style = "gapsdk" if kind == "linear" else str(rng.choice(["pulpnnx", "gapsdk"]))
    stride = 2 if kind != "linear" and style == "pulpnnx" and rng.random() < 0.3 else 1
    k_in = int(rng.integers(1, 5)) * 16 if kind == "linear" else int(rng.integers(1, 40))
    k_out = k_in if kind == "dw" else int(rng.integers(1, 70))
    pad = (0, 0, 0, 0)
    pad_value = 0
    if kind in ("3x3", "dw"):
        pad = tuple(int(v) for v in rng.integers(0, 2, size=4))
        if style == "gapsdk":
            pad_value = int(rng.integers(0, 1 << (16 if mode16 else 8)))
    out_bits = int(rng.choice([8, 8, 32, 16]))
    quant = not (out_bits == 32 and rng.random() < 0.3)
    relu = bool(rng.random() < 0.5) and quant
    qw = int(rng.integers(1, 9))
    offset = int(rng.choice([-(1 << (qw - 1)), 0, int(rng.integers(-256, 256))]))
    L = gen.Layer(f"r{seed}", seed, kind=kind, h_in=int(rng.integers(3, 9)),
                  w_in=int(rng.integers(3, 9)), k_in=k_in, k_out=k_out, stride=stride, pad=pad,
                  pad_value=pad_value, qw=qw, offset=offset, offset_bit=int(rng.integers(0, 2)),
                  in_bits=16 if mode16 else 8, quantize=quant, out_bits=out_bits,
                  norm_bits=int(rng.choice([8, 16, 32])), bias=bool(rng.random() < 0.5),
                  channel_shift=bool(rng.random() < 0.3), relu=relu, style=style,
                  streamin=out_bits == 32 and stride == 1 and rng.random() < 0.3,
                  rounding_bit=int(rng.integers(0, 2)))
    if L.stride == 2 and (L.k_out * (out_bits // 8)) % 2:
        L.k_out += 1                                   # pulp-nnx: even output pixel stride
        L.k_in += kind == "dw"
    if L.stride == 2 and (L.h_out < 2 or L.w_out < 2):
        L.stride = 1
    return L


@pytest.mark.parametrize("seed", range(40))
def test_random_layers_match_the_independent_reference(seed, tmp_path):
    L = _random_layer(3000 + seed)
    print(f"seed={3000 + seed} {L}")
    s = gen.single(f"random layer seed {3000 + seed}", L, gen.L1 + 0x1000 if seed % 2 else 0x800)
    tr, res = _replay(s.w.save(tmp_path))
    assert res.failed == 0 and not res.faulted, res.messages
    assert res.passed == tr.checks


# ---- regressions for the decisions of the review ------------------------------------------
def _cfg(**fields) -> JobConfig:
    regs = [0] * R.N_JOB_REGS
    for name, value in fields.items():
        regs[R.by_name(name).index] = value
    return JobConfig.from_regs(regs)


@pytest.mark.parametrize("word,eff", [(0xFFFFFF80, -128), (0x80, 128), (0xFFFFFF6C, -148),
                                      (0xFFFFFFFF, -1), (0x7F, 127), (0, 0)])
def test_weight_offset_is_not_gated_by_config0_bit15(word, eff):
    """The open RTL never reads CONFIG0[15] and the GAP9 simulator leaves it unimplemented:
    the offset (bits 7:0, bit 31 its sign) applies for both values of the bit."""
    cfg0 = R.by_name("CONFIG0")
    for bit in (0, 1):
        c = _cfg(WEIGHT_OFFSET=word, CONFIG0=cfg0.encode(WEIGHT_OFFS=bit))
        assert c.weight_offs == bool(bit) and c.weight_offset == eff


@pytest.mark.parametrize("seed", range(4))
def test_pulpnnx_weights_with_bit15_clear(seed, tmp_path):
    """pulp-nnx's encoding (stored = w - offset) with CONFIG0[15] = 0 and the offset programmed:
    the output is the functional model's (signed weights)."""
    print(f"seed={seed}")
    L = gen.Layer("b15", 500 + seed, kind=["3x3", "1x1", "dw", "linear"][seed],
                  h_in=3, w_in=4, k_in=32, k_out=32 if seed == 2 else 20,
                  pad=(1, 1, 1, 1) if seed in (0, 2) else (0, 0, 0, 0), qw=8 - seed,
                  offset_bit=0, style="gapsdk" if seed == 3 else "pulpnnx")
    tr, res = _replay(gen.single("bit 15 clear", L, gen.L1).w.save(tmp_path))
    assert res.failed == 0 and not res.faulted, res.messages
    assert L.data["w"].min() < 0                       # the weights really are signed


@pytest.mark.parametrize("seed", range(5))
def test_normquant_product_is_exact_beyond_48_bits(seed):
    print(f"seed={seed}")
    rng = np.random.default_rng(seed)
    k, p = 16, 9
    acc = rng.integers(-(1 << 31), 1 << 31, size=(k, p))
    acc[0, 0], acc[1, 0] = -(1 << 31), (1 << 31) - 1
    scale = rng.integers(0, 1 << 32, size=k)
    scale[:2] = (1 << 32) - 1
    shift = rng.integers(0, 32, size=k)
    bias = rng.integers(-(1 << 31), 1 << 31, size=k)
    for b in (None, bias):
        for bits, relu in ((8, True), (8, False), (32, False), (32, True), (16, False)):
            got = engine.normquant(acc, scale, shift.astype(np.uint8), b, bits, not relu)
            want = ref.norm_quant(acc.T, scale=scale, bias=b, shift=shift, relu=relu,
                                  out_bits=bits).T
            np.testing.assert_array_equal(got, want)
            lit = engine._literal_normquant(acc, scale, shift, b, bits, not relu)
            np.testing.assert_array_equal(lit, want)


@pytest.mark.parametrize("mode,ok", [(0, True), (1, False), (2, True), (3, True)])
def test_linear_with_every_filter_mode(mode, ok, tmp_path):
    """LINEAR (CONFIG0[7]) takes precedence over FILTER_MODE 00/10/11 (the RTL binds
    mode_linear to bit 7); with 3x3 depthwise (01) the job is rejected, reported."""
    L = gen.Layer("lin", 77, kind="linear", k_in=48, k_out=36, qw=3, linear_mode_bits=mode,
                  style="gapsdk", relu=True)
    tr, res = _replay(gen.single("linear mode bits", L, 0x1000).w.save(tmp_path))
    if ok:
        assert res.failed == 0 and not res.faulted, res.messages
    else:
        assert res.faulted and any("LINEAR" in m for m in res.messages), res.messages


@pytest.mark.parametrize("style", ["pulpnnx", "gapsdk"])
def test_16bit_outputs_contiguous_for_both_d0_conventions(style, tmp_path):
    """QUANT_BITS 16 with OUTFEAT_D0 32 (pulp-nnx) or 16 (GAP SDK): contiguous int16 HWC."""
    L = gen.Layer("o16", 78, kind="1x1", h_in=2, w_in=3, k_in=16, k_out=50, out_bits=16,
                  style=style)
    s = gen.single("16-bit outputs", L, gen.L1)
    d0 = gen.jobs_for(gen.place(L, gen.L1))[0]["OUTFEAT_D0_STRIDE"]
    assert d0 == (32 if style == "pulpnnx" else 16)
    tr, res = _replay(s.w.save(tmp_path))
    assert res.failed == 0 and not res.faulted, res.messages


def test_registry_paths_exist():
    from tlm.core import registry
    extra = registry.get("ne16").bench.extra
    for v in extra.values():
        if isinstance(v, str) and v.endswith(".py") and "/" in v:
            assert (HERE.parents[1] / v).is_file(), v
