"""The APB register map (TRM 3.2, 3.3, 3.4) and the APB access rules (TRM 3.1.1).

Expected values are written out from the TRM tables here rather than read back from
tlm.ethos_u85.registers, so a wrong table entry fails."""
import itertools

import pytest

from tlm.ethos_u85 import registers as R
from tlm.ethos_u85.config import CONFIGS, Pins, Policy, get_config
from tlm.ethos_u85.device import Device

OFF = {r.ident: r.offset for r in R.REGISTERS}

# TRM Tables 3-3, 3-30, 3-32, 3-45, 3-59: (ident, offset, access, reset word or None)
TRM_MAP = [
    ("ID", 0x0000, "ro", 0x20007001), ("STATUS", 0x0004, "ro", 0x00000008),
    ("CMD", 0x0008, "rw", 0x0000000C), ("RESET", 0x000C, "rw", 0),
    ("QBASE_LO", 0x0010, "rw", 0), ("QBASE_HI", 0x0014, "rw", 0), ("QREAD", 0x0018, "ro", 0),
    ("QCONFIG", 0x001C, "rw", 0), ("QSIZE", 0x0020, "rw", 0), ("PROT", 0x0024, "ro", 0),
    ("CONFIG", 0x0028, "ro", None), ("COND_STATUS", 0x0030, "ro", 0), ("POWER_CTRL", 0x0038, "rw", 0),
    ("REGIONCFG", 0x003C, "rw", 0), ("MEM_ATTR0", 0x0040, "rw", 0), ("MEM_ATTR1", 0x0044, "rw", 0),
    ("MEM_ATTR2", 0x0048, "rw", 0), ("MEM_ATTR3", 0x004C, "rw", 0), ("AXI_SRAM", 0x0050, "rw", 0),
    ("AXI_EXT", 0x0054, "rw", 0), ("CFG_SRAM_CAP", 0x0060, "ro", None), ("CFG_EXT_CAP", 0x0064, "ro", None),
    ("CFG_SRAM_HASH0_LO", 0x0068, "ro", None), ("CFG_SRAM_HASH0_HI", 0x006C, "ro", None),
    ("CFG_SRAM_HASH1_LO", 0x0070, "ro", None), ("CFG_SRAM_HASH1_HI", 0x0074, "ro", None),
    ("CFG_EXT_HASH0_LO", 0x0078, "ro", None), ("CFG_EXT_HASH0_HI", 0x007C, "ro", None),
] + [(f"BASEP{n}_{h}", 0x80 + 8 * n + 4 * i, "rw", 0) for n in range(8) for i, h in enumerate(("LO", "HI"))] + [
    ("PID4", 0xFD0, "ro", 0x04), ("PID5", 0xFD4, "ro", 0), ("PID6", 0xFD8, "ro", 0), ("PID7", 0xFDC, "ro", 0),
    ("PID0", 0xFE0, "ro", 0x82), ("PID1", 0xFE4, "ro", 0xB5), ("PID2", 0xFE8, "ro", 0x0B),
    ("PID3", 0xFEC, "ro", 0), ("CID0", 0xFF0, "ro", 0x0D), ("CID1", 0xFF4, "ro", 0xF0),
    ("CID2", 0xFF8, "ro", 0x05), ("CID3", 0xFFC, "ro", 0xB1),
    ("PMCR", 0x1180, "rw", 0x4000), ("PMCNTENSET", 0x1184, "rw", 0), ("PMCNTENCLR", 0x1188, "rw", 0),
    ("PMOVSSET", 0x118C, "rw", 0), ("PMOVSCLR", 0x1190, "rw", 0), ("PMINTSET", 0x1194, "rw", 0),
    ("PMINTCLR", 0x1198, "rw", 0), ("PMCCNTR_LO", 0x11A0, "rw", 0), ("PMCCNTR_HI", 0x11A4, "rw", 0),
    ("PMCCNTR_CFG", 0x11A8, "rw", 0), ("PMCAXI_CHAN", 0x11AC, "rw", 0), ("PMCLUT", 0x11B0, "rw", 0),
] + [(f"PMEVCNTR{n}", 0x1300 + 4 * n, "rw", 0) for n in range(8)] \
  + [(f"PMEVTYPER{n}", 0x1380 + 4 * n, "rw", 0) for n in range(8)]

