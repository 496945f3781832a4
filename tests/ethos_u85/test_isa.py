"""Unit tests of the ISA table, decoder, encoder, disassembler and RegisterFile (tlm/isa.py).

Known-answer words below are written by hand from the TRM bit tables (3.10.x, 3.11.x) or
copied from Vela output, so they do not come from the table under test.
"""
import random
from enum import IntEnum

import numpy as np
import pytest

from tlm.ethos_u85 import isa
from tlm.ethos_u85.isa import IsaError, RegisterFile, decode, decode_word, disasm, encode


# ---------------------------------------------------------------------------- the table
def test_table_has_every_trm_command():
    # TRM 3.10.2-3.10.64 (63 cmd0) and 3.11.2-3.11.49 (48 cmd1)
    assert len(isa.CMD0_BY_OPCODE) == 63
    assert len(isa.CMD1_BY_OPCODE) == 48
    assert len(isa.BY_NAME) == len(isa.COMMANDS) == 111
    assert set(isa.FIELDS) == set(isa.BY_NAME)


def test_opcodes_unique_per_kind_and_in_range():
    for kind in (0, 1):
        ops = [c.opcode for c in isa.COMMANDS if c.kind == kind]
        assert len(ops) == len(set(ops))
        assert all(0 <= op < 1024 for op in ops)
    by = {0: isa.CMD0_BY_OPCODE, 1: isa.CMD1_BY_OPCODE}
    assert all(by[c.kind][c.opcode] is c for c in isa.COMMANDS)


@pytest.mark.parametrize("cmd", isa.COMMANDS, ids=lambda c: c.name)
def test_fields_disjoint_and_inside_payload(cmd):
    names = [f.name for f in cmd.fields]
    assert len(names) == len(set(names))
    used = 0xFFFF                                  # header: opcode, reserved, control
    for f in cmd.fields:
        assert f.mask & used == 0, f"{cmd.name}.{f.name} overlaps"
        used |= f.mask
        assert f.width == bin(f.mask).count("1")
    assert used >> (32 * (cmd.kind + 1)) == 0, "field outside the command"
    assert cmd.reserved_mask & used == 0


@pytest.mark.parametrize("cmd", [c for c in isa.COMMANDS if any(f.enum for f in c.fields)],
                         ids=lambda c: c.name)
def test_enums_fit_their_fields(cmd):
    for f in cmd.fields:
        if f.enum is not None:
            assert issubclass(f.enum, IntEnum)
            assert max(f.enum) < 1 << f.width


def test_known_opcodes_and_enums_from_trm():
    # spot checks against TRM figures/tables, independent of the table layout
    assert isa.BY_NAME["NPU_OP_STOP"].opcode == 0 and isa.BY_NAME["NPU_OP_STOP"].kind == 0
    assert isa.BY_NAME["NPU_SET_IFM_BASE0"].opcode == 0 and isa.BY_NAME["NPU_SET_IFM_BASE0"].kind == 1
    assert isa.BY_NAME["NPU_OP_BRANCH"].opcode == 0x100
    assert isa.BY_NAME["NPU_SET_RESIZE_Y_STEP"].opcode == 0x097
    assert isa.elementwise_mode["and"] == 33 and isa.elementwise_mode.and_not == 42
    assert isa.elementwise_mode.lshr == 10 and isa.elementwise_mode.cmp_gt == 19
    assert isa.activation_transpose.CWH == 7 and isa.activation_transpose.CHW == 6
    assert isa.microblock.u4x4 == 5 and isa.activation_function.lut_sigmoid == 11
    assert isa.round_mode_ofm.truncate_to_lower == 5 and isa.pooling_mode.argmax_y == 7
    assert isa.broadcast_mode.scalar == 8 and isa.activation_storage.chained == 2
    assert isa.cmd0_opcode.npu_op_conv == 2 and isa.cmd1_opcode.npu_set_ofm_scale == 0x24


