"""Traces (docs/trace-format.md) for the BM1880: the model writes a trace of any program
through its command-processor window, `npu-tlm replay` runs it, and bad buffers, bad
register accesses and bad traces give one clear line each."""
import subprocess
import sys

import numpy as np

from tests.bm1880.bm1880_harness import I8, Rig, rng_for, values
from tests.bm1880.bm1880_net import G_BC, G_BF, G_POOL, G_WC, G_WF, G_X, G_Y, build
from tlm.bm1880 import (CTRL_NULL, bmk1880_acquire_cmdbuf, bmk1880_gdma_load, bmk1880_gdma_store, bmk1880_info_t,
                        bmk1880_register, bmk1880_tpu_relu, regs)
from tlm.bm1880.trace_target import LMEM_WINDOW, Bm1880TraceTarget, record_run, write_trace
from tlm.core import registry
from tlm.core.trace import parse, replay

OFF = {r.name: r.offset for r in regs.REGISTERS}


def cli(*args):
    return subprocess.run([sys.executable, "-m", "tlm.core.cli", "replay", *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def net_trace(tmp_path, seed=401):
    r = rng_for(seed)
    info = bmk1880_info_t(1880, bytearray(4096), 4096)
    ctx = bmk1880_register(info)
    build(ctx)
    buf, _ = bmk1880_acquire_cmdbuf(ctx)
    b = lambda n: r.integers(0, 256, n, dtype=np.uint8).tobytes()     # noqa: E731
    inputs = [(G_X, b(384)), (G_WC, b(216)), (G_BC, b(16)), (G_WF, b(1280)), (G_BF, b(20))]
    return write_trace(tmp_path, bytes(buf), inputs, [(G_POOL, 256), (G_Y, 20)], comment="small network"), buf


def test_registry_entry():
    info = registry.get("bm1880")
    assert info.configs == ("bm1880",)
    t = info.make_target()
    assert isinstance(t, Bm1880TraceTarget) and t.device == "bm1880"
    assert t.read_reg(OFF["ID"]) == regs.BY_NAME["ID"].reset


def test_written_trace_replays(tmp_path):
    path, buf = net_trace(tmp_path)
    text = path.read_text()
    assert text.startswith("device bm1880\n# small network\n")
    assert f"write_reg 0x{OFF['DOORBELL']:x} 0x00000001" in text and "wait_irq" in text
    assert text.count("check_mem") == 2
    done = regs.BY_NAME["STATUS"].field("done").put(1)
    assert f"read_reg 0x{OFF['STATUS']:x} 0x{done:08x}" in text
    tr = parse(path)
    res = replay(tr, registry.get("bm1880").make_target())
    assert res.exit_status == 0 and res.failed == 0 and res.passed == 5, res.messages
    r = cli(path)
    assert r.returncode == 0 and r.stdout.strip().endswith("replay: 5 checks passed, 0 failed"), r.stdout + r.stderr


def test_wrong_expectation_fails(tmp_path):
    path, _ = net_trace(tmp_path)
    out = sorted(tmp_path.glob("mem_*.bin"))[-1]                     # the last check_mem file
    data = bytearray(out.read_bytes())
    data[3] ^= 0xFF
    out.write_bytes(bytes(data))
    r = cli(path)
    assert r.returncode == 1
    assert "check_mem" in r.stdout and "first difference at 0x" in r.stdout and "1 failed" in r.stdout


def test_corrupt_command_buffer_is_a_fault_not_a_traceback(tmp_path):
    path, buf = net_trace(tmp_path)
    blob = next(p for p in tmp_path.glob("mem_*.bin") if p.read_bytes() == bytes(buf))
    bad = bytearray(buf)
    bad[40] ^= 0x5A
    blob.write_bytes(bytes(bad))
    r = cli(path)
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr
    assert "device fault after write_reg: FAULT_DECODE: command 1 at offset 0x" in r.stdout   # at DOORBELL
    assert "offset 0x14: expected" in r.stdout                     # STATUS reads fault, not done


def test_bad_register_accesses_are_reported(tmp_path):
    (tmp_path / "t.txt").write_text("device bm1880\n"
                                    f"write_reg 0x{OFF['STATUS']:x} 0x1\n"
                                    "read_reg 0x3c 0x0\n"
                                    f"write_reg 0x{OFF['IRQ_ENABLE']:x} 0xff\n")
    r = cli(tmp_path / "t.txt")
    assert r.returncode == 1
    assert "write of 0x00000001 to read-only register STATUS (offset 0x14)" in r.stdout
    assert "read of unmapped offset 0x3c" in r.stdout
    assert "sets bits outside its fields" in r.stdout


def test_malformed_trace_exit_2(tmp_path):
    (tmp_path / "t.txt").write_text("device bm1880\nfill_mem 0x1ffffffffff 2 0x00\n")
    r = cli(tmp_path / "t.txt")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "outside the bm1880 address space (41 bits)" in r.stderr


def test_lmem_window_and_empty_buffer(tmp_path):
    """A trace can preload and check lmem; an empty buffer (appendix A.1) is done at once."""
    rig = Rig()
    r = rng_for(402)
    a, o = rig.alloc((1, 40, 2, 2)), rig.alloc((1, 40, 2, 2))
    v = values(r, (1, 40, 2, 2), True)
    rig.put(a, v)
    bmk1880_tpu_relu(rig.ctx, ofmap=o, ifmap=a)
    buf = rig.cmdbuf()
    lmem0 = rig.m.lmem.tobytes()
    path = write_trace(tmp_path, buf, outputs=[(LMEM_WINDOW, len(lmem0))], lmem_image=lmem0)
    assert cli(path).returncode == 0
    t = Bm1880TraceTarget()
    t.load_mem(LMEM_WINDOW, lmem0)
    rec = record_run(t, buf)
    rig.m.lmem[:] = np.frombuffer(t.read_mem(LMEM_WINDOW, len(lmem0)), np.uint8)
    assert np.array_equal(rig.get(o), np.maximum(v, 0))
    assert "wait_irq" in rec.writer.text()
    empty = write_trace(tmp_path / "empty", b"")
    r2 = cli(empty)
    assert r2.returncode == 0 and "3 checks passed" in r2.stdout


def test_gmem_bus_error_is_fault_bus():
    rig = Rig()
    t = rig.alloc((1, 4, 2, 2), I8)
    bmk1880_gdma_load(rig.ctx, t, 0x1000, CTRL_NULL)
    bmk1880_gdma_store(rig.ctx, t, 0x8000, CTRL_NULL)
    target = Bm1880TraceTarget()
    target.m.gmem.inject_fault(0x8000, 0x8010)
    rec = record_run(target, rig.cmdbuf())
    faults = target.faults()
    assert any(f.startswith("FAULT_BUS: command 1 at offset 0x28 (bmk1880_gdma_store): SLVERR on gmem write 0x8000")
               for f in faults), faults
    st = regs.BY_NAME["STATUS"]
    v = target.read_reg(OFF["STATUS"])
    assert st.field("fault_code").get(v) == regs.FAULT_CODE["BUS"]
    assert target.read_reg(OFF["FAULT_CMD"]) == 1 and target.read_reg(OFF["CMD_DONE"]) == 1
    assert "read_reg" in rec.writer.text()


def test_doorbell_while_busy_and_irq_clear():
    rig = Rig()
    t = rig.alloc((1, 4, 2, 2), I8)
    for _ in range(3):
        bmk1880_gdma_load(rig.ctx, t, 0x1000, CTRL_NULL)
    buf = rig.cmdbuf()
    tg = Bm1880TraceTarget()
    tg.load_mem(0x100, buf)
    tg.write_reg(OFF["CMDBUF_ADDR_LO"], 0x100)
    tg.write_reg(OFF["CMDBUF_SIZE"], len(buf))
    tg.write_reg(OFF["DOORBELL"], 1)
    busy = regs.BY_NAME["STATUS"].field("busy")
    assert busy.get(tg.read_reg(OFF["STATUS"])) == 1
    tg.write_reg(OFF["DOORBELL"], 1)
    assert tg.faults() == ["DOORBELL written while a buffer is running; ignored"]
    assert tg.wait_irq(10) and tg.read_reg(OFF["CMD_DONE"]) == 3
    tg.write_reg(OFF["IRQ_STATUS"], tg.read_reg(OFF["IRQ_STATUS"]))
    assert not tg.cp.irq and not tg.wait_irq(5)


def test_make_model():
    import pytest
    from tlm.bm1880.device import Bm1880, make_model
    m = make_model("bm1880")
    assert isinstance(m, Bm1880) and m.slices.shape == (m.chip.npu_num, m.chip.lmem_size)
    with pytest.raises(ValueError, match="no configuration 'bm1881'"):
        make_model("bm1881")


def test_hostile_buffers_through_the_register_window():
    """Through the trace target: random bytes, a good buffer with random bytes flipped, and
    random addresses and sizes (up to 4 GiB, past 2^40) at the doorbell. Every doorbell ends in
    the done or the fault interrupt within the wait budget, with one line per fault."""
    r = rng_for(601)
    rig = Rig()
    t, u = rig.alloc((1, 4, 2, 2), I8), rig.alloc((1, 4, 2, 2), I8)
    bmk1880_gdma_load(rig.ctx, t, 0x1000, CTRL_NULL)
    bmk1880_tpu_relu(rig.ctx, ofmap=u, ifmap=t)
    bmk1880_gdma_store(rig.ctx, u, 0x2000, CTRL_NULL)
    good = rig.cmdbuf()
    st = regs.BY_NAME["STATUS"]
    ends = set()
    for k in range(120):
        tg = Bm1880TraceTarget()
        kind = k % 3
        if kind == 0:
            buf = r.integers(0, 256, int(r.integers(0, 300)), dtype=np.uint8).tobytes()
        else:
            buf = bytearray(good)
            for _ in range(int(r.integers(1, 4))):
                buf[int(r.integers(0, len(buf)))] = int(r.integers(0, 256))
            buf = bytes(buf)
        addr, size = 0x100, len(buf)
        if kind == 2 and r.integers(0, 2):
            addr = int(r.choice([0, (1 << 40) - 8, 0xFF_FFFF_FF00]))
            size = int(r.choice([0, 7, 1 << 20, (1 << 32) - 1]))
        tg.load_mem(0x100, buf)
        tg.write_reg(OFF["CMDBUF_ADDR_LO"], addr & 0xFFFFFFFF)
        tg.write_reg(OFF["CMDBUF_ADDR_HI"], addr >> 32)
        tg.write_reg(OFF["CMDBUF_SIZE"], size)
        tg.write_reg(OFF["DOORBELL"], 1)
        assert tg.wait_irq(tg.wait_default)
        v = tg.read_reg(OFF["STATUS"])
        assert st.field("busy").get(v) == 0 and st.field("done").get(v) + st.field("fault").get(v) == 1
        code = st.field("fault_code").get(v)
        ends.add(regs.FAULT_NAME[code])
        faults = tg.faults()
        assert all(isinstance(f, str) and "\n" not in f for f in faults)
        assert (code == 0) == (not any(f.startswith("FAULT_") for f in faults)), faults
    assert {"NONE", "DECODE", "LIMIT"} <= ends