# TRM Table 3-13 CONFIG field values per configuration: macs_per_cc, num_axi_sram, num_axi_ext, num_wd
TRM_CONFIG = {"ethos-u85-128": (7, 1, 0, 0), "ethos-u85-256": (8, 1, 0, 0), "ethos-u85-512": (9, 1, 0, 1),
              "ethos-u85-1024": (10, 1, 1, 2), "ethos-u85-2048": (11, 2, 1, 2)}

RESERVED = [0x002C, 0x0034, 0x0058, 0x005C, 0x00C0, 0x00FC, 0x0100, 0x017C, 0x0180, 0x0400, 0x0940,
            0x0C00, 0x0F00, 0x0FCC, 0x1000, 0x117C, 0x119C, 0x11B4, 0x11FC, 0x1200, 0x1320, 0x137C,
            0x13A0, 0x13FC, 0x1400, 0x1FFC]

PINS = dict(PORPL=0, PORSL=0, CFGSRAMCAP=0x0001_0A05, CFGEXTCAP=0x0002_1F3F,
            CFGSRAMHASH0=0xAB_CDEF_1240 | 0x3F, CFGSRAMHASH1=0x00_0000_0100, CFGEXTHASH0=0x12_3456_7880)


def settled(config="ethos-u85-256", pins=None, policy=None):
    return Device(config, pins=pins, policy=policy, settle=True)


def pprot_of(priv, nonsecure):
    return (nonsecure << 1) | priv


# ------------------------------------------------------------------------------ the table
def test_table_matches_trm_offsets_access_and_resets():
    assert [(r.ident, r.offset, r.access) for r in R.REGISTERS] == [(i, o, a) for i, o, a, _ in TRM_MAP]
    for ident, _, _, reset in TRM_MAP:
        if reset is not None:
            assert R.BY_IDENT[ident].reset == reset, ident


def test_table_is_well_formed():
    for r in R.REGISTERS:
        assert r.offset % 4 == 0 and r.offset < R.APB_WINDOW
        page = R.page_of(r.offset)
        assert page is not None and page.name == r.page, r.ident
        used = 0
        for f in r.fields:
            assert 0 <= f.lsb and f.msb <= 31 and f.width >= 1, (r.ident, f.name)
            assert not used & f.mask, (r.ident, f.name)
            used |= f.mask
            assert f.enum is None or f.enum in R.ENUMS
            if f.reset is not None and r.reset is not None:
                assert f.get(r.reset) == f.reset, (r.ident, f.name)
        assert R.by_offset(r.offset) is r
        assert R.get(r.ident) is r
    assert len({r.ident for r in R.REGISTERS}) == len(R.REGISTERS)


def test_pages_match_trm_table_3_1():
    assert [(p.name, p.offset, p.size) for p in R.PAGES] == [
        ("BASE", 0, 128), ("BASE_POINTERS", 0x80, 128), ("ID", 0xF00, 256), ("PMU", 0x1180, 128),
        ("PMU_COUNTERS", 0x1300, 256)]
    for off in RESERVED:
        assert R.by_offset(off) is None, hex(off)


