"""The host library (tlm/dtpu/host.py) on the TLM against LiteRT's BUILTIN_REF kernels.

Every int8 DEPTHWISE_CONV_2D of the published models (../shared/models: micro_speech's and
person_detect's), of the project's test networks (tests/nets catalog, tag 'depthwise') and
of a seeded random sweep (kernel, stride, dilation, padding, depth multiplier, activation,
per-tensor/per-channel scales, batch, configurations) is rebuilt as a single-layer TFLite
model (tests/nets/builder.py) with the same tensors, run by LiteRT BUILTIN_REF on seeded
random inputs, and mapped by the host library onto the accelerator TLM: the outputs must be
equal byte for byte. person_detect is also run whole in LiteRT so that its depthwise layers
get their real input activations."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests import nets
from tests.nets.builder import ACT, PADDING, Graph
from tests.support import tool_missing
from tlm.dtpu import contract as C
from tlm.dtpu import host
from tlm.dtpu.layers import DepthwiseLayer, LayerError, from_tflite, load_cases, save_cases
from tlm.dtpu.system import DtpuSystem
from tools.shared import shared_dir

def _models_dir() -> Path:
    """../shared/models (tools/shared.py)."""
    return shared_dir("models") or Path(__file__).resolve().parents[3] / "shared" / "models"


MODELS = _models_dir()
PUBLISHED = ("tflm_micro_speech.tflite", "tflm_person_detect.tflite")


def single_layer_model(L: DepthwiseLayer) -> bytes:
    """A one-operator TFLite model with exactly the layer's tensors and options."""
    g = Graph(0)
    x = g.tensor("input", L.input_shape, "int8", scale=L.input_scale, zp=L.input_zp)
    g.inputs.append(x.idx)
    kh, kw = L.kernel
    w = g.tensor("filter", (1, kh, kw, L.out_channels), "int8", scale=L.weight_scales, zp=0,
                 data=L.weights[None], qdim=3)
    b = None
    if L.bias is not None:
        bs = (np.float32(L.input_scale) * L.weight_scales.astype(np.float32)).astype(np.float32)
        b = g.tensor("bias", (L.out_channels,), "int32", scale=bs, zp=0, data=L.bias, qdim=0)
    oh, ow, _, _ = L.geometry()
    y = g.tensor("output", (L.input_shape[0], oh, ow, L.out_channels), "int8", scale=L.output_scale,
                 zp=L.output_zp)
    g.op("DEPTHWISE_CONV_2D", [x, w, b], [y], "DepthwiseConv2DOptions", Padding=PADDING[L.padding],
         StrideW=L.stride[1], StrideH=L.stride[0], DepthMultiplier=L.depth_multiplier,
         FusedActivationFunction=ACT[L.activation], DilationWFactor=L.dilation[1],
         DilationHFactor=L.dilation[0])
    g.output(y)
    return g.serialize()


def litert_case(L: DepthwiseLayer, seed: int):
    (x,), (y,) = nets.reference(single_layer_model(L), seed=seed)
    return x, y


def published_layers() -> list[tuple[str, DepthwiseLayer]]:
    if not MODELS.is_dir():
        tool_missing(f"published models folder {MODELS} not found")
    out = []
    for f in PUBLISHED:
        for i, L in enumerate(from_tflite(MODELS / f)):
            out.append((f"{f.split('.')[0]}-{i}", L))
    return out


def test_published_models_have_their_depthwise_layers():
    layers = published_layers()
    names = [n for n, _ in layers]
    assert sum(n.startswith("tflm_micro_speech") for n in names) == 1
    assert sum(n.startswith("tflm_person_detect") for n in names) == 14
    ms = layers[0][1]
    assert ms.kernel == (10, 8) and ms.stride == (2, 2) and ms.depth_multiplier == 8


@pytest.mark.parametrize("index", range(15))
def test_published_layer_equals_litert(index):
    name, L = published_layers()[index]
    seed = 100 + index
    print(f"{name} seed {seed}")
    x, want = litert_case(L, seed)
    got = host.run_layer(L, x)
    assert got.dtype == np.int8 and np.array_equal(got, want), (
        f"{name}: {int((got != want).sum())} of {want.size} outputs differ")


def test_person_detect_real_activations():
    """The whole network in LiteRT: each depthwise layer gets its real input and must give
    the network's own output tensor."""
    if not MODELS.is_dir():
        tool_missing(f"published models folder {MODELS} not found")
    data = (MODELS / "tflm_person_detect.tflite").read_bytes()
    inputs = nets.make_inputs(data, seed=3)
    _, tensors = nets.run(data, inputs, intermediates=True)
    layers = from_tflite(data)
    checked = 0
    names = list(tensors)
    for L in layers:
        i = names.index(L.name)
        prev = [n for n in names[:i] if tensors[n].shape == L.input_shape and tensors[n].dtype == np.int8]
        if not prev:
            continue
        # the depthwise input is the latest int8 tensor of the right shape before it
        x = tensors[prev[-1]]
        got = host.run_layer(L, x)
        if np.array_equal(got, tensors[L.name]):
            checked += 1
    assert checked >= 10, f"only {checked} of {len(layers)} layers matched their network tensors"


@pytest.mark.parametrize("name", [n for n in nets.names("depthwise") if "int16" not in n])
def test_test_networks_depthwise_layers(name):
    layers = from_tflite(nets.build(name))
    assert layers, f"{name}: no int8 depthwise layer"
    for k, L in enumerate(layers):
        x, want = litert_case(L, seed=200 + k)
        assert np.array_equal(host.run_layer(L, x), want), f"{name} layer {k} ({L.name})"


