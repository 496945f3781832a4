"""Published models: real int8 and 16x8 TFLite networks that other people trained
(`../shared/models` next to the repository; its README.md names every file and its source),
each compiled with Vela 5.2 for ethos-u85-128..2048, run on the TLM and on LiteRT
BUILTIN_REF with the same inputs and compared byte for byte.

* Inputs: uniform over each input's integer range, seed nets.DEFAULT_INPUT_SEED; an input
  that is a TRANSPOSE_CONV's output shape gets the true output shape. LiteRT gets the
  TFLite inputs; the TLM gets them in Vela's input order (inputs the command stream never
  reads left out, shapes as LiteRT has them: the runner accepts any shape with the same
  element count).
* Every case runs with `run_model(..., strict=True)`: an UNPREDICTABLE or model-limit event
  fails it.
* Expected failures only for documented Vela/LiteRT disagreements (DISAGREEMENTS): the
  mismatch must show, and each entry's checks must pass: the TLM equals the stream's own
  arithmetic computed independently (numpy from the stream's scale/shift/rounding values),
  and with LiteRT's arithmetic substituted at the disputed places the TLM equals LiteRT
  bit for bit (so the expected failure cannot hide another error).
* The full matrix (every model x 5 configurations) runs by default; `test_survey` prints
  the table (also build/published-models.txt).

The folder is found next to the repository root, or next to the main checkout's root when
this is a git worktree, or at $NPU_SHARED_MODELS. Without it the tests skip with the reason;
under CI (CI=true) they fail.
"""
from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from tests import nets
from tests.nets import gemmlowp
from tests.ethos_u85.support.compare import compare
from tests.ethos_u85.support.disagreements import (Backdoor, check_fc_rounding, interpreter, regval, tlm_inputs,
                                                    with_regs)
from tests.support import tool_missing
from tools.shared import main_checkout as _main_checkout
from tools.shared import shared_dir
from tlm.ethos_u85 import fmap, isa
from tlm.ethos_u85.ops import KERNEL_OPS
from tlm.ethos_u85.ops.common import OpContext, get_op_state
from tlm.ethos_u85.runner import RunError, run_model
from tlm.ethos_u85.vela import load

pytestmark = pytest.mark.vela

REPO = Path(__file__).resolve().parents[2]
ENV = "NPU_SHARED_MODELS"
ACCELS = ("ethos-u85-128", "ethos-u85-256", "ethos-u85-512", "ethos-u85-1024", "ethos-u85-2048")
SEED = nets.DEFAULT_INPUT_SEED
SURVEY_FILE = REPO / "build" / "published-models.txt"


def models_dir() -> "Path | None":
    return shared_dir("models")


MODELS = models_dir()
NAMES = sorted(p.stem for p in MODELS.glob("*.tflite")) if MODELS and MODELS.is_dir() else []


def _stateful(name: str) -> bool:
    """The TFLite model has variable (state) tensors."""
    from tlm.ethos_u85.vela import read_tflite_graph
    g = read_tflite_graph((MODELS / f"{name}.tflite").read_bytes())
    return any(t.is_variable for tensors, _ in g.subgraphs for t in tensors)


STATEFUL = [n for n in NAMES if _stateful(n)]


def require_models() -> Path:
    if not NAMES:
        tool_missing(f"published models not found: no *.tflite in ../shared/models next to the "
                     f"repository ({REPO.parent / 'shared' / 'models'}) or ${ENV}")
    return MODELS


# ---------------------------------------------------------------------------- one case
@lru_cache(maxsize=None)
def model_bytes(name: str) -> bytes:
    return (require_models() / f"{name}.tflite").read_bytes()


def make_inputs(data: bytes, seed: int = SEED) -> list:
    """Uniform over each input's integer range; a TRANSPOSE_CONV output-shape input gets
    the true output shape (its output tensor's static shape)."""
    it = interpreter(data)
    details = {d["index"]: d for d in it.get_tensor_details()}
    shapes = {int(op["inputs"][0]): [int(s) for s in details[int(op["outputs"][0])]["shape"]]
              for op in it._get_ops_details() if op["op_name"] == "TRANSPOSE_CONV"}
    rng = np.random.default_rng(seed)
    out = []
    for d in it.get_input_details():
        dt = np.dtype(d["dtype"])
        if d["index"] in shapes:
            out.append(np.asarray(shapes[d["index"]], dt).reshape(d["shape"]))
        else:
            info = np.iinfo(dt)
            out.append(rng.integers(info.min, int(info.max) + 1, size=d["shape"]).astype(dt))
    return out


