"""Bit-exact comparison of a run's outputs with LiteRT's (the end-to-end tests' verdict)."""
from __future__ import annotations

import numpy as np


def compare(got: list, want: list) -> "str | None":
    """None if bit-exact; otherwise the differing counts and the first differing elements."""
    if len(got) != len(want):
        return f"{len(got)} outputs, LiteRT has {len(want)}"
    problems = []
    for i, (g, w) in enumerate(zip(got, want)):
        if g.dtype != w.dtype or g.size != w.size:
            problems.append(f"output{i}: {g.dtype}{list(g.shape)}, LiteRT {w.dtype}{list(w.shape)}")
            continue
        g = g.reshape(w.shape)
        bad = np.argwhere(g != w)
        if len(bad):
            first = ", ".join(f"{tuple(int(v) for v in ix)} got {g[tuple(ix)]} want {w[tuple(ix)]}"
                              for ix in bad[:3])
            worst = int(np.abs(g.astype(np.int64) - w.astype(np.int64)).max())
            problems.append(f"output{i}: {len(bad)}/{w.size} differ (max |diff| {worst}); first {first}")
    return "; ".join(problems) or None