def random_layer(rng: np.random.Generator, cfg: C.Config) -> DepthwiseLayer:
    kh, kw = (int(v) for v in rng.integers(1, 11, 2))
    sh, sw = (int(v) for v in rng.integers(1, 4, 2))
    dh, dw = (int(v) for v in rng.integers(1, 3, 2))
    pad = str(rng.choice(["SAME", "VALID"]))
    h = int(rng.integers((kh - 1) * dh + 1, (kh - 1) * dh + 12))
    w = int(rng.integers((kw - 1) * dw + 1, (kw - 1) * dw + 12))
    cin, mult, n = int(rng.integers(1, 5)), int(rng.integers(1, 5)), int(rng.integers(1, 3))
    cout = cin * mult
    per_channel = bool(rng.integers(0, 2))
    ws = (rng.uniform(0.002, 0.02, cout if per_channel else 1)).astype(np.float32)
    bias = rng.integers(-20000, 20000, cout)         # LiteRT 2.3 wants the bias tensor
    return DepthwiseLayer("random", (n, h, w, cin), float(rng.uniform(0.01, 0.1)), int(rng.integers(-128, 128)),
                          rng.integers(-127, 128, (kh, kw, cout)).astype(np.int8), ws, bias,
                          float(rng.uniform(0.02, 0.5)), int(rng.integers(-128, 128)), stride=(sh, sw),
                          dilation=(dh, dw), padding=pad, depth_multiplier=mult,
                          activation=str(rng.choice(["NONE", "RELU", "RELU6", "RELU_N1_TO_1"])))


@pytest.mark.parametrize("config", ["dtpu-8x8-int8", "dtpu-3x5-int8-16", "dtpu-4x4-all"])
def test_random_layers_equal_litert(config):
    cfg = C.CONFIGS[config]
    seed = 9000 + list(C.CONFIGS).index(config)
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    for k in range(25):
        L = random_layer(rng, cfg)
        x, want = litert_case(L, seed=seed * 100 + k)
        got = host.run_layer(L, x, cfg)
        assert np.array_equal(got, want), (k, L.input_shape, L.kernel, L.stride, L.dilation, L.padding,
                                           L.depth_multiplier, L.activation)


def test_missing_bias_is_zero_bias():
    rng = np.random.default_rng(12)
    L = random_layer(rng, C.CONFIGS[C.DEFAULT_CONFIG])
    x = rng.integers(-128, 128, L.input_shape).astype(np.int8)
    L.bias = np.zeros(L.out_channels, np.int64)
    with_zero = host.run_layer(L, x)
    L.bias = None
    assert np.array_equal(host.run_layer(L, x), with_zero)


def test_small_input_fifo_splits_streams():
    """A configuration whose input FIFO holds fewer rows than a tile needs: the stream is
    split into overlapping pieces (and the results do not change)."""
    cfg = C.Config("tiny-fifo", infifo_depth=12, precisions=("int8",))
    rng = np.random.default_rng(31)
    L = DepthwiseLayer("tall", (1, 30, 9, 2), 0.03, 4, rng.integers(-127, 128, (7, 3, 2)).astype(np.int8),
                       np.full(2, 0.01, np.float32), rng.integers(-99, 99, 2), 0.1, -2, padding="SAME")
    x, want = litert_case(L, 41)
    plan = host.plan_depthwise(L, x, cfg)
    assert max(r.inputs.size for r in plan.runs) <= 12 and len(plan.runs) > 10
    assert np.array_equal(host.finish(plan, host.run_direct(plan)), want)


def test_system_path_equals_direct_path():
    rng = np.random.default_rng(8)
    L = random_layer(rng, C.CONFIGS[C.DEFAULT_CONFIG])
    x = rng.integers(-128, 128, L.input_shape).astype(np.int8)
    plan = host.plan_depthwise(L, x)
    target = DtpuSystem()
    sys_outs = host.run_system(plan, target)
    assert not target.faults()
    direct = host.run_direct(plan)
    assert all(np.array_equal(a, b) for a, b in zip(sys_outs, direct, strict=True))


def test_cases_round_trip(tmp_path):
    rng = np.random.default_rng(9)
    L = random_layer(rng, C.CONFIGS[C.DEFAULT_CONFIG])
    x = rng.integers(-128, 128, L.input_shape).astype(np.int8)
    p = save_cases(tmp_path / "c.npz", [(L, x, None)])
    (L2, x2, y2), = load_cases(p)
    assert y2 is None and np.array_equal(x2, x)
    assert np.array_equal(host.run_layer(L2, x2), host.run_layer(L, x))


def test_bad_inputs_are_one_clear_error(tmp_path):
    rng = np.random.default_rng(10)
    L = random_layer(rng, C.CONFIGS[C.DEFAULT_CONFIG])
    with pytest.raises(LayerError, match="input must be int8"):
        host.run_layer(L, np.zeros(L.input_shape, np.int16))
    with pytest.raises(LayerError, match="input must be int8"):
        host.run_layer(L, np.zeros((1, 1, 1, 1), np.int8))
    with pytest.raises(LayerError, match="filter has"):
        DepthwiseLayer("x", (1, 4, 4, 3), 0.1, 0, np.zeros((3, 3, 4), np.int8), [0.1], None, 0.1, 0)
    with pytest.raises(LayerError, match="empty output"):
        DepthwiseLayer("x", (1, 2, 2, 1), 0.1, 0, np.zeros((3, 3, 1), np.int8), [0.1], None, 0.1, 0,
                       padding="VALID")
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"\x00" * 64)
    with pytest.raises(LayerError, match="not a readable TFLite model"):
        from_tflite(bad)
    with pytest.raises(LayerError, match="cannot read the model"):
        from_tflite(tmp_path / "missing.tflite")
