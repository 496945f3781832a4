"""Register-table machinery (tlm/core/regtable.py) on a small table of its own."""
import pytest

from tlm.core.regtable import RO, RW, Field, Page, Register, RegisterMap

TABLE = (
    Register("CTRL", 0x0, "P", RW, 0x4, (Field("go", 0, 1), Field("mode", 1, 2, reset=2),
                                          Field("busy", 7, 1, RO))),
    Register("PTR", 0x8, "P", RW, 0, (Field("offset", 0, 32),), word=0),
    Register("PTR", 0xC, "P", RW, 0, (Field("offset", 0, 8, part_lsb=32),), word=1),
)
REGS = RegisterMap(TABLE, (Page("P", 0, 0x10, "page"),))


def test_lookups_and_accessors():
    assert REGS.CTRL.offset == 0 and REGS["PTR_HI"].offset == 0xC and REGS.offset("PTR", 1) == 0xC
    assert REGS.OFFSET == {"CTRL": 0, "PTR_LO": 8, "PTR_HI": 0xC}
    assert REGS.at(0x8) is REGS.PTR_LO and REGS.at(0x4) is None and REGS.ident_of(0xC) == "PTR_HI"
    assert REGS.page_of(0xC).name == "P" and REGS.page_of(0x10) is None
    m = REGS.CTRL.mode
    assert (m.lsb, m.width, m.mask) == (1, 2, 0b110) and m.get(0b100) == 2 and m.put(0, 3) == 0b110
    assert REGS.CTRL.encode(go=1, mode=1) == 0b011 and REGS.CTRL.decode(0x85) == {"go": 1, "mode": 2, "busy": 1}
    assert REGS.CTRL.write_mask == 0b111 and REGS.CTRL.read_mask == 0x87
    assert REGS.PTR_LO.field("offset").width == 32          # a field named like a Register attribute


def test_unknown_names_and_duplicates():
    missing = "nope"
    with pytest.raises(AttributeError, match="no register"):
        getattr(REGS, missing.upper())
    with pytest.raises(AttributeError, match="no field"):
        getattr(REGS.CTRL, missing)
    with pytest.raises(ValueError, match="duplicate"):
        RegisterMap(TABLE + (TABLE[0],))
