"""The Ethos-U85's options of the bench runner (tb/core/run.py): ``NPU_MODEL``.

Without ``--config`` (``CONFIG``), DUT=rtl builds the stand-in for ``--npu-model``'s own
configuration (``hdl_config``), else for the default ethos-u85-256.

* ``--npu-model PATH`` (``NPU_MODEL``) runs a Vela output through the bench
  (tb/ethos_u85/tests/test_network.py); without ``--tests`` only that test runs.
  ``--npu-model-ref`` (default: the ``NPU_MODEL_REF`` environment variable) is an .npz with
  ``input<i>`` / ``output<i>`` (e.g. LiteRT BUILTIN_REF outputs) that the outputs are also
  checked against.
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
