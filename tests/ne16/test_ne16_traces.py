"""NE16 traces: the example traces replay on the TLM (API and `npu-tlm replay`), a corrupted
expectation fails, hand-written traces in the shape of the hidden acceptance traces (ACQUIRE
read, job registers, TRIGGER, wait_irq, STATUS and output checked) pass at low and at GAP9 L1
addresses, the TLM writes a trace for any job, and the examples are current."""
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tlm.core.trace import parse, parse_text, replay
from tlm.ne16 import builder, host, layers
from tlm.ne16 import registers as R
from tlm.ne16.trace_target import Ne16TraceTarget

REPO = Path(__file__).resolve().parents[2]
TRACES = sorted((REPO / "tests" / "ne16" / "traces").glob("*/trace.txt"))
NPU_TLM = [sys.executable, "-m", "tlm.ethos_u85.cli"]


def test_there_are_example_traces():
    assert len(TRACES) >= 5


@pytest.mark.parametrize("path", TRACES, ids=[p.parent.name for p in TRACES])
def test_example_trace_replays(path):
    tr = parse(path)
    assert tr.device == "ne16"
    res = replay(tr, Ne16TraceTarget())
    assert res.failed == 0 and not res.faulted, res.messages
    assert res.passed == tr.checks and res.passed >= 4
    ops = [s.op for s in tr.steps]
    assert "wait_irq" in ops and "check_mem" in ops
    assert ops[[s.op for s in tr.steps].index("write_reg") - 1] == "read_reg"   # ACQUIRE first


def test_cli_replays_and_fails_on_a_corrupted_expectation(tmp_path):
    src = REPO / "tests" / "ne16" / "traces" / "conv3x3_pad_l1"
    r = subprocess.run(NPU_TLM + ["replay", str(src / "trace.txt")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 failed" in r.stdout
    bad = tmp_path / "bad"
    shutil.copytree(src, bad)
    tr = parse(bad / "trace.txt")
    out_file = [s for s in tr.steps if s.op == "check_mem"][-1].args[1]
    data = bytearray(out_file.read_bytes())
    data[5] ^= 0x40                                     # one wrong byte expected
    out_file.write_bytes(bytes(data))
    r = subprocess.run(NPU_TLM + ["replay", str(bad / "trace.txt")], capture_output=True, text=True)
    assert r.returncode == 1
    assert "first difference at" in r.stdout and "1 failed" in r.stdout


def test_corrupted_register_expectation_fails(tmp_path):
    src = REPO / "tests" / "ne16" / "traces" / "two_jobs_queue" / "trace.txt"
    text = src.read_text().replace("read_reg 0xc 0x00000101", "read_reg 0xc 0x00000001")
    assert text != src.read_text()
    res = replay(parse_text(text, str(src)), Ne16TraceTarget())
    assert res.failed == 1 and "offset 0xc" in res.messages[0]


HAND = """device ne16
# a 1x1 job written by hand: 16 input channels of value 1, one output channel, weights 3
# (8 bits), scale 2, shift 1 -> (16*3*2) >> 1 = 48 per pixel, 3x3 pixels
fill_mem {x:#x} 144 0x01
load_mem {w:#x} weights.bin
fill_mem {s:#x} 1 0x02
read_reg {ACQUIRE:#x} 0x0
write_reg {WEIGHTS_PTR:#x} {w:#x}
write_reg {INFEAT_PTR:#x} {x:#x}
write_reg {OUTFEAT_PTR:#x} {y:#x}
write_reg {SCALE_PTR:#x} {s:#x}
write_reg {INFEAT_D0_STRIDE:#x} 16      # 16 channels a pixel
write_reg {INFEAT_D1_STRIDE:#x} 48      # 3 pixels a row
write_reg {OUTFEAT_D0_STRIDE:#x} 32
write_reg {OUTFEAT_D1_STRIDE:#x} 1      # one output channel
write_reg {OUTFEAT_D2_STRIDE:#x} 3
write_reg {WEIGHTS_D0_STRIDE:#x} 16     # 2 bytes x 8 bit-planes
write_reg {WEIGHTS_D1_STRIDE:#x} 16
write_reg {SUBTILE_REM0:#x} {rem0:#x}
write_reg {SUBTILE_REM1:#x} {rem1:#x}
write_reg {SUBTILE_REM2:#x} {rem1:#x}
write_reg {SUBTILE_NB0:#x} {nb0:#x}
write_reg {SUBTILE_NB1:#x} {nb1:#x}
write_reg {CONFIG0:#x} {cfg:#x}
write_reg {TRIGGER:#x} 0                # commit and start
wait_irq
read_reg {STATUS:#x} 0x0                # idle
read_reg {RUNNING_JOB:#x} 0x0           # job 0 ran
check_mem {y:#x} expect.bin
"""


@pytest.mark.parametrize("base", [0x0, 0x1000, 0x10000000, 0x1001F000])
def test_hand_written_trace(tmp_path, base):
    x, w, s, y = base + 0x100, base + 0x400, base + 0x600, base + 0x800
    # weights 3 = planes 0 and 1 set for channel 0 of output 0; 8 planes of 2 bytes
    planes = np.zeros((8, 2), np.uint8)
    planes[:, :] = 0
    planes[0], planes[1] = [0xFF, 0xFF], [0xFF, 0xFF]
    (tmp_path / "weights.bin").write_bytes(planes.tobytes())
    (tmp_path / "expect.bin").write_bytes(bytes([48] * 9))
    cfg = R.by_name("CONFIG0").encode(QWM1=7, STREAMOUT=1, FILTER_MODE=2, RIGHT_SHIFT=1,
                                      QUANT_RECT=1)
    p = tmp_path / "hand.txt"
    enc = lambda name, **f: R.by_name(name).encode(**f)       # noqa: E731
    p.write_text(HAND.format(x=x, w=w, s=s, y=y, cfg=cfg, rem0=enc("SUBTILE_REM0", KO=1, KI=16),
                             rem1=enc("SUBTILE_REM1", HO=3, WO=3), nb0=enc("SUBTILE_NB0", KO=1, KI=1),
                             nb1=enc("SUBTILE_NB1", HO=1, WO=1), **R.OFFSETS))
    res = replay(parse(p), Ne16TraceTarget())
    assert res.failed == 0 and not res.faulted, res.messages
    assert res.passed == 5                     # ACQUIRE, wait_irq, STATUS, RUNNING_JOB, memory


def test_tlm_writes_a_trace_for_any_job(tmp_path):
    for seed in (7, 8):
        lay = layers.random_layer(seed, kind="conv3x3", h=5, w=5, cin=20, cout=12)
        prog = builder.build(lay, "gapsdk", base=0x10000000)
        path = host.record_trace(prog, tmp_path / str(seed))
        tr = parse(path)
        res = replay(tr, Ne16TraceTarget())
        assert res.failed == 0 and res.passed == tr.checks, res.messages
        got = prog.decode_output((path.parent / [s for s in tr.steps if s.op == "check_mem"][-1]
                                  .args[1].name).read_bytes())
        np.testing.assert_array_equal(got, lay.reference())


def test_example_traces_are_current():
    r = subprocess.run([sys.executable, "-m", "tools.gen_ne16", "--check"],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
