"""From a float or uint8-quantized layer to KPU layer arguments and tables, the way the
Kendryte Model Compiler does it (EXT MC ``layer_list_to_k210_layer.py``, nncase; digest §3.3).
Own code from those facts.

Quantisation (MC): input real = sx*code + bx with bx = xmin, sx = (xmax - xmin)/255 (the
range is widened to contain 0, so ``pad_value`` = round(-bx/sx) is the code of real 0);
weights real = sw*code + bw with bw = wmin, sw = (wmax - wmin)/w_qmax (255 for 8-bit, 65535
for 16-bit weights). Then

    sum x_real*w_real = sx*sw*(sum x*w + (bw/sw)*sum x + (bx/sx)*sum w + n*(bw/sw)*(bx/sx))

so ``shr_x, arg_x = pow_next_log_of_2(bw/sw)``, ``shr_w, arg_w = pow_next_log_of_2(bx/sx)``
and ``arg_add = k*k*(bw/sw)*(bx/sx)`` (the KPU multiplies it by the input channels). Batch
norm (or the bias) folds into v = M*out_real: ``norm_shift, norm_mul =
pow_next_log_of_2(M*scale*sx*sw)``, ``norm_add = M*shift``. The MC uses the constant
M = 1e8/3 ("hotfix magic"); here M is a power of two chosen per layer so that v stays inside
36 bits and norm_add inside 32 bits (``post_scale=`` gives a fixed M, e.g. ``MC_MAGIC``).
The activation table (MC): segment 0 starts at -2**35 with output code 0; the others start
at breakpoints in real x (evenly spaced output values plus the function's kinks), with
x_start = x*M corrected for the rounding of the output code, slope y_mul/2**shift_number
with y_mul in [2**14, 2**15), result_bias = the output code at the breakpoint.
Weights are stored O, I, H, W (depthwise C, 1, H, W), uint8 or little-endian uint16.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import datapath
from .layout import Fmap
from .registers import (ACT_SEGMENTS, POOL_BY_NAME, POOL_TYPES, LayerArgument,
                        encode_activation, encode_batchnorm)

MC_MAGIC = 100000000.0 / 3            # the MC's post-scale ("hotfix_magic_1")
LOAD_LIMIT = {True: 30 * 1024, False: 60 * 1024}   # bytes per weight load (EXT nncase v0.1)
ACTIVATIONS = ("linear", "relu", "relu6", "leaky")
X_START_MIN = -(1 << 35)                           # segment 0 (EXT: 0x800000000)
X_START_MAX = (1 << 35) - 1                        # unused segments never apply
V_BITS = 34                                        # headroom below the 36-bit ALU


def pow_next_log_of_2(value: float, bound_shift: int = 24, max_shift: int = 15) -> tuple:
    """(shift, mul): double `value` while it stays inside +-2**(bound_shift-2), is not 0 and
    the shift is below `max_shift` (EXT MC); mul = round(value * 2**shift), kept in
    `bound_shift` signed bits."""
    shift, v = 0, float(value)
    lim = 1 << (bound_shift - 2)
    while -lim <= v < lim and v != 0 and shift < max_shift:
        v *= 2
        shift += 1
    top = (1 << (bound_shift - 1)) - 1
    return shift, int(max(-top - 1, min(top, round(v))))


def weight_loads(out_ch: int, per_channel: int, eight_bit: bool, depthwise: bool) -> tuple:
    """(o_ch_num_coef + 1, load_time + 1, para_size) (EXT nncase codegen)."""
    if depthwise:
        return out_ch, 1, out_ch * per_channel
    coef = max(1, min(out_ch, LOAD_LIMIT[eight_bit] // per_channel))
    return coef, -(-out_ch // coef), coef * per_channel


def geometry(in_shape: tuple, out_ch: int, kernel: int, depthwise: bool, pool_type: int,
             eight_bit: bool, first_stride: int = 0, src: int = 0, dst: int = 0) -> dict:
    """Every layer-argument field that follows from the shapes (seed and MC formulas);
    the arithmetic fields and table addresses are left 0."""
    c, h, w = in_shape
    stride = 2 if first_stride else 1
    ho, wo = datapath.pool_output_size(-(-h // stride), -(-w // stride), pool_type)
    if ho < 1 or wo < 1:
        raise ValueError(f"{POOL_TYPES[pool_type].name} of a {w}x{h} map leaves no output")
    si = Fmap.packed(src, c, h, w)
    so = Fmap.packed(dst, out_ch, ho, wo)
    per = kernel * kernel * (1 if depthwise else c) * (1 if eight_bit else 2)
    coef, loads, para = weight_loads(out_ch, per, eight_bit, depthwise)
    return dict(
        depth_wise_layer=int(depthwise), image_src_addr=src, image_dst_addr=dst,
        i_ch_num=c - 1, o_ch_num=out_ch - 1, o_ch_num_coef=coef - 1,
        i_row_wid=w - 1, i_col_high=h - 1, o_row_wid=wo - 1, o_col_high=ho - 1,
        kernel_type={1: 0, 3: 1}[kernel], pool_type=pool_type, first_stride=first_stride,
        load_para=1, dma_burst_size=15, load_coor=1, load_time=loads - 1, para_size=para,
        channel_switch_addr=si.channel_switch, row_switch_addr=si.row_switch,
        coef_group=si.group, load_act=1, wb_channel_switch_addr=so.channel_switch,
        wb_row_switch_addr=so.row_switch, wb_group=so.group,
        channel_byte_num=ho * wo - 1, dma_total_byte=ho * wo * out_ch - 1)


def output_bytes(shape: tuple) -> int:
    """img_output_size: KPU RAM bytes of a packed map [C, H, W]."""
    c, h, w = shape
    return Fmap.packed(0, c, h, w).nbytes


@dataclass
class K210Layer:
    """A converted layer: its argument (addresses still 0) and the three tables."""
    la: LayerArgument
    weights: bytes
    bn: np.ndarray                  # uint64 per output channel
    act: np.ndarray                 # uint64 [18]
    eight_bit: bool
    in_shape: tuple
    out_shape: tuple
    x_scale: float = 1.0            # input real = x_scale*code + x_bias
    x_bias: float = 0.0
    y_scale: float = 1.0            # output real = y_scale*code + y_bias
    y_bias: float = 0.0
    post_scale: float = 1.0
    info: dict = field(default_factory=dict)

    def placed(self, src: int, dst: int, weights_addr: int, bn_addr: int, act_addr: int,
               int_en: int = 0, send_data_out: int = 0) -> LayerArgument:
        """The argument with feature-map lines (64-byte units) and table addresses."""
        return self.la.replace(image_src_addr=src, image_dst_addr=dst, para_start_addr=weights_addr,
                               bwsx_base_addr=bn_addr, active_addr=act_addr, int_en=int_en,
                               send_data_out=send_data_out)


# ---- activation functions over real values ------------------------------------------------
def act_fn(kind: str, x: np.ndarray, slope: float = 0.1) -> np.ndarray:
    if kind == "linear":
        return x
    if kind == "relu":
        return np.maximum(x, 0)
    if kind == "relu6":
        return np.clip(x, 0, 6)
    if kind == "leaky":
        return np.where(x >= 0, x, slope * x)
    raise ValueError(f"activation {kind!r} (one of {', '.join(ACTIVATIONS)})")


def _inverse(kind: str, y: float, slope: float) -> "float | None":
    """The smallest x with f(x) = y on the rising part, or None."""
    if kind == "linear":
        return y
    if kind == "leaky":
        return y if y >= 0 else y / slope
    if y < 0 or (kind == "relu6" and y > 6.0):
        return None
    return y


def _breakpoints(kind: str, ymin: float, ymax: float, slope: float) -> list:
    """(x, f(x), slope to the next breakpoint) of the pieces above segment 0, ascending:
    evenly spaced output values from ymin (MC) plus the function's kinks, at most 15."""
    ys = [ymin + i * (ymax - ymin) / (ACT_SEGMENTS - 1) for i in range(ACT_SEGMENTS - 1)]
    kinks = {"linear": [], "relu": [0.0], "relu6": [0.0, 6.0], "leaky": [0.0]}[kind]
    lo = _inverse(kind, max(ymin, 0.0) if kind in ("relu", "relu6") else ymin, slope)
    xs = sorted({x for x in (_inverse(kind, y, slope) for y in ys) if x is not None}
                | {k for k in kinks if lo is not None and k >= lo})
    while len(xs) > ACT_SEGMENTS - 1:                   # keep the kinks
        del xs[next(j for j in range(1, len(xs)) if xs[j] not in kinks)]
    f = [float(act_fn(kind, np.array([x]), slope)[0]) for x in xs + [xs[-1] + 1.0]]
    nxt = xs[1:] + [xs[-1] + 1.0]
    return [(x, f[i], (f[i + 1] - f[i]) / (nxt[i] - x)) for i, x in enumerate(xs)]