# ---------------------------------------------------------------------------- known answers
@pytest.mark.parametrize("words, name, fields", [
    # from Vela output (conv2d, U85-256)
    ([0x00264024, 0x51EB8500], "NPU_SET_OFM_SCALE",
     dict(shift=38, dbl_rnd=0, round_mode=0, scale=1374389504)),
    ([0x02000124], "NPU_SET_ACC_FORMAT", dict(acc_format=0, acc_input=0, acc_output=0, microblock=2)),
    ([0x00040122], "NPU_SET_KERNEL_STRIDE",
     dict(stride_x_lsb=0, stride_y_lsb=0, weight_order=1, dilation_x=0, dilation_y=0,
          decomposition=0, stride_x_msb=0, stride_y_msb=0)),
    ([0xFFFE0109], "NPU_SET_IFM_ZERO_POINT", dict(zero_point=0xFFFE)),   # untyped: raw bits
    # precision: IFM at [19:18], OFM at [18:17] (TRM 3.10.38 / 3.10.53)
    ([0x00050105], "NPU_SET_IFM_PRECISION",
     dict(activation_type=1, activation_precision=1, activation_format=0, activation_storage=0)),
    ([0xC0030114], "NPU_SET_OFM_PRECISION",
     dict(activation_type=1, activation_precision=1, activation_format=0, scale_mode=0,
          activation_reverse=0, activation_transpose=0, activation_storage=3)),
    # 40-bit address: addr_hi [23:16], addr_lo [63:32]
    ([0x00AB4000, 0x12345678], "NPU_SET_IFM_BASE0", dict(addr=0xAB12345678)),
    # signed 40-bit DMA stride (TRM 3.11.11: addr_hi signed)
    ([0x00FF4033, 0xFFFFFFF0], "NPU_SET_DMA0_SRC_STRIDE0", dict(addr=-16)),
    ([0x007F4039, 0xFFFFFFFF], "NPU_SET_DMA0_IDX_SKIP1", dict(addr=(1 << 39) - 1)),
    ([0x00004027, 0xC3C3C3C4], "NPU_SET_OP_SCALAR", dict(scalar=0xC3C3C3C4 - (1 << 32))),
    ([0x0FFF012C], "NPU_SET_RESIZE_X_OFFSET", dict(resize_x_offset=-1)),
    ([0x00014100, 0x00000040], "NPU_OP_BRANCH", dict(branch_cond=1, branch_target=0x40)),
    ([0x002A0006], "NPU_OP_ELEMENTWISE", dict(elementwise_mode=42)),
    ([0xFFFF0000], "NPU_OP_STOP", dict(mask=0xFFFF)),
])
def test_known_answer(words, name, fields):
    d = decode_word(words, 0)
    assert (d.cmd.name, d.fields, d.size, d.offset) == (name, fields, 4 * len(words), 0)
    assert encode(name, **fields) == words


def test_decode_accepts_numpy_and_reports_offsets():
    words = np.array(encode("NPU_SET_BLOCKDEP", blockdep=3) + encode("NPU_SET_OFM_BASE1", addr=16)
                     + encode("NPU_OP_CONV"), dtype=np.uint32)
    ds = decode(words)
    assert [(d.offset, d.name, d.size) for d in ds] == [
        (0, "NPU_SET_BLOCKDEP", 4), (4, "NPU_SET_OFM_BASE1", 8), (12, "NPU_OP_CONV", 4)]
    assert ds[1].words == (0x00004011, 16)


# ---------------------------------------------------------------------------- round trip
def _random_value(f: isa.Field, rng: random.Random) -> int:
    if f.enum is not None and rng.random() < 0.7:
        return int(rng.choice(list(f.enum)))
    lo = -(1 << (f.width - 1)) if f.signed else 0
    hi = (1 << (f.width - 1)) - 1 if f.signed else (1 << f.width) - 1
    return rng.choice([lo, hi, rng.randint(lo, hi)])


