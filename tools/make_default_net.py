#!/usr/bin/env python3
"""Write the default network of `make sim` into tests/ethos_u85/data/ (run again after changing it).

    python -m tools.make_default_net

* ``sim_default_vela.npz``: catalog network ``sim_default`` (tests/nets/catalog.py)
  compiled by Vela for ethos-u85-256, raw format;
* ``sim_default_ref.npz``: its inputs (``input0..``) and LiteRT BUILTIN_REF outputs
  (``output0..``), for NPU_MODEL_REF.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

NAME, CONFIG = "sim_default", "ethos-u85-256"
OUT = REPO / "tests" / "ethos_u85" / "data"


def main() -> int:
    import numpy as np

    from tests import nets
    OUT.mkdir(parents=True, exist_ok=True)
    model = OUT / f"{NAME}_vela.npz"
    shutil.copyfile(nets.compiled(NAME, CONFIG, "default", "raw"), model)
    inputs, outputs = nets.reference(nets.build(NAME))
    ref = OUT / f"{NAME}_ref.npz"
    np.savez(ref, **{f"input{i}": x for i, x in enumerate(inputs)},
             **{f"output{i}": y for i, y in enumerate(outputs)})
    print(f"wrote {model.relative_to(REPO)} and {ref.relative_to(REPO)} (vela {nets.vela_version()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