def test_field_positions_spot_checks():
    st = R.get("STATUS")
    assert [(f.name, f.lsb, f.width) for f in st.fields] == [
        ("state", 0, 1), ("irq_raised", 1, 1), ("bus_status", 2, 1), ("reset_status", 3, 1),
        ("cmd_parse_error", 4, 1), ("cmd_end_reached", 5, 1), ("pmu_irq_raised", 6, 1), ("ecc_fault", 8, 1),
        ("branch_fault", 9, 1), ("faulting_interface", 11, 1), ("faulting_channel", 12, 4),
        ("irq_history_mask", 16, 16)]
    assert R.get("CMD").write_mask == 0xFFFF001F
    assert R.get("AXI_SRAM").write_mask == 0x00031F3F
    assert R.get("MEM_ATTR2").write_mask == 0xF7
    assert R.get("REGIONCFG").write_mask == 0xFFFF
    assert R.get("PMCR").write_mask == 0x0F and R.get("PMCR").read_mask == 0xF809
    assert R.get("PMCCNTR_CFG").write_mask == 0xF3FFF3FF
    assert R.get("PMCAXI_CHAN").write_mask == 0x50F
    assert R.get("PMCLUT").write_mask == 0xFFFF0001
    assert R.get("PMEVTYPER5").write_mask == 0xF3FF
    assert R.get("PMCCNTR", 1).write_mask == 0xFFFF
    assert R.get("QBASE", 1).field("offset").part_lsb == 32
    assert R.get("CFG_EXT_HASH0", 0).field("zero").mask == 0x3F
    assert R.get("PMCR").field("event_cnt_rst").access == "wo"
    assert R.get("PMCR").field("num_event_cnt").access == "ro"
    assert dict(R.ENUMS["axi_mem_encoding_t"])[0xB] == "write_back_read_and_write_allocate"
    assert dict(R.ENUMS["pmu_axi_channel_t"])[9] == "wr_mem2mem" and 7 not in dict(R.ENUMS["pmu_axi_channel_t"])
    assert "CMD" in R.summary_table() and R.get("ID").as_dict()["reset"] == 0x20007001


def test_pmu_event_enum_spot_values():
    ev = R.PMU_EVENTS
    want = {0x000: "no_event", 0x011: "cycle", 0x020: "npu_idle", 0x023: "npu_active", 0x030: "mac_active",
            0x033: "mac_dpu_active", 0x040: "ao_active", 0x050: "wd_active", 0x051: "wd_stalled",
            0x080: "sram_rd_trans_accepted", 0x087: "sram_wr_data_beat_written", 0x08C: "sram_enabled_cycles",
            0x08F: "sram_wr_stall_limit", 0x0A0: "axi_latency_any", 0x0A6: "axi_latency_1024",
            0x0B5: "ecc_ao_lut", 0x180: "ext_rd_trans_accepted", 0x18E: "ext_rd_stall_limit",
            0x200: "sram0_rd_trans_accepted", 0x21C: "sram1_enabled_cycles", 0x23F: "sram3_wr_stall_limit",
            0x280: "ext0_rd_trans_accepted", 0x297: "ext1_wr_data_beat_written", 0x29F: "ext1_wr_stall_limit"}
    for v, n in want.items():
        assert ev[v][0] == n, hex(v)
    for reserved in (1, 16, 18, 33, 0x85, 0x86, 0x8A, 0x8D, 0x0A7, 0x0B6, 0x17F, 0x205, 0x240, 0x2A0, 0x3FF):
        assert reserved not in ev, hex(reserved)
    assert len(ev) == 22 + 2 * 11 + 6 * 11


@pytest.mark.parametrize("name", list(CONFIGS))
def test_config_words_follow_table_3_13(name):
    cfg = get_config(name)
    reg = R.get("CONFIG")
    f = reg.decode(cfg.config_word)
    assert (f["macs_per_cc"], f["num_axi_sram"], f["num_axi_ext"], f["num_wd"]) == TRM_CONFIG[name]
    assert f["cmd_stream_version"] == 1 and f["custom_dma"] == 0 and f["product"] == 2
    assert cfg.macs == 1 << f["macs_per_cc"]
    assert cfg.sram_ports == 1 << f["num_axi_sram"] and cfg.ext_ports == 1 << f["num_axi_ext"]
    assert cfg.max_outstanding("sram") == (12, 16)
    assert cfg.max_outstanding("ext") == ((32, 32) if cfg.macs <= 256 else (64, 32))


def test_get_config_aliases():
    assert get_config("ETHOSU85_512").macs == 512 and get_config(1024).macs == 1024
    assert get_config(None).name == "ethos-u85-256"
    assert get_config(get_config(128)) is get_config("ethos-u85-128")
    with pytest.raises(ValueError):
        get_config("ethos-u85-64")


