"""The command buffer: the documented byte format, round trips of every kind, and hostile
buffers (every corruption is one fault, never an exception)."""
import struct

import numpy as np
import pytest

from tests.bm1880.bm1880_cases import COMPUTE, baseline, call
from tests.bm1880.bm1880_harness import I8, Rig, rng_for
from tlm.bm1880 import (CTRL_NULL, bmk1880_add_dependency, bmk1880_create_streams, bmk1880_gdma_load,
                        bmk1880_gdma_store, bmk1880_set_stream, bmk1880_tl_prealloc, bmk1880_tpu_relu, shape_t4)
from tlm.bm1880.descriptors import (BY_NAME, DEPENDENCY, FLAG_SYNC, FORMAT_VERSION, HEADER, HDR_SIZE, NO_STREAM,
                                    decode, encode_record)
from tlm.bm1880 import regs
from tlm.bm1880.device import Bm1880, CommandProcessor, FaultError, Job, Program
from tlm.bm1880.tensors import TL


def crc8_bitwise(data: bytes) -> int:
    """CRC-8, polynomial x^8 + x^2 + x + 1, initial 0, bit by bit (not the model's table)."""
    reg = 0
    for byte in data:
        for i in range(7, -1, -1):
            top = (reg >> 7) & 1
            reg = ((reg << 1) & 0xFF) | 0
            if top ^ ((byte >> i) & 1):
                reg ^= 0x07
    return reg


def header(**vals) -> bytearray:
    out = bytearray(HDR_SIZE)
    for name, byte, lsb, _width, _ in HEADER:
        out[byte] |= vals[name] << lsb
    return out


def test_sample_a2_bytes_are_the_documented_format():
    """Appendix A.2's program: prealloc (1, 32, 8, 8) FMT_I8 at 0, load from 0x1000."""
    rig = Rig()
    t = bmk1880_tl_prealloc(rig.ctx, 0, shape_t4(1, 32, 8, 8), I8)
    bmk1880_gdma_load(rig.ctx, t, 0x1000, CTRL_NULL)
    got = rig.cmdbuf()
    kind = BY_NAME["gdma_load"]
    payload = struct.pack("<BBI4I", 0x01, 4, 0, 1, 32, 8, 8) + struct.pack("<Q", 0x1000) + struct.pack("<I", 0)
    hdr = header(engine_id=kind.engine, version=FORMAT_VERSION, kind=kind.code, flags=FLAG_SYNC, stream=NO_STREAM,
                 crc=0, len=len(payload))
    crc_byte = next(h[1] for h in HEADER if h[0] == "crc")
    hdr[crc_byte] = crc8_bitwise(bytes(hdr) + payload)
    assert got == bytes(hdr) + payload
    assert len(got) == 6 + 34


@pytest.mark.parametrize("name", COMPUTE)
def test_round_trip(name):
    rig = Rig()
    call(rig, name, baseline(rig, name))
    buf = rig.cmdbuf()
    (rec,) = decode(buf)
    assert rec.kind.name == name and rec.sync and rec.stream == NO_STREAM
    assert encode_record(rec.kind, rec.args, rec.flags, rec.stream) == buf
    for f in rec.kind.fields:
        if f.type == "tl" and rec.args[f.name] is not None:
            assert isinstance(rec.args[f.name], TL)


def _program(rig):
    """A buffer with several kinds, a streams region and a dependency record."""
    ctx = rig.ctx
    a, b = rig.alloc((1, 40, 3, 3)), rig.alloc((1, 40, 3, 3))
    bmk1880_gdma_load(ctx, a, 0x100, CTRL_NULL)
    bmk1880_create_streams(ctx, 2)
    op1 = bmk1880_tpu_relu(ctx, ofmap=b, ifmap=a)
    bmk1880_set_stream(ctx, 1)
    op2 = bmk1880_gdma_store(ctx, a, 0x2000, CTRL_NULL)
    bmk1880_add_dependency(ctx, op1, op2)
    for name in ("tpu_conv", "tpu_matrix_mac", "gdma_copy_gmem", "tpu_mac_const", "tpu_add_const"):
        call(rig, name, baseline(rig, name))
    return rig.cmdbuf()


