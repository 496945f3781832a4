"""Vela output loader (tlm/vela.py) and the decoder against Vela's own printout.

Unit tests use synthetic payloads. The `vela` tests compile catalog models (tests/nets) with
Vela for ethos-u85-128/256/512 and require our decode of every command to equal Vela's
`--verbose-register-command-stream` print field by field (tests/vela_print.py).
"""
from __future__ import annotations

import os
import struct
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from tests.support import require

from tests.ethos_u85.support import vela_print
from tests.ethos_u85.support.vela_files import CONFIG_256, ID_WORD, STREAM, cop1, cop2, write_npz
from tlm.ethos_u85 import cli, isa, vela
from tlm.ethos_u85.vela import VelaFormatError


# ---------------------------------------------------------------------------- payload parsing
def test_cop1_payload():
    p = vela.parse_payload(cop1(STREAM, extra=[3, 4]))       # READ_APB, DUMP_SHRAM ignored
    assert (p.cop_format, p.config_word, p.id_word) == ("COP1", CONFIG_256, ID_WORD)
    assert p.command_words.dtype == np.uint32 and p.command_words.tolist() == STREAM


def test_cop1_long_stream_length_uses_high_byte():
    words = isa.encode("NPU_SET_BLOCKDEP") * 0x10003
    assert len(vela.parse_payload(cop1(words)).command_words) == 0x10003


@pytest.mark.parametrize("data, msg", ids=lambda x: x if isinstance(x, str) else "", argvalues=[
    (cop1(STREAM)[:-4], "announces 5 words, only 4 present"),
    (cop1(STREAM)[:-2], "not whole words"),
    (cop1(STREAM)[:16], "no command stream"),
    (cop1(STREAM, extra=[0x77]), "unknown COP1 driver action 0x00000077"),
    (cop1(STREAM) + cop1(STREAM)[28:], "second COP1 CMDSTRM"),
    (cop1(STREAM)[:12], "truncated COP1 OPTCFG"),
    (b"ABCDxxxx", "not a COP1/COP2"),
])
def test_cop1_errors(data, msg):
    with pytest.raises(VelaFormatError, match=msg):
        vela.parse_payload(data, "thing")


def test_cop2_payload():
    p = vela.parse_payload(cop2(STREAM, features=2, staging=1 << 33,
                                entries=struct.pack("<II", 7, 4) + b"abcd"))   # unknown entry skipped
    assert (p.cop_format, p.config_word, p.id_word, p.features, p.staging_usage) == (
        "COP2", CONFIG_256, ID_WORD, 2, 1 << 33)
    assert p.command_words.tolist() == STREAM


@pytest.mark.parametrize("mutate, msg", ids=lambda x: x if isinstance(x, str) else "", argvalues=[
    (lambda d: d[:-4], "announces"),
    (lambda d: d[:4] + b"\x02" + d[5:], "unsupported COP2 version 2"),
    (lambda d: d[:28] + b"VEUX" + d[32:], "bad COP2 VEUM"),
    (lambda d: d[:16] + struct.pack("<I", 9) + d[20:], "no command-stream entry"),
    (lambda d: d[:20] + struct.pack("<I", 1000) + d[24:], "runs past the end"),
    (lambda d: d[:60] + b"\xff\xff\xff\x00" + d[64:], "misaligned"),
    (lambda d: d[:12], "header truncated"),
])
def test_cop2_errors(mutate, msg):
    with pytest.raises(VelaFormatError, match=msg):
        vela.parse_payload(mutate(cop2(STREAM)), "thing")


# ---------------------------------------------------------------------------- npz / bin loading
def test_npz_loader(tmp_path):
    ro = bytes(range(1, 17)) + b"\x00" * 16                   # trailing NULs must survive
    m = vela.load(write_npz(tmp_path / "m_vela.npz", cop1(STREAM), weight=ro))
    assert (m.source, m.cop_format, m.accelerator) == ("npz", "COP1", "ethos-u85-256")
    assert m.command_words.tolist() == STREAM                  # ... here too (last word is 0)
    assert m.read_only == ro and (m.scratch_size, m.scratch_fast_size) == (2048, 0)
    (i,), (o,) = m.inputs, m.outputs
    assert (i.shape, i.dtype, i.region, i.offset, i.nbytes) == ((1, 8, 8, 16), "int8", 1, 1024, 1024)
    assert (o.shape, o.dtype, o.nbytes) == ((1, 1, 1, 10), "int16", 20)
    assert i.quantization == vela.Quantization("per_tensor", (0.5,), (-3,))


