"""`npu-tlm` under hostile input (issue "Hostile input", CLI part).

Every subcommand given a bad file (missing, directory, empty, truncated or foreign .npz,
.npz with wrong keys/dtypes, random bytes, a TFLite file that Vela did not compile, ...) or,
for `run`, bad inputs (wrong count/shape/dtype, unreadable .npy, unwritable output) answers
with exactly one stderr line starting ``npu-tlm: error: ``, a non-zero exit status and no
traceback. Most cases call `tlm.ethos_u85.cli.main` in-process (fast); a few run the `npu-tlm`
console script as a subprocess (real exit status, real stderr, pipes, resource limits).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.ethos_u85.support.cli_models import COPY_STREAM, IN_SHAPE, copy_model
from tests.ethos_u85.support.vela_files import STREAM, cop1, cop2, write_npz
from tlm.core import cli
from tlm.ethos_u85 import cli as u85cli
from tlm.ethos_u85 import isa

PREFIX = "npu-tlm: error: "
SCRIPT = Path(sys.executable).with_name("npu-tlm")


def _subcommands() -> set:
    parser = cli.build_parser()
    return {name for a in parser._actions if isinstance(a, argparse._SubParsersAction) for name in a.choices}


SUBCOMMANDS = _subcommands()


def good_input(tmp: Path, name="in0.npy") -> Path:
    p = tmp / name
    np.save(p, np.random.default_rng(5).integers(-128, 128, IN_SHAPE).astype(np.int8))
    return p


def invoke(capsys, *argv):
    """cli.main in-process: (exit status, stdout, stderr). An exception escaping main is the
    bug these tests look for, so it fails the test with its type and message."""
    try:
        rc = cli.main([str(a) for a in argv])
    except SystemExit as e:
        rc = e.code
    except Exception as e:  # noqa: BLE001
        capsys.readouterr()
        pytest.fail(f"exception escaped cli.main({' '.join(map(str, argv))}): {type(e).__name__}: {e}")
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_error(rc, out, err, contains: "str | None" = None, stdout_may_have_lines: bool = False):
    lines = err.splitlines()
    assert isinstance(rc, int) and rc != 0, f"exit status {rc!r}, stderr {err!r}"
    assert len(lines) == 1 and lines[0].startswith(PREFIX), f"stderr is not one error line: {err!r}"
    assert "Traceback" not in out + err
    if not stdout_may_have_lines:
        assert out == "", f"stdout on error: {out[:200]!r}"
    if contains:
        assert contains in lines[0], lines[0]


# ============================================================================================
# Bad model files (every subcommand)
# ============================================================================================
def _rand(n: int, seed: int, prefix: bytes = b"") -> bytes:
    return prefix + np.random.default_rng(seed).bytes(n - len(prefix))


def _truncated(frac: float):
    def make(p: Path):
        good = copy_model(p.with_name("good_" + p.name))
        data = good.read_bytes()
        p.write_bytes(data[: int(len(data) * frac)])
    return make


def _member_mangled(key: str, mangle):
    """A valid zip whose member `key` is replaced by mangle(original bytes)."""
    def make(p: Path):
        good = copy_model(p.with_name("good_" + p.name))
        with zipfile.ZipFile(good) as src, zipfile.ZipFile(p, "w") as dst:
            for item in src.infolist():
                data = src.read(item)
                dst.writestr(item, mangle(data) if item.filename == key + ".npy" else data)
    return make


def _npz(**override):
    return lambda p: copy_model(p, **override)


def _npz_drop(key):
    return lambda p: write_npz(p, cop1(COPY_STREAM), drop=(key,))


def _zip_with_text(p: Path):
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("readme.txt", "not a model\n")


def _evil_pickle(p: Path):
    """input_quantization pickles a class outside the loader's numpy-only allowlist."""
    copy_model(p, input_quantization=np.array([Path("/etc/passwd")], dtype=object))


def _needs(module: str):
    """Import a test-flow dependency (pyproject [test]): skip locally without it, fail under CI."""
    import importlib

    from tests.support import tool_missing
    try:
        return importlib.import_module(module)
    except ImportError as e:
        tool_missing(f"{module} ({e})")