@pytest.mark.parametrize("cmd", isa.COMMANDS, ids=lambda c: c.name)
def test_encode_decode_round_trip(cmd):
    rng = random.Random(cmd.name)
    for _ in range(25):
        values = {f.name: _random_value(f, rng) for f in cmd.fields}
        words = encode(cmd.name, **values)
        assert len(words) == cmd.kind + 1 and all(0 <= w < 1 << 32 for w in words)
        d = decode_word([0x11] + words, 1)          # at an offset, after a cmd0
        assert (d.cmd, d.offset, d.fields) == (cmd, 4, values)
        assert d.raw & cmd.reserved_mask == 0
        assert disasm(words)[0].split()[2 + cmd.kind] == cmd.name   # offset, word(s), mnemonic


def test_encode_rejects_bad_values():
    with pytest.raises(ValueError, match="unknown command"):
        encode("NPU_SET_NOTHING")
    with pytest.raises(ValueError, match="no field"):
        encode("NPU_SET_IFM_REGION", regoin=1)
    with pytest.raises(ValueError, match="outside"):
        encode("NPU_SET_IFM_REGION", region=8)
    with pytest.raises(ValueError, match="outside"):
        encode("NPU_SET_IFM_BASE0", addr=1 << 40)
    with pytest.raises(ValueError, match="outside"):
        encode("NPU_SET_IFM_BASE0", addr=-1)
    with pytest.raises(ValueError, match="outside"):
        encode("NPU_SET_DMA0_SRC_STRIDE0", addr=1 << 39)
    with pytest.raises(ValueError, match="outside"):
        encode("NPU_SET_RESIZE_X_OFFSET", resize_x_offset=2048)
    with pytest.raises(ValueError, match="bad value"):
        encode("NPU_OP_POOL", pooling_mode="maximum")
    with pytest.raises(ValueError, match="bad value"):
        encode("NPU_SET_IFM_REGION", region=1.0)


def test_encode_untyped_and_enum_names():
    assert encode("NPU_SET_IFM_ZERO_POINT", zero_point=-6) == [0xFFFA0109]
    assert encode("NPU_SET_IFM_ZERO_POINT", zero_point=0xFFFA) == [0xFFFA0109]
    assert encode("NPU_OP_POOL", pooling_mode="average") == [0x00010005]
    assert encode("NPU_OP_POOL", pooling_mode=isa.pooling_mode.sum) == [0x00030005]
    assert encode("NPU_SET_OFM_BASE0", addr=np.uint64(0x1_0000_0010)) == [0x00014010, 0x10]


# ---------------------------------------------------------------------------- reserved encodings
@pytest.mark.parametrize("word, reason", [
    (0x00000400, "bits \\[13:10\\]"),        # reserved bit 10
    (0x00002002, "bits \\[13:10\\]"),        # reserved bit 13 on NPU_OP_CONV
    (0x00008000, "control value 2"),
    (0x0000C000, "control value 3"),
    (0x00000004, "unknown cmd0 opcode 0x004"),
    (0x00000106, "unknown cmd0 opcode 0x106"),
    (0x000003FF, "unknown cmd0 opcode 0x3ff"),
    (0x00004007, "unknown cmd1 opcode 0x007"),
    (0x00004101, "unknown cmd1 opcode 0x101"),
])
def test_reserved_encoding_raises_with_offset(word, reason):
    good = encode("NPU_SET_IFM_BASE0", addr=0x100) + encode("NPU_OP_DMA_START")
    with pytest.raises(IsaError, match=reason) as ei:
        decode(good + [word, 0, 0])
    e = ei.value
    assert (e.offset, e.word) == (12, word)
    assert "0x00000c" in str(e) and f"0x{word:08x}" in str(e)