def activation_table(kind: str, ymin: float, ymax: float, post: float, slope: float = 0.1) -> np.ndarray:
    """The 18 words of the activation table for output range [ymin, ymax] (real) and the
    batch-norm post-scale `post` (v = post * real)."""
    ysc = (ymax - ymin) / 255.0
    xs, ym, sh, bias = [X_START_MIN], [0], [0], [0]
    for x, y, d in _breakpoints(kind, ymin, ymax, slope):
        code = (y - ymin) / ysc
        b = int(min(255, max(0, round(code))))
        dcode = d / ysc / post                              # output codes per unit of v
        if dcode > 0:
            s = 0
            while dcode * (1 << s) < (1 << 14) and s < 255:
                s += 1
            m = int(min(32767, round(dcode * (1 << s))))
            xstart = x * post - (code - b) / dcode
        else:
            s, m, xstart = 0, 0, x * post
        xs.append(int(max(X_START_MIN + 1, min(X_START_MAX, math.floor(xstart)))))
        ym.append(m)
        sh.append(s)
        bias.append(b)
    while len(xs) < ACT_SEGMENTS:
        xs.append(X_START_MAX)
        ym.append(0)
        sh.append(0)
        bias.append(255)
    return encode_activation(xs, ym, sh, bias)


# ---- the core --------------------------------------------------------------------------------
def _quantize(codes: np.ndarray, sw: float, bw: float, sx: float, bx: float, scale: np.ndarray,
              shift: np.ndarray, activation: str, ymin: float, ymax: float, pre_abs: float,
              in_shape: tuple, kernel: int, depthwise: bool, pool: str, eight_bit: bool,
              post_scale: "float | None", slope: float) -> K210Layer:
    out_ch = codes.shape[0]
    pool_type = POOL_BY_NAME[pool].code if isinstance(pool, str) else int(pool)
    geo = geometry(in_shape, out_ch, kernel, depthwise, pool_type, eight_bit)
    shr_x, arg_x = pow_next_log_of_2(bw / sw)
    shr_w, arg_w = pow_next_log_of_2(bx / sx)
    arg_add = int(round(kernel * kernel * (bw / sw) * (bx / sx)))
    pad_value = int(min(255, max(0, round(-bx / sx))))
    ratio = np.abs(scale) * sx * sw
    if post_scale is None:
        lim = [2.0 ** V_BITS / max(pre_abs, 1e-30), 2.0 ** 30 / max(float(np.max(np.abs(shift))), 1e-30),
               2.0 ** 22 / max(float(np.max(ratio)), 1e-30)]
        post_scale = 2.0 ** math.floor(math.log2(min(lim)))
    bnm, bns = [], []
    for r in scale * sx * sw * post_scale:
        s, m = pow_next_log_of_2(r)
        bnm.append(m)
        bns.append(s)
    bna = np.round(shift * post_scale).astype(np.int64)
    la = LayerArgument.from_fields(geo, pad_value=pad_value, arg_x=arg_x, shr_x=shr_x,
                                   arg_w=arg_w, shr_w=shr_w, arg_add=arg_add)
    wdt = "<u1" if eight_bit else "<u2"
    ho, wo = la.o_col_high + 1, la.o_row_wid + 1
    return K210Layer(
        la=la, weights=codes.astype(wdt).tobytes(), bn=encode_batchnorm(bnm, bns, bna),
        act=activation_table(activation, ymin, ymax, post_scale, slope), eight_bit=eight_bit,
        in_shape=tuple(in_shape), out_shape=(out_ch, ho, wo), x_scale=sx, x_bias=bx,
        y_scale=(ymax - ymin) / 255.0, y_bias=ymin, post_scale=post_scale,
        info=dict(activation=activation, pool=pool_type, sw=sw, bw=bw, slope=slope))


