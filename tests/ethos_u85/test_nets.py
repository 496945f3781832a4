"""The test-network catalog: every model builds deterministically, runs on LiteRT's
reference kernels, and compiles with Vela for ethos-u85-256 to 100 % NPU."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tests import nets

ACCEL = "ethos-u85-256"
NPZ_KEYS = {"cmd_data", "weight_data", "scratch_size", "scratch_fast_size", "input_shape",
            "output_shape", "input_offset", "output_offset", "input_region", "output_region"}


@pytest.fixture(scope="module")
def u85_256(vela_cache_dir):
    """Compile all NPU models up front in parallel (vela is a subprocess); cached on disk."""
    with ThreadPoolExecutor(max_workers=4) as ex:
        futs = {n: ex.submit(nets.compiled, n, ACCEL, "default", "raw", vela_cache_dir)
                for n in nets.NAMES}
        errors = {}
        for n, f in futs.items():
            try:
                f.result()
            except Exception as e:  # reported per model below
                errors[n] = e
    return futs, errors


def test_catalog_shape():
    assert len(nets.NAMES) == len(set(nets.NAMES))
    assert set(nets.NAMES) <= set(nets.ALL_NAMES)
    assert "tinynet" in nets.NAMES
    for n in nets.ALL_NAMES:
        assert nets.MODELS[n].npu == (n in nets.NAMES)
        assert nets.MODELS[n].npu or nets.MODELS[n].note
    assert set(nets.names("int16")) and set(nets.names("int16")) <= set(nets.NAMES)


def test_build_is_deterministic():
    for n in nets.ALL_NAMES:
        a = nets.build(n)
        b = nets.graph(n).serialize()  # fresh Graph, bypasses build()'s memo
        assert a == b, n
        assert a[4:8] == b"TFL3"


@pytest.mark.parametrize("name", nets.ALL_NAMES)
def test_reference_runs(name, net_reference):
    ins, outs = net_reference(name)
    assert outs and all(o.size for o in outs)
    # inputs are reproducible and explicit inputs give the same outputs
    ins2, outs2 = nets.reference(nets.build(name), inputs=ins)
    for a, b in zip(outs, outs2, strict=True):
        np.testing.assert_array_equal(a, b)
    ins3, _ = nets.reference(nets.build(name))
    for a, b in zip(ins, ins3, strict=True):
        np.testing.assert_array_equal(a, b)
    # outputs are not degenerate (quantisation ranges are sensible)
    assert any(len(np.unique(o)) > 1 for o in outs), name


@pytest.mark.parametrize("name", nets.NAMES)
def test_vela_u85_256_npu_only(name, u85_256):
    futs, errors = u85_256
    if name in errors:
        raise errors[name]
    path = futs[name].result()
    out = nets.compiled_stdout(path)
    assert "CPU operators = 0 " in out, out
    z = np.load(path, allow_pickle=True)
    assert NPZ_KEYS <= set(z.files)
    payload = z["cmd_data"].tobytes()
    assert payload[:4] == b"COP1"
    assert int.from_bytes(payload[8:12], "little") == 0x20000118  # U85-256 CONFIG word


@pytest.mark.parametrize("mode", sorted(nets.MEMORY_MODES))
def test_memory_modes(mode, vela_cache_dir):
    p = nets.compiled("tinynet", ACCEL, memory_mode=mode, cache_dir=vela_cache_dir)
    z = np.load(p, allow_pickle=True)
    payload = z["cmd_data"].tobytes()
    if mode == "separate_io":
        assert payload[:4] == b"COP2"
        assert list(z["input_region"]) == [3] and list(z["output_region"]) == [4]
    else:
        assert payload[:4] == b"COP1"
        assert list(z["input_region"]) == [1]
    if mode in ("shared_sram", "sram_only"):
        assert int(z["scratch_fast_size"]) == 0
    if mode == "default":
        assert int(z["scratch_fast_size"]) > 0


@pytest.mark.parametrize("name", nets.CPU_NAMES)
def test_cpu_models_really_fall_back(name, vela_cache_dir):
    """Keep the catalog's npu=False tags honest (tflite output allows CPU operators)."""
    p = nets.compiled(name, ACCEL, output_format="tflite", cache_dir=vela_cache_dir)
    out = nets.compiled_stdout(p)
    assert "CPU operators = 0 " not in out and "CPU operators = " in out, out


def test_tflite_output_format(vela_cache_dir):
    p = nets.compiled("conv2d_3x3_s1_same_relu6_pc", ACCEL, output_format="tflite",
                      cache_dir=vela_cache_dir)
    assert p.name.endswith("_vela.tflite")
    assert p.read_bytes()[4:8] == b"TFL3"


def test_compile_vela_direct_and_error(tmp_path):
    src = tmp_path / "add.tflite"
    src.write_bytes(nets.build("add_8x8x16"))
    out, stdout = nets.compile_vela(src, ACCEL, tmp_path / "out")
    assert out == tmp_path / "out" / "add_vela.npz" and out.exists()
    assert "Ethos_U85_256" in stdout
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"not a flatbuffer")
    with pytest.raises(RuntimeError):
        nets.compile_vela(bad, ACCEL, tmp_path / "bad")


def test_shipped_default_network_is_current(u85_256):
    """tests/data/sim_default_*.npz (make sim's default network, written by
    tools/make_default_net.py) are what the catalog, Vela and LiteRT give now."""
    from pathlib import Path

    from tlm.ethos_u85.vela import load
    data = Path(__file__).resolve().parent / "data"
    futs, errors = u85_256
    assert "sim_default" not in errors, errors.get("sim_default")
    shipped, fresh = load(data / "sim_default_vela.npz"), load(futs["sim_default"].result())
    assert np.array_equal(shipped.command_words, fresh.command_words), \
        "tests/data/sim_default_vela.npz is stale: run python tools/make_default_net.py"
    with np.load(data / "sim_default_ref.npz") as ref:
        inputs, outputs = nets.reference(nets.build("sim_default"))
        for i, x in enumerate(inputs):
            assert np.array_equal(ref[f"input{i}"], x), f"input{i} is stale"
        for i, y in enumerate(outputs):
            assert np.array_equal(ref[f"output{i}"], y), f"output{i} is stale"


def test_vela_cache_is_inside_the_repository():
    """The compile cache defaults to the repository's build/ (a worktree keeps its own, never
    a folder above the checkout); $NETS_VELA_CACHE overrides it."""
    from pathlib import Path

    from tests.nets import compile as vc
    repo = Path(__file__).resolve().parents[2]
    assert (repo / "pyproject.toml").is_file() and vc.REPO == repo
    assert vc.DEFAULT_CACHE == repo / "build" / "vela-cache"
