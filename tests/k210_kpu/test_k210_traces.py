"""K210 traces (docs/trace-format.md, digest §8): the examples in traces/ replay on the TLM,
through ``npu-tlm replay`` too; a corrupted expectation, a bad layer and a malformed line
fail as the contract says; the TLM writes traces (RecordingTarget)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.k210_kpu import test_k210_cases as cases
from tlm.core import registry
from tlm.core.trace import RecordingTarget, TraceFormatError, parse, parse_text, replay
from tlm.k210_kpu import driver
from tlm.k210_kpu.registers import OFFSET, LayerArgument
from tlm.k210_kpu.trace_target import K210TraceTarget

FIFO, DATA_OUT = OFFSET["layer_argument_fifo"], OFFSET["fifo_data_out"]

HERE = Path(__file__).resolve().parent
TRACES = sorted((HERE / "traces").glob("*/trace.txt"))
REPO = HERE.parents[1]


def test_examples_exist():
    names = {p.parent.name for p in TRACES}
    assert "identity_1x1_hand" in names and len(names) >= 4


@pytest.mark.parametrize("path", TRACES, ids=[p.parent.name for p in TRACES])
def test_example_replays(path):
    tr = parse(path)
    assert tr.device == "k210-kpu"
    res = replay(tr, registry.get(tr.device).make_target(tr.config))
    assert res.exit_status == 0, res.messages
    assert res.passed == tr.checks and res.passed >= 4
    ops = [s.op for s in tr.steps]
    assert "check_mem" in ops and "read_reg" in ops
    # twelve 64-bit writes to layer_argument_fifo per layer
    n_fifo = sum(s.op == "write_reg" and s.args[0] == FIFO for s in tr.steps)
    assert n_fifo and n_fifo % 12 == 0


def test_cli_replay_exit_status(tmp_path):
    exe = [sys.executable, "-m", "tlm.core.cli", "replay"]
    ok = subprocess.run(exe + [str(TRACES[0])], capture_output=True, text=True, cwd=REPO)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "0 failed" in ok.stdout


def corrupt(tmp_path: Path, name: str, how: str) -> Path:
    src = HERE / "traces" / name
    dst = tmp_path / name
    shutil.copytree(src, dst)
    text = (dst / "trace.txt").read_text()
    if how == "check_mem":
        line = next(ln for ln in text.splitlines() if ln.startswith("check_mem"))
        blob = dst / line.split()[2]
        data = bytearray(blob.read_bytes())
        data[len(data) // 2] ^= 0x10
        blob.write_bytes(bytes(data))
    elif how == "read_reg":
        lines = text.splitlines()
        i = max(i for i, ln in enumerate(lines) if ln.startswith(f"read_reg 0x{DATA_OUT:x}"))
        op, off, val, *rest = lines[i].split()
        lines[i] = f"{op} {off} 0x{int(val, 16) ^ (1 << 40):016x}"
        (dst / "trace.txt").write_text("\n".join(lines) + "\n")
    return dst / "trace.txt"


@pytest.mark.parametrize("name", ["identity_1x1_hand", "net_kpu_run_w16"])
@pytest.mark.parametrize("how", ["check_mem", "read_reg"])
def test_corrupted_expectation_fails(tmp_path, name, how):
    path = corrupt(tmp_path, name, how)
    res = replay(parse(path), K210TraceTarget())
    assert res.exit_status == 1 and res.failed == 1, res.messages
    msg = res.messages[0]
    assert (("first difference at 0x" in msg) if how == "check_mem" else (f"offset 0x{DATA_OUT:x}" in msg)), msg
    cli = subprocess.run([sys.executable, "-m", "tlm.core.cli", "replay", str(path)], capture_output=True,
                         text=True, cwd=REPO)
    assert cli.returncode == 1 and "1 failed" in cli.stdout


def test_hand_trace_words_decode_to_the_intended_fields():
    tr = parse(HERE / "traces" / "identity_1x1_hand" / "trace.txt")
    words = [s.args[1] for s in tr.steps if s.op == "write_reg" and s.args[0] == FIFO]
    la = LayerArgument(words)
    assert (la.int_en, la.image_src_addr, la.image_dst_addr) == (1, 0, 0x7000)
    assert (la.i_row_wid, la.i_col_high, la.o_row_wid, la.o_col_high) == (3, 3, 1, 1)
    assert (la.kernel_type, la.pool_type, la.load_para, la.dma_burst_size) == (0, 1, 1, 15)
    assert (la.bwsx_base_addr, la.para_start_addr, la.active_addr) == (0x80200080, 0x80200000, 0x80200100)
    assert (la.load_coor, la.para_size, la.channel_switch_addr, la.row_switch_addr) == (1, 1, 4, 1)
    assert (la.coef_group, la.load_act, la.wb_channel_switch_addr, la.wb_group) == (4, 1, 2, 4)
    assert (la.send_data_out, la.channel_byte_num, la.dma_total_byte) == (1, 3, 3)


def test_interrupt_never_raised_fails(tmp_path):
    text = (HERE / "traces" / "identity_1x1_hand" / "trace.txt").read_text()
    text = text.replace("write_reg 0x18 0x6 ", "write_reg 0x18 0x7 ")       # mask everything
    p = tmp_path / "t" / "trace.txt"
    shutil.copytree(HERE / "traces" / "identity_1x1_hand", p.parent)
    p.write_text(text)
    res = replay(parse(p), K210TraceTarget())
    assert res.failed >= 1 and any("interrupt not raised" in m for m in res.messages)


def test_bad_layer_is_a_device_fault(tmp_path):
    text = (HERE / "traces" / "identity_1x1_hand" / "trace.txt").read_text()
    text = text.replace("0x80200100c0010004", "0x80200108c0010004")        # act table not 256-aligned
    p = tmp_path / "t" / "trace.txt"
    shutil.copytree(HERE / "traces" / "identity_1x1_hand", p.parent)
    p.write_text(text)
    res = replay(parse(p), K210TraceTarget())
    assert res.faulted and res.exit_status == 1
    assert any("device fault" in m and "active_addr" in m for m in res.messages)


@pytest.mark.parametrize("line,what", [("write_reg 0x4 0x1", "multiple of 8"),
                                       ("write_reg 0x0 0x10000000000000000", "64 bits"),
                                       ("load_mem 0xfffffff0 x.bin", "address space")])
def test_malformed_lines(tmp_path, line, what):
    (tmp_path / "x.bin").write_bytes(bytes(32))
    tr = parse_text(f"device k210-kpu\n{line}\n", str(tmp_path / "t.txt"))
    with pytest.raises(TraceFormatError, match=what):
        replay(tr, K210TraceTarget())


def test_recording_round_trip(tmp_path):
    """A driver run through RecordingTarget becomes a trace that replays with every check."""
    rng = np.random.default_rng(cases.SEED + 31)
    print(f"seed {cases.SEED + 31}")
    x = rng.uniform(-1, 1, (2, 8, 16))
    from tlm.k210_kpu import convert
    layers = [convert.from_float(rng.normal(0, 0.5, (3, 2, 3, 3)), x, activation="relu", pool="max_2_s2")]
    net = driver.place(layers)
    rec = RecordingTarget(K210TraceTarget())
    xq = np.clip(np.round((x - layers[0].x_bias) / layers[0].x_scale), 0, 255).astype(np.uint8)
    driver.load(rec, net, xq)
    assert driver.run_calc_done(rec, net, send_last=True)
    lo, hi = net.out_map.span()
    rec.check_mem(0x40600000 + lo, hi - lo)
    out = driver.read_output(rec, net.out_bytes())
    path = rec.writer.save(tmp_path)
    res = replay(parse(path), K210TraceTarget())
    assert res.exit_status == 0 and res.passed >= 3, res.messages
    assert len(out) == net.out_bytes()


def test_generated_files_are_current():
    p = subprocess.run([sys.executable, "tools/gen_k210.py", "--check"], capture_output=True,
                       text=True, cwd=REPO)
    assert p.returncode == 0, p.stderr