# ------------------------------------------------------------------------------ reset values
@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_register_reset_value_over_apb(name):
    d = settled(name, pins=PINS)
    cfg = get_config(name)
    for r in R.REGISTERS:
        data, err = d.apb_read(r.offset)
        assert err == 0, r.ident
        if r.ident == "STATUS":
            assert data == 0                        # reset sequence over: reset_status back to 0
        elif r.ident == "CONFIG":
            assert data == cfg.config_word
        elif r.reset_source == "pins":
            assert data == R.reset_word(r, name, PINS), r.ident
        else:
            assert data == dict((i, v) for i, _, _, v in TRM_MAP)[r.ident], r.ident
    # pin mirrors: [5:0] of the hash registers read 0; HASH1 only mirrors on 1024/2048 (TRM 3.3.1.23)
    lo, _ = d.apb_read(OFF["CFG_SRAM_HASH0_LO"])
    assert lo == 0xCDEF1240
    assert d.apb_read(OFF["CFG_SRAM_HASH0_HI"])[0] == 0xAB
    assert d.apb_read(OFF["CFG_EXT_HASH0_LO"])[0] == 0x34567880
    assert d.apb_read(OFF["CFG_SRAM_HASH1_LO"])[0] == (0x100 if cfg.macs >= 1024 else 0)
    assert d.apb_read(OFF["CFG_SRAM_CAP"])[0] == 0x0001_0A05


def test_status_reset_value_during_reset_sequence():
    d = Device()                                      # not settled: nRESET just released
    assert d.apb_read(OFF["STATUS"]) == (0x00000008, 0)
    assert d.apb_read(OFF["ID"]) == (0, 0)           # TRM 3.1.1: other reads return 0
    d.wait_reset()
    assert d.apb_read(OFF["STATUS"]) == (0, 0) and d.apb_read(OFF["ID"]) == (0x20007001, 0)