def float_conv(x: np.ndarray, w: np.ndarray, depthwise: bool) -> np.ndarray:
    """Real SAME convolution (zero padding), stride 1: x [C, H, W], w [O, C|1, k, k]."""
    k = w.shape[-1]
    p = (k - 1) // 2
    c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (p, p), (p, p)))
    out = np.zeros((w.shape[0], h, wd))
    for ky in range(k):
        for kx in range(k):
            tap = xp[:, ky:ky + h, kx:kx + wd]
            if depthwise:
                out += w[:, 0, ky, kx][:, None, None] * tap
            else:
                out += np.tensordot(w[:, :, ky, kx], tap, axes=(1, 0))
    return out


def from_float(weights: np.ndarray, x_cal: np.ndarray, *, bias=None, bn=None,
               activation: str = "relu", pool: "str | int" = "bypass", eight_bit: bool = True,
               depthwise: bool = False, input_range: "tuple | None" = None,
               output_range: "tuple | None" = None, post_scale: "float | None" = None,
               slope: float = 0.1) -> K210Layer:
    """Convert a float layer. weights [O, C, k, k] (depthwise [C, 1, k, k]); x_cal: a float
    calibration input [C, H, W] (gives the input, pre-activation and output ranges like the
    MC's dataset); bn: dict(mean, var, gamma, beta, eps) per output channel; bias: per
    output channel (a layer without BN: mean 0, var 1, gamma 1, beta = bias)."""
    w = np.asarray(weights, np.float64)
    o = w.shape[0]
    x_cal = np.asarray(x_cal, np.float64)
    xmin, xmax = input_range if input_range is not None else (float(x_cal.min()), float(x_cal.max()))
    xmin, xmax = min(xmin, 0.0), max(xmax, 0.0)
    if xmax == xmin:
        xmax = xmin + 1.0
    sx, bx = (xmax - xmin) / 255.0, xmin
    qmax = 255 if eight_bit else 65535
    wmin, wmax = float(w.min()), float(w.max())
    if wmax == wmin:
        wmax = wmin + 1.0
    sw, bw = (wmax - wmin) / qmax, wmin
    codes = np.clip(np.round((w - bw) / sw), 0, qmax)
    b = np.zeros(o) if bias is None else np.asarray(bias, np.float64)
    if bn is None:
        scale, shift = np.ones(o), b
    else:
        inv = np.asarray(bn["gamma"]) / np.sqrt(np.asarray(bn["var"]) + bn.get("eps", 1e-5))
        scale, shift = inv, np.asarray(bn["beta"]) + (b - np.asarray(bn["mean"])) * inv
    xq = np.clip(np.round((x_cal - bx) / sx), 0, 255) * sx + bx
    pre = float_conv(xq, codes * sw + bw, depthwise) * scale[:, None, None] + shift[:, None, None]
    y = act_fn(activation, pre, slope)
    ymin, ymax = output_range if output_range is not None else (float(y.min()), float(y.max()))
    ymin, ymax = min(ymin, 0.0), max(ymax, 0.0)
    if ymax == ymin:
        ymax = ymin + 1.0
    pre_abs = 2.0 * float(np.max(np.abs(pre)))
    return _quantize(codes, sw, bw, sx, bx, scale, shift, activation, ymin, ymax, pre_abs,
                     x_cal.shape, w.shape[-1], depthwise, pool, eight_bit, post_scale, slope)


