"""Random NE16 layers for tests and the bench (a reference, not the TLM).

`random_layer(seed, **overrides)` draws a small logical layer covering the CONFIG0 options:
kind (3x3, 3x3 depthwise, 1x1, linear), stride, padding and its value, filter mask, weight
bits 1..8, symmetric or layer-wise weight offset, MODE16 inputs, streamin, raw streamout,
NORM_BITS, per-channel shift, bias, QUANT_BITS, rectification and the rounding bit. The
seed alone reproduces the layer; tests print it. Overrides fix any field of `Layer` (or
`h`, `w`, `cin`, `cout`).
"""
from __future__ import annotations

import numpy as np

from .builder import Layer

KINDS = ("conv3x3", "dw3x3", "conv1x1", "linear")


def random_layer(seed: int, **fix) -> Layer:
    rng = np.random.default_rng(seed)

    def pick(name, draw):
        return fix.pop(name) if name in fix else draw()

    kind = pick("kind", lambda: KINDS[rng.integers(len(KINDS))])
    three = kind in ("conv3x3", "dw3x3")
    mode16 = pick("mode16", lambda: kind != "dw3x3" and rng.random() < 0.25)
    stride = pick("stride", lambda: 2 if three and rng.random() < 0.25 else 1)
    qw = pick("qw", lambda: int(rng.integers(1, 9)))
    if kind == "linear":
        h = w = 1
        fix.pop("h", None), fix.pop("w", None)
        cin = pick("cin", lambda: int(16 * rng.integers(1, 40)))
    else:
        h = pick("h", lambda: int(rng.integers(1, 10)))
        w = pick("w", lambda: int(rng.integers(1, 10)))
        cin = pick("cin", lambda: int(rng.integers(1, 40)))
    cout = pick("cout", lambda: int(rng.integers(1, 70)))
    if kind == "dw3x3":
        cout = cin
    padding = pick("padding", lambda: tuple(int(v) for v in rng.integers(0, 2, 4)) if three
                   else (0, 0, 0, 0))
    # at least one output pixel
    if three:
        h, w = max(h, 3 - padding[0] - padding[1]), max(w, 3 - padding[2] - padding[3])
    out_bits = pick("out_bits", lambda: int(rng.choice([8, 8, 16, 32])))
    want_streamin = pick("use_streamin", lambda: rng.random() < 0.3)
    streamin = out_bits == 32 and want_streamin
    quant = pick("quant", lambda: rng.random() < 0.85)
    norm_bits = pick("norm_bits", lambda: int(rng.choice([8, 16, 32])))
    xmax = 1 << (16 if mode16 else 8)
    x = rng.integers(0, xmax, (h, w, cin)).astype(np.uint16 if mode16 else np.uint8)
    wshape = {"conv3x3": (cout, cin, 3, 3), "dw3x3": (cin, 1, 3, 3), "conv1x1": (cout, cin, 1, 1),
              "linear": (cout, cin)}[kind]
    wt = rng.integers(0, 1 << qw, wshape)
    lay = dict(
        kind=kind, x=x, w=wt, qw=qw, stride=stride, padding=padding,
        pad_value=pick("pad_value", lambda: int(rng.integers(0, xmax)) if rng.random() < 0.3 else 0),
        weight_offset=pick("weight_offset", lambda: None if rng.random() < 0.3
                           else int(rng.integers(-256, 256))),
        filter_mask=pick("filter_mask", lambda: tuple(int(v) for v in rng.integers(0, 2, 4))
                         if three and rng.random() < 0.3 else (0, 0, 0, 0)),
        quant=quant, out_bits=out_bits, relu=pick("relu", lambda: bool(rng.random() < 0.5)),
        norm_bits=norm_bits,
        scale=rng.integers(0, 1 << norm_bits, cout),
        shift=pick("shift", lambda: rng.integers(0, 32, cout) if rng.random() < 0.3
                   else int(rng.integers(0, 32))),
        bias=pick("bias", lambda: rng.integers(-2**31, 2**31, cout) if rng.random() < 0.5 else None),
        rounding_bit=pick("rounding_bit", lambda: int(rng.integers(0, 2))),
    )
    unknown = set(fix) - set(Layer.__dataclass_fields__)
    if unknown:
        raise TypeError(f"random_layer: unknown override(s) {', '.join(sorted(unknown))}")
    lay.update(fix)
    layer = Layer(**lay)
    if streamin:
        layer.streamin = rng.integers(-2**31, 2**31, layer.out_shape).astype(np.int32)
    return layer
