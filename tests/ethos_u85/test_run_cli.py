"""`npu-tlm run`: outputs on good models, one-line errors (never a traceback) otherwise.

Good paths: a DMA-only synthetic model (runs today, output = input copied by the NPU), and the
Vela-compiled `maxpool_2x2_s2_valid` checked bit for bit against LiteRT BUILTIN_REF, with the
TLM's NPU_OP_POOL when it exists and, independently, with `max_pool_double` plugged in.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.ethos_u85.support.cli_models import COPY_STREAM, IN_SHAPE, copy_model, dma_copy_stream
from tests.ethos_u85.support.vela_files import cop1, write_npz
from tlm.core import cli
from tlm.ethos_u85 import isa
from tlm.ethos_u85.memory import Channel

POOL_NET = "maxpool_2x2_s2_valid"


def max_pool_double(snap, port, device):
    """Test double for NPU_OP_POOL, MAX only: int8 NHWC, one tile, unit OFM scale (what Vela
    emits for the pool nets). Not the TLM's kernel: it lets the CLI path be checked against
    LiteRT while NPU_OP_POOL is being written."""
    f = snap.field
    assert f("NPU_SET_IFM_PRECISION", "activation_format") == 0 == f("NPU_SET_OFM_PRECISION", "activation_format")
    assert (f("NPU_SET_OFM_SCALE", "scale"), f("NPU_SET_OFM_SCALE", "shift")) == (1, 0)
    h, w = f("NPU_SET_IFM_HEIGHT0_M1", "height_m1") + 1, f("NPU_SET_IFM_WIDTH0_M1", "width_m1") + 1
    c = f("NPU_SET_IFM_DEPTH_M1", "depth_m1") + 1
    sy, sx = f("NPU_SET_IFM_STRIDE_Y", "addr"), f("NPU_SET_IFM_STRIDE_X", "addr")
    raw = port.read(f("NPU_SET_IFM_REGION", "region"), f("NPU_SET_IFM_BASE0", "addr"),
                    (h - 1) * sy + (w - 1) * sx + c, Channel.rd_ifm).view(np.int8)
    ifm = np.lib.stride_tricks.as_strided(raw, (h, w, c), (sy, sx, 1)).astype(np.int32)
    pads = [f(f"NPU_SET_IFM_PAD_{s}", "pad") for s in ("TOP", "BOTTOM", "LEFT", "RIGHT")]
    ifm = np.pad(ifm, (pads[:2], pads[2:], (0, 0)), constant_values=-(1 << 20))
    kh, kw = f("NPU_SET_KERNEL_HEIGHT_M1", "height_m1") + 1, f("NPU_SET_KERNEL_WIDTH_M1", "width_m1") + 1
    ky = (f("NPU_SET_KERNEL_STRIDE", "stride_y_msb") << 1 | f("NPU_SET_KERNEL_STRIDE", "stride_y_lsb")) + 1
    kx = (f("NPU_SET_KERNEL_STRIDE", "stride_x_msb") << 1 | f("NPU_SET_KERNEL_STRIDE", "stride_x_lsb")) + 1
    oh, ow = f("NPU_SET_OFM_HEIGHT_M1", "height_m1") + 1, f("NPU_SET_OFM_WIDTH_M1", "width_m1") + 1
    out = np.full((oh, ow, c), -(1 << 20), np.int32)
    for dy in range(kh):
        for dx in range(kw):
            out = np.maximum(out, ifm[dy:dy + ky * (oh - 1) + 1:ky, dx:dx + kx * (ow - 1) + 1:kx])
    lo, hi = (np.int16(np.uint16(f(f"NPU_SET_ACTIVATION_{m}", "clip_boundary"))) for m in ("MIN", "MAX"))
    out = np.clip(out, lo, hi).astype(np.int8)
    oy, ox = f("NPU_SET_OFM_STRIDE_Y", "addr"), f("NPU_SET_OFM_STRIDE_X", "addr")
    for y in range(oh):
        for x in range(ow):
            port.write(f("NPU_SET_OFM_REGION", "region"), f("NPU_SET_OFM_BASE0", "addr") + y * oy + x * ox,
                       out[y, x], Channel.wr_ofm)


def run_cli(capsys, *argv):
    rc = cli.main(["run", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err.splitlines()


def save(path, array) -> Path:
    np.save(path, array)
    return Path(path)


def rand_input(seed, shape=IN_SHAPE, dtype=np.int8):
    """Seeded (the seeds are literals at the call sites)."""
    rng = np.random.default_rng(seed)
    return rng.integers(-128, 128, size=shape).astype(dtype)


# ---------------------------------------------------------------------------- good paths
def test_run_dma_copy_model(tmp_path, capsys):
    model = copy_model(tmp_path / "copy_vela.npz")
    x = rand_input(11)
    out = tmp_path / "result.bin"                     # the path is used as given (no '.npz' added)
    rc, stdout, err = run_cli(capsys, model, "--input", save(tmp_path / "x.npy", x), "--output", out)
    assert (rc, err) == (0, [])
    with np.load(out) as z:
        assert z.files == ["output0"]
        assert z["output0"].dtype == np.int8 and z["output0"].shape == IN_SHAPE
        assert np.array_equal(z["output0"], x)


def test_run_with_explicit_budgets(tmp_path, capsys):
    model = copy_model(tmp_path / "copy_vela.npz")
    x = rand_input(12)
    out = tmp_path / "o.npz"
    rc, _, err = run_cli(capsys, model, "--input", save(tmp_path / "x.npy", x), "--output", out,
                         "--max-steps", "8", "--max-work", "1_000")
    assert (rc, err) == (0, [])
    with np.load(out) as z:
        assert np.array_equal(z["output0"], x)


@pytest.mark.parametrize("opt, value", [("--max-steps", "0"), ("--max-work", "-5"), ("--max-work", "lots")])
def test_run_rejects_bad_budget_options(tmp_path, capsys, opt, value):
    with pytest.raises(SystemExit) as e:
        cli.main(["run", str(tmp_path / "m.npz"), "--output", str(tmp_path / "o.npz"), opt, value])
    assert e.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"npu-tlm: error: run: argument {opt}: ")


def _pool_case(tmp_path, vela_compiled, net_reference, output_format, capsys, *extra):
    model = vela_compiled(POOL_NET, "ethos-u85-256", "default", output_format)
    (x,), (want,) = net_reference(POOL_NET)
    out = tmp_path / "out.npz"
    rc, _, err = run_cli(capsys, model, "--input", save(tmp_path / "in0.npy", x), "--output", out, *extra)
    assert rc == 0
    if "--config" in extra:       # another configuration than the model's: a warning, same result
        assert len(err) == 1 and err[0].startswith("npu-tlm: warning: ") and "MACs per cycle" in err[0]
    else:
        assert err == []
    with np.load(out) as z:
        assert z.files == ["output0"]
        got = z["output0"]
    assert got.dtype == want.dtype and got.shape == (1, 4, 4, 16)
    assert np.array_equal(got.reshape(want.shape), want), f"{np.count_nonzero(got != want)} elements differ"


@pytest.mark.vela
@pytest.mark.parametrize("output_format", ["raw", "tflite"])
def test_run_maxpool_vs_litert(tmp_path, vela_compiled, net_reference, kernel_ops, output_format, capsys):
    if "NPU_OP_POOL" not in kernel_ops:
        pytest.skip("the TLM has no NPU_OP_POOL yet")
    _pool_case(tmp_path, vela_compiled, net_reference, output_format, capsys)


@pytest.mark.vela
@pytest.mark.parametrize("output_format, extra", [("raw", ()), ("tflite", ()),
                                                  ("raw", ("--config", "ethos-u85-512"))])
def test_run_maxpool_with_pool_double_vs_litert(tmp_path, vela_compiled, net_reference, kernel_ops,
                                                monkeypatch, output_format, extra, capsys):
    monkeypatch.setitem(kernel_ops, "NPU_OP_POOL", max_pool_double)
    _pool_case(tmp_path, vela_compiled, net_reference, output_format, capsys, *extra)


# ---------------------------------------------------------------------------- bad input
def _corrupt_npy(p):
    p.write_bytes(b"\x93NUMPY\x01\x00garbage")
    return p


def _pickled_npy(p):
    np.save(p, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    return p


def _npz_input(p):
    np.savez(p.with_suffix(".npz"), a=rand_input(1), b=rand_input(2))
    return p.with_suffix(".npz")


BAD = {
    # name: (argv builder (tmp, model, good_input) -> argv, expected text in the message)
    "missing_model": (lambda t, m, x: [t / "nope_vela.npz", "--input", x], "nope_vela.npz: no such file"),
    "corrupt_model": (lambda t, m, x: [_write(t / "bad_vela.npz", b"PK\x03\x04" + bytes(range(200))),
                                       "--input", x], "not a valid .npz archive"),
    "missing_input": (lambda t, m, x: [m, "--input", t / "none.npy"], "none.npy: no such file"),
    "corrupt_input": (lambda t, m, x: [m, "--input", _corrupt_npy(t / "c.npy")], "not a readable .npy"),
    "pickled_input": (lambda t, m, x: [m, "--input", _pickled_npy(t / "p.npy")], "not a readable .npy"),
    "npz_as_input": (lambda t, m, x: [m, "--input", _npz_input(t / "z.npy")], "holds several arrays"),
    "no_input": (lambda t, m, x: [m], "the model has 1 input, got 0"),
    "two_inputs": (lambda t, m, x: [m, "--input", x, "--input", x], "the model has 1 input, got 2"),
    "wrong_shape": (lambda t, m, x: [m, "--input", save(t / "s.npy", rand_input(3, (1, 8, 16, 7)))],
                    "input 0 ('input0') has shape [1, 8, 16, 7] (896 elements), the model expects "
                    "[1, 8, 8, 16] (NHWC, 1024 elements)"),
    "wrong_dtype": (lambda t, m, x: [m, "--input", save(t / "d.npy", rand_input(4, dtype=np.int16))],
                    "input 0 ('input0') has dtype int16, the model expects int8"),
    "bad_config": (lambda t, m, x: [m, "--input", x, "--config", "ethos-u85-999"],
                   "unknown Ethos-U85 configuration 'ethos-u85-999'"),
    "u55_config": (lambda t, m, x: [m, "--input", x, "--config", "ethos-u55-128"],   # no prefix match
                   "unknown Ethos-U85 configuration 'ethos-u55-128'"),
    # the copy stream has 8 commands; its DMA alone is 1 + 2 x (1 transaction + 1024 / 64) work units
    "max_steps": (lambda t, m, x: [m, "--input", x, "--max-steps", "3"],
                  "step budget used up at command offset 0x10 (NPU_SET_DMA0_DST), NPU still running: "
                  "budget of 3 steps"),
    "max_work": (lambda t, m, x: [m, "--input", x, "--max-work", "10"],
                 "work budget used up at command offset 0x24 (NPU_OP_DMA_WAIT), NPU still running: "
                 "budget of 10 work units"),
    "u55_model": (lambda t, m, x: [write_npz(t / "u55_vela.npz", cop1([0], config=0x00003008)), "--input", x],
                  "compiled for product 0, not an Ethos-U85"),
    # The stream reads region 5, which a Vela model does not use: the runner binds it to a
    # DECERR window, so the NPU stops with bus_status at the DMA_START (offset 0x20).
    "bus_fault": (lambda t, m, x: [copy_model(t / "f_vela.npz", dma_copy_stream(5, 0, 1, 0, 16)), "--input", x],
                  "NPU stopped with bus_status, faulting_interface=ext faulting_channel=rd_mem2mem "
                  "at command offset 0x20 (NPU_OP_DMA_START)"),
    "unimplemented_op": (lambda t, m, x: [copy_model(t / "u_vela.npz", isa.encode("NPU_OP_RESIZE")), "--input", x],
                         "NPU stopped with cmd_parse_error at command offset 0x0 (NPU_OP_RESIZE): "
                         "NPU_OP_RESIZE not implemented"),
}


def _write(p, data):
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("case", list(BAD))
def test_run_bad_input_one_line(tmp_path, capsys, kernel_ops, monkeypatch, case):
    monkeypatch.delitem(kernel_ops, "NPU_OP_RESIZE", raising=False)
    build, text = BAD[case]
    model = copy_model(tmp_path / "good_vela.npz")
    good = save(tmp_path / "good.npy", rand_input(5))
    out = tmp_path / "out.npz"
    rc, stdout, err = run_cli(capsys, *build(tmp_path, model, good), "--output", out)
    assert rc == 1 and stdout == ""
    assert len(err) == 1 and err[0].startswith("npu-tlm: error: "), err
    assert text in err[0], err[0]
    assert not out.exists()


# ---------------------------------------------------------------------------- warnings, --strict
RESERVED_OP = isa.encode("NPU_OP_ELEMENTWISE", elementwise_mode=12)      # fails a TRM assert


def test_run_warns_once_per_kind_of_unpredictable_event(tmp_path, capsys):
    """The copy still runs (an UNPREDICTABLE op has no further effect), exit 0, but never
    silently: one warning line for the two events of one kind, naming offset, op, assert."""
    model = copy_model(tmp_path / "r_vela.npz", RESERVED_OP + RESERVED_OP + COPY_STREAM)
    x = rand_input(11)
    rc, stdout, err = run_cli(capsys, model, "--input", save(tmp_path / "x.npy", x), "--output", tmp_path / "o.npz")
    assert rc == 0 and stdout == ""
    assert err == [f"npu-tlm: warning: {model}: UNPREDICTABLE at command offset 0x0 (NPU_OP_ELEMENTWISE): "
                   f"reserved elementwise_mode 12 [2 times]"]
    assert np.array_equal(np.load(tmp_path / "o.npz")["output0"], x)


def test_run_strict_turns_warnings_into_an_error_exit(tmp_path, capsys):
    model = copy_model(tmp_path / "r_vela.npz", RESERVED_OP + COPY_STREAM)
    out = tmp_path / "o.npz"
    rc, stdout, err = run_cli(capsys, model, "--input", save(tmp_path / "x.npy", rand_input(12)), "--output", out,
                              "--strict")
    assert rc == 1 and stdout == "" and not out.exists()
    assert len(err) == 2 and err[0].startswith("npu-tlm: warning: ") and "reserved elementwise_mode 12" in err[0]
    assert err[1] == f"npu-tlm: error: {model}: --strict: the run had 1 warning event (listed above); no output written"
    rc, _, err = run_cli(capsys, copy_model(tmp_path / "g_vela.npz"), "--input", tmp_path / "x.npy", "--output", out,
                         "--strict")
    assert rc == 0 and err == [] and out.exists()


def test_run_config_that_disagrees_with_the_model_warns(tmp_path, capsys):
    model = copy_model(tmp_path / "g_vela.npz")
    x = save(tmp_path / "x.npy", rand_input(13))
    rc, _, err = run_cli(capsys, model, "--input", x, "--output", tmp_path / "o.npz", "--config", "ethos-u85-1024")
    assert rc == 0 and len(err) == 1
    assert err[0] == (f"npu-tlm: warning: {model}: config: the model was compiled for 256 MACs per cycle, "
                      f"ethos-u85-1024 has 1024 (CONFIG 0x20000118); Arm's driver refuses it")
    rc, _, err = run_cli(capsys, model, "--input", x, "--output", tmp_path / "o.npz", "--config", "ethos-u85-256")
    assert rc == 0 and err == []
    rc, _, err = run_cli(capsys, model, "--input", x, "--output", tmp_path / "o.npz", "--config", "ethos-u85-1024",
                         "--strict")
    assert rc == 1 and len(err) == 2 and err[1].startswith("npu-tlm: error: ")


def test_run_input_of_another_shape_with_the_element_count(tmp_path, capsys):
    """micro_speech: the TFLite input [1, 1960] is the raw input [1, 49, 40, 1]."""
    model = copy_model(tmp_path / "g_vela.npz")
    x = rand_input(14, (1, 1024))
    rc, _, err = run_cli(capsys, model, "--input", save(tmp_path / "x.npy", x), "--output", tmp_path / "o.npz")
    assert rc == 0 and err == []
    assert np.array_equal(np.load(tmp_path / "o.npz")["output0"].ravel(), x.ravel())


def test_run_does_not_ask_for_an_input_the_stream_never_reads(tmp_path, capsys):
    model = copy_model(tmp_path / "u_vela.npz", input_shape=np.array([[1, 1, 1, 1, 1, 4], [1, 1, *IN_SHAPE]]),
                       input_elem_size=np.array([4, 1]), input_region=np.array([1, 1]),
                       input_offset=np.array([2.0 ** 64 - 1, 1024.0]),
                       input_quantization=np.array([None, None], dtype=object))
    x = rand_input(15)
    xs = save(tmp_path / "x.npy", x)
    shape = save(tmp_path / "s.npy", np.array(IN_SHAPE, np.int32))
    for argv in (["--input", xs], ["--input", shape, "--input", xs]):
        rc, _, err = run_cli(capsys, model, *argv, "--output", tmp_path / "o.npz")
        assert rc == 0 and err == []
        assert np.array_equal(np.load(tmp_path / "o.npz")["output0"], x)


def test_run_unwritable_output(tmp_path, capsys):
    model = copy_model(tmp_path / "good_vela.npz")
    rc, _, err = run_cli(capsys, model, "--input", save(tmp_path / "x.npy", rand_input(6)),
                         "--output", tmp_path / "no_such_dir" / "out.npz")
    assert rc == 1 and len(err) == 1
    assert err[0].startswith("npu-tlm: error: ") and "cannot write" in err[0]


@pytest.mark.parametrize("make_input", ["missing", "wrong_dtype"])
def test_run_process_exit_status_no_traceback(tmp_path, make_input):
    """The installed entry point's behaviour, in a real process."""
    model = copy_model(tmp_path / "good_vela.npz")
    x = tmp_path / "x.npy"
    if make_input == "wrong_dtype":
        save(x, rand_input(7, dtype=np.uint8))
    r = subprocess.run([sys.executable, "-m", "tlm.core.cli", "run", str(model), "--input", str(x),
                        "--output", str(tmp_path / "o.npz")], capture_output=True, text=True,
                       cwd=Path(__file__).resolve().parents[1])
    assert r.returncode == 1 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("npu-tlm: error: ") and "Traceback" not in r.stderr