def from_uint8(weights_q: np.ndarray, w_scale: float, w_zero_point: int, x_scale: float,
               x_zero_point: int, y_scale: float, y_zero_point: int, in_shape: tuple, *,
               bias_q=None, activation: str = "linear", pool: "str | int" = "bypass",
               depthwise: bool = False, eight_bit: bool = True,
               post_scale: "float | None" = None) -> K210Layer:
    """Convert a uint8-quantized (TFLite-style, real = scale*(q - zero_point)) layer: weights
    [O, C, k, k] uint8, int32 bias in units of x_scale*w_scale. 16-bit mode stores the same
    codes as uint16."""
    codes = np.asarray(weights_q, np.int64)
    o, k = codes.shape[0], codes.shape[-1]
    sw, bw = float(w_scale), -float(w_scale) * w_zero_point
    sx, bx = float(x_scale), -float(x_scale) * x_zero_point
    b = np.zeros(o) if bias_q is None else np.asarray(bias_q, np.float64) * sx * sw
    ymin, ymax = -y_zero_point * y_scale, (255 - y_zero_point) * y_scale
    taps = k * k * (1 if depthwise else in_shape[0])
    pre_abs = 2.0 * (taps * 255.0 * max(abs(sw * 255 + bw), abs(bw)) * max(abs(bx), abs(sx * 255 + bx))
                     + float(np.max(np.abs(b))))
    return _quantize(codes, sw, bw, sx, bx, np.ones(o), b, activation, ymin, ymax, pre_abs,
                     tuple(in_shape), k, depthwise, pool, eight_bit, post_scale, 0.1)