def test_program_decodes_and_runs():
    rig = Rig()
    buf = _program(rig)
    prog = Program.load(buf, rig.chip)
    assert len(prog.commands) == 8 and prog.deps == [(1, 2)]
    assert rig.m.run(buf).ok


def test_every_single_byte_corruption_is_a_decode_fault():
    rig = Rig()
    buf = bytearray(_program(rig))
    r = rng_for(101)
    for pos in range(len(buf)):
        bad = bytearray(buf)
        bad[pos] ^= int(r.integers(1, 256))
        job = Job(Bm1880(), bytes(bad))
        assert job.fault is not None and job.fault.code == "DECODE", (pos, job.fault)
        assert job.fault.offset >= 0


def test_truncation():
    rig = Rig()
    buf = _program(rig)
    bounds = {r.offset for r in decode(buf)} | {len(buf)}
    for n in range(len(buf)):
        job = Job(Bm1880(), buf[:n])
        if n in bounds:
            assert job.fault is None or job.fault.code == "DEP", (n, job.fault)   # cut before a dependency's target
        else:
            assert job.fault.code == "DECODE" and "end of the buffer" in job.fault.message \
                or "buffer ends inside a cmd_hdr_t" in job.fault.message, (n, job.fault)


@pytest.mark.parametrize("seed", [201, 202, 203, 204])
def test_random_garbage_never_raises(seed):
    r = rng_for(seed)
    rig = Rig()
    good = _program(rig)
    for _ in range(300):
        n = int(r.integers(0, 200))
        junk = r.integers(0, 256, n, dtype=np.uint8).tobytes()
        if r.integers(0, 2):                   # a valid-looking header with a random payload
            k = list(BY_NAME.values())[int(r.integers(0, len(BY_NAME)))]
            junk = bytes(header(engine_id=k.engine, version=FORMAT_VERSION, kind=k.code, flags=0, stream=NO_STREAM,
                                crc=0, len=min(n, 255))) + junk
        res = Bm1880().run(good[:int(r.integers(0, len(good)))] + junk)
        assert res.ok or res.fault.code in ("DECODE", "ARG", "DEP", "HAZARD", "DATA", "BUS")


def test_valid_crc_but_broken_rule_is_an_arg_fault():
    rig = Rig()
    args = baseline(rig, "tpu_mul")
    call(rig, "tpu_mul", args)
    good = rig.cmdbuf()
    (rec,) = decode(good)
    bad_args = dict(rec.args, rshift_width=99)
    buf = good + encode_record(rec.kind, bad_args, FLAG_SYNC)
    with pytest.raises(FaultError) as e:
        Program.load(buf, rig.chip)
    f = e.value.fault
    assert f.code == "ARG" and f.index == 1 and f.offset == len(good)
    assert f"command 1 at offset 0x{len(good):x} (bmk1880_tpu_mul): rshift_width: 99 is outside 0..31" in f.message


def test_bad_dependency_records():
    rig = Rig()
    call(rig, "tpu_relu", baseline(rig, "tpu_relu"))
    one = rig.cmdbuf()
    fwd = one + encode_record(DEPENDENCY, {"before": 0, "after": 1})
    with pytest.raises(FaultError, match="names command 1, only 1 precede it"):
        Program.load(fwd, rig.chip)
    self_dep = one + encode_record(DEPENDENCY, {"before": 0, "after": 0})
    with pytest.raises(FaultError, match="cannot precede itself"):
        Program.load(self_dep, rig.chip)
    two = one + one
    cyc = two + encode_record(DEPENDENCY, {"before": 1, "after": 0})
    with pytest.raises(FaultError) as e:
        Program.load(cyc, rig.chip)
    assert e.value.fault.code == "DEP" and "cycle" in e.value.fault.message


