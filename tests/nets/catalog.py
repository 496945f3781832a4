"""Model catalog: seeded, deterministic quantised TFLite test networks.

Every model is registered with :func:`_net`. ``MODELS`` maps name -> :class:`Entry`
(builder function, tags, whether Vela maps it 100 % to the U85 NPU, note).  ``NAMES`` lists
the NPU-only models, ``CPU_NAMES`` the ones Vela leaves (partly) on the CPU, ``ALL_NAMES``
everything.  ``build(name)`` returns the flatbuffer bytes.

NPU mapping was checked with vela 5.2.0 for ethos-u85-128/256/512 and the default,
shared_sram, sram_only and separate_io memory modes (all agree).  Vela's rejections:

* MAXIMUM/MINIMUM with different input/output quantisation ("Both Input quantization
  parameters must match OFM quantization parameters");
* RESIZE_BILINEAR whose scale factor is not an integer power of two (12/8, and the
  align_corners (19/4) case); RESIZE_NEAREST with 12/8 *is* mapped;
* MEAN over the channel axis unless one of h, w, c is 1.

LiteRT itself refuses int8 CONCATENATION with differing input/output quantisation and
CONV_2D without a bias tensor, so those are not in the catalog at all.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from .builder import Graph

BASE_SEED = 1234


@dataclass
class Entry:
    name: str
    fn: Callable[[Graph], None]
    npu: bool = True  # Vela (ethos-u85-256) maps every operator to the NPU
    tags: tuple = ()
    note: str = ""


MODELS: dict[str, Entry] = {}


def _net(name, npu=True, tags=(), note=""):
    def deco(fn):
        if name in MODELS:
            raise ValueError(f"duplicate model {name}")
        MODELS[name] = Entry(name, fn, npu, tuple(tags), note)
        return fn

    return deco


def seed_of(name: str) -> int:
    return BASE_SEED ^ zlib.crc32(name.encode())


@lru_cache(maxsize=None)
def build(name: str) -> bytes:
    """The TFLite flatbuffer for model ``name`` (deterministic)."""
    e = MODELS[name]
    g = Graph(seed_of(name), description=f"ethos-u85-tlm test net {name}")
    e.fn(g)
    return g.serialize()


def graph(name: str) -> Graph:
    """The :class:`Graph` object (tensor handles, quantisation) of model ``name``."""
    e = MODELS[name]
    g = Graph(seed_of(name), description=f"ethos-u85-tlm test net {name}")
    e.fn(g)
    return g


# =========================================================================== step 1
# conv2d 3x3: 1x9x9x8 -> 16, stride 1/2, SAME/VALID, RELU6, per-tensor/per-channel
for _s in (1, 2):
    for _p in ("same", "valid"):
        for _q in ("pt", "pc"):
            def _conv(g, s=_s, p=_p, q=_q):
                x = g.input((1, 9, 9, 8))
                y = g.conv2d(x, 16, 3, s, p.upper(), "RELU6", per_channel=(q == "pc"), target=3.0)
                g.output(y)

            _net(f"conv2d_3x3_s{_s}_{_p}_relu6_{_q}", tags=("conv", "int8"))(_conv)


@_net("dwconv_3x3_s1_same_relu6_pc", tags=("depthwise", "int8"))
def _(g):
    x = g.input((1, 9, 9, 16))
    g.output(g.depthwise(x, 3, 1, "SAME", act="RELU6", target=3.0))


@_net("dwconv_3x3_s2_valid_relu6_pt", tags=("depthwise", "int8"))
def _(g):
    x = g.input((1, 9, 9, 16))
    g.output(g.depthwise(x, 3, 2, "VALID", act="RELU6", per_channel=False, target=3.0))


@_net("dwconv_3x3_s1_same_mult2_pc", tags=("depthwise", "int8"))
def _(g):
    x = g.input((1, 8, 8, 8))
    g.output(g.depthwise(x, 3, 1, "SAME", mult=2))


@_net("fc_64x32_pt", tags=("fc", "int8"))
def _(g):
    x = g.input((1, 64))
    g.output(g.fully_connected(x, 32, per_channel=False))


@_net("fc_64x32_pc", tags=("fc", "int8"))
def _(g):
    x = g.input((1, 64))
    g.output(g.fully_connected(x, 32, per_channel=True))


@_net("fc_64x32_relu_batch2_pc", tags=("fc", "int8"))
def _(g):
    x = g.input((2, 64))
    g.output(g.fully_connected(x, 32, act="RELU", per_channel=True))


@_net("batch_matmul_8x16x12", tags=("matmul", "int8"))
def _(g):
    a = g.input((1, 8, 16), name="a")
    b = g.input((1, 16, 12), name="b")
    g.output(g.batch_matmul(a, b))


@_net("add_8x8x16", tags=("elementwise", "int8"))
def _(g):
    a = g.input((1, 8, 8, 16), name="a")
    b = g.input((1, 8, 8, 16), name="b")
    g.output(g.add(a, b))


@_net("add_bcast_relu", tags=("elementwise", "int8"))
def _(g):
    a = g.input((1, 8, 8, 16), name="a")
    b = g.input((1, 1, 1, 16), name="b")
    g.output(g.add(a, b, act="RELU"))


@_net("mul_8x8x16", tags=("elementwise", "int8"))
def _(g):
    a = g.input((1, 8, 8, 16), name="a")
    b = g.input((1, 8, 8, 16), name="b")
    g.output(g.mul(a, b))


@_net("mul_bcast_relu", tags=("elementwise", "int8"))
def _(g):
    a = g.input((1, 8, 8, 16), name="a")
    b = g.input((1, 1, 1, 16), name="b")
    g.output(g.mul(a, b, act="RELU"))


for _kind in ("max", "avg"):
    for _k, _st, _p in ((2, 2, "valid"), (3, 1, "same"), (3, 2, "same")):
        def _pool(g, kind=_kind, k=_k, st=_st, p=_p):
            x = g.input((1, 9, 9, 16))
            g.output(g.pool(x, kind.upper(), k, st, p.upper()))

        _net(f"{_kind}pool_{_k}x{_k}_s{_st}_{_p}", tags=("pool", "int8"))(_pool)


@_net("tinynet", tags=("network", "int8"))
def _(g):
    x = g.input((1, 16, 16, 8))
    c1 = g.conv2d(x, 16, 3, 2, "SAME", "RELU", name="conv1")
    d1 = g.depthwise(c1, 3, 1, "SAME", name="dw1")
    a1 = g.add(c1, d1, name="add1")
    p1 = g.pool(a1, "AVG", 2, 2, "VALID", name="avgpool")
    c2 = g.conv2d(p1, 32, 3, 1, "VALID", "RELU", name="conv2")
    p2 = g.pool(c2, "MAX", 2, 2, "VALID", name="maxpool")
    g.output(g.fully_connected(p2, 10, name="fc"))


# =========================================================================== step 2
# ---- elementwise
@_net("sub_8x8x16", tags=("elementwise", "int8"))
def _(g):
    a = g.input((1, 8, 8, 16), name="a")
    b = g.input((1, 8, 8, 16), name="b")
    g.output(g.sub(a, b))


@_net("sub_bcast_relu6", tags=("elementwise", "int8", "fused_act"))
def _(g):
    a = g.input((1, 8, 8, 16), name="a", rms=3.0)
    b = g.input((1, 1, 1, 16), name="b", rms=3.0)
    g.output(g.sub(a, b, act="RELU6"))


@_net("add_relu_n1_to_1", tags=("elementwise", "int8", "fused_act"))
def _(g):
    a = g.input((1, 6, 7, 21), name="a")
    b = g.input((1, 6, 7, 21), name="b")
    g.output(g.add(a, b, act="RELU_N1_TO_1"))


@_net("add_bcast_row", tags=("elementwise", "int8"))
def _(g):
    a = g.input((1, 5, 8, 16), name="a")
    b = g.input((1, 1, 8, 16), name="b")
    g.output(g.add(a, b))


@_net("add_const_scalar", tags=("elementwise", "int8", "scalar"))
def _(g):
    a = g.input((1, 8, 8, 16), name="a")
    c = g.tensor("c", (1,), "int8", scale=a.s * 0.7, zp=3, data=[57], rms=0.4)
    g.output(g.add(a, c))


@_net("mul_bcast_hw", tags=("elementwise", "int8"))
def _(g):
    a = g.input((1, 8, 8, 16), name="a")
    b = g.input((1, 8, 8, 1), name="b")
    g.output(g.mul(a, b))


@_net("mul_const_scalar", tags=("elementwise", "int8", "scalar"))
def _(g):
    a = g.input((1, 8, 8, 16), name="a")
    c = g.tensor("c", (1,), "int8", scale=0.01, zp=-5, data=[90], rms=0.95)
    g.output(g.mul(a, c))


@_net("maximum_8x8x16", tags=("elementwise", "int8"))
def _(g):
    a = g.input((1, 8, 8, 16), name="a")
    b = g.input((1, 8, 8, 16), name="b", scale=a.s, zp=a.z)
    g.output(g.maximum(a, b))


@_net("minimum_bcast", tags=("elementwise", "int8"))
def _(g):
    a = g.input((1, 8, 8, 16), name="a")
    b = g.input((1, 1, 1, 16), name="b", scale=a.s, zp=a.z)
    g.output(g.minimum(a, b))


@_net("maximum_diff_quant", npu=False, tags=("elementwise", "int8"),
      note="vela: MAX/MIN need IFM and OFM quantisation to match -> CPU")
def _(g):
    a = g.input((1, 8, 8, 16), name="a")
    b = g.input((1, 8, 8, 16), name="b")
    y = g.act_tensor("maximum", a.shape, "int8", max(a.rms, b.rms))
    g.op("MAXIMUM", [a, b], [y])
    g.output(y)


# ---- resize
_RESIZE_CPU = {
    "resize_bilinear_align_4x5to16x20":
        "vela: align_corners width scale (19/4) must be an integer power of two -> CPU",
}
for _mode in ("nearest", "bilinear"):
    for _var, _ac, _hp in (("", False, False), ("_align", True, False), ("_halfpix", False, True)):
        for _ih, _iw, _oh, _ow in ((8, 8, 16, 16), (4, 5, 16, 20)):
            if _ac and (_oh - 1) % (_ih - 1):
                _oh, _ow = 2 * _ih - 1, 2 * _iw - 1
            tag = f"{_ih}x{_iw}to{_oh}x{_ow}"

            def _resize(g, mode=_mode, ac=_ac, hp=_hp, ih=_ih, iw=_iw, oh=_oh, ow=_ow):
                x = g.input((1, ih, iw, 8))
                g.output(g.resize(x, (oh, ow), mode.upper(), ac, hp))

            _name = f"resize_{_mode}{_var}_{tag}"
            _npu = _name not in _RESIZE_CPU
            _net(_name, npu=_npu, tags=("resize", "int8"),
                 note="" if _npu else _RESIZE_CPU[_name])(_resize)


@_net("resize_nearest_8x8to12x12", tags=("resize", "int8"))
def _(g):
    x = g.input((1, 8, 8, 8))
    g.output(g.resize(x, (12, 12), "NEAREST"))


@_net("resize_bilinear_8x8to12x12", npu=False, tags=("resize", "int8"),
      note="vela: bilinear scale factor must be an integer power of two -> CPU")
def _(g):
    x = g.input((1, 8, 8, 8))
    g.output(g.resize(x, (12, 12), "BILINEAR"))


# ---- data movement
for _axis in (1, 2, 3):
    def _cat(g, axis=_axis):
        a = g.input((1, 6, 6, 8), name="a")
        shp = [1, 6, 6, 8]
        shp[axis] = 5
        b = g.input(tuple(shp), name="b", scale=a.s, zp=a.z)
        g.output(g.concat([a, b], axis))

    _net(f"concat_axis{_axis}", tags=("concat", "int8"))(_cat)


@_net("concat_3way_c8_3_21", tags=("concat", "int8", "odd"))
def _(g):
    """int8 CONCATENATION needs equal quantisation on all inputs (LiteRT checks it)."""
    a = g.input((1, 6, 6, 8), name="a")
    b = g.input((1, 6, 6, 3), name="b", scale=a.s, zp=a.z)
    c = g.input((1, 6, 6, 21), name="c", scale=a.s, zp=a.z)
    g.output(g.concat([a, b, c], 3))


@_net("pad_hw", tags=("pad", "int8"))
def _(g):
    x = g.input((1, 7, 9, 16))
    g.output(g.pad(x, [[0, 0], [1, 2], [2, 1], [0, 0]]))


@_net("pad_c", tags=("pad", "int8"))
def _(g):
    x = g.input((1, 6, 6, 7))
    g.output(g.pad(x, [[0, 0], [0, 0], [0, 0], [1, 8]]))


@_net("pad_conv_valid", tags=("pad", "conv", "int8"))
def _(g):
    x = g.input((1, 8, 8, 8))
    p = g.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
    g.output(g.conv2d(p, 16, 3, 1, "VALID"))


for _perm in ((0, 2, 1, 3), (0, 3, 1, 2), (0, 1, 3, 2), (0, 3, 2, 1)):
    def _tr(g, perm=_perm):
        x = g.input((1, 5, 6, 7))
        g.output(g.transpose(x, perm))

    _net("transpose_" + "".join(map(str, _perm)), tags=("transpose", "int8"))(_tr)


@_net("reshape_fc", tags=("reshape", "fc", "int8"))
def _(g):
    x = g.input((1, 4, 4, 8))
    r = g.reshape(x, (1, 128))
    g.output(g.fully_connected(r, 10))


# ---- reductions
@_net("mean_hw_keepdims", tags=("mean", "int8"))
def _(g):
    x = g.input((1, 7, 7, 32))
    g.output(g.mean(x, (1, 2), True))


@_net("mean_hw_same_quant", tags=("mean", "int8"))
def _(g):
    x = g.input((1, 8, 8, 16))
    g.output(g.mean(x, (1, 2), True, requant=False))


@_net("mean_hw_nokeep", tags=("mean", "int8"))
def _(g):
    x = g.input((1, 5, 9, 21))
    g.output(g.mean(x, (1, 2), False))


@_net("mean_w", tags=("mean", "int8"))
def _(g):
    x = g.input((1, 6, 10, 16))
    g.output(g.mean(x, (2,), True))


# a W mean whose chained OFM (64*80 values) exceeds the stand-in's chaining FIFO (4096): the
# catalog network the RTL refusal tests use (tb/ethos_u85/testlib/rtl_support.UNCLAIMED_NET)
@_net("mean_w_64x4x80", tags=("mean", "int8"))
def _(g):
    x = g.input((1, 64, 4, 80))
    g.output(g.mean(x, (2,), True))


@_net("mean_c", npu=False, tags=("mean", "int8"),
      note="vela: depth reduction only if any of h, w, c == 1 -> CPU")
def _(g):
    x = g.input((1, 6, 6, 24))
    g.output(g.mean(x, (3,), True))


@_net("mean_c_h1", tags=("mean", "int8"))
def _(g):
    x = g.input((1, 1, 6, 24))
    g.output(g.mean(x, (3,), True))


# ---- activations (LUT / dedicated)
@_net("leaky_relu_0p1", tags=("activation", "int8"))
def _(g):
    x = g.input((1, 8, 8, 16), rms=2.0)
    g.output(g.leaky_relu(x, 0.1))


@_net("leaky_relu_1p5", tags=("activation", "int8"))
def _(g):
    x = g.input((1, 8, 8, 16), rms=2.0)
    g.output(g.leaky_relu(x, 1.5))


@_net("hard_swish", tags=("activation", "int8"))
def _(g):
    x = g.input((1, 8, 8, 16), rms=3.0)
    g.output(g.hard_swish(x))


@_net("tanh", tags=("activation", "int8"))
def _(g):
    x = g.input((1, 8, 8, 16), rms=1.5)
    g.output(g.tanh(x))


@_net("logistic", tags=("activation", "int8"))
def _(g):
    x = g.input((1, 8, 8, 16), rms=2.5)
    g.output(g.logistic(x))


@_net("softmax_1x10", tags=("activation", "softmax", "int8"))
def _(g):
    x = g.input((1, 10), rms=2.0)
    g.output(g.softmax(x))


@_net("softmax_4x4x33", tags=("activation", "softmax", "int8"))
def _(g):
    x = g.input((1, 4, 4, 33), rms=1.5)
    g.output(g.softmax(x))


@_net("softmax_beta0p5", tags=("activation", "softmax", "int8"))
def _(g):
    x = g.input((1, 2, 3, 16), rms=4.0)
    g.output(g.softmax(x, beta=0.5))


@_net("requantize_int8", tags=("quantize", "int8"))
def _(g):
    x = g.input((1, 8, 8, 16))
    g.output(g.quantize(x))


@_net("requantize_int8_to_int16", tags=("quantize", "int16"))
def _(g):
    x = g.input((1, 8, 8, 16))
    y = g.tensor("requantize", x.shape, "int16", scale=x.s / 100.0, zp=0)
    g.op("QUANTIZE", [x], [y])
    g.output(y)


for _kind in ("RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1"):
    def _relu(g, kind=_kind):
        x = g.input((1, 8, 8, 16), rms=4.0 if kind == "RELU6" else 1.0)
        g.output(g.relu(x, kind))

    _net(f"{_kind.lower()}_standalone", tags=("activation", "int8"))(_relu)


# ---- convolution variants
for _act in ("NONE", "RELU", "RELU_N1_TO_1"):
    def _cact(g, act=_act):
        x = g.input((1, 8, 8, 8))
        g.output(g.conv2d(x, 16, 3, 1, "SAME", act, target=1.0 if act != "RELU_N1_TO_1" else 1.5))

    _net(f"conv2d_3x3_{_act.lower()}", tags=("conv", "int8", "fused_act"))(_cact)


@_net("conv2d_3x3_dil2_same", tags=("conv", "int8"))
def _(g):
    x = g.input((1, 12, 12, 8))
    g.output(g.conv2d(x, 16, 3, 1, "SAME", "RELU", dilation=2))


@_net("conv2d_3x3_dil2x3_valid", tags=("conv", "int8"))
def _(g):
    x = g.input((1, 13, 14, 8))
    g.output(g.conv2d(x, 16, 3, 1, "VALID", dilation=(2, 3)))


@_net("conv2d_3x3_s3_valid", tags=("conv", "int8"))
def _(g):
    x = g.input((1, 14, 14, 8))
    g.output(g.conv2d(x, 16, 3, 3, "VALID"))


@_net("conv2d_5x5_s3_same", tags=("conv", "int8"))
def _(g):
    x = g.input((1, 16, 17, 8))
    g.output(g.conv2d(x, 16, 5, 3, "SAME"))


@_net("conv2d_s2x1", tags=("conv", "int8"))
def _(g):
    x = g.input((1, 10, 9, 8))
    g.output(g.conv2d(x, 16, 3, (2, 1), "SAME"))


for _cin, _cout in ((3, 7), (7, 21), (21, 33), (33, 3)):
    def _codd(g, cin=_cin, cout=_cout):
        x = g.input((1, 11, 13, cin))
        g.output(g.conv2d(x, cout, 3, 1, "SAME", "RELU6", target=3.0))

    _net(f"conv2d_3x3_c{_cin}to{_cout}_odd", tags=("conv", "int8", "odd"))(_codd)


@_net("conv2d_1x1_c33to47", tags=("conv", "int8", "odd"))
def _(g):
    x = g.input((1, 7, 5, 33))
    g.output(g.conv2d(x, 47, 1, 1, "VALID"))


@_net("conv2d_1x3_asym_kernel", tags=("conv", "int8"))
def _(g):
    x = g.input((1, 9, 9, 8))
    g.output(g.conv2d(x, 16, (1, 3), 1, "SAME"))


@_net("conv2d_7x7_s2_rgb", tags=("conv", "int8", "odd"))
def _(g):
    x = g.input((1, 23, 23, 3))
    g.output(g.conv2d(x, 16, 7, 2, "SAME", "RELU"))


@_net("conv2d_deep_c200to64", tags=("conv", "int8"))
def _(g):
    x = g.input((1, 6, 6, 200))
    g.output(g.conv2d(x, 64, 3, 1, "SAME"))


@_net("dwconv_3x3_c21_odd", tags=("depthwise", "int8", "odd"))
def _(g):
    x = g.input((1, 11, 7, 21))
    g.output(g.depthwise(x, 3, 1, "SAME", act="RELU"))


@_net("dwconv_3x3_dil2", tags=("depthwise", "int8"))
def _(g):
    x = g.input((1, 12, 12, 16))
    g.output(g.depthwise(x, 3, 1, "SAME", dilation=2))


@_net("dwconv_5x5_s2_c33", tags=("depthwise", "int8", "odd"))
def _(g):
    x = g.input((1, 13, 13, 33))
    g.output(g.depthwise(x, 5, 2, "SAME", act="RELU6", target=3.0))


@_net("dwconv_3x3_s3_valid", tags=("depthwise", "int8"))
def _(g):
    x = g.input((1, 14, 14, 16))
    g.output(g.depthwise(x, 3, 3, "VALID"))


@_net("dwconv_mult3_c3", tags=("depthwise", "int8", "odd"))
def _(g):
    x = g.input((1, 8, 8, 3))
    g.output(g.depthwise(x, 3, 1, "SAME", mult=3))


@_net("fc_33x7_odd", tags=("fc", "int8", "odd"))
def _(g):
    x = g.input((1, 33))
    g.output(g.fully_connected(x, 7))


@_net("fc_300x100_relu6", tags=("fc", "int8"))
def _(g):
    x = g.input((1, 300))
    g.output(g.fully_connected(x, 100, act="RELU6", target=3.0))


@_net("fc_batch4_no_bias", tags=("fc", "int8"))
def _(g):
    x = g.input((4, 48))
    g.output(g.fully_connected(x, 24, bias=False))


@_net("maxpool_3x3_s2_valid_c21", tags=("pool", "int8", "odd"))
def _(g):
    x = g.input((1, 11, 11, 21))
    g.output(g.pool(x, "MAX", 3, 2, "VALID"))


@_net("avgpool_5x5_s1_same_relu6", tags=("pool", "int8", "fused_act"))
def _(g):
    x = g.input((1, 9, 9, 16), rms=6.0)
    g.output(g.pool(x, "AVG", 5, 1, "SAME", act="RELU6"))


@_net("avgpool_global_7x7", tags=("pool", "int8"))
def _(g):
    x = g.input((1, 7, 7, 32))
    g.output(g.pool(x, "AVG", 7, 1, "VALID"))


@_net("avgpool_2x3_s2x3_c7", tags=("pool", "int8", "odd"))
def _(g):
    x = g.input((1, 8, 9, 7))
    g.output(g.pool(x, "AVG", (2, 3), (2, 3), "VALID"))


@_net("reshape_input_dwconv", tags=("reshape", "depthwise", "int8"))
def _(g):
    """A leading RESHAPE (micro_speech's): Vela folds it into the input, so the raw input is
    [1, 16, 20, 2] where LiteRT's is [1, 640] (issue 11)."""
    x = g.input((1, 640))
    g.output(g.depthwise(g.reshape(x, (1, 16, 20, 2)), 3, 2, "SAME", act="RELU"))


# ---- int16x8 variants (int16 activations, symmetric; int8 weights; int64 bias)
@_net("conv2d_3x3_int16", tags=("conv", "int16"))
def _(g):
    x = g.input((1, 9, 9, 8), dtype="int16")
    g.output(g.conv2d(x, 16, 3, 1, "SAME", "RELU"))


@_net("conv2d_3x3_s2_int16_pt", tags=("conv", "int16"))
def _(g):
    x = g.input((1, 9, 9, 8), dtype="int16")
    g.output(g.conv2d(x, 16, 3, 2, "VALID", per_channel=False))


@_net("dwconv_3x3_int16", tags=("depthwise", "int16"))
def _(g):
    x = g.input((1, 9, 9, 16), dtype="int16")
    g.output(g.depthwise(x, 3, 1, "SAME", act="RELU6", target=3.0))


@_net("fc_64x32_int16", tags=("fc", "int16"))
def _(g):
    x = g.input((1, 64), dtype="int16")
    g.output(g.fully_connected(x, 32))


@_net("add_int16", tags=("elementwise", "int16"))
def _(g):
    a = g.input((1, 8, 8, 16), dtype="int16", name="a")
    b = g.input((1, 8, 8, 16), dtype="int16", name="b")
    g.output(g.add(a, b))


@_net("mul_int16", tags=("elementwise", "int16"))
def _(g):
    a = g.input((1, 8, 8, 16), dtype="int16", name="a")
    b = g.input((1, 8, 8, 16), dtype="int16", name="b")
    g.output(g.mul(a, b))


@_net("leaky_relu_int16", tags=("activation", "int16"))
def _(g):
    """int16 LEAKY_RELU: Vela emits ELEMENTWISE lrelu without IFM2_PRECISION (issue 11)."""
    x = g.input((1, 8, 8, 16), dtype="int16", rms=2.0)
    g.output(g.leaky_relu(x, 0.2))


@_net("add_leaky_relu_int16", tags=("activation", "elementwise", "int16"))
def _(g):
    """An int16 ADD leaves IFM2 registers behind for the LEAKY_RELU that follows."""
    a = g.input((1, 8, 8, 16), dtype="int16", name="a")
    b = g.input((1, 8, 8, 16), dtype="int16", name="b")
    g.output(g.leaky_relu(g.add(a, b), 0.3))


@_net("maxpool_2x2_int16", tags=("pool", "int16"))
def _(g):
    x = g.input((1, 8, 8, 16), dtype="int16")
    g.output(g.pool(x, "MAX", 2, 2, "VALID"))


@_net("avgpool_3x3_int16", tags=("pool", "int16"))
def _(g):
    x = g.input((1, 8, 8, 16), dtype="int16")
    g.output(g.pool(x, "AVG", 3, 1, "SAME"))


@_net("tanh_int16", tags=("activation", "int16"))
def _(g):
    x = g.input((1, 8, 8, 16), dtype="int16", rms=2.5)
    g.output(g.tanh(x))


@_net("logistic_int16", tags=("activation", "int16"))
def _(g):
    x = g.input((1, 8, 8, 16), dtype="int16", rms=4.0)
    g.output(g.logistic(x))


@_net("softmax_int16", tags=("activation", "softmax", "int16"))
def _(g):
    x = g.input((1, 4, 4, 16), dtype="int16", rms=3.0)
    g.output(g.softmax(x))


# ---- more TFLite operators Vela 5.2 maps to the U85 NPU (session 6): one-input
# elementwise functions as LUTs, PRELU, ARG_MAX, slicing and packing, TRANSPOSE_CONV, kernels
# and pools beyond the NPU's limits (Vela decomposes them), int16 broadcasts
@_net("abs_8x8x16", tags=("elementwise", "int8"))
def _(g):
    x = g.input((1, 8, 8, 16))
    g.output(g.unary("ABS", x))


@_net("abs_int16", tags=("elementwise", "int16"))
def _(g):
    x = g.input((1, 8, 8, 16), dtype="int16")
    g.output(g.unary("ABS", x))


@_net("exp_int8", tags=("activation", "int8"))
def _(g):
    x = g.input((1, 4, 4, 16), rms=0.5)
    g.output(g.unary("EXP", x, scale=4.0 / 255, zp=-128))


@_net("exp_int16", tags=("activation", "int16"))
def _(g):
    x = g.input((1, 4, 4, 16), dtype="int16", scale=4.0 / 32768)
    g.output(g.unary("EXP", x, scale=60.0 / 32767, zp=0))


@_net("log_int8", tags=("activation", "int8"))
def _(g):
    x = g.input((1, 4, 4, 16), scale=0.05, zp=-128)
    g.output(g.unary("LOG", x, scale=0.05, zp=40))


@_net("rsqrt_int8", tags=("activation", "int8"))
def _(g):
    x = g.input((1, 4, 4, 16), scale=0.02, zp=-128)
    g.output(g.unary("RSQRT", x, scale=0.1, zp=-100))


@_net("leaky_relu_neg_alpha", tags=("activation", "int8"))
def _(g):
    x = g.input((1, 8, 8, 16))
    g.output(g.leaky_relu(x, -0.3))


@_net("prelu_c16", tags=("activation", "int8"))
def _(g):
    x = g.input((1, 8, 8, 16))
    g.output(g.prelu(x, g.rng.integers(-50, 60, 16), 0.01))


@_net("squared_difference_8x8x16", tags=("elementwise", "int8"))
def _(g):
    a = g.input((1, 8, 8, 16), name="a")
    b = g.input((1, 8, 8, 16), name="b")
    g.output(g.squared_difference(a, b))


@_net("argmax_c16", tags=("reduce", "int8"))
def _(g):
    x = g.input((1, 4, 4, 16))
    g.output(g.arg_max(x, 3))


@_net("reduce_max_hw", tags=("reduce", "int8"))
def _(g):
    x = g.input((1, 8, 8, 16))
    g.output(g.reduce_max(x, (1, 2)))


@_net("mean_hw_40x40", tags=("reduce", "int8"))
def _(g):
    x = g.input((1, 40, 40, 8))
    g.output(g.mean(x, (1, 2)))


@_net("mean_hw_int16", tags=("reduce", "int16"))
def _(g):
    x = g.input((1, 8, 8, 16), dtype="int16")
    g.output(g.mean(x, (1, 2)))


@_net("mirror_pad_reflect", tags=("pad", "int8"))
def _(g):
    x = g.input((1, 6, 6, 8))
    g.output(g.mirror_pad(x, [[0, 0], [2, 1], [1, 2], [0, 0]], "REFLECT"))


@_net("mirror_pad_symmetric", tags=("pad", "int8"))
def _(g):
    x = g.input((1, 6, 6, 8))
    g.output(g.mirror_pad(x, [[0, 0], [2, 1], [1, 2], [0, 0]], "SYMMETRIC"))


@_net("strided_slice_s2x3", tags=("slice", "int8"))
def _(g):
    x = g.input((1, 8, 10, 16))
    g.output(g.strided_slice(x, [0, 1, 2, 3], [1, 8, 10, 15], [1, 2, 3, 1]))


@_net("slice_5x6x9", tags=("slice", "int8"))
def _(g):
    x = g.input((1, 8, 10, 16))
    g.output(g.slice(x, [0, 1, 2, 3], [1, 5, 6, 9]))


@_net("split_c2_add", tags=("slice", "elementwise", "int8"))
def _(g):
    x = g.input((1, 8, 8, 16))
    g.output(g.add(*g.split(x, 3, (8, 8))))


@_net("split_v_3way", tags=("slice", "int8"))
def _(g):
    x = g.input((1, 8, 8, 16))
    g.output(*g.split(x, 3, (3, 5, 8)))


@_net("pack_axis1", tags=("concat", "int8"))
def _(g):
    a = g.input((1, 4, 16), name="a")
    b = g.input((1, 4, 16), name="b", scale=a.s, zp=int(a.zp[0]))
    g.output(g.pack([a, b], 1))


@_net("unpack_axis1", tags=("slice", "int8"))
def _(g):
    x = g.input((1, 3, 4, 16))
    g.output(*g.unpack(x, 1))


@_net("transpose_conv_s2_same", tags=("transpose_conv", "int8"))
def _(g):
    x = g.input((1, 4, 4, 8))
    g.output(g.transpose_conv(x, 12, 3, 2, "SAME"))


@_net("transpose_conv_s3_valid", tags=("transpose_conv", "int8"))
def _(g):
    x = g.input((1, 4, 4, 8))
    g.output(g.transpose_conv(x, 5, 3, 3, "VALID"))


@_net("transpose_conv_int16", tags=("transpose_conv", "int16"))
def _(g):
    x = g.input((1, 5, 5, 8), dtype="int16")
    g.output(g.transpose_conv(x, 6, 4, 2, "SAME"))


@_net("conv2d_9x9_same", tags=("conv", "int8"))
def _(g):
    x = g.input((1, 20, 20, 5))
    g.output(g.conv2d(x, 11, 9, 1, "SAME"))


@_net("conv2d_5x5_s4_valid", tags=("conv", "int8"))
def _(g):
    x = g.input((1, 21, 21, 6))
    g.output(g.conv2d(x, 8, 5, 4, "VALID"))


@_net("conv2d_3x3_dil4", tags=("conv", "int8"))
def _(g):
    x = g.input((1, 20, 20, 6))
    g.output(g.conv2d(x, 8, 3, 1, "SAME", dilation=4))


@_net("dwconv_7x7_int16", tags=("depthwise", "int16"))
def _(g):
    x = g.input((1, 12, 12, 20), dtype="int16")
    g.output(g.depthwise(x, 7, 1, "SAME"))


@_net("maxpool_10x10_valid", tags=("pool", "int8"))
def _(g):
    x = g.input((1, 20, 20, 8))
    g.output(g.pool(x, "MAX", 10, 1, "VALID"))


@_net("avgpool_8x8_s3_same", tags=("pool", "int8"))
def _(g):
    x = g.input((1, 20, 20, 8))
    g.output(g.pool(x, "AVG", 8, 3, "SAME"))


@_net("avgpool_12x12_valid", tags=("pool", "int8"))
def _(g):
    x = g.input((1, 20, 20, 8))
    g.output(g.pool(x, "AVG", 12, 2, "VALID"))


@_net("mul_int16_bcast", tags=("elementwise", "int16"))
def _(g):
    a = g.input((1, 8, 8, 16), dtype="int16", name="a")
    b = g.input((1, 1, 1, 16), dtype="int16", name="b")
    g.output(g.mul(a, b))


@_net("sub_int16_bcast_row", tags=("elementwise", "int16"))
def _(g):
    a = g.input((1, 8, 8, 16), dtype="int16", name="a")
    b = g.input((1, 1, 8, 16), dtype="int16", name="b")
    g.output(g.sub(a, b))


@_net("maximum_int16", tags=("elementwise", "int16"))
def _(g):
    a = g.input((1, 8, 8, 16), dtype="int16", name="a")
    b = g.input((1, 8, 8, 16), dtype="int16", name="b", scale=a.s)
    g.output(g.maximum(a, b))


@_net("resize_bilinear_halfpix_int16", tags=("resize", "int16"))
def _(g):
    x = g.input((1, 4, 4, 8), dtype="int16")
    g.output(g.resize(x, (8, 8), "BILINEAR", half_pixel=True))


# ---- multi-layer networks
@_net("mbv2_block", tags=("network", "int8"))
def _(g):
    """MobileNetV2 inverted residual: 1x1 expand RELU6 -> dw 3x3 RELU6 -> 1x1 project -> +x."""
    x = g.input((1, 12, 12, 16))
    e = g.conv2d(x, 48, 1, 1, "VALID", "RELU6", target=3.0, name="expand")
    d = g.depthwise(e, 3, 1, "SAME", act="RELU6", target=3.0, name="dw")
    p = g.conv2d(d, 16, 1, 1, "VALID", name="project")
    g.output(g.add(x, p, name="residual"))


@_net("classifier", tags=("network", "int8"))
def _(g):
    """conv s2 RELU -> conv RELU6 -> maxpool -> mean(HW) -> FC -> softmax."""
    x = g.input((1, 20, 20, 3))
    c1 = g.conv2d(x, 16, 3, 2, "SAME", "RELU", name="conv1")
    c2 = g.conv2d(c1, 32, 3, 1, "SAME", "RELU6", target=3.0, name="conv2")
    p = g.pool(c2, "MAX", 2, 2, "VALID", name="pool")
    m = g.mean(p, (1, 2), False, name="gap")
    f = g.fully_connected(m, 10, target=1.5, name="logits")
    g.output(g.softmax(f))


@_net("unet_mini", tags=("network", "int8"))
def _(g):
    """conv s2 -> conv -> resize nearest x2 -> concat(skip) -> conv -> hard-swish."""
    x = g.input((1, 16, 16, 8))
    s = g.conv2d(x, 16, 3, 1, "SAME", "RELU", name="enc0")
    d = g.conv2d(s, 24, 3, 2, "SAME", "RELU", name="enc1")
    u = g.resize(d, (16, 16), "NEAREST", name="up")
    u2 = g.quantize(u, scale=s.s, zp=s.z, name="up_rq")
    c = g.concat([s, u2], 3, name="cat")
    y = g.conv2d(c, 8, 3, 1, "SAME", name="dec", target=2.0)
    g.output(g.hard_swish(y, name="hswish"))


@_net("sim_default", tags=("network", "int8"))
def _(g):
    """The default network of `make sim` (shipped in tests/data/): elementwise and pooling
    only and no chaining, so the RTL stand-in runs it too. add broadcast RELU ->
    maxpool 2x2 s2 -> avgpool 3x3 s1 SAME; sub of the two pools."""
    x = g.input((1, 16, 16, 16), name="x")
    b = g.input((1, 1, 1, 16), name="bias")
    a = g.add(x, b, act="RELU", name="add")
    p = g.pool(a, "MAX", 2, 2, "VALID", name="maxpool")
    q = g.pool(p, "AVG", 3, 1, "SAME", name="avgpool")
    g.output(q, g.sub(p, q, name="sub"))


@_net("int16_net", tags=("network", "int16"))
def _(g):
    """int16x8: conv -> dw -> add skip -> avgpool -> FC."""
    x = g.input((1, 10, 10, 8), dtype="int16")
    c = g.conv2d(x, 16, 3, 1, "SAME", "RELU", name="conv")
    d = g.depthwise(c, 3, 1, "SAME", name="dw")
    a = g.add(c, d, name="add")
    p = g.pool(a, "AVG", 2, 2, "VALID", name="pool")
    g.output(g.fully_connected(p, 10, name="fc"))


# =========================================================================== names
def _names(npu_only: bool):
    return [n for n, e in MODELS.items() if e.npu or not npu_only]


NAMES = _names(True)
ALL_NAMES = _names(False)
CPU_NAMES = [n for n in ALL_NAMES if n not in NAMES]


def names(tag=None, npu_only=True):
    """Model names carrying ``tag`` (e.g. 'conv', 'int16', 'network'); all if tag is None."""
    src = NAMES if npu_only else ALL_NAMES
    return [n for n in src if tag is None or tag in MODELS[n].tags]


# =========================================================================== benchmarks
# Registered after NAMES/ALL_NAMES/CPU_NAMES are computed, so the bench models stay out of
# the default test lists (test_nets.py parametrises over those; this net alone takes ~0.6 s
# to compile and ~0.1 s on LiteRT, and far longer on the TLM).  `make bench` (tools/bench.py)
# uses them; nets.build/compiled/reference work with any MODELS key.
def _make_divisible8(v: float) -> int:
    """MobileNet channel rounding: nearest multiple of 8, never more than 10 % below v."""
    n = max(8, int(v + 4) // 8 * 8)
    return n + 8 if n < 0.9 * v else n


# MobileNetV2 (t = expansion, c = output channels, n = repeats, s = first stride)
_MBV2_BLOCKS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1))


