"""The Ethos-U85's options of the bench runner (tb/core/run.py): ``NPU_MODEL``.

Without ``--config`` (``CONFIG``), DUT=rtl builds the stand-in for ``--npu-model``'s own
configuration (``hdl_config``), else for the default ethos-u85-256.

* ``--npu-model PATH`` (``NPU_MODEL``) runs a Vela output through the bench
  (tb/ethos_u85/tests/test_network.py); without ``--tests`` only that test runs.
  ``--npu-model-ref`` (default: the ``NPU_MODEL_REF`` environment variable) is an .npz with
  ``input<i>`` / ``output<i>`` (e.g. LiteRT BUILTIN_REF outputs) that the outputs are also
  checked against. ``check_model_ref`` validates it before anything is built: exactly one
  ``input<i>`` per model input and one ``output<i>`` per output, each of the tensor's shape
  and dtype; anything else is one error line (exit status 2).
* Without ``--npu-model`` the regression's test_npu_model runs the shipped default network
  ``tests/ethos_u85/data/sim_default_vela.npz`` against ``sim_default_ref.npz`` (elementwise
  and pooling, so the RTL stand-in runs it; ``python -m tools.make_default_net`` writes them).
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from tb.core.run import RunOptions
from tb.core.simtools import REPO, SetupError

DATA = REPO / "tests" / "ethos_u85" / "data"
DEFAULT_NET = DATA / "sim_default_vela.npz"          # test_npu_model's default
DEFAULT_NET_REF = DATA / "sim_default_ref.npz"


class U85RunOptions(RunOptions):
    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--npu-model", default=None, help="Vela output to run through the bench")
        parser.add_argument("--npu-model-ref", default=os.environ.get("NPU_MODEL_REF") or None,
                            help="npz with input<i>/output<i> reference arrays for --npu-model")

    def prepare(self, args: argparse.Namespace, info) -> "tuple[dict, str | None]":
        if not args.npu_model:
            if args.npu_model_ref and "NPU_MODEL_REF" not in os.environ:
                raise SetupError("--npu-model-ref needs --npu-model")
            if DEFAULT_NET.is_file():
                return {"NPU_MODEL": str(DEFAULT_NET), "NPU_MODEL_REF": str(DEFAULT_NET_REF)}, None
            return {"NPU_MODEL": "", "NPU_MODEL_REF": ""}, None
        model = Path(args.npu_model).expanduser().resolve()
        if not model.is_file():
            raise SetupError(f"NPU_MODEL {args.npu_model}: no such file")
        from tlm.ethos_u85.vela import load
        try:
            load(model)
        except Exception as e:  # noqa: BLE001 - any load error is a bad argument
            raise SetupError(f"NPU_MODEL {args.npu_model}: {e}") from None
        ref = ""
        if args.npu_model_ref:
            refp = Path(args.npu_model_ref).expanduser().resolve()
            if not refp.is_file():
                raise SetupError(f"NPU_MODEL_REF {args.npu_model_ref}: no such file")
            ref = str(refp)
            try:
                check_model_ref(load(model), refp)
            except ValueError as e:
                raise SetupError(str(e)) from None
        return {"NPU_MODEL": str(model), "NPU_MODEL_REF": ref}, "test_npu_model"

    def hdl_config(self, args: argparse.Namespace, info) -> "str | None":
        """Without ``--config``, the stand-in is built for ``--npu-model``'s own configuration
        (the CONFIG word Vela embedded; ``prepare`` reports a model that does not load)."""
        if not args.npu_model:
            return None
        from tlm.ethos_u85.runner import resolve_config
        from tlm.ethos_u85.vela import load
        try:
            return resolve_config(load(Path(args.npu_model).expanduser()), None).name
        except Exception:  # noqa: BLE001 - prepare() turns a bad model into one error line
            return None


def check_model_ref(model, path) -> dict:
    """The arrays of the NPU_MODEL_REF file *path* for the Vela model *model*
    (``tlm.ethos_u85.vela.load``), checked: keys exactly ``input0..`` and ``output0..`` of the
    model's tensors, each with the tensor's shape and dtype. ValueError (one line) otherwise."""
    import numpy as np
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as e:  # noqa: BLE001 - any read error is a bad file
        raise ValueError(f"NPU_MODEL_REF {path}: not a readable .npz ({e})") from None
    want = {f"input{i}": t for i, t in enumerate(model.inputs)}
    want.update({f"output{i}": t for i, t in enumerate(model.outputs)})
    missing = sorted(set(want) - set(arrays))
    extra = sorted(set(arrays) - set(want))
    if missing or extra:
        raise ValueError(f"NPU_MODEL_REF {path}: keys {sorted(arrays)} do not match the model's "
                         f"{sorted(want)}" + (f" (missing {missing})" if missing else "")
                         + (f" (unknown {extra})" if extra else ""))
    for k, t in want.items():
        a = arrays[k]
        if tuple(a.shape) != tuple(t.shape) or a.dtype != np.dtype(t.dtype):
            raise ValueError(f"NPU_MODEL_REF {path}: {k} is {a.dtype} {list(a.shape)}, the model's "
                             f"{t.name} is {np.dtype(t.dtype)} {list(t.shape)}")
    return arrays
