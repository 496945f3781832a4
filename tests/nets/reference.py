"""Reference outputs from LiteRT's reference kernels (BUILTIN_REF)."""

from __future__ import annotations

import numpy as np

DEFAULT_INPUT_SEED = 1235


def _interpreter(tflite_bytes: bytes, preserve_all: bool = False, ref: bool = True):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kind = OpResolverType.BUILTIN_REF if ref else OpResolverType.AUTO
    it = Interpreter(model_content=bytes(tflite_bytes), experimental_op_resolver_type=kind,
                     experimental_preserve_all_tensors=preserve_all)
    it.allocate_tensors()
    return it


def make_inputs(tflite_bytes: bytes, seed: int = DEFAULT_INPUT_SEED) -> list[np.ndarray]:
    """Deterministic inputs, uniform over each input's integer range."""
    it = _interpreter(tflite_bytes)
    rng = np.random.default_rng(seed)
    out = []
    for d in it.get_input_details():
        dt = np.dtype(d["dtype"])
        if dt.kind in "iu":
            info = np.iinfo(dt)
            out.append(rng.integers(info.min, int(info.max) + 1, size=d["shape"]).astype(dt))
        else:
            out.append(rng.standard_normal(d["shape"]).astype(dt))
    return out


def run(tflite_bytes: bytes, inputs, ref: bool = True, intermediates: bool = False):
    """Run the model; returns outputs (and a name->array dict of all tensors if asked)."""
    it = _interpreter(tflite_bytes, preserve_all=intermediates, ref=ref)
    for d, x in zip(it.get_input_details(), inputs, strict=True):
        it.set_tensor(d["index"], np.asarray(x, dtype=d["dtype"]).reshape(d["shape"]))
    it.invoke()
    outs = [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]
    if not intermediates:
        return outs
    tensors = {}
    for d in it.get_tensor_details():
        try:
            v = it.get_tensor(d["index"])
        except ValueError:
            continue
        if v is not None and v.size and d["name"]:
            tensors[d["name"]] = v.copy()
    return outs, tensors


def reference(tflite_bytes: bytes, inputs=None, seed: int = DEFAULT_INPUT_SEED):
    """Returns ``(inputs, outputs)``; inputs are generated from ``seed`` if not given."""
    if inputs is None:
        inputs = make_inputs(tflite_bytes, seed)
    inputs = [np.asarray(x) for x in inputs]
    return inputs, run(tflite_bytes, inputs, ref=True)


def io_quantization(tflite_bytes: bytes):
    """[(scale, zero_point)] for inputs and outputs, as LiteRT reports them."""
    it = _interpreter(tflite_bytes)
    q = lambda ds: [tuple(d["quantization"]) for d in ds]  # noqa: E731
    return q(it.get_input_details()), q(it.get_output_details())