@_net("mobilenet_v2_0p5_224", tags=("bench", "network", "int8"),
      note="MobileNetV2 alpha=0.5, 224x224x3 -> 1000 logits; 97.13 M conv/dw/FC MACs "
           "(vela reports 97.19 M: it also counts the 7x7 average pool)")
def _(g):
    """MobileNetV2-style int8 classifier: stem conv 3x3 s2 RELU6, 17 inverted-residual blocks
    (1x1 expand RELU6 -> dw 3x3 RELU6 -> 1x1 project, ADD skip where shapes match; stride-2
    stages at 112, 56, 28, 14 -> 7), 1x1 head conv to 1280 RELU6, global average pool
    (AVERAGE_POOL_2D 7x7), FC 1000.  No softmax: the logits are compared bit for bit."""
    alpha = 0.5
    x = g.input((1, 224, 224, 3))
    x = g.conv2d(x, _make_divisible8(32 * alpha), 3, 2, "SAME", "RELU6", target=3.0, name="stem")
    blk = 0
    for t, c, n, s in _MBV2_BLOCKS:
        cout = _make_divisible8(c * alpha)
        for i in range(n):
            cin, stride = x.shape[3], (s if i == 0 else 1)
            h = x
            if t != 1:
                h = g.conv2d(h, cin * t, 1, 1, "VALID", "RELU6", target=3.0, name=f"b{blk}_expand")
            h = g.depthwise(h, 3, stride, "SAME", act="RELU6", target=3.0, name=f"b{blk}_dw")
            h = g.conv2d(h, cout, 1, 1, "VALID", None, target=1.0, name=f"b{blk}_project")
            if stride == 1 and cin == cout:
                h = g.add(x, h, name=f"b{blk}_add")
            x = h
            blk += 1
    x = g.conv2d(x, 1280, 1, 1, "VALID", "RELU6", target=3.0, name="head")
    x = g.pool(x, "AVG", x.shape[1], 1, "VALID", name="gap")
    g.output(g.fully_connected(x, 1000, target=2.0, name="logits"))