@pytest.mark.parametrize("porpl,porsl", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_prot_reflects_por_pins(porpl, porsl):
    d = settled(pins=dict(PORPL=porpl, PORSL=porsl))
    pp = pprot_of(1, porsl)                           # a requester that is always permitted
    assert d.apb_read(OFF["PROT"], pp) == ((porsl << 1) | porpl, 0)


# ------------------------------------------------------------------------------ access classes
def _expected_after_ones(r):
    """Read-back value after a permitted write of 0xFFFFFFFF to a register in STOPPED state."""
    if r.access == "ro":
        return None                                       # unchanged
    if r.behaviour == "set":
        return 0x800000FF
    if r.behaviour == "clr":
        return 0                                          # clears its (empty) shared state
    if r.ident == "PMCR":
        return 0x4009
    if r.ident == "CMD":
        return 0xFFFF001F
    return r.write_mask & r.read_mask


@pytest.mark.parametrize("reg", [r for r in R.REGISTERS if r.ident != "RESET"], ids=lambda r: r.ident)
def test_access_class_write_ones_then_zero(reg):
    d = settled(pins=PINS)
    before = d.apb_read(reg.offset)[0]
    assert d.apb_write(reg.offset, 0xFFFFFFFF) == 0            # ro writes are ignored without error
    got = d.apb_read(reg.offset)[0]
    want = _expected_after_ones(reg)
    if reg.ident == "STATUS":
        # writing CMD is the only way to touch STATUS; an ro write leaves it alone
        assert got == before
    elif want is None:
        assert got == before, reg.ident
    else:
        assert got == want, (reg.ident, hex(got))
    d.apb_write(reg.offset, 0)
    after0 = d.apb_read(reg.offset)[0]
    if reg.access == "ro":
        assert after0 == before
    elif reg.ident == "PMCR":
        assert after0 == 0x4000                                  # num_event_cnt is ro
    elif reg.behaviour == "set":
        assert after0 == 0x800000FF                              # writing 0 has no effect
    else:
        assert after0 == 0, reg.ident


def test_set_clear_pairs_share_state():
    d = settled()
    for s, c in (("PMCNTENSET", "PMCNTENCLR"), ("PMOVSSET", "PMOVSCLR"), ("PMINTSET", "PMINTCLR")):
        d.apb_write(OFF[s], 0x8000_0005)
        assert d.apb_read(OFF[s])[0] == 0x8000_0005 and d.apb_read(OFF[c])[0] == 0x8000_0005
        d.apb_write(OFF[s], 0x0000_0002)
        assert d.apb_read(OFF[c])[0] == 0x8000_0007
        d.apb_write(OFF[c], 0x8000_0001)
        assert d.apb_read(OFF[s])[0] == 0x0000_0006
    d.apb_write(OFF["PMINTCLR"], 0xFFFFFFFF)
    d.apb_write(OFF["PMOVSCLR"], 0xFFFFFFFF)
    assert d.apb_read(OFF["PMOVSSET"])[0] == 0 and d.apb_read(OFF["PMINTSET"])[0] == 0


def test_wo_fields_read_zero_and_act():
    d = settled()
    d.apb_write(OFF["PMEVCNTR3"], 1234)
    d.apb_write(OFF["PMCCNTR_LO"], 99)
    d.apb_write(OFF["PMCR"], 0b0010)                          # event_cnt_rst
    assert d.apb_read(OFF["PMEVCNTR3"])[0] == 0 and d.apb_read(OFF["PMCCNTR_LO"])[0] == 99
    assert d.apb_read(OFF["PMCR"])[0] == 0x4000
    d.apb_write(OFF["PMCR"], 0b0100)                          # cycle_cnt_rst
    assert d.apb_read(OFF["PMCCNTR_LO"])[0] == 0


def test_cmd_reads_back_last_written_word():
    d = settled()
    d.apb_write(OFF["CMD"], 0x0005_0004)                      # clear history bits + clock_q_enable
    assert d.apb_read(OFF["CMD"])[0] == 0x0005_0004
    d.apb_write(OFF["CMD"], 0x0000_7FE8)                      # reserved [15:5] not stored (policy mask)
    assert d.apb_read(OFF["CMD"])[0] == 0x08
    d2 = settled(policy=Policy(cmd_readback_mask=0xFFFFFFFF))
    d2.apb_write(OFF["CMD"], 0x0000_7FE8)
    assert d2.apb_read(OFF["CMD"])[0] == 0x7FE8


# ------------------------------------------------------------------------------ PROT matrix
STATES = [(cpl, csl) for cpl in (0, 1) for csl in (0, 1)]
REQUESTERS = [pprot_of(p, ns) | (i << 2) for p in (0, 1) for ns in (0, 1) for i in (0, 1)]


def _permitted(cpl, csl, pprot):
    return (pprot & 1) >= cpl and ((pprot >> 1) & 1) <= csl


def test_permission_rule_table_4_2():
    # the four rows of TRM 3.1.1 / 2.3.5, written out
    table = {(1, 0): {0b01}, (0, 0): {0b01, 0b00}, (1, 1): {0b01, 0b11}, (0, 1): {0b00, 0b01, 0b10, 0b11}}
    for (cpl, csl), ok in table.items():
        for pp in range(4):
            assert _permitted(cpl, csl, pp) == (pp in ok)


@pytest.mark.parametrize("cpl,csl", STATES)
def test_prot_matrix_reads_every_register(cpl, csl):
    d = settled(pins=dict(PINS, PORPL=cpl, PORSL=csl))
    for pprot in REQUESTERS:
        for r in R.REGISTERS:
            data, err = d.apb_read(r.offset, pprot)
            if _permitted(cpl, csl, pprot):
                assert err == 0 and data == d.read_register(r.offset), (r.ident, pprot)
            else:
                assert (data, err) == (0, 1), (r.ident, pprot)
        for off in RESERVED[:4]:
            assert d.apb_read(off, pprot) == (0, 0 if _permitted(cpl, csl, pprot) else 1)


@pytest.mark.parametrize("cpl,csl", STATES)
def test_prot_matrix_denied_writes_have_no_effect(cpl, csl):
    d = settled(pins=dict(PINS, PORPL=cpl, PORSL=csl))
    snapshot = {r.offset: d.read_register(r.offset) for r in R.REGISTERS}
    for pprot in REQUESTERS:
        if _permitted(cpl, csl, pprot):
            continue
        for r in R.REGISTERS:
            for value in (0xFFFFFFFF, 0x00000001, 0x00000000):
                assert d.apb_write(r.offset, value, pprot) == 1, (r.ident, pprot)
        assert not d.in_reset and not d.running
        assert {r.offset: d.read_register(r.offset) for r in R.REGISTERS if r.ident != "PMCCNTR_LO"} == \
            {o: v for o, v in snapshot.items() if o != OFF["PMCCNTR_LO"]}
        assert d.prot_word == (csl << 1) | cpl


@pytest.mark.parametrize("cpl,csl", STATES)
def test_prot_matrix_permitted_writes_take_effect(cpl, csl):
    for pprot in REQUESTERS:
        if not _permitted(cpl, csl, pprot):
            continue
        d = settled(pins=dict(PINS, PORPL=cpl, PORSL=csl))
        for r in R.REGISTERS:
            if r.ident in ("RESET", "CMD") or r.access == "ro":
                continue
            assert d.apb_write(r.offset, 0x5A5A5A5A, pprot) == 0
            want = 0x5A5A5A5A & r.write_mask & r.read_mask
            if r.behaviour == "set":
                want = 0x5A5A5A5A & 0x800000FF
            if r.behaviour == "clr":
                want = d.read_register(r.offset)             # clears bits of its pair's state
            if r.ident == "PMCR":
                want = 0x4000 | (0x5A5A5A5A & 0x9)
            assert d.apb_read(r.offset, pprot) == (want, 0), (r.ident, pprot)
        assert d.apb_write(OFF["CMD"], 0x0000_0004, pprot) == 0
        assert d.apb_read(OFF["CMD"], pprot) == (4, 0)


# ------------------------------------------------------------------------------ shapes
@pytest.mark.parametrize("reg", [r for r in R.REGISTERS if r.access != "ro"], ids=lambda r: r.ident)
def test_subword_and_unaligned_writes_are_errors(reg):
    d = settled()
    before = d.read_register(reg.offset)
    for pstrb in (0x0, 0x1, 0x3, 0x7, 0xE, 0xC, 0x8):
        assert d.apb_write(reg.offset, 0xFFFFFFFF, pstrb=pstrb) == 1
    for delta in (1, 2, 3):
        assert d.apb_write(reg.offset + delta, 0xFFFFFFFF) == 1
        assert d.apb_read(reg.offset + delta) == (0, 1)
    assert d.read_register(reg.offset) == before and not d.in_reset and not d.running


def test_unaligned_reads_of_readonly_registers_error():
    d = settled()
    for r in R.REGISTERS:
        if r.access == "ro":
            assert d.apb_read(r.offset + 2) == (0, 1)
            assert d.apb_read(r.offset) [1] == 0


def test_reserved_offsets_raz_wi_and_policy():
    d = settled()
    for off in RESERVED:
        assert d.apb_write(off, 0xFFFFFFFF) == 0
        assert d.apb_read(off) == (0, 0)
    assert all(d.read_register(r.offset) == R.reset_word(r) for r in R.REGISTERS
               if r.reset_source == "const" and r.ident not in ("STATUS",))
    strict = settled(policy=Policy(reserved_offset_slverr=True))
    for off in RESERVED:
        assert strict.apb_read(off) == (0, 1) and strict.apb_write(off, 1) == 1


def test_paddr_is_13_bits():
    d = settled()
    assert d.apb_read(0x2000 + OFF["ID"]) == (0x20007001, 0)
    d.apb_write(0x4000 + OFF["BASEP1_LO"], 0x1234)
    assert d.apb_read(OFF["BASEP1_LO"])[0] == 0x1234


def test_reset_word_helper_matches_device_for_all_pins():
    for porpl, porsl in itertools.product((0, 1), repeat=2):
        pins = Pins.make(dict(PINS, PORPL=porpl, PORSL=porsl))
        d = settled("ethos-u85-2048", pins=pins)
        for r in R.REGISTERS:
            if r.ident != "STATUS":
                assert d.read_register(r.offset) == R.reset_word(r, "ethos-u85-2048", pins), r.ident
    assert R.reset_word(R.get("STATUS")) == 8
