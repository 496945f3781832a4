"""A small TFLite graph builder that writes quantised models without TensorFlow.

The flatbuffer writer uses the generated schema modules shipped in the Vela wheel
(``ethosu.vela.tflite``).  On top of it, :class:`Graph` offers one method per operator.
Each method creates the output tensor, picks its quantisation the way the TF converter
would (int8: per-tensor asymmetric activations, symmetric weights, int32 bias with scale
``in_scale * w_scale``; int16x8: symmetric int16 activations, int8 weights, int64 bias),
and returns a :class:`T` handle.

Quantisation ranges are chosen from a rough real-domain RMS estimate carried by every
activation tensor (``T.rms``).  This keeps accumulators in range and makes fused
activations (RELU6 etc.) actually clamp, without a float calibration pass.

Everything is driven by one ``numpy.random.Generator``, so a model is a pure function of
its seed.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field

import flatbuffers
import numpy as np
from ethosu.vela.tflite import (
    Buffer,
    BuiltinOperator,
    BuiltinOptions,
    Model,
    Operator,
    OperatorCode,
    QuantizationParameters,
    SubGraph,
    Tensor,
    TensorType,
)

# dtype name -> (TFLite TensorType, numpy dtype)
DTYPES = {
    "int8": (TensorType.TensorType.INT8, np.int8),
    "uint8": (TensorType.TensorType.UINT8, np.uint8),
    "int16": (TensorType.TensorType.INT16, np.int16),
    "int32": (TensorType.TensorType.INT32, np.int32),
    "int64": (TensorType.TensorType.INT64, np.int64),
    "float32": (TensorType.TensorType.FLOAT32, np.float32),
}

# Fused activation names -> ActivationFunctionType values
ACT = {None: 0, "NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3, "TANH": 4}

PADDING = {"SAME": 0, "VALID": 1}

# RMS of a uniform integer distribution over [-127, 127] (weights) and [-128, 127] (data)
_RMS_U8W = math.sqrt((255**2 - 1) / 12.0)
_RMS_I8 = math.sqrt((256**2 - 1) / 12.0)
_RMS_I16 = math.sqrt((65536**2 - 1) / 12.0)


@dataclass
class T:
    """Handle for a tensor in a :class:`Graph`."""

    idx: int
    name: str
    shape: tuple
    dtype: str
    scale: np.ndarray | None = None  # float32 array (per-tensor: length 1)
    zp: np.ndarray | None = None  # int64 array
    rms: float = 1.0  # rough real-domain RMS estimate (activations only)

    @property
    def s(self) -> float:
        return float(self.scale[0])

    @property
    def z(self) -> int:
        return int(self.zp[0])


@dataclass
class _Op:
    code: int
    inputs: list
    outputs: list
    opt_type: int
    opt_name: str | None
    opts: dict = field(default_factory=dict)


def _out_size(n: int, k: int, stride: int, padding: str, dilation: int = 1) -> int:
    if padding == "SAME":
        return -(-n // stride)
    eff = (k - 1) * dilation + 1
    return -(-(n - eff + 1) // stride)


class Graph:
    """A single-subgraph TFLite model under construction."""

    def __init__(self, seed: int, description: str = "ethos-u85-tlm test net"):
        self.rng = np.random.default_rng(seed)
        self.description = description
        self.tensors: list[dict] = []
        self.buffers: list[bytes] = [b""]  # buffer 0 is the empty sentinel
        self.ops: list[_Op] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        self._names: dict[str, int] = {}

    # ------------------------------------------------------------------ tensors
    def _uniq(self, name: str) -> str:
        n = self._names.get(name, 0)
        self._names[name] = n + 1
        return name if n == 0 else f"{name}_{n}"

    def tensor(self, name, shape, dtype, scale=None, zp=None, data=None, qdim=0, rms=1.0) -> T:
        name = self._uniq(name)
        buf = 0
        if data is not None:
            arr = np.ascontiguousarray(np.asarray(data, dtype=DTYPES[dtype][1]).reshape(shape))
            self.buffers.append(arr.tobytes())
            buf = len(self.buffers) - 1
        sc = None if scale is None else np.atleast_1d(np.asarray(scale, np.float32))
        zpa = None
        if sc is not None:
            zpa = np.zeros(len(sc), np.int64) if zp is None else np.atleast_1d(np.asarray(zp, np.int64))
            if len(zpa) == 1 and len(sc) > 1:
                zpa = np.repeat(zpa, len(sc))
        self.tensors.append(
            dict(name=name, shape=tuple(int(d) for d in shape), dtype=dtype, buffer=buf,
                 scale=sc, zp=zpa, qdim=int(qdim))
        )
        return T(len(self.tensors) - 1, name, tuple(int(d) for d in shape), dtype, sc, zpa, rms)

    def const(self, name, data, dtype="int32") -> T:
        data = np.asarray(data)
        return self.tensor(name, data.shape, dtype, data=data)

    def _rand_zp(self) -> int:
        z = int(self.rng.integers(1, 21))
        return z if self.rng.integers(0, 2) else -z

    def act_tensor(self, name, shape, dtype, rms, act=None, scale=None, zp=None) -> T:
        """A new activation tensor whose quantisation covers ~3 RMS (after ``act``)."""
        if scale is None:
            if dtype == "int16":
                zp = 0
                hi = {None: 3 * rms, "NONE": 3 * rms, "RELU": 3 * rms,
                      "RELU6": 6.5 if 3 * rms > 6 else 3 * rms,
                      "RELU_N1_TO_1": 1.25}[act]
                scale = hi / 32767.0
            else:
                if zp is None:
                    zp = self._rand_zp()
                if act in (None, "NONE", "TANH"):
                    scale = 6.0 * rms / 255.0
                elif act == "RELU":
                    scale = 3.0 * rms / (127 - zp)
                elif act == "RELU6":
                    scale = (6.5 if 3 * rms > 6 else 3 * rms) / (127 - zp)
                elif act == "RELU_N1_TO_1":
                    scale = 1.25 / (127 - zp)
                else:
                    raise ValueError(act)
        if zp is None:
            zp = 0
        out_rms = rms
        if act == "RELU":
            out_rms = rms * 0.71
        elif act == "RELU6":
            out_rms = min(rms * 0.71, 3.0)
        elif act == "RELU_N1_TO_1":
            out_rms = min(rms, 0.6)
        return self.tensor(name, shape, dtype, scale=scale, zp=zp, rms=out_rms)

    def input(self, shape, dtype="int8", name="input", scale=None, zp=None, rms=1.0) -> T:
        """A graph input; data is expected uniform over the dtype's range."""
        if dtype == "int16":
            scale = scale if scale is not None else rms * float(self.rng.uniform(0.8, 1.2)) / _RMS_I16
            zp = 0
        else:
            zp = self._rand_zp() if zp is None else zp
            scale = scale if scale is not None else rms * float(self.rng.uniform(0.8, 1.2)) / _RMS_I8
        t = self.tensor(name, shape, dtype, scale=scale, zp=zp)
        # real RMS of uniform data around its zero point
        span = _RMS_I16 if dtype == "int16" else _RMS_I8
        t.rms = float(scale * math.sqrt(span**2 + zp**2))
        self.inputs.append(t.idx)
        return t

    def output(self, *ts: T) -> None:
        for t in ts:
            self.outputs.append(t.idx)

    # ------------------------------------------------------------------ ops
    def op(self, opname: str, inputs, outputs, opt_name=None, **opts) -> None:
        code = getattr(BuiltinOperator.BuiltinOperator, opname)
        opt_type = getattr(BuiltinOptions.BuiltinOptions, opt_name) if opt_name else 0
        ins = [(-1 if t is None else t.idx) for t in inputs]
        self.ops.append(_Op(code, ins, [t.idx for t in outputs], opt_type, opt_name, opts))

    def _weights(self, shape):
        return self.rng.integers(-127, 128, size=shape).astype(np.int8)

    def _wscales(self, base, n, per_channel):
        if per_channel:
            return (base * self.rng.uniform(0.5, 1.5, size=n)).astype(np.float32)
        return np.array([base], np.float32)

    def _bias(self, name, n, in_scale, w_scales, target, dtype):
        ws = np.broadcast_to(w_scales, (n,)).astype(np.float64)
        real = self.rng.uniform(-0.5, 0.5, size=n) * target
        q = np.round(real / (in_scale * ws)).astype(np.int64)
        bscale = (in_scale * np.asarray(w_scales, np.float64)).astype(np.float32)
        if len(bscale) == 1 and n > 1:  # per-tensor weights -> per-tensor bias quantisation
            return self.tensor(name, (n,), dtype, scale=bscale, zp=0, data=q, qdim=0)
        return self.tensor(name, (n,), dtype, scale=bscale, zp=np.zeros(n, np.int64), data=q, qdim=0)

    def _acc_types(self, x: T):
        return ("int64", "int16") if x.dtype == "int16" else ("int32", "int8")

    def conv2d(self, x: T, cout, k=3, stride=1, padding="SAME", act=None, per_channel=True,
               dilation=1, target=1.0, name="conv", bias=True, out_scale=None, out_zp=None) -> T:
        kh, kw = (k, k) if isinstance(k, int) else k
        sh, sw = (stride, stride) if isinstance(stride, int) else stride
        dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
        n, h, w_, cin = x.shape
        K = kh * kw * cin
        base = target / (math.sqrt(K) * x.rms * _RMS_U8W)
        ws = self._wscales(base, cout, per_channel)
        w = self.tensor(f"{name}_w", (cout, kh, kw, cin), "int8", scale=ws, zp=0,
                        data=self._weights((cout, kh, kw, cin)), qdim=0)
        btype, _ = self._acc_types(x)
        b = self._bias(f"{name}_b", cout, x.s, ws, target, btype) if bias else None
        oh = _out_size(h, kh, sh, padding, dh)
        ow = _out_size(w_, kw, sw, padding, dw)
        y = self.act_tensor(name, (n, oh, ow, cout), x.dtype, target, act, out_scale, out_zp)
        self.op("CONV_2D", [x, w, b], [y], "Conv2DOptions", Padding=PADDING[padding],
                StrideW=sw, StrideH=sh, FusedActivationFunction=ACT[act],
                DilationWFactor=dw, DilationHFactor=dh)
        return y

    def depthwise(self, x: T, k=3, stride=1, padding="SAME", mult=1, act=None, per_channel=True,
                  dilation=1, target=1.0, name="dwconv") -> T:
        kh, kw = (k, k) if isinstance(k, int) else k
        sh, sw = (stride, stride) if isinstance(stride, int) else stride
        dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
        n, h, w_, cin = x.shape
        cout = cin * mult
        base = target / (math.sqrt(kh * kw) * x.rms * _RMS_U8W)
        ws = self._wscales(base, cout, per_channel)
        w = self.tensor(f"{name}_w", (1, kh, kw, cout), "int8", scale=ws, zp=0,
                        data=self._weights((1, kh, kw, cout)), qdim=3)
        btype, _ = self._acc_types(x)
        b = self._bias(f"{name}_b", cout, x.s, ws, target, btype)
        oh = _out_size(h, kh, sh, padding, dh)
        ow = _out_size(w_, kw, sw, padding, dw)
        y = self.act_tensor(name, (n, oh, ow, cout), x.dtype, target, act)
        self.op("DEPTHWISE_CONV_2D", [x, w, b], [y], "DepthwiseConv2DOptions",
                Padding=PADDING[padding], StrideW=sw, StrideH=sh, DepthMultiplier=mult,
                FusedActivationFunction=ACT[act], DilationWFactor=dw, DilationHFactor=dh)
        return y

    def fully_connected(self, x: T, units, act=None, per_channel=True, target=1.0, name="fc",
                        keep_num_dims=False, bias=True) -> T:
        cin = x.shape[-1] if len(x.shape) == 2 else int(np.prod(x.shape[1:]))
        batch = int(np.prod(x.shape)) // cin
        base = target / (math.sqrt(cin) * x.rms * _RMS_U8W)
        ws = self._wscales(base, units, per_channel)
        w = self.tensor(f"{name}_w", (units, cin), "int8", scale=ws, zp=0,
                        data=self._weights((units, cin)), qdim=0)
        btype, _ = self._acc_types(x)
        b = self._bias(f"{name}_b", units, x.s, ws, target, btype) if bias else None
        oshape = tuple(x.shape[:-1]) + (units,) if keep_num_dims else (batch, units)
        y = self.act_tensor(name, oshape, x.dtype, target, act)
        self.op("FULLY_CONNECTED", [x, w, b], [y], "FullyConnectedOptions",
                FusedActivationFunction=ACT[act], KeepNumDims=bool(keep_num_dims))
        return y

    def batch_matmul(self, a: T, b: T, name="batch_matmul") -> T:
        """BATCH_MATMUL of two activations (Vela: a matrix multiply, NPU_OP_CONV with
        weights_ifm2): [..., m, k] x [..., k, n] -> [..., m, n]."""
        k = a.shape[-1]
        y = self.act_tensor(name, tuple(a.shape[:-1]) + (b.shape[-1],), a.dtype,
                            math.sqrt(k) * a.rms * b.rms)
        self.op("BATCH_MATMUL", [a, b], [y], "BatchMatMulOptions", AdjX=False, AdjY=False)
        return y

    def _binary_shape(self, a: T, b: T):
        ra, rb = len(a.shape), len(b.shape)
        r = max(ra, rb)
        sa = (1,) * (r - ra) + tuple(a.shape)
        sb = (1,) * (r - rb) + tuple(b.shape)
        out = []
        for p, q in zip(sa, sb):
            if p != q and p != 1 and q != 1:
                raise ValueError(f"not broadcastable: {a.shape} {b.shape}")
            out.append(max(p, q))
        return tuple(out)

    def add(self, a: T, b: T, act=None, name="add") -> T:
        rms = math.sqrt(a.rms**2 + b.rms**2)
        y = self.act_tensor(name, self._binary_shape(a, b), a.dtype, rms, act)
        opts = dict(FusedActivationFunction=ACT[act])
        if a.dtype == "int16":
            opts["PotScaleInt16"] = False
        self.op("ADD", [a, b], [y], "AddOptions", **opts)
        return y

    def sub(self, a: T, b: T, act=None, name="sub") -> T:
        rms = math.sqrt(a.rms**2 + b.rms**2)
        y = self.act_tensor(name, self._binary_shape(a, b), a.dtype, rms, act)
        opts = dict(FusedActivationFunction=ACT[act])
        if a.dtype == "int16":
            opts["PotScaleInt16"] = False
        self.op("SUB", [a, b], [y], "SubOptions", **opts)
        return y

    def mul(self, a: T, b: T, act=None, name="mul") -> T:
        y = self.act_tensor(name, self._binary_shape(a, b), a.dtype, a.rms * b.rms, act)
        self.op("MUL", [a, b], [y], "MulOptions", FusedActivationFunction=ACT[act])
        return y

    def _same_quant(self, x: T, name, shape=None) -> T:
        return self.tensor(name, x.shape if shape is None else shape, x.dtype,
                           scale=x.scale, zp=x.zp, rms=x.rms)

    def maximum(self, a: T, b: T, name="maximum") -> T:
        y = self._same_quant(a, name, self._binary_shape(a, b))
        self.op("MAXIMUM", [a, b], [y])
        return y

    def minimum(self, a: T, b: T, name="minimum") -> T:
        y = self._same_quant(a, name, self._binary_shape(a, b))
        self.op("MINIMUM", [a, b], [y])
        return y

    def pool(self, x: T, kind="MAX", k=2, stride=2, padding="VALID", act=None, name=None) -> T:
        kh, kw = (k, k) if isinstance(k, int) else k
        sh, sw = (stride, stride) if isinstance(stride, int) else stride
        n, h, w_, c = x.shape
        oh, ow = _out_size(h, kh, sh, padding), _out_size(w_, kw, sw, padding)
        y = self._same_quant(x, name or f"{kind.lower()}pool", (n, oh, ow, c))
        if kind == "MAX":
            y.rms = x.rms * 1.3  # the max of a window is biased upwards
        opname = {"MAX": "MAX_POOL_2D", "AVG": "AVERAGE_POOL_2D"}[kind]
        self.op(opname, [x], [y], "Pool2DOptions", Padding=PADDING[padding], StrideW=sw,
                StrideH=sh, FilterWidth=kw, FilterHeight=kh, FusedActivationFunction=ACT[act])
        return y

    def concat(self, xs, axis=3, name="concat") -> T:
        shape = list(xs[0].shape)
        shape[axis] = sum(x.shape[axis] for x in xs)
        y = self._same_quant(xs[0], name, tuple(shape))
        self.op("CONCATENATION", list(xs), [y], "ConcatenationOptions", Axis=axis,
                FusedActivationFunction=0)
        return y

    def pad(self, x: T, paddings, name="pad") -> T:
        p = np.asarray(paddings, np.int32)
        shape = tuple(int(d + p[i, 0] + p[i, 1]) for i, d in enumerate(x.shape))
        pt = self.const(f"{name}_paddings", p, "int32")
        y = self._same_quant(x, name, shape)
        self.op("PAD", [x, pt], [y], "PadOptions")
        return y

    def transpose(self, x: T, perm, name="transpose") -> T:
        pt = self.const(f"{name}_perm", np.asarray(perm, np.int32), "int32")
        y = self._same_quant(x, name, tuple(x.shape[p] for p in perm))
        self.op("TRANSPOSE", [x, pt], [y], "TransposeOptions")
        return y

    def reshape(self, x: T, shape, name="reshape") -> T:
        st = self.const(f"{name}_shape", np.asarray(shape, np.int32), "int32")
        y = self._same_quant(x, name, tuple(shape))
        self.op("RESHAPE", [x, st], [y], "ReshapeOptions")
        return y

    def mean(self, x: T, axes=(1, 2), keep_dims=True, name="mean", requant=True) -> T:
        at = self.const(f"{name}_axes", np.asarray(axes, np.int32), "int32")
        shape = [d for d in x.shape]
        for a in axes:
            shape[a] = 1
        if not keep_dims:
            shape = [d for i, d in enumerate(shape) if i not in axes]
        n = int(np.prod([x.shape[a] for a in axes]))
        if requant:
            # activations after RELU have a large mean, so the mean keeps most of the RMS
            y = self.act_tensor(name, tuple(shape), x.dtype, max(x.rms / math.sqrt(n), x.rms * 0.6))
        else:
            y = self._same_quant(x, name, tuple(shape))
        self.op("MEAN", [x, at], [y], "ReducerOptions", KeepDims=bool(keep_dims))
        return y

    def resize(self, x: T, size, mode="NEAREST", align_corners=False, half_pixel=False,
               name=None) -> T:
        st = self.const(f"{name or 'resize'}_size", np.asarray(size, np.int32), "int32")
        n, _, _, c = x.shape
        y = self._same_quant(x, name or f"resize_{mode.lower()}", (n, size[0], size[1], c))
        if mode == "NEAREST":
            self.op("RESIZE_NEAREST_NEIGHBOR", [x, st], [y], "ResizeNearestNeighborOptions",
                    AlignCorners=bool(align_corners), HalfPixelCenters=bool(half_pixel))
        else:
            self.op("RESIZE_BILINEAR", [x, st], [y], "ResizeBilinearOptions",
                    AlignCorners=bool(align_corners), HalfPixelCenters=bool(half_pixel))
        return y

    def leaky_relu(self, x: T, alpha=0.1, name="leaky_relu") -> T:
        y = self.act_tensor(name, x.shape, x.dtype, x.rms)
        self.op("LEAKY_RELU", [x], [y], "LeakyReluOptions", Alpha=float(alpha))
        return y

    def hard_swish(self, x: T, name="hard_swish") -> T:
        y = self.act_tensor(name, x.shape, x.dtype, x.rms)
        self.op("HARD_SWISH", [x], [y], "HardSwishOptions")
        return y

    def relu(self, x: T, kind="RELU", name=None, requant=True) -> T:
        """Standalone RELU / RELU6 / RELU_N1_TO_1 / RELU_0_TO_1 (optionally requantising)."""
        if requant:
            act = {"RELU_0_TO_1": "RELU_N1_TO_1"}.get(kind, kind)
            y = self.act_tensor(name or kind.lower(), x.shape, x.dtype, x.rms, act)
        else:
            y = self._same_quant(x, name or kind.lower(), x.shape)
        self.op(kind, [x], [y])
        return y

    def tanh(self, x: T, name="tanh") -> T:
        if x.dtype == "int16":
            y = self.tensor(name, x.shape, "int16", scale=1.0 / 32768, zp=0, rms=0.6)
        else:
            y = self.tensor(name, x.shape, "int8", scale=1.0 / 128, zp=0, rms=0.6)
        self.op("TANH", [x], [y])
        return y

    def logistic(self, x: T, name="logistic") -> T:
        if x.dtype == "int16":
            y = self.tensor(name, x.shape, "int16", scale=1.0 / 32768, zp=0, rms=0.5)
        else:
            y = self.tensor(name, x.shape, "int8", scale=1.0 / 256, zp=-128, rms=0.5)
        self.op("LOGISTIC", [x], [y])
        return y

    def softmax(self, x: T, beta=1.0, name="softmax") -> T:
        if x.dtype == "int16":
            y = self.tensor(name, x.shape, "int16", scale=1.0 / 32768, zp=0, rms=0.3)
        else:
            y = self.tensor(name, x.shape, "int8", scale=1.0 / 256, zp=-128, rms=0.3)
        self.op("SOFTMAX", [x], [y], "SoftmaxOptions", Beta=float(beta))
        return y

    def quantize(self, x: T, scale=None, zp=None, name="requantize") -> T:
        if scale is None:
            scale = x.s * float(self.rng.uniform(0.6, 1.6))
        if zp is None:
            zp = self._rand_zp() if x.dtype != "int16" else 0
        y = self.tensor(name, x.shape, x.dtype, scale=scale, zp=zp, rms=x.rms)
        self.op("QUANTIZE", [x], [y])
        return y

    def unary(self, opname: str, x: T, scale=None, zp=None, rms=None, name=None) -> T:
        """A one-input elementwise operator (ABS, EXP, LOG, RSQRT, ...): the output quantised
        as given, else covering ~3x ``rms`` (default: the input's)."""
        y = self.act_tensor(name or opname.lower(), x.shape, x.dtype, x.rms if rms is None else rms,
                            scale=scale, zp=zp)
        self.op(opname, [x], [y])
        return y

    def prelu(self, x: T, alpha, alpha_scale, name="prelu") -> T:
        """PRELU with a constant per-channel alpha (quantised values, symmetric)."""
        a = self.tensor(f"{name}_alpha", (1, 1, x.shape[-1]), x.dtype, scale=alpha_scale, zp=0,
                        data=np.asarray(alpha).reshape(1, 1, -1))
        y = self.act_tensor(name, x.shape, x.dtype, x.rms)
        self.op("PRELU", [x, a], [y])
        return y

    def squared_difference(self, a: T, b: T, name="squared_difference") -> T:
        y = self.act_tensor(name, self._binary_shape(a, b), a.dtype, (a.rms + b.rms) ** 2 / 2)
        self.op("SQUARED_DIFFERENCE", [a, b], [y])
        return y

    def arg_max(self, x: T, axis: int, name="arg_max") -> T:
        """ARG_MAX along ``axis``, int32 indices."""
        at = self.const(f"{name}_axis", np.asarray([axis], np.int32), "int32")
        y = self.tensor(name, tuple(d for i, d in enumerate(x.shape) if i != axis), "int32")
        self.op("ARG_MAX", [x, at], [y], "ArgMaxOptions", OutputType=TensorType.TensorType.INT32)
        return y

    def mirror_pad(self, x: T, paddings, mode="REFLECT", name="mirror_pad") -> T:
        p = np.asarray(paddings, np.int32)
        shape = tuple(int(d + p[i, 0] + p[i, 1]) for i, d in enumerate(x.shape))
        pt = self.const(f"{name}_paddings", p, "int32")
        y = self._same_quant(x, name, shape)
        self.op("MIRROR_PAD", [x, pt], [y], "MirrorPadOptions", Mode={"REFLECT": 0, "SYMMETRIC": 1}[mode])
        return y

    def strided_slice(self, x: T, begin, end, strides, name="strided_slice") -> T:
        shape = tuple(len(range(b, e, s)) for b, e, s in zip(begin, end, strides))
        ins = [self.const(f"{name}_{k}", np.asarray(v, np.int32), "int32")
               for k, v in (("begin", begin), ("end", end), ("strides", strides))]
        y = self._same_quant(x, name, shape)
        self.op("STRIDED_SLICE", [x, *ins], [y], "StridedSliceOptions")
        return y

    def slice(self, x: T, begin, size, name="slice") -> T:
        ins = [self.const(f"{name}_{k}", np.asarray(v, np.int32), "int32")
               for k, v in (("begin", begin), ("size", size))]
        y = self._same_quant(x, name, tuple(size))
        self.op("SLICE", [x, *ins], [y], "SliceOptions")
        return y

    def split(self, x: T, axis: int, sizes, name="split") -> list:
        """SPLIT (equal ``sizes``) or SPLIT_V along ``axis``: one tensor per size."""
        ys = []
        for i, n in enumerate(sizes):
            shape = list(x.shape)
            shape[axis] = n
            ys.append(self._same_quant(x, f"{name}{i}", tuple(shape)))
        at = self.const(f"{name}_axis", np.asarray(axis, np.int32), "int32")
        if len(set(sizes)) == 1:
            self.op("SPLIT", [at, x], ys, "SplitOptions", NumSplits=len(sizes))
        else:
            st = self.const(f"{name}_sizes", np.asarray(sizes, np.int32), "int32")
            self.op("SPLIT_V", [x, st, at], ys, "SplitVOptions", NumSplits=len(sizes))
        return ys

    def pack(self, xs, axis: int, name="pack") -> T:
        shape = list(xs[0].shape)
        shape.insert(axis, len(xs))
        y = self._same_quant(xs[0], name, tuple(shape))
        self.op("PACK", list(xs), [y], "PackOptions", ValuesCount=len(xs), Axis=axis)
        return y

    def unpack(self, x: T, axis: int, name="unpack") -> list:
        shape = tuple(d for i, d in enumerate(x.shape) if i != axis)
        ys = [self._same_quant(x, f"{name}{i}", shape) for i in range(x.shape[axis])]
        self.op("UNPACK", [x], ys, "UnpackOptions", Num=len(ys), Axis=axis)
        return ys

    def reduce_max(self, x: T, axes, name="reduce_max") -> T:
        at = self.const(f"{name}_axes", np.asarray(axes, np.int32), "int32")
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
        y = self._same_quant(x, name, shape)
        self.op("REDUCE_MAX", [x, at], [y], "ReducerOptions", KeepDims=True)
        return y

    def transpose_conv(self, x: T, cout, k=3, stride=2, padding="SAME", name="transpose_conv") -> T:
        """TRANSPOSE_CONV (no fused activation) with a bias; output size as TFLite's
        ``padding`` rule gives it."""
        kh, kw = (k, k) if isinstance(k, int) else k
        n, h, w_, cin = x.shape
        oh, ow = ((h * stride, w_ * stride) if padding == "SAME"
                  else ((h - 1) * stride + kh, (w_ - 1) * stride + kw))
        target = 1.0
        ws = self._wscales(target / (math.sqrt(kh * kw * cin / stride ** 2) * x.rms * _RMS_U8W), cout, True)
        w = self.tensor(f"{name}_w", (cout, kh, kw, cin), "int8", scale=ws, zp=0,
                        data=self._weights((cout, kh, kw, cin)), qdim=0)
        btype, _ = self._acc_types(x)
        b = self._bias(f"{name}_b", cout, x.s, ws, target, btype)
        osz = self.const(f"{name}_shape", np.asarray([n, oh, ow, cout], np.int32), "int32")
        y = self.act_tensor(name, (n, oh, ow, cout), x.dtype, target)
        self.op("TRANSPOSE_CONV", [osz, w, x, b], [y], "TransposeConvOptions", Padding=PADDING[padding],
                StrideW=stride, StrideH=stride)
        return y

    # ------------------------------------------------------------------ serialise
    def serialize(self) -> bytes:
        b = flatbuffers.Builder(1024)

        def ivec(start_fn, values, kind="int32"):
            values = list(values)
            start_fn(b, len(values))
            for v in reversed(values):
                {"int32": b.PrependInt32, "int64": b.PrependInt64,
                 "float32": b.PrependFloat32}[kind](v)
            return b.EndVector()

        # buffers
        buf_offs = []
        for data in self.buffers:
            if data:
                b.StartVector(1, len(data), 16)
                b.head = b.head - len(data)
                b.Bytes[b.head:b.head + len(data)] = data
                vec = b.EndVector()
                Buffer.Start(b)
                Buffer.AddData(b, vec)
            else:
                Buffer.Start(b)
            buf_offs.append(Buffer.End(b))

        # tensors
        t_offs = []
        for t in self.tensors:
            name = b.CreateString(t["name"])
            shape = ivec(Tensor.StartShapeVector, t["shape"])
            q = None
            if t["scale"] is not None:
                sc = ivec(QuantizationParameters.StartScaleVector, [float(s) for s in t["scale"]],
                          "float32")
                zp = ivec(QuantizationParameters.StartZeroPointVector, [int(z) for z in t["zp"]],
                          "int64")
                QuantizationParameters.Start(b)
                QuantizationParameters.AddScale(b, sc)
                QuantizationParameters.AddZeroPoint(b, zp)
                QuantizationParameters.AddQuantizedDimension(b, t["qdim"])
                q = QuantizationParameters.End(b)
            Tensor.Start(b)
            Tensor.AddShape(b, shape)
            Tensor.AddType(b, DTYPES[t["dtype"]][0])
            Tensor.AddBuffer(b, t["buffer"])
            Tensor.AddName(b, name)
            if q is not None:
                Tensor.AddQuantization(b, q)
            t_offs.append(Tensor.End(b))

        # operator codes (in order of first use)
        codes: list[int] = []
        for o in self.ops:
            if o.code not in codes:
                codes.append(o.code)
        oc_offs = []
        for c in codes:
            OperatorCode.Start(b)
            OperatorCode.AddDeprecatedBuiltinCode(b, min(c, 127))
            OperatorCode.AddBuiltinCode(b, c)
            OperatorCode.AddVersion(b, 1)
            oc_offs.append(OperatorCode.End(b))

        # operators
        op_offs = []
        for o in self.ops:
            opt = None
            if o.opt_name:
                mod = importlib.import_module(f"ethosu.vela.tflite.{o.opt_name}")
                mod.Start(b)
                for k, v in o.opts.items():
                    getattr(mod, "Add" + k)(b, v)
                opt = mod.End(b)
            ins = ivec(Operator.StartInputsVector, o.inputs)
            outs = ivec(Operator.StartOutputsVector, o.outputs)
            Operator.Start(b)
            Operator.AddOpcodeIndex(b, codes.index(o.code))
            Operator.AddInputs(b, ins)
            Operator.AddOutputs(b, outs)
            if opt is not None:
                Operator.AddBuiltinOptionsType(b, o.opt_type)
                Operator.AddBuiltinOptions(b, opt)
            op_offs.append(Operator.End(b))

        def ovec(start_fn, offs):
            start_fn(b, len(offs))
            for off in reversed(offs):
                b.PrependUOffsetTRelative(off)
            return b.EndVector()

        sg_tensors = ovec(SubGraph.StartTensorsVector, t_offs)
        sg_ops = ovec(SubGraph.StartOperatorsVector, op_offs)
        sg_in = ivec(SubGraph.StartInputsVector, self.inputs)
        sg_out = ivec(SubGraph.StartOutputsVector, self.outputs)
        sg_name = b.CreateString("main")
        SubGraph.Start(b)
        SubGraph.AddTensors(b, sg_tensors)
        SubGraph.AddInputs(b, sg_in)
        SubGraph.AddOutputs(b, sg_out)
        SubGraph.AddOperators(b, sg_ops)
        SubGraph.AddName(b, sg_name)
        sg = SubGraph.End(b)

        subgraphs = ovec(Model.StartSubgraphsVector, [sg])
        opcodes = ovec(Model.StartOperatorCodesVector, oc_offs)
        buffers = ovec(Model.StartBuffersVector, buf_offs)
        desc = b.CreateString(self.description)
        Model.Start(b)
        Model.AddVersion(b, 3)
        Model.AddOperatorCodes(b, opcodes)
        Model.AddSubgraphs(b, subgraphs)
        Model.AddDescription(b, desc)
        Model.AddBuffers(b, buffers)
        m = Model.End(b)
        b.Finish(m, file_identifier=b"TFL3")
        return bytes(b.Output())