@lru_cache(maxsize=None)
def reference(name: str):
    data = model_bytes(name)
    inputs = make_inputs(data)
    return inputs, nets.run(data, inputs)


def compiled(name: str, accel: str, output_format: str = "raw", memory_mode: str = "default") -> Path:
    return nets.compiled_bytes(model_bytes(name), name, accel, memory_mode, output_format)


@dataclass
class Outcome:
    diff: "str | None"            # None: bit-exact
    error: str = ""               # a RunError (strict: any warning)
    seconds: float = 0.0
    outputs: list = field(default_factory=list)


_OUTCOMES: dict = {}


def outcome(name: str, accel: str) -> Outcome:
    key = (name, accel)
    if key not in _OUTCOMES:
        t0 = time.perf_counter()
        inputs, want = reference(name)
        model = load(compiled(name, accel))
        try:
            got = run_model(model, tlm_inputs(model, inputs), strict=True).outputs
        except RunError as e:
            _OUTCOMES[key] = Outcome("run failed", f"{e.kind}: {e}", time.perf_counter() - t0)
        else:
            _OUTCOMES[key] = Outcome(compare(got, want), "", time.perf_counter() - t0, got)
    return _OUTCOMES[key]


# ---------------------------------------------------------------------------- disagreement checks
def check_fully_connected_rounding(name: str, accel: str, monkeypatch) -> None:
    """support.disagreements.check_fc_rounding on the published model."""
    check_fc_rounding(model_bytes(name), reference(name)[0], load(compiled(name, accel)), monkeypatch)


