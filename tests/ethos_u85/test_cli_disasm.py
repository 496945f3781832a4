"""`npu-tlm disasm`: output on a good model, one-line errors (never a traceback) otherwise."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.support import require

from tests.ethos_u85.support.vela_files import STREAM, cop1, cop2, write_npz
from tlm.core import cli
from tlm.ethos_u85 import isa


def run_cli(capsys, *argv):
    rc = cli.main(["disasm", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out.splitlines(), err.splitlines()


def test_disasm_npz(tmp_path, capsys):
    path = write_npz(tmp_path / "net_vela.npz", cop1(STREAM), weight=b"\x01" * 48)
    rc, out, err = run_cli(capsys, path)
    assert (rc, err) == (0, [])
    assert out[:6] == [
        f"# model: {path} (npz, COP1)",
        "# accelerator: ethos-u85-256 (CONFIG 0x20000118, ID 0x20007000)",
        "# command stream: 5 words (20 bytes); read-only: 48 bytes; scratch: 2048 bytes; "
        "scratch_fast: 0 bytes",
        "# input0 'input0': int8 [1, 8, 8, 16] region 1 offset 0x400 scale 0.5 zero_point -3",
        "# output0 'output0': int16 [1, 1, 1, 10] region 1 offset 0x0 scale 0.5 zero_point -3",
        "0x000000: 00004000 00000400  NPU_SET_IFM_BASE0            addr=0x400",
    ]
    assert out[6:] == isa.disasm(STREAM)[1:]


def test_disasm_no_header_bin(tmp_path, capsys):
    path = tmp_path / "stream.bin"
    path.write_bytes(np.array(STREAM, "<u4").tobytes())
    rc, out, err = run_cli(capsys, "--no-header", path)
    assert (rc, out, err) == (0, isa.disasm(STREAM), [])


def _truncated_npz(p: Path):
    write_npz(p, cop1(STREAM))
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _truncated_member(p: Path):
    """A valid zip whose cmd_data member is cut short."""
    good = p.with_suffix(".good.npz")
    write_npz(good, cop1(STREAM))
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(p, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            dst.writestr(item, data[:90] if item.filename == "cmd_data.npy" else data)


def _random(n, suffix):
    def make(p: Path):
        p.with_suffix(suffix).write_bytes(np.random.default_rng(n).bytes(n))
    return make


ERRORS = {
    # name: (file name, setup, expected message part)
    "missing": ("nothere_vela.npz", None, "no such file"),
    "empty": ("empty.npz", lambda p: p.write_bytes(b""), "empty file"),
    "directory": ("adir", lambda p: p.mkdir(), "is a directory"),
    "truncated_npz": ("t_vela.npz", _truncated_npz, "not a valid .npz archive"),
    "truncated_npz_member": ("m_vela.npz", _truncated_member, "corrupt Vela .npz"),
    "foreign_npz": ("x.npz", lambda p: np.savez(p, x=np.arange(3)), "not a Vela raw .npz"),
    "random_npz": ("r.npz", _random(1000, ".npz"), "not a valid .npz archive"),
    "random_tflite": ("r.tflite", _random(999, ".tflite"), "corrupt TFLite flatbuffer"),
    "random_bin_odd": ("r.bin", _random(1001, ".bin"), "not a whole number of 32-bit words"),
    "unknown_suffix": ("notes.txt", lambda p: p.write_text("hello\n"), "not a Vela output"),
    "bad_cop1": ("b_vela.npz", lambda p: write_npz(p, cop1(STREAM)[:-8]), "announces 5 words"),
    "bad_cop2": ("c_vela.npz", lambda p: write_npz(p, cop2(STREAM)[:-4]), "COP2 header announces"),
    "reserved_word": ("w.bin",
                      lambda p: p.write_bytes(np.array(STREAM[:3] + [0x4400], "<u4").tobytes()),
                      "offset 0x00000c: word 0x00004400: reserved bits"),
}


@pytest.mark.parametrize("case", ERRORS)
def test_disasm_errors_are_one_line(tmp_path, capsys, case):
    name, setup, message = ERRORS[case]
    path = tmp_path / name
    if setup:
        setup(path)
    rc, out, err = run_cli(capsys, path)
    assert rc == 1
    assert len(err) == 1 and err[0].startswith("npu-tlm: error: "), err
    assert message in err[0]
    if case != "reserved_word":
        assert str(path) in err[0] and out == []
    else:                                   # commands before the bad word are still listed
        listed = isa.disasm(STREAM[:3])
        assert out[-len(listed):] == listed and len(listed) == 2


def test_tflite_without_ethosu_op(tmp_path, capsys):
    require("ethosu.vela")
    from tests import nets

    path = tmp_path / "plain.tflite"
    path.write_bytes(nets.build("add_8x8x16"))
    rc, out, err = run_cli(capsys, path)
    assert rc == 1 and err == [f"npu-tlm: error: {path}: no 'ethos-u' custom operator "
                               "(not compiled by Vela?)"]


def test_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main([])
    assert e.value.code == 2
    with pytest.raises(SystemExit):
        cli.main(["disasm"])


def test_console_script_no_traceback(tmp_path):
    script = Path(sys.executable).with_name("npu-tlm")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "tlm.core.cli"]
    r = subprocess.run(cmd + ["disasm", str(tmp_path / "missing.tflite")], capture_output=True,
                       text=True)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == f"npu-tlm: error: {tmp_path / 'missing.tflite'}: no such file\n"
