"""int8 DEPTHWISE_CONV_2D layers: the description the host library maps onto the DTPU,
and a reader that takes them out of .tflite files.

`DepthwiseLayer` holds what TFLite's kernel uses: the input shape and quantisation, the
filter [KH, KW, C*M] (TFLite stores [1, KH, KW, C*M]), per-channel or per-tensor filter
scales, the int32 bias, the output quantisation, strides, dilations, padding, depth
multiplier and fused activation. `from_tflite(path)` returns every int8 DEPTHWISE_CONV_2D
of a model (read with the TFLite schema modules shipped with ethos-u-vela).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .quant import ACTIVATIONS

DEPTHWISE_CONV_2D = 4          # TFLite BuiltinOperator
INT8, INT32 = 9, 2             # TFLite TensorType
PADDINGS = ("SAME", "VALID")   # TFLite Padding 0, 1


class LayerError(ValueError):
    """A layer the host library cannot map (one clear line)."""


@dataclass
class DepthwiseLayer:
    name: str
    input_shape: tuple[int, int, int, int]      # N, H, W, C
    input_scale: float
    input_zp: int
    weights: np.ndarray                         # int8 [KH, KW, C*M]
    weight_scales: np.ndarray                   # float32 [C*M] or [1]
    bias: "np.ndarray | None"                   # int32 [C*M]
    output_scale: float
    output_zp: int
    stride: tuple[int, int] = (1, 1)            # (h, w)
    dilation: tuple[int, int] = (1, 1)
    padding: str = "SAME"
    depth_multiplier: int = 1
    activation: str = "NONE"
    output_shape: "tuple[int, int, int, int] | None" = field(default=None)

    def __post_init__(self):
        w = np.asarray(self.weights)
        if w.ndim == 4 and w.shape[0] == 1:
            w = w[0]
        if w.ndim != 3 or w.dtype != np.int8:
            raise LayerError(f"{self.name}: filter must be int8 [KH, KW, C*M], got {w.dtype} {w.shape}")
        self.weights = w
        n, h, wd, c = self.input_shape
        if w.shape[2] != c * self.depth_multiplier:
            raise LayerError(f"{self.name}: filter has {w.shape[2]} channels, input {c} x depth "
                             f"multiplier {self.depth_multiplier}")
        if self.padding not in PADDINGS:
            raise LayerError(f"{self.name}: padding {self.padding!r} (SAME or VALID)")
        if self.activation not in ACTIVATIONS:
            raise LayerError(f"{self.name}: fused activation {self.activation!r}")
        if min(self.stride + self.dilation) < 1:
            raise LayerError(f"{self.name}: strides and dilations must be >= 1")
        self.weight_scales = np.asarray(self.weight_scales, np.float32).reshape(-1)
        if self.weight_scales.size not in (1, w.shape[2]):
            raise LayerError(f"{self.name}: {self.weight_scales.size} filter scales for {w.shape[2]} channels")
        if self.bias is not None:
            self.bias = np.asarray(self.bias, np.int64).reshape(-1)
            if self.bias.size != w.shape[2]:
                raise LayerError(f"{self.name}: {self.bias.size} biases for {w.shape[2]} channels")
        oh, ow, *_ = self.geometry()
        if oh < 1 or ow < 1:
            raise LayerError(f"{self.name}: empty output ({oh} x {ow})")

    @property
    def kernel(self) -> tuple[int, int]:
        return self.weights.shape[0], self.weights.shape[1]

    @property
    def out_channels(self) -> int:
        return self.weights.shape[2]

    def geometry(self) -> tuple[int, int, int, int]:
        """(OH, OW, pad_top, pad_left), TFLite's ComputePaddingHeightWidth."""
        _, h, w, _ = self.input_shape
        (kh, kw), (sh, sw), (dh, dw) = self.kernel, self.stride, self.dilation
        eh, ew = (kh - 1) * dh + 1, (kw - 1) * dw + 1
        if self.padding == "SAME":
            oh, ow = -(-h // sh), -(-w // sw)
        else:
            oh, ow = (h - eh + sh) // sh, (w - ew + sw) // sw
        ph = max(0, ((oh - 1) * sh + eh - h) // 2)
        pw = max(0, ((ow - 1) * sw + ew - w) // 2)
        return oh, ow, ph, pw

    @property
    def macs(self) -> int:
        oh, ow, _, _ = self.geometry()
        kh, kw = self.kernel
        return self.input_shape[0] * oh * ow * self.out_channels * kh * kw


def _vela_schema():
    try:
        from ethosu.vela.tflite.DepthwiseConv2DOptions import DepthwiseConv2DOptions
        from ethosu.vela.tflite.Model import Model
    except ImportError:
        raise LayerError("reading .tflite files needs the TFLite schema modules of ethos-u-vela "
                         "(pip install -e '.[test]')") from None
    return Model, DepthwiseConv2DOptions


def from_tflite(source: "str | Path | bytes") -> list[DepthwiseLayer]:
    """Every int8 DEPTHWISE_CONV_2D of a .tflite model, in operator order."""
    Model, Options = _vela_schema()
    what = "<bytes>" if isinstance(source, (bytes, bytearray)) else str(source)
    try:
        data = source if isinstance(source, (bytes, bytearray)) else Path(source).read_bytes()
    except OSError as e:
        raise LayerError(f"{what}: cannot read the model: {e.strerror or e}") from None
    try:
        return _read_layers(Model, Options, data, what)
    except LayerError:
        raise
    except Exception as e:  # noqa: BLE001 - a damaged flatbuffer: one clear line
        raise LayerError(f"{what}: not a readable TFLite model ({type(e).__name__}: {e})") from None


def _read_layers(Model, Options, data: bytes, what: str) -> list[DepthwiseLayer]:
    m = Model.GetRootAsModel(data, 0)
    if m.SubgraphsLength() < 1:
        raise LayerError(f"{what}: not a readable TFLite model (no subgraph)")
    codes = [max(m.OperatorCodes(i).BuiltinCode(), m.OperatorCodes(i).DeprecatedBuiltinCode())
             for i in range(m.OperatorCodesLength())]
    sg = m.Subgraphs(0)

    def buffer(t) -> np.ndarray:
        b = m.Buffers(t.Buffer())
        if b.Offset() > 1:
            raw = bytes(data[b.Offset():b.Offset() + b.Size()])
        else:
            raw = b.DataAsNumpy().tobytes() if b.DataLength() else b""
        return np.frombuffer(raw, np.int8 if t.Type() == INT8 else np.int32)

    def quant(t):
        q = t.Quantization()
        if q is None or not q.ScaleLength():
            raise LayerError(f"{what}: tensor {t.Name().decode()} is not quantised")
        return q.ScaleAsNumpy().astype(np.float32), q.ZeroPointAsNumpy().astype(np.int64)

    layers = []
    for k in range(sg.OperatorsLength()):
        op = sg.Operators(k)
        if codes[op.OpcodeIndex()] != DEPTHWISE_CONV_2D:
            continue
        ins = [int(i) for i in op.InputsAsNumpy()]
        outs = [int(i) for i in op.OutputsAsNumpy()]
        x, w, y = sg.Tensors(ins[0]), sg.Tensors(ins[1]), sg.Tensors(outs[0])
        name = (y.Name() or b"").decode() or f"op{k}"
        if x.Type() != INT8 or w.Type() != INT8 or y.Type() != INT8:
            continue                                         # int16x8 layers are not mapped
        opts = Options()
        tab = op.BuiltinOptions()
        opts.Init(tab.Bytes, tab.Pos)
        xs, xz = quant(x)
        ws, _ = quant(w)
        ys, yz = quant(y)
        b = None
        if len(ins) > 2 and ins[2] >= 0:
            b = buffer(sg.Tensors(ins[2])).astype(np.int64)
        wshape = tuple(int(v) for v in w.ShapeAsNumpy())
        layers.append(DepthwiseLayer(
            name=name, input_shape=tuple(int(v) for v in x.ShapeAsNumpy()),
            input_scale=float(xs[0]), input_zp=int(xz[0]),
            weights=buffer(w).reshape(wshape), weight_scales=ws, bias=b,
            output_scale=float(ys[0]), output_zp=int(yz[0]),
            stride=(opts.StrideH(), opts.StrideW()),
            dilation=(max(1, opts.DilationHFactor()), max(1, opts.DilationWFactor())),
            padding=PADDINGS[opts.Padding()],
            depth_multiplier=wshape[-1] // max(1, int(x.ShapeAsNumpy()[-1])),   # the shapes decide
            activation=ACTIVATIONS[opts.FusedActivationFunction()],
            output_shape=tuple(int(v) for v in y.ShapeAsNumpy())))
    return layers


# ------------------------------------------------------------------------------------------
# Cases on disk: layers + inputs (+ reference outputs) for the bench and the benchmark
# ------------------------------------------------------------------------------------------
_SCALARS = ("name", "input_scale", "input_zp", "output_scale", "output_zp", "padding",
            "depth_multiplier", "activation")
_TUPLES = ("input_shape", "stride", "dilation")


def save_cases(path: "str | Path", cases) -> Path:
    """Write [(layer, x, expected-or-None), ...] to an .npz (numpy only)."""
    arrays = {"count": np.array(len(cases))}
    for i, (layer, x, y) in enumerate(cases):
        p = f"c{i}_"
        for k in _SCALARS:
            arrays[p + k] = np.array(getattr(layer, k))
        for k in _TUPLES:
            arrays[p + k] = np.array(getattr(layer, k), np.int64)
        arrays[p + "weights"] = layer.weights
        arrays[p + "weight_scales"] = layer.weight_scales
        if layer.bias is not None:
            arrays[p + "bias"] = layer.bias
        arrays[p + "x"] = np.asarray(x, np.int8)
        if y is not None:
            arrays[p + "y"] = np.asarray(y, np.int8)
    path = Path(path)
    np.savez(path, **arrays)
    return path


def load_cases(path: "str | Path") -> list:
    """[(layer, x, expected-or-None), ...] from save_cases' file."""
    with np.load(path, allow_pickle=False) as z:
        out = []
        for i in range(int(z["count"])):
            p = f"c{i}_"
            kw = {k: z[p + k].item() for k in _SCALARS}
            kw.update({k: tuple(int(v) for v in z[p + k]) for k in _TUPLES})
            layer = DepthwiseLayer(weights=z[p + "weights"], weight_scales=z[p + "weight_scales"],
                                   bias=z[p + "bias"] if p + "bias" in z else None, **kw)
            out.append((layer, z[p + "x"], z[p + "y"] if p + "y" in z else None))
    return out