def check_lstm_with_litert_arithmetic(name: str, accel: str, monkeypatch) -> None:
    """With LiteRT's arithmetic at the two disputed places the TLM equals LiteRT bit for bit:
    (1) the LSTM gate nonlinearities as LiteRT's integer LSTM kernel computes them,
    gemmlowp's logistic/tanh (tests/nets/gemmlowp.py) on the int16 pre-activation saturated to
    int16 (Q3.12 for the gates; the cell state's own format for tanh(c)), instead of the
    stream's lut_sigmoid/lut_tanh (which take 3*pre-activation, up to +-10.3, through a
    512-entry interpolation); (2) one rounding (TRM 'natural') for every CONV instead of the
    stream's double_symmetric (FULLY_CONNECTED). The substitution asserts the register
    values of Vela 5.2's LSTM lowering it relies on."""
    inputs, want = reference(name)
    model = load(compiled(name, accel))
    lut_tanh, lut_sigmoid = isa.activation_function.lut_tanh, isa.activation_function.lut_sigmoid
    natural = isa.round_mode_ofm.natural
    ops = {k: KERNEL_OPS[k] for k in ("NPU_OP_ELEMENTWISE", "NPU_OP_POOL", "NPU_OP_CONV")}
    counts = {"gate": 0, "tanh_c": 0, "conv": 0}

    def gates(opname):
        fn = ops[opname]

        def w(snap, port, dev):
            f = snap.field
            act = f("NPU_SET_ACTIVATION", "activation_function")
            if opname == "NPU_OP_CONV":
                if f("NPU_SET_OFM_SCALE", "round_mode") != natural:
                    snap = with_regs(snap, NPU_SET_OFM_SCALE=regval(
                        "NPU_SET_OFM_SCALE", scale=f("NPU_SET_OFM_SCALE", "scale"),
                        shift=f("NPU_SET_OFM_SCALE", "shift"), round_mode=natural, dbl_rnd=0))
                    counts["conv"] += 1
                return fn(snap, port, dev)
            if act not in (lut_tanh, lut_sigmoid):
                return fn(snap, port, dev)
            if opname == "NPU_OP_ELEMENTWISE":     # gate: add of two Q3.12 halves, x3 into the LUT
                assert dev.op_fields.get("elementwise_mode") == isa.elementwise_mode.add
                for reg in ("NPU_SET_IFM_SCALE", "NPU_SET_IFM2_SCALE"):
                    assert (f(reg, "scale"), f(reg, "shift")) == (1 << 30, 16), reg
                assert (f("NPU_SET_OFM_SCALE", "scale"), f("NPU_SET_OFM_SCALE", "shift")) == (3 << 29, 43)
                scale, shift, ib = 1, 14, 3                    # a + b exactly
                counts["gate"] += 1
            else:                                              # tanh(c): c * s into the LUT, s = 3 * 2**k
                s = f("NPU_SET_OFM_SCALE", "scale")
                assert f("NPU_SET_OFM_SCALE", "shift") == 0 and act == lut_tanh and s % 3 == 0
                scale, shift, ib = 1, 0, 3 + int(s // 3).bit_length() - 1
                counts["tanh_c"] += 1
            snap2 = with_regs(
                snap, NPU_SET_OFM_SCALE=regval("NPU_SET_OFM_SCALE", scale=scale, shift=shift, round_mode=natural,
                                               dbl_rnd=0),
                NPU_SET_ACTIVATION=regval("NPU_SET_ACTIVATION", activation_function=0, table=0,
                                          activation_clip_range=isa.activation_clip_range.b16),
                NPU_SET_ACTIVATION_MIN=regval("NPU_SET_ACTIVATION_MIN", clip_boundary=0x8000),
                NPU_SET_ACTIVATION_MAX=regval("NPU_SET_ACTIVATION_MAX", clip_boundary=0x7FFF))
            fn(snap2, port, dev)
            g = gemmlowp.logistic if act == lut_sigmoid else gemmlowp.tanh
            ofm = fmap.FeatureMap.from_registers(snap2, "OFM")
            if ofm.storage == fmap.Storage.CHAINED:             # the values the op just pushed
                chunks = get_op_state(dev).fifo[ofm.region]
                chunks[-1] = g(chunks[-1], ib).astype(np.int64)
            else:
                ctx = OpContext(snap2, port, dev, opname)
                shape = (range(ctx.ofm_h), range(ctx.ofm_w), range(ctx.ofm_d))
                acc = Backdoor(port, ofm.region)
                fmap.write_fmap(acc, ofm, *shape, g(fmap.read_fmap(acc, ofm, *shape), ib).astype(np.int64))
        return w

    for k in ops:
        monkeypatch.setitem(KERNEL_OPS, k, gates(k))
    got = run_model(model, tlm_inputs(model, inputs), strict=True).outputs
    for k, v in ops.items():
        monkeypatch.setitem(KERNEL_OPS, k, v)
    assert counts["gate"] and counts["tanh_c"] and counts["conv"], counts
    assert compare(got, want) is None, compare(got, want)


@dataclass(frozen=True)
class Disagreement:
    reason: str
    checks: tuple


DISAGREEMENTS = {
    "tflm_dtln_noise_suppression": Disagreement(
        "Vela/LiteRT disagreement, two places: (1) LSTM gates: LiteRT's integer LSTM kernel computes "
        "sigmoid/tanh with gemmlowp's 16-bit fixed-point functions on pre-activations saturated to "
        "int16 (Q3.12, +-8); Vela programs lut_sigmoid/lut_tanh, TFLite's int16 LOGISTIC/TANH "
        "approximation (input x 3*4096 up to +-10.3, 512-entry interpolation): gate values differ by "
        "an LSB or more; (2) FULLY_CONNECTED: LiteRT's reference rounds once, Vela programs "
        "double_symmetric with shift > 31, which the TRM defines as a double rounding. The TLM follows "
        "the stream (check 1); with LiteRT's arithmetic at both places it equals LiteRT (check 2)",
        (check_fully_connected_rounding, check_lstm_with_litert_arithmetic)),
}


# ---------------------------------------------------------------------------- tests
def test_models_folder_present():
    d = require_models()
    assert len(NAMES) >= 1 and (d / "README.md").is_file()
    assert set(DISAGREEMENTS) <= set(NAMES), set(DISAGREEMENTS) - set(NAMES)
    assert set(SEPARATE_IO_INCONSISTENT) <= set(STATEFUL) and STATEFUL


def test_models_folder_lookup_in_a_worktree(tmp_path):
    main, wt = tmp_path / "main", tmp_path / "wt" / "branch"
    (main / ".git" / "worktrees" / "branch").mkdir(parents=True)
    (main / ".git" / "worktrees" / "branch" / "commondir").write_text("../..\n")
    wt.mkdir(parents=True)
    (wt / ".git").write_text(f"gitdir: {main / '.git' / 'worktrees' / 'branch'}\n")
    assert _main_checkout(wt) == main
    assert _main_checkout(main) is None


def test_make_inputs_gives_transpose_conv_its_output_shape():
    require_models()
    names = [n for n in NAMES if n.startswith("seanet_transpose_conv")]
    if not names:
        pytest.skip("no TRANSPOSE_CONV model in the folder")
    for n in names:
        it = interpreter(model_bytes(n))
        x = make_inputs(model_bytes(n))
        assert x[0].dtype == np.int32 and list(x[0]) == list(it.get_output_details()[0]["shape"])


@pytest.mark.long
def test_survey(capsys):
    """Every case (memoised for the per-case tests) and a table of the verdicts."""
    require_models()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:   # vela subprocesses
        list(pool.map(lambda case: compiled(*case), [(n, a) for n in NAMES for a in ACCELS]))
    rows, exact = [], 0
    for name in NAMES:
        cells = []
        for accel in ACCELS:
            o = outcome(name, accel)
            ok = o.diff is None
            exact += ok
            cells.append("exact" if ok else "DISAGREE" if name in DISAGREEMENTS else "MISMATCH")
        rows.append(f"{name:<32}" + "".join(f"{c:>10}" for c in cells))
    total = len(NAMES) * len(ACCELS)
    lines = [f"published models ({MODELS}): {exact} of {total} cases bit-exact vs LiteRT BUILTIN_REF, "
             f"{time.perf_counter() - t0:.1f} s (inputs seed {SEED})",
             f"{'model':<32}" + "".join(f"{a[10:]:>10}" for a in ACCELS)] + rows
    for name, d in DISAGREEMENTS.items():
        lines.append(f"DISAGREE {name}: {d.reason}")
    for (name, accel), o in sorted(_OUTCOMES.items()):
        if o.diff is not None:
            lines.append(f"  {name} {accel}: {o.error or o.diff}")
    table = "\n".join(lines)
    SURVEY_FILE.parent.mkdir(parents=True, exist_ok=True)
    SURVEY_FILE.write_text(table + "\n")
    with capsys.disabled():
        print("\n" + table)
    assert exact + sum(1 for (n, _), o in _OUTCOMES.items() if o.diff is not None) == total


@pytest.mark.parametrize("accel", ACCELS)
@pytest.mark.parametrize("name", NAMES)
def test_published_model(name, accel, monkeypatch):
    o = outcome(name, accel)
    assert not o.error, o.error
    known = DISAGREEMENTS.get(name)
    if known is None:
        assert o.diff is None, f"{name} on {accel}: {o.diff}"
        return
    assert o.diff is not None, f"{name}: the documented disagreement no longer shows; update DISAGREEMENTS"
    for check in known.checks:
        check(name, accel, monkeypatch)
    pytest.xfail(known.reason)


@pytest.mark.parametrize("name", NAMES)
def test_published_model_as_vela_tflite(name):
    """The *_vela.tflite output of the same compilation runs to the same outputs as the raw
    .npz (its loader: inputs without an allocation, is_variable state tensors among the
    custom operator's inputs and outputs, the subgraph's own outputs)."""
    raw = outcome(name, "ethos-u85-256")
    assert not raw.error, raw.error
    inputs, _ = reference(name)
    model = load(compiled(name, "ethos-u85-256", "tflite"))
    got = run_model(model, tlm_inputs(model, inputs), strict=True).outputs
    assert compare(got, [x.reshape(y.shape) for x, y in zip(raw.outputs, got, strict=True)]) is None


# Vela 5.2 with --separate-io-regions and state tensors: micro_speech_lstm's stream writes
# region 4 (outputs) at offset 0x3190, which its .tflite's OfflineMemoryAllocation gives to
# no output (the state-out copies are at 0 and 80, the output at 240): the TLM stops with a
# bus fault there (the runner sizes region 4 by its tensors), an error, never a wrong result.
SEPARATE_IO_INCONSISTENT = {"tflm_micro_speech_lstm": "Vela 5.2 writes region 4 outside every tensor it lists"}


@pytest.mark.parametrize("name", STATEFUL)
def test_state_tensors_with_separate_io_regions(name):
    """--separate-io-regions puts the state tensors in the input region (state in) and the
    output region (state out): the *_vela.tflite output (which says so) gives the default
    compilation's outputs; the raw .npz (which says region 1) is refused with one message."""
    assert load(compiled(name, "ethos-u85-256")).variables
    inputs, _ = reference(name)
    raw = outcome(name, "ethos-u85-256")
    model = load(compiled(name, "ethos-u85-256", "tflite", "separate_io"))
    assert {t.region for t in model.variables} == {3, 4}
    with pytest.raises(RunError) as e:
        npz = load(compiled(name, "ethos-u85-256", "raw", "separate_io"))
        run_model(npz, tlm_inputs(npz, inputs))
    assert e.value.kind == "model" and "--separate-io-regions raw .npz" in str(e.value)
    if name in SEPARATE_IO_INCONSISTENT:
        with pytest.raises(RunError) as e:
            run_model(model, tlm_inputs(model, inputs))
        assert e.value.kind == "bus_fault" and "faulting_channel=wr_ofm" in str(e.value)
        pytest.xfail(SEPARATE_IO_INCONSISTENT[name])
    got = run_model(model, tlm_inputs(model, inputs), strict=True).outputs
    assert compare(got, [x.reshape(y.shape) for x, y in zip(raw.outputs, got, strict=True)]) is None