def test_truncated_cmd1_raises():
    words = encode("NPU_OP_STOP") + encode("NPU_SET_OFM_SCALE", scale=5)[:1]
    with pytest.raises(IsaError, match="truncated cmd1 NPU_SET_OFM_SCALE") as ei:
        decode(words)
    assert ei.value.offset == 4
    with pytest.raises(IsaError):
        disasm(np.array(words, dtype=np.uint32))


# ---------------------------------------------------------------------------- disassembler
def test_disasm_lines():
    words = (encode("NPU_SET_OFM_PRECISION", activation_precision="b16", activation_transpose="CWH")
             + encode("NPU_SET_DMA0_DST_STRIDE1", addr=-32)
             + [0x00020005]            # NPU_OP_POOL reduce_sum
             + [0x000F0107]            # IFM_UPSCALE mode 3 (reserved) + reserved bits [19:18]
             + encode("NPU_OP_STOP", mask=0xFFFF))
    lines = disasm(words)
    assert lines[0] == ("0x000000: 38020114           NPU_SET_OFM_PRECISION        "
                        "activation_type=unsigned activation_precision=b16 activation_format=nhwc "
                        "scale_mode=per_channel "
                        "activation_reverse=none activation_transpose=CWH activation_storage=tile2x2")
    assert lines[1] == "0x000004: 00ff4036 ffffffe0  NPU_SET_DMA0_DST_STRIDE1     addr=-0x20"
    assert lines[2].endswith("NPU_OP_POOL                  pooling_mode=reduce_sum")
    assert lines[3].endswith("mode=reserved(3) reserved_bits=0xc0000")
    assert lines[4] == "0x000014: ffff0000           NPU_OP_STOP                  mask=65535"


# ---------------------------------------------------------------------------- register file
def test_register_file():
    rf = RegisterFile()
    assert rf.NPU_SET_IFM_BASE0.addr == 0 and not rf.changed()
    assert all(rf.raw(c.name) == 0 for c in isa.SET_COMMANDS)
    rf.set(decode_word(encode("NPU_SET_IFM_BASE0", addr=0x12_0000_0040), 0))
    rf.set(decode_word(encode("NPU_SET_IFM_PRECISION", activation_precision="b16",
                              activation_type="signed"), 0))
    assert rf.NPU_SET_IFM_BASE0.addr == 0x12_0000_0040
    assert rf["NPU_SET_IFM_BASE0"]["addr"] == 0x12_0000_0040
    assert rf.field("NPU_SET_IFM_PRECISION", "activation_precision") == isa.activation_precision.b16
    assert dict(rf.NPU_SET_IFM_PRECISION) == dict(activation_type=1, activation_precision=1,
                                                   activation_format=0, activation_storage=0)
    assert set(rf.changed()) == {"NPU_SET_IFM_BASE0", "NPU_SET_IFM_PRECISION"}

    snap = rf.snapshot()
    assert snap == rf
    rf.set(decode_word(encode("NPU_SET_IFM_BASE0", addr=0x80), 0))     # sticky until re-set
    assert snap.NPU_SET_IFM_BASE0.addr == 0x12_0000_0040 and rf.NPU_SET_IFM_BASE0.addr == 0x80
    assert snap != rf
    with pytest.raises(AttributeError):
        snap.foo = 1
    with pytest.raises(TypeError):
        snap._raw["NPU_SET_IFM_BASE0"] = 0
    with pytest.raises(AttributeError):
        rf.NPU_SET_IFM_BASE0.addr = 5
    with pytest.raises(AttributeError):
        rf.NPU_SET_IFM_BASE0.nonexistent  # noqa: B018 - the attribute access is the test
    with pytest.raises(AttributeError):
        rf.NPU_SET_NOTHING  # noqa: B018
    with pytest.raises(KeyError):
        rf["NPU_OP_CONV"]
    with pytest.raises(ValueError, match="operation"):
        rf.set(decode_word(encode("NPU_OP_CONV"), 0))
    rf.reset()
    assert not rf.changed() and rf == RegisterFile()