def test_other_version_is_refused():
    rig = Rig()
    call(rig, "tpu_relu", baseline(rig, "tpu_relu"))
    buf = bytearray(rig.cmdbuf())
    ver = next(h for h in HEADER if h[0] == "version")
    buf[ver[1]] = (buf[ver[1]] & ~(((1 << ver[3]) - 1) << ver[2])) | (2 << ver[2])
    with pytest.raises(FaultError, match="format version 2, this model reads version 1"):
        Program.load(bytes(buf), rig.chip)


def test_command_processor_reports_faults_in_status():
    cp = CommandProcessor()
    cp.m.gmem.write(0x100, bytes(header(engine_id=2, version=FORMAT_VERSION, kind=0x99, flags=0, stream=NO_STREAM,
                                        crc=0, len=0)))
    off = {r.name: r.offset for r in regs.REGISTERS}
    cp.write(off["CMDBUF_ADDR_LO"], 0x100)
    cp.write(off["CMDBUF_SIZE"], 6)
    cp.write(off["DOORBELL"], 1)
    st = regs.BY_NAME["STATUS"]
    v = cp.read(off["STATUS"])
    assert st.field("fault").get(v) == 1 and st.field("fault_code").get(v) == regs.FAULT_CODE["DECODE"]
    assert cp.irq and cp.read(off["FAULT_OFFSET"]) == 0
    assert any("unknown kind code 0x99" in e for e in cp.events)


def test_disassembly_one_line_per_command():
    from tlm.bm1880.descriptors import DecodeError, disassemble
    rig = Rig()
    buf = _program(rig)
    lines = disassemble(buf)
    assert len(lines) == len(decode(buf)) == 9
    assert lines[0].startswith("0x000000    #0 GDMA SYNC     bmk1880_gdma_load t=FMT_I8 tensor (1, 40, 3, 3) "
                               "@0x0 aligned gaddr=0x100 ctrls=CTRL_NULL")
    assert " s1 bmk1880_gdma_store" in lines[2] and "bmk1880_add_dependency before=#1 after=#2" in lines[3]
    with pytest.raises(DecodeError, match="CRC-8 mismatch"):
        disassemble(buf[:-1] + bytes([buf[-1] ^ 1]))


def test_huge_shapes_in_a_buffer_are_arg_faults():
    """A decoded tensor of 2^32 channels or a 2^60-datum gmem copy is refused before any
    address is computed (choice C-LIMIT)."""
    from tlm.bm1880.tensors import TG
    rig = Rig()
    call(rig, "tpu_relu", baseline(rig, "tpu_relu"))
    (rec,) = decode(rig.cmdbuf())
    big = TL(I8, 4, 1, 0xFFFFFFFF, 1, 1, 0, True, None)
    buf = encode_record(rec.kind, dict(rec.args, ifmap=big), FLAG_SYNC)
    with pytest.raises(FaultError, match="ifmap: shape .* more than lmem's"):
        Program.load(buf, rig.chip)
    g = TG(0, 4, 1 << 15, 1 << 15, 1 << 15, 1 << 15, (0, 0, 0, 0))
    buf = encode_record(BY_NAME["gdma_copy_gmem"], {"dst": g, "src": g, "ctrls": CTRL_NULL}, FLAG_SYNC)
    with pytest.raises(FaultError, match="dst: holds 1152921504606846976 data; one gmem operand holds at most"):
        Program.load(buf, rig.chip)


def test_buffers_beyond_the_model_budget_are_limit_faults():
    """Choice C-LIMIT: a buffer larger than MAX_CMDBUF is refused before decoding, and through
    the register window before anything is fetched (a hostile CMDBUF_SIZE of 4 GiB)."""
    from tlm.bm1880.descriptors import MAX_CMDBUF
    with pytest.raises(FaultError) as e:
        Program.load(bytes(MAX_CMDBUF + 1))
    assert e.value.fault.code == "LIMIT" and f"at most {MAX_CMDBUF}" in str(e.value)
    cp = CommandProcessor()
    off = {r.name: r.offset for r in regs.REGISTERS}
    fetched = []
    cp.m.fetch = lambda addr, size: fetched.append(size)                  # must not be reached
    cp.write(off["CMDBUF_SIZE"], 0xFFFFFFFF)
    cp.write(off["DOORBELL"], 1)
    st = regs.BY_NAME["STATUS"]
    v = cp.read(off["STATUS"])
    assert st.field("fault").get(v) == 1 and st.field("fault_code").get(v) == regs.FAULT_CODE["LIMIT"]
    assert not fetched and cp.irq and any("CMDBUF_SIZE 4294967295" in ev for ev in cp.events)