# The bench-throughput networks of `make bench` (tools/bench.py section 4): operations the RTL
# stand-in runs, large enough to move more than 50,000 AXI beats through the pins (the catalog's
# pin-level nets move at most ~5,500). Out of NAMES, so `make test` never simulates them.
@_net("sim_bench_conv", tags=("sim_bench", "conv", "int8"),
      note="CONV 1x1 16 -> 16 channels RELU6 on 1x160x160x16 int8: > 50,000 AXI beats, bus-bound")
def _(g):
    x = g.input((1, 160, 160, 16), rms=3.0)
    g.output(g.conv2d(x, 16, 1, 1, "VALID", "RELU6", name="conv1x1"))


BENCH_NAMES = [n for n, e in MODELS.items() if "bench" in e.tags]


# Networks whose Vela stream and LiteRT BUILTIN_REF disagree, the TLM following the TRM
# (README, "Bit-exactness vs LiteRT"): name -> why. Tests comparing with LiteRT skip the
# comparison for these only (tests/ethos_u85/test_ops_resize.py computes the resize by hand).
VELA_VS_LITERT = {
    "resize_nearest_8x8to12x12": "Vela compiles a nearest resize without half-pixel centres to the stream "
                                 "with them (offset -1): the TLM gives TFLite's half-pixel result",
    "fc_64x32_int16": "LiteRT's BUILTIN_REF int16 FULLY_CONNECTED rescales with the 32-bit double-rounding "
                      "MultiplyByQuantizedMultiplier (31-bit multiplier); Vela programs acc48 with the 15-bit "
                      "reduced multiplier and natural rounding (TFLite's int64 formula, as for int16 CONV_2D). "
                      "The TLM output equals the int64 formula bit for bit; 5/32 outputs differ by 1 from LiteRT.",
}