def float_reference(layer_w: np.ndarray, x: np.ndarray, *, bias=None, bn=None, activation="relu",
                    pool="bypass", depthwise=False, slope=0.1) -> np.ndarray:
    """The float model of the layer (for checking a conversion): real output [O, Ho, Wo]."""
    w = np.asarray(layer_w, np.float64)
    o = w.shape[0]
    b = np.zeros(o) if bias is None else np.asarray(bias, np.float64)
    if bn is None:
        scale, shift = np.ones(o), b
    else:
        inv = np.asarray(bn["gamma"]) / np.sqrt(np.asarray(bn["var"]) + bn.get("eps", 1e-5))
        scale, shift = inv, np.asarray(bn["beta"]) + (b - np.asarray(bn["mean"])) * inv
    y = act_fn(activation, float_conv(np.asarray(x, np.float64), w, depthwise)
               * scale[:, None, None] + shift[:, None, None], slope)
    p = POOL_TYPES[POOL_BY_NAME[pool].code if isinstance(pool, str) else int(pool)]
    if p.kind == "bypass":
        return y
    c, h, wd = y.shape
    ho, wo = h // p.stride, wd // p.stride
    taps = []
    for dy in range(p.size):
        for dx in range(p.size):
            if p.kind == "select" and (dy, dx) != p.offset:
                continue
            ry = np.minimum(np.arange(ho) * p.stride + dy, h - 1)
            rx = np.minimum(np.arange(wo) * p.stride + dx, wd - 1)
            taps.append(y[:, ry][:, :, rx])
    t = np.stack(taps)
    return t.max(axis=0) if p.kind == "max" else (t.mean(axis=0) if p.kind == "mean" else t[0])


def random_network(shape: tuple, spec, *, eight_bit: bool = True, seed: int = 0) -> tuple:
    """Random float layers converted one after another, each calibrated on the float output of
    the one before: spec rows (depthwise, kernel, out_ch, activation, pool), input `shape`
    [C, H, W] uniform in [-1, 1]. Returns (layers, the input quantised as layer 0 expects)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, shape)
    layers, cur, rin = [], x, None
    for dw, k, oc, act, pool in spec:
        oc = cur.shape[0] if dw else oc
        w = rng.normal(0, 0.5, (oc, 1 if dw else cur.shape[0], k, k))
        b = rng.normal(0, 0.2, oc)
        layer = from_float(w, cur, bias=b, activation=act, pool=pool, eight_bit=eight_bit,
                           depthwise=dw, input_range=rin)
        layers.append(layer)
        cur = float_reference(w, cur, bias=b, activation=act, pool=pool, depthwise=dw)
        rin = (layer.y_bias, layer.y_bias + 255 * layer.y_scale)
    xq = np.clip(np.round((x - layers[0].x_bias) / layers[0].x_scale), 0, 255).astype(np.uint8)
    return layers, xq