def test_npz_unused_input_and_state_tensors(tmp_path):
    """Vela 5.2's raw .npz: an input it never places has offset 2**64-1 (held by the float64
    array as 2**64: TRANSPOSE_CONV's output shape); variable_* lists the state tensors once
    per use (duplicates dropped)."""
    q = {"quant_type": "per_tensor", "scale": np.array([0.25], np.float32), "zero_point": np.array([-4], np.int32)}
    path = write_npz(
        tmp_path / "m_vela.npz", cop1(STREAM),
        input_shape=np.array([[1, 1, 1, 1, 1, 4], [1, 1, 1, 8, 8, 16]]), input_elem_size=np.array([4, 1]),
        input_region=np.array([1, 1]), input_offset=np.array([2.0 ** 64 - 1, 1024.0]),
        input_quantization=np.array([None, q], dtype=object),
        variable_shape=np.array([[1, 1, 1, 1, 1, 16]] * 3), variable_elem_size=np.array([1, 2, 1]),
        variable_region=np.array([1, 1, 1]), variable_offset=np.array([512, 640, 512]),
        variable_quantization=np.array([q, q, q], dtype=object))
    m = vela.load(path)
    assert [(t.name, t.index, t.offset) for t in m.inputs] == [("input1", 1, 1024)]
    assert [(t.name, t.index, t.dtype, t.shape) for t in m.unused_inputs] == [("input0", 0, "int32", (1, 1, 1, 4))]
    assert [(t.offset, t.dtype, t.quantization.zero_point) for t in m.variables] == [(512, "int8", (-4,)),
                                                                                    (640, "int16", (-4,))]
    header = cli.header(m)
    assert any(h.startswith("# unused input 'input0': int32 [1, 1, 1, 4] (the command stream never reads")
               for h in header)
    assert "# state1 'variable1': int16 [1, 1, 1, 16] region 1 offset 0x280 scale 0.25 zero_point -4" in header
    with pytest.raises(VelaFormatError, match="incomplete variable_"):
        vela.load(write_npz(tmp_path / "v.npz", cop1(STREAM), variable_shape=np.array([[1, 1, 1, 1, 1, 16]])))


def test_npz_empty_weight_blob(tmp_path):
    # Vela stores an empty blob as b'' with dtype S1, whose tobytes() is b'\x00'
    m = vela.load(write_npz(tmp_path / "m.npz", cop2(STREAM), weight=b""))
    assert m.read_only == b"" and m.cop_format == "COP2"


@pytest.mark.parametrize("kwargs, msg", [
    (dict(drop=("cmd_data",)), "missing cmd_data"),
    (dict(drop=("input_offset", "output_shape")), "missing input_offset, output_shape"),
    (dict(cmd_data=np.array(b"COP1")), "no command stream"),
    (dict(cmd_data=np.array([1, 2])), "corrupt Vela .npz"),
    (dict(input_region=np.array([1, 1])), "different lengths"),
    (dict(input_elem_size=np.array([3])), "elem_size"),
    # a pickle that is not a numpy array of dicts must not be loaded
    (dict(input_quantization=np.array([os.system], dtype=object)), "refusing to unpickle"),
])
def test_npz_errors(tmp_path, kwargs, msg):
    path = write_npz(tmp_path / "bad.npz", cop1(STREAM), **kwargs)
    with pytest.raises(VelaFormatError, match=msg) as ei:
        vela.load(path)
    assert str(path) in str(ei.value)