def test_hazard_check_budget_is_a_limit_fault(monkeypatch):
    """Choice C-LIMIT: a parallel group whose two engines both touch more than the hazard
    table's budget faults with FAULT_LIMIT; the sizes come from the shapes, no address is
    computed."""
    from tlm.bm1880 import device, schedule
    from tlm.bm1880.chip import CHIP
    monkeypatch.setattr(device, "footprint", lambda ops: pytest.fail("a footprint was computed"))
    rig = Rig()
    big = rig.alloc((1, 32, 1, CHIP.lmem_size))                             # all of lmem
    from tlm.bm1880 import bmk1880_gdma_copy_gmem, bmk1880_parallel_disable, bmk1880_parallel_enable, shape_t4
    from tlm.bm1880 import tensor_gmem_default
    from tlm.bm1880.checks import MAX_GMEM_DATA
    bmk1880_parallel_enable(rig.ctx)
    per_tpu = 2 * CHIP.lmem_total                                           # relu: ofmap + ifmap
    per_dma = 2 * MAX_GMEM_DATA
    for _ in range(schedule.MAX_HAZARD_TABLE // per_tpu + 1):
        bmk1880_tpu_relu(rig.ctx, ofmap=big, ifmap=big)
    for k in range(schedule.MAX_HAZARD_TABLE // per_dma + 1):
        s = shape_t4(1, 1, 1, MAX_GMEM_DATA)
        bmk1880_gdma_copy_gmem(rig.ctx, tensor_gmem_default((2 * k + 1) << 30, s), tensor_gmem_default(2 * k << 30, s),
                               CTRL_NULL)
    bmk1880_parallel_disable(rig.ctx)
    with pytest.raises(FaultError) as e:
        Program.load(rig.cmdbuf(), rig.chip)
    assert e.value.fault.code == "LIMIT" and "hazard check" in str(e.value) and "C-LIMIT" in str(e.value)


@pytest.mark.parametrize("seed", [401, 402, 403])
def test_valid_crc_random_fields_never_raise(seed):
    """Records of every kind with random field values (shapes, strides, addresses, formats,
    flags, shifts) and a correct CRC, so they pass decoding and reach the argument rules and
    execution: each run ends done or with a documented fault, never an exception."""
    from tlm.bm1880.descriptors import KINDS
    from tlm.bm1880.tensors import TG
    from tlm.bm1880.chip import stride_t
    r = rng_for(seed)
    pick = lambda xs: xs[int(r.integers(0, len(xs)))]                          # noqa: E731
    dims = [1, 1, 2, 3, 16, 32, 37, 256, 4096, 1 << 20, (1 << 32) - 1]
    def value(t):
        if t == "tl":
            if r.random() < 0.1:
                return None
            st = None if r.random() < 0.7 else tuple(pick([0, 1, 2, 16, 4096, (1 << 32) - 1]) for _ in range(4))
            return TL(pick([4, 9, 4, 9, 0, 5]), pick([4, 4, 4, 2]), *(pick(dims) for _ in range(4)),
                      pick([0, 0, 0x100, 0x10000, 0x10010, int(r.integers(0, 1 << 21)), (1 << 32) - 1]),
                      bool(r.integers(0, 2)), st)
        if t == "tg":
            return TG(pick([0, 0x1000, (1 << 40) - 8, (1 << 64) - 1]), pick([2, 4, 4, 3]),
                      *(pick(dims) for _ in range(4)), tuple(pick([0, 1, 2, 16, (1 << 32) - 1]) for _ in range(4)))
        if t == "stride":
            return stride_t(*(pick([0, 1, 2, 16, 4096, (1 << 32) - 1]) for _ in range(4)))
        if t in ("u8", "c8"):
            return pick([0, 1, 2, 3, 16, 128, 255])
        if t == "bool":
            return bool(r.integers(0, 2))
        if t == "c16":
            return pick([0, 1, 0x8000, 0xFFFF])
        if t == "int":
            return pick([0, 1, 5, 16, 31, 32, -1, -(1 << 31)])
        if t in ("u32", "ctrl"):
            return pick([0, 1, 4, 32, 256, 260, (1 << 32) - 1])
        return pick([0, 0x100, (1 << 40) - 1, (1 << 64) - 1])
    kinds = [k for k in KINDS if k is not DEPENDENCY]
    codes = set()
    for _ in range(250):
        k = pick(kinds)
        rec = encode_record(k, {f.name: value(f.type) for f in k.fields}, FLAG_SYNC)
        res = Bm1880().run(rec)
        assert res.ok or res.fault.code in ("ARG", "DATA", "LIMIT"), res
        codes.add("ok" if res.ok else res.fault.code)
    assert "ARG" in codes


def test_npu_tlm_disasm_reads_a_command_buffer(tmp_path, capsys):
    """`npu-tlm disasm` finds the BM1880 format by its checked first command (or --device);
    a corrupt command lists the ones before it, then one error line naming it."""
    from tlm.bm1880.descriptors import disassemble
    from tlm.core import cli
    buf = _program(Rig())
    path = tmp_path / "job.cmdbuf"
    path.write_bytes(buf)
    for extra in ([], ["--device", "bm1880"]):
        assert cli.main(["disasm", str(path), *extra]) == 0
        out, err = capsys.readouterr()
        lines = out.splitlines()
        assert err == "" and lines[0].startswith(f"# bm1880 command buffer: {path} ({len(buf)} bytes")
        assert lines[1:] == disassemble(buf)
    assert cli.main(["disasm", str(path), "--no-header"]) == 0
    assert capsys.readouterr().out.splitlines() == disassemble(buf)
    # the last command corrupted: the 8 before it listed, then its offset and the cause
    last = decode(buf)[-1].offset
    path.write_bytes(buf[:-1] + bytes([buf[-1] ^ 1]))
    assert cli.main(["disasm", str(path), "--no-header"]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == disassemble(buf[:last]) and len(out.splitlines()) == 8
    assert err.count("\n") == 1 and err.startswith(f"npu-tlm: error: {path}: command 8 at offset 0x{last:x}")
    assert "CRC-8 mismatch" in err
    # the first command corrupted: no device recognises it; named, one error line
    bad = bytearray(buf)
    bad[HDR_SIZE] ^= 0xFF
    path.write_bytes(bytes(bad))
    assert cli.main(["disasm", str(path), "--device", "bm1880"]) == 1
    out, err = capsys.readouterr()
    assert out == f"# bm1880 command buffer: {path} ({len(buf)} bytes, format version {FORMAT_VERSION})\n"
    assert err == (f"npu-tlm: error: {path}: command 0 at offset 0x0 ({decode(buf)[0].kind.name}): "
                   "CRC-8 mismatch (corrupt command)\n")
    # another device's option, an empty file, a missing file: one line each
    path.write_bytes(buf)
    assert cli.main(["disasm", str(path), "--op-index", "1"]) == 1
    assert capsys.readouterr().err == (f"npu-tlm: error: {path}: --op-index is an option of ethos-u85, "
                                       "the file is read as bm1880\n")
    empty = tmp_path / "empty.cmdbuf"
    empty.write_bytes(b"")
    for p, why in ((empty, "empty file"), (tmp_path / "nothere", "no such file")):
        assert cli.main(["disasm", str(p), "--device", "bm1880"]) == 1
        assert capsys.readouterr().err == f"npu-tlm: error: {p}: {why}\n"