def _nonvela_tflite(p: Path):
    nets = _needs("tests.nets")
    _needs("flatbuffers")
    p.write_bytes(nets.build("add_8x8x16"))


def _vela_tflite_cut(p: Path):
    _needs("ethosu.vela")
    from tests import nets

    data = nets.compiled("add_8x8x16", "ethos-u85-256", output_format="tflite").read_bytes()
    p.write_bytes(data[: len(data) // 2])


NPZ_KEYS = ("cmd_data", "weight_data", "scratch_size", "scratch_fast_size", "input_shape", "input_elem_size",
            "input_region", "input_offset", "input_quantization", "output_shape", "output_elem_size",
            "output_region", "output_offset", "output_quantization")

BAD_MODELS = {
    # name: (file name, maker or None, message fragment or None)
    "missing": ("nothere_vela.npz", None, "no such file"),
    "directory": ("adir_vela.npz", lambda p: p.mkdir(), "is a directory"),
    "empty_npz": ("e_vela.npz", lambda p: p.write_bytes(b""), "empty file"),
    "empty_tflite": ("e_vela.tflite", lambda p: p.write_bytes(b""), "empty file"),
    "empty_bin": ("e.bin", lambda p: p.write_bytes(b""), "empty file"),
    "dev_null": ("/dev/null", None, "not a regular file"),
    "truncated_npz_10": ("t10_vela.npz", _truncated(0.1), None),
    "truncated_npz_50": ("t50_vela.npz", _truncated(0.5), None),
    "truncated_npz_99": ("t99_vela.npz", _truncated(0.99), None),
    "truncated_member": ("tm_vela.npz", _member_mangled("cmd_data", lambda b: b[:90]), "corrupt Vela .npz"),
    "garbage_member": ("gm_vela.npz", _member_mangled("input_shape", lambda b: _rand(len(b), 1)), None),
    "member_bad_header": ("bh_vela.npz", _member_mangled("scratch_size", lambda b: b[:6] + b"\x09\x00" + b[8:]),
                          None),
    "foreign_npz": ("x.npz", lambda p: np.savez(p, x=np.arange(3)), "not a Vela raw .npz"),
    "zip_not_npz": ("z_vela.npz", _zip_with_text, "not a Vela raw .npz"),
    "evil_pickle": ("ev_vela.npz", _evil_pickle, "corrupt Vela .npz"),
    "cmd_data_int_array": ("ci_vela.npz", _npz(cmd_data=np.arange(10)), None),
    "cmd_data_1d_bytes": ("cb_vela.npz", _npz(cmd_data=np.array([b"COP1", b"xx"])), None),
    "cmd_data_random": ("cr_vela.npz", _npz(cmd_data=np.array(_rand(64, 2))), None),
    "cmd_data_empty": ("ce_vela.npz", _npz(cmd_data=np.array(b"")), None),
    "cmd_data_cop1_cut": ("c1_vela.npz", _npz(cmd_data=np.array(cop1(STREAM)[:-8])), "announces"),
    "cmd_data_cop2_cut": ("c2_vela.npz", _npz(cmd_data=np.array(cop2(STREAM)[:-4])), "COP2"),
    "weight_data_float": ("wf_vela.npz", _npz(weight_data=np.zeros(4, np.float32)), None),
    "scratch_size_str": ("ss_vela.npz", _npz(scratch_size=np.array("abc")), None),
    "scratch_size_vector": ("sv_vela.npz", _npz(scratch_size=np.array([1, 2])), None),
    "input_shape_1d": ("i1_vela.npz", _npz(input_shape=np.array([1, 2, 3])), None),
    "input_shape_str": ("is_vela.npz", _npz(input_shape=np.array([["a"] * 6])), None),
    "input_elem_size_3": ("ie_vela.npz", _npz(input_elem_size=np.array([3])), "1, 2, 4 or 8"),
    "input_rows_mismatch": ("ir_vela.npz", _npz(input_region=np.array([1, 1])), "different lengths"),
    "random_npz": ("r.npz", lambda p: p.write_bytes(_rand(1000, 3)), None),
    "random_tflite": ("r.tflite", lambda p: p.write_bytes(_rand(999, 4)), None),
    "random_tfl3": ("r3.tflite", lambda p: p.write_bytes(_rand(4000, 5, b"\x18\x00\x00\x00TFL3")), None),
    "random_bin_odd": ("r.bin", lambda p: p.write_bytes(_rand(1001, 6)), "not a whole number of 32-bit words"),
    "random_no_suffix": ("randomfile", lambda p: p.write_bytes(_rand(1000, 7)), None),
    "text_file": ("notes.txt", lambda p: p.write_text("hello\n"), "not a Vela output"),
    "cop1_file_cut": ("cut.bin", lambda p: p.write_bytes(cop1(STREAM)[:-8]), None),
    "cop2_file_bad_major": ("m.bin", lambda p: p.write_bytes(cop2(STREAM)[:4] + b"\x07\x00" + cop2(STREAM)[6:]),
                            None),
    "nonvela_tflite": ("plain.tflite", _nonvela_tflite, "no 'ethos-u' custom operator"),
    "vela_tflite_cut": ("cut_vela.tflite", _vela_tflite_cut, None),
}


def _model_path(tmp_path: Path, case: str) -> Path:
    name, make, _ = BAD_MODELS[case]
    path = Path(name) if name.startswith("/") else tmp_path / name
    if make:
        make(path)
    return path


def _argv(sub: str, model: Path, tmp_path: Path) -> list:
    if sub == "run":
        return ["run", model, "--input", good_input(tmp_path), "--output", tmp_path / "out.npz"]
    if sub == "trace":
        return ["trace", model, "--input", good_input(tmp_path), "--out", tmp_path / "trace"]
    return [sub, model]


def _subs():
    """The subcommands that take a Vela model: the Ethos-U85's (the core's replay and devices
    take none: tests/core/test_trace.py)."""
    parser = cli.build_parser([u85cli.COMMANDS])
    return sorted(name for a in parser._actions if isinstance(a, argparse._SubParsersAction) for name in a.choices)


@pytest.mark.parametrize("sub", _subs())
@pytest.mark.parametrize("case", BAD_MODELS)
def test_bad_model_file_one_error_line(tmp_path, capsys, sub, case):
    path = _model_path(tmp_path, case)
    rc, out, err = invoke(capsys, *_argv(sub, path, tmp_path))
    assert_one_error(rc, out, err, BAD_MODELS[case][2])
    assert rc == 1


@pytest.mark.parametrize("sub", _subs())
def test_reserved_word_in_stream(tmp_path, capsys, sub):
    """disasm lists the commands before the bad word; run stops with cmd_parse_error."""
    path = tmp_path / "w.bin"
    path.write_bytes(np.array(STREAM[:3] + [0x4400], "<u4").tobytes())
    model = path if sub == "disasm" else write_npz(tmp_path / "w_vela.npz", cop1(STREAM[:3] + [0x4400]))
    rc, out, err = invoke(capsys, *_argv(sub, model, tmp_path))
    assert_one_error(rc, out, err, stdout_may_have_lines=sub == "disasm")


# --------------------------------------------------------------------------- mutation fuzz
def _mutants(data: bytes, n: int, seed: int):
    """Seeded byte-level mutants: overwrite, flip, cut, insert, duplicate a span."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        b = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            k = int(rng.integers(0, 5))
            i = int(rng.integers(0, max(1, len(b))))
            if k == 0:
                b[i:i + 4] = rng.bytes(4)
            elif k == 1 and b:
                b[i % len(b)] ^= 1 << int(rng.integers(0, 8))
            elif k == 2:
                del b[i:]
            elif k == 3:
                b[i:i] = rng.bytes(int(rng.integers(1, 16)))
            else:
                j = int(rng.integers(i, len(b) + 1))
                b[i:i] = b[i:j][:256]
        yield bytes(b)


def _real_models():
    """(label, bytes, suffix) of real Vela outputs (tinynet)."""
    _needs("ethosu.vela")
    from tests import nets

    out = []
    for fmt, suffix in (("raw", "_vela.npz"), ("tflite", "_vela.tflite")):
        p = nets.compiled("tinynet", "ethos-u85-256", output_format=fmt)
        out.append((fmt, p.read_bytes(), suffix))
    return out


def _escape(argv) -> "str | None":
    """Run cli.main; the escaping exception as 'Type: message', or None."""
    try:
        cli.main([str(a) for a in argv])
    except SystemExit:
        return None
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"
    return None


def _mutation_run(capsys, argvs) -> int:
    """Runs every argv; returns how many succeeded (no error line). A `run` that completes
    after UNPREDICTABLE events prints one `npu-tlm: warning: ` line per kind of event first
    (never silent); a failure is one error line after them."""
    escaped, ok = [], 0
    for argv in argvs:
        esc = _escape(argv)
        out, err = capsys.readouterr()
        if esc is not None:
            escaped.append(f"{argv[1]}: {esc}")
            continue
        lines = err.splitlines()
        warn = [ln for ln in lines if ln.startswith("npu-tlm: warning: ")]
        rest = lines[len(warn):]
        assert "Traceback" not in out + err
        assert lines[:len(warn)] == warn and (not warn or argv[0] == "run"), f"{argv}: {err!r}"
        assert rest == [] or (len(rest) == 1 and rest[0].startswith(PREFIX)), f"{argv}: {err!r}"
        ok += rest == []
    assert not escaped, "exceptions escaped cli.main:\n" + "\n".join(escaped[:10])
    return ok


def test_disasm_mutated_vela_outputs(tmp_path, capsys):
    """Byte mutants of real *_vela.npz / *_vela.tflite files: disasm either succeeds (empty
    stderr) or prints one error line; never a traceback."""
    argvs = []
    for fmt, data, suffix in _real_models():
        for i, blob in enumerate(_mutants(data, 80, seed=101 if fmt == "raw" else 202)):
            path = tmp_path / f"m{fmt}{i}{suffix}"
            path.write_bytes(blob)
            argvs.append(["disasm", path])
    _mutation_run(capsys, argvs)


def test_run_mutated_vela_outputs(tmp_path, capsys):
    """The same byte mutants given to `run` (with an input of the unmutated model's shape and
    a bounded budget): it succeeds or prints one error line; never a traceback."""
    from tlm.ethos_u85.vela import load

    argvs = []
    for fmt, data, suffix in _real_models():
        good = tmp_path / f"good{suffix}"
        good.write_bytes(data)
        t = load(good).inputs[0]
        x = tmp_path / f"in_{fmt}.npy"
        np.save(x, np.random.default_rng(7).integers(-128, 128, t.shape).astype(t.dtype))
        rng = np.random.default_rng(505)
        for i, blob in enumerate(_mutants(data, 30, seed=303 if fmt == "raw" else 404)):
            path = tmp_path / f"r{fmt}{i}{suffix}"
            if fmt == "raw":                # the zip would not load: mutate the stream / weights inside it
                with np.load(good, allow_pickle=True) as z:
                    arrays = {k: z[k] for k in z.files}
                if i % 3:                   # bit flips in the command words (length kept: whole words)
                    b = bytearray(arrays["cmd_data"].item())
                    for _ in range(int(rng.integers(1, 5))):
                        b[int(rng.integers(16, len(b)))] ^= 1 << int(rng.integers(8))
                    arrays["cmd_data"] = np.array(bytes(b))
                else:
                    arrays["weight_data"] = np.array(next(_mutants(arrays["weight_data"].item(), 1,
                                                                   seed=int(rng.integers(1 << 30)))))
                with open(path, "wb") as f:
                    np.savez(f, **arrays)
            else:
                path.write_bytes(blob)
            argvs.append(["run", path, "--input", x, "--output", tmp_path / "o.npz", "--max-steps", "20000",
                          "--max-work", str(1 << 22)])
    assert _mutation_run(capsys, argvs) >= 5            # some mutants run to the end


@pytest.mark.parametrize("sub", _subs())
def test_npz_with_unsupported_zip_version(tmp_path, capsys, sub):
    data = bytearray(copy_model(tmp_path / "good_vela.npz").read_bytes())
    i = data.index(b"PK\x01\x02")                    # first central-directory entry
    data[i + 6:i + 8] = (109).to_bytes(2, "little")    # version needed to extract: 10.9
    path = tmp_path / "v_vela.npz"
    path.write_bytes(bytes(data))
    rc, out, err = invoke(capsys, *_argv(sub, path, tmp_path))
    assert_one_error(rc, out, err)


_FIELD_VALUES = {
    "scratch_size": [0, 1, 1024, -1, 1 << 24],
    "scratch_fast_size": [0, -5, 1 << 20],
    "input_offset": [[0], [-1], [2047], [1 << 24], [1 << 40]],
    "input_region": [[0], [2], [5], [7], [8], [-1], [255]],
    "input_elem_size": [[1], [2], [4], [8], [0], [16]],
    "input_shape": [[[1, 1, 1, 8, 8, 16]], [[1, 1, 1, 0, 8, 16]], [[1, 1, -1, 8, 8, 16]],
                    [[2, 1, 1, 8, 8, 16]], [[1, 1, 1, 1, 1, 1]], [[1, 1, 1, 64, 64, 64]]],
    "output_offset": [[0], [-64], [2047], [1 << 24]],
    "output_region": [[1], [4], [7], [9]],
    "output_shape": [[[1, 1, 1, 8, 8, 16]], [[1, 1, 1, 0, 0, 0]], [[1, 1, 1, -8, 8, 16]], [[1, 1, 1, 256, 256, 64]]],
    "output_elem_size": [[1], [2], [3], [8]],
}


def test_run_npz_field_fuzz(tmp_path, capsys):
    """Seeded random values in the .npz tensor/size fields of a DMA-copy model (the stream
    stays bounded): `run` succeeds or prints one error line, never a traceback."""
    rng = np.random.default_rng(303)
    x = good_input(tmp_path)
    keys = list(_FIELD_VALUES)
    argvs = []
    for i in range(60):
        override = {}
        for k in rng.choice(keys, size=int(rng.integers(1, 4)), replace=False):
            vals = _FIELD_VALUES[str(k)]
            override[str(k)] = np.array(vals[int(rng.integers(0, len(vals)))])
        model = copy_model(tmp_path / f"f{i}_vela.npz", **override)
        argvs.append(["run", model, "--input", x, "--output", tmp_path / "o.npz"])
    _mutation_run(capsys, argvs)


def test_run_model_with_negative_output_dimension(tmp_path, capsys):
    model = copy_model(tmp_path / "neg_vela.npz", output_shape=np.array([[1, 1, 1, -8, 8, 16]]))
    rc, out, err = invoke(capsys, "run", model, "--input", good_input(tmp_path), "--output", tmp_path / "o.npz")
    assert_one_error(rc, out, err)


# ============================================================================================
# run: inputs, output, options
# ============================================================================================
def _npy_header(shape, descr="|i1", payload=b"abc"):
    def make(p: Path):
        with open(p, "wb") as f:
            np.lib.format.write_array_header_1_0(f, {"descr": descr, "fortran_order": False, "shape": shape})
            f.write(payload)
    return make


def _save(arr, **kw):
    return lambda p: np.save(p, arr, **kw)


BAD_INPUTS = {
    # name: (maker of IN.npy, count of --input flags, message fragment)
    "missing": (None, 1, "no such file"),
    "directory": (lambda p: p.mkdir(), 1, None),
    "empty": (lambda p: p.write_bytes(b""), 1, None),
    "random_bytes": (lambda p: p.write_bytes(_rand(500, 8)), 1, None),
    "truncated_npy": (lambda p: p.write_bytes(open_npy_bytes()[:100]), 1, None),
    "short_data": (_npy_header(IN_SHAPE), 1, None),
    "npz_as_input": (lambda p: p.write_bytes(_npz_bytes(a=np.zeros(IN_SHAPE, np.int8))), 1, "several arrays"),
    "object_array": (_save(np.array([1, "a"], dtype=object), allow_pickle=True), 1, None),
    "dtype_int16": (_save(np.zeros(IN_SHAPE, np.int16)), 1, "dtype"),
    "dtype_uint8": (_save(np.zeros(IN_SHAPE, np.uint8)), 1, "dtype"),
    "dtype_float32": (_save(np.zeros(IN_SHAPE, np.float32)), 1, "dtype"),
    "dtype_bool": (_save(np.zeros(IN_SHAPE, bool)), 1, "dtype"),
    "dtype_str": (_save(np.full(IN_SHAPE, "a")), 1, "dtype"),
    "shape_channels": (_save(np.zeros((1, 8, 8, 15), np.int8)), 1, "shape"),
    "shape_count": (_save(np.zeros((1, 16, 8, 7), np.int8)), 1, "shape"),
    "shape_0d": (_save(np.int8(3)), 1, "shape"),
    "shape_empty": (_save(np.zeros((0,), np.int8)), 1, "shape"),
    "count_zero": (None, 0, "input"),
    "count_two": (_save(np.zeros(IN_SHAPE, np.int8)), 2, "input"),
}


def _npz_bytes(**arrays) -> bytes:
    import io

    f = io.BytesIO()
    np.savez(f, **arrays)
    return f.getvalue()


def open_npy_bytes() -> bytes:
    import io

    f = io.BytesIO()
    np.save(f, np.zeros(IN_SHAPE, np.int8))
    return f.getvalue()


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_run_bad_inputs_one_error_line(tmp_path, capsys, case):
    make, count, message = BAD_INPUTS[case]
    model = copy_model(tmp_path / "copy_vela.npz")
    inp = tmp_path / "in0.npy"
    if make:
        make(inp)
    args = []
    for _ in range(count):
        args += ["--input", inp]
    rc, out, err = invoke(capsys, "run", model, *args, "--output", tmp_path / "out.npz")
    assert_one_error(rc, out, err, message)
    assert not (tmp_path / "out.npz").exists()


def test_run_input_npy_declaring_huge_shape(tmp_path, capsys):
    inp = tmp_path / "huge.npy"
    _npy_header((1 << 40,))(inp)
    rc, out, err = invoke(capsys, "run", copy_model(tmp_path / "copy_vela.npz"), "--input", inp,
                          "--output", tmp_path / "out.npz")
    assert_one_error(rc, out, err)


def test_run_model_declaring_huge_output(tmp_path, capsys):
    model = copy_model(tmp_path / "huge_vela.npz", scratch_size=np.array(1 << 39),
                       output_shape=np.array([[1, 1, 1, 1 << 13, 1 << 13, 1 << 10]]))
    rc, out, err = invoke(capsys, "run", model, "--input", good_input(tmp_path), "--output", tmp_path / "o.npz")
    assert_one_error(rc, out, err)


@pytest.mark.parametrize("case", ["directory", "missing_dir", "dev_full"])
def test_run_unwritable_output(tmp_path, capsys, case):
    out_path = {"directory": tmp_path, "missing_dir": tmp_path / "no" / "such" / "out.npz",
                "dev_full": Path("/dev/full")}[case]
    if case == "dev_full" and not out_path.exists():
        pytest.skip("no /dev/full")
    rc, out, err = invoke(capsys, "run", copy_model(tmp_path / "copy_vela.npz"), "--input", good_input(tmp_path),
                          "--output", out_path)
    assert_one_error(rc, out, err)


@pytest.mark.parametrize("config", ["ethos-u85-3", "bogus", "", "ethos-u85-"])
def test_run_bad_config(tmp_path, capsys, config):
    rc, out, err = invoke(capsys, "run", copy_model(tmp_path / "copy_vela.npz"), "--input", good_input(tmp_path),
                          "--output", tmp_path / "o.npz", "--config", config)
    assert_one_error(rc, out, err)


@pytest.mark.parametrize("stream, what", [
    (isa.encode("NPU_OP_BRANCH", branch_target=0x1000), "branch_fault"),
    (isa.encode("NPU_SET_DMA0_SRC_REGION", region=6) + isa.encode("NPU_SET_DMA0_LEN", addr=16)
     + isa.encode("NPU_OP_DMA_START"), "bus_status"),                  # region 6 is unbound: DECERR
    (isa.encode("NPU_SET_DMA0_LEN", addr=1 << 39) + isa.encode("NPU_OP_DMA_START"), "BudgetExceeded"),
    ([0xFFFF_FFFF], "cmd_parse_error"),
])
def test_run_faulting_stream_one_error_line(tmp_path, capsys, stream, what):
    model = copy_model(tmp_path / "f_vela.npz", stream)
    rc, out, err = invoke(capsys, "run", model, "--input", good_input(tmp_path), "--output", tmp_path / "o.npz")
    assert_one_error(rc, out, err, what)


def test_run_op_index_out_of_range(tmp_path, capsys):
    _needs("ethosu.vela")
    from tests import nets

    model = nets.compiled("add_8x8x16", "ethos-u85-256", output_format="tflite")
    for idx in ("-1", "5"):
        rc, out, err = invoke(capsys, "run", model, "--op-index", idx, "--output", tmp_path / "o.npz")
        assert_one_error(rc, out, err, "operator index")


# ============================================================================================
# Usage errors (argparse): one 'npu-tlm: error:' line that points to --help, exit status 2
# ============================================================================================
@pytest.mark.parametrize("argv", [[], ["frobnicate"], ["disasm"], ["disasm", "x.bin", "--op-index", "abc"],
                                  ["run", "x_vela.npz"],
                                  ["run", "x_vela.npz", "--output"]])
def test_usage_errors(capsys, argv):
    """No usage text: one line 'npu-tlm: error: [SUBCOMMAND: ]... (see 'npu-tlm[ SUBCOMMAND] --help')',
    exit status 2."""
    rc, out, err = invoke(capsys, *argv)
    assert rc == 2 and out == "" and "Traceback" not in err
    assert_one_error(rc, out, err)
    sub = argv[0] if argv and argv[0] in SUBCOMMANDS else ""
    assert err.startswith(PREFIX + (f"{sub}: " if sub else "")), err
    assert err.rstrip().endswith(f"(see 'npu-tlm{' ' + sub if sub else ''} --help')"), err


def test_script_usage_error_is_one_line():
    r = subprocess.run([sys.executable, "-m", "tlm.core.cli", "run", "x_vela.npz"], capture_output=True, text=True,
                       timeout=60, cwd=Path(cli.__file__).parents[2])       # this checkout's tlm
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == ("npu-tlm: error: run: the following arguments are required: --output "
                        "(see 'npu-tlm run --help')\n"), r.stderr


# ============================================================================================
# The console script, as a subprocess
# ============================================================================================
def _script(*argv, timeout=60, **kw):
    cmd = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "tlm.core.cli"]
    return subprocess.run(cmd + [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, **kw)


def _check_proc(r: subprocess.CompletedProcess):
    assert r.returncode == 1, (r.returncode, r.stderr[-500:])
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(PREFIX), r.stderr[-500:]
    assert "Traceback" not in r.stderr + r.stdout


def test_script_missing_file():
    r = _script("disasm", "/nonexistent/x_vela.npz")
    _check_proc(r)
    assert r.stdout == "" and r.stderr == "npu-tlm: error: /nonexistent/x_vela.npz: no such file\n"


def test_script_run_random_model_and_bad_input(tmp_path):
    bad = tmp_path / "r_vela.npz"
    bad.write_bytes(_rand(3000, 9))
    _check_proc(_script("run", bad, "--input", good_input(tmp_path), "--output", tmp_path / "o.npz"))
    inp = tmp_path / "bad.npy"
    inp.write_bytes(_rand(300, 10))
    _check_proc(_script("run", copy_model(tmp_path / "c_vela.npz"), "--input", inp, "--output", tmp_path / "o.npz"))


def test_script_closed_stdout_pipe(tmp_path):
    """`npu-tlm disasm big | head -1`: exit 0 and no traceback when the reader goes away."""
    path = tmp_path / "big.bin"
    path.write_bytes(np.array(isa.encode("NPU_SET_IFM_REGION", region=1) * 50000, "<u4").tobytes())
    cmd = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "tlm.core.cli"]
    p = subprocess.Popen(cmd + ["disasm", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 0 and "Traceback" not in err and err == ""


def _limit_memory():
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


@pytest.mark.skipif(not Path("/dev/zero").exists() or os.name != "posix", reason="needs /dev/zero and rlimits")
def test_script_character_device_model():
    r = _script("disasm", "/dev/zero", timeout=120, preexec_fn=_limit_memory)
    _check_proc(r)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")
def test_script_fifo_input(tmp_path):
    fifo = tmp_path / "in0.npy"
    os.mkfifo(fifo)
    r = _script("run", copy_model(tmp_path / "c_vela.npz"), "--input", fifo, "--output", tmp_path / "o.npz",
                timeout=20)
    _check_proc(r)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")
def test_script_fifo_model(tmp_path):
    fifo = tmp_path / "model_vela.npz"
    os.mkfifo(fifo)
    r = _script("disasm", fifo, timeout=5)
    _check_proc(r)