def test_bin_loader(tmp_path):
    p = tmp_path / "s.bin"
    p.write_bytes(np.array(STREAM, "<u4").tobytes())
    m = vela.load(p)
    assert (m.source, m.cop_format, m.config_word) == ("bin", None, None)
    assert m.command_words.tolist() == STREAM
    p.write_bytes(cop1(STREAM))                               # a dumped payload also works
    assert vela.load(p).config_word == CONFIG_256
    p.write_bytes(b"\x01\x02\x03\x04\x05")
    with pytest.raises(VelaFormatError, match="not a whole number of 32-bit words"):
        vela.load(p)


# ---------------------------------------------------------------------------- Vela acceptance
ACCELS = ("ethos-u85-128", "ethos-u85-256", "ethos-u85-512")
CONFIG_WORDS = {"ethos-u85-128": 0x20000117, "ethos-u85-256": 0x20000118,
                "ethos-u85-512": 0x20001119}
# Compiled for every accelerator; together they emit 75 of the 111 commands.
CORE = ("tinynet", "classifier", "unet_mini", "dwconv_3x3_s1_same_mult2_pc")
# U85-256 only, for more enum values (LUTs, i48, broadcast modes, transposes, dilation, resize).
EXTRA = ("softmax_int16", "minimum_bcast", "add_bcast_row", "maximum_8x8x16",
         "resize_bilinear_8x8to16x16", "transpose_0312", "conv2d_3x3_dil2_same", "tanh_int16",
         "logistic_int16")
RAW = [(n, a) for n in CORE for a in ACCELS] + [(n, "ethos-u85-256") for n in EXTRA]
COP2_CASES = [("tinynet", "ethos-u85-512"), ("add_bcast_relu", "ethos-u85-128")]
# (name, accel, memory mode, output format) of everything compiled
JOBS = ([(n, a, "default", "raw") for n, a in RAW]
        + [(n, a, "separate_io", fmt) for n, a in COP2_CASES for fmt in ("raw", "tflite")]
        + [("tinynet", "ethos-u85-256", "default", "tflite"),
           ("unet_mini", "ethos-u85-512", "default", "tflite")])
# Commands Vela 5.2.0 does not emit for these networks; everything else must be seen.
NOT_EMITTED = {"NPU_OP_BRANCH", "NPU_OP_IRQ", "NPU_OP_PMU_MASK", "NPU_SET_DMA0_SIZE1",
               "NPU_SET_DMA0_SRC_STRIDE0", "NPU_SET_DMA0_SRC_STRIDE1", "NPU_SET_DMA0_DST_STRIDE0",
               "NPU_SET_DMA0_DST_STRIDE1", "NPU_SET_DMA0_IDX", "NPU_SET_DMA0_IDX_MAX",
               "NPU_SET_DMA0_IDX_REGION", "NPU_SET_DMA0_IDX_SKIP1", "NPU_SET_WEIGHT2_BASE",
               "NPU_SET_WEIGHT2_LENGTH", "NPU_SET_WEIGHT3_BASE", "NPU_SET_WEIGHT3_LENGTH"}


@pytest.fixture(scope="session")
def compiled(tmp_path_factory):
    """job -> (output path, vela stdout); all jobs compiled once per session, in parallel."""
    require("ethosu.vela")
    from tests import nets

    cache = tmp_path_factory.mktemp("vela")

    def run(job):
        name, accel, mode, fmt = job
        out = nets.compiled_bytes(nets.build(name), name, accel, mode, fmt, cache_dir=cache,
                                  extra_args=("--verbose-register-command-stream",))
        return job, (out, nets.compiled_stdout(out))

    with ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as ex:
        return dict(ex.map(run, JOBS))


def _check_against_print(model: vela.VelaModel, stdout: str) -> list[isa.Decoded]:
    streams = vela_print.parse(stdout)
    assert len(streams) == 1
    decoded = isa.decode(model.command_words)
    problems = vela_print.compare(decoded, streams[0])
    assert not problems, "\n".join(problems[:40])
    return decoded


@pytest.mark.vela
@pytest.mark.parametrize("name, accel", RAW)
def test_decode_matches_vela_print(compiled, name, accel):
    path, stdout = compiled[(name, accel, "default", "raw")]
    m = vela.load(path)
    assert (m.cop_format, m.config_word, m.id_word, m.accelerator) == (
        "COP1", CONFIG_WORDS[accel], ID_WORD, accel)
    decoded = _check_against_print(m, stdout)
    assert decoded[-1].cmd.name == "NPU_OP_STOP"


@pytest.mark.vela
def test_vela_streams_cover_the_isa(compiled):
    seen = {d.cmd.name for (_, _, _, fmt), (path, _) in compiled.items() if fmt == "raw"
            for d in isa.decode(vela.load(path).command_words)}
    assert "NPU_SET_WEIGHT1_BASE" in seen                      # two weight decoders on U85-512
    assert seen == set(isa.BY_NAME) - NOT_EMITTED


@pytest.mark.vela
def test_compare_detects_mismatches(compiled):
    path, stdout = compiled[("tinynet", "ethos-u85-256", "default", "raw")]
    decoded = isa.decode(vela.load(path).command_words)
    stream = vela_print.parse(stdout)[0]
    assert vela_print.compare(decoded, stream) == []
    conv = next(c for c in stream.commands if c.name == "NPU_SET_KERNEL_STRIDE")
    conv.fields["weight_order"] = "WEIGHT_ORDER_X"
    stream.commands[-1].fields["mask"] = "1"
    problems = vela_print.compare(decoded[:-1], stream)
    assert any("weight_order" in p for p in problems)
    assert any("commands decoded" in p for p in problems) and any("announces" in p for p in problems)


@pytest.mark.vela
@pytest.mark.parametrize("name, accel", COP2_CASES)
def test_cop2_separate_io(compiled, name, accel):
    path, stdout = compiled[(name, accel, "separate_io", "raw")]
    m = vela.load(path)
    assert (m.cop_format, m.payload.features, m.config_word) == ("COP2", 2, CONFIG_WORDS[accel])
    assert {t.region for t in m.inputs} == {vela.REGION_INPUT}
    assert {t.region for t in m.outputs} == {vela.REGION_OUTPUT}
    _check_against_print(m, stdout)


TFLITE_CASES = [("tinynet", "ethos-u85-256", "default"), ("unet_mini", "ethos-u85-512", "default")] + [
    (n, a, "separate_io") for n, a in COP2_CASES]


@pytest.mark.vela
@pytest.mark.parametrize("name, accel, mode", TFLITE_CASES)
def test_tflite_output_matches_npz(compiled, name, accel, mode):
    npz = vela.load(compiled[(name, accel, mode, "raw")][0])
    path = compiled[(name, accel, mode, "tflite")][0]
    tfl = vela.load(path)
    assert tfl.source == "tflite"
    assert np.array_equal(tfl.command_words, npz.command_words)
    assert tfl.payload.cop_format == npz.payload.cop_format
    for attr in ("config_word", "id_word", "read_only", "scratch_size", "scratch_fast_size"):
        assert getattr(tfl, attr) == getattr(npz, attr), attr
    assert len(tfl.inputs) == len(npz.inputs) and len(tfl.outputs) == len(npz.outputs)
    for t, n in zip(tfl.inputs + tfl.outputs, npz.inputs + npz.outputs, strict=True):
        assert (t.region, t.offset, t.nbytes, t.quantization) == (n.region, n.offset, n.nbytes,
                                                                   n.quantization)
        assert t.shape[-1] == n.shape[-1]
    # the own flatbuffer reader and the vela wheel's generated modules agree
    data = Path(path).read_bytes()
    assert vela._load_tflite(path, data, use_vela=False) == vela._load_tflite(path, data, use_vela=True)


@pytest.mark.vela
def test_cli_disasm_real_model(compiled, capsys):
    path, _ = compiled[("tinynet", "ethos-u85-512", "default", "raw")]
    assert cli.main(["disasm", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    header = [line for line in out if line.startswith("# ")]
    assert out[:len(header)] == header and "ethos-u85-512" in header[1]
    assert out[len(header):] == isa.disasm(vela.load(path).command_words)
