"""The APB register map of the Ethos-U85 as data (TRM 3.2, 3.3, 3.4).

This table is the single source of truth for the TLM, the cocotb bench and the Verilog
stand-in (which generates an include file from it). It is plain data: frozen dataclasses
holding ints and strings, plus a few helpers to iterate and to pack/unpack field values.

Conventions
-----------
* Every entry of `REGISTERS` is one 32-bit APB word. A 64-bit TRM register (QBASE,
  CFG_SRAM_HASH0/1, CFG_EXT_HASH0, BASEPn, PMCCNTR) is two entries with the same `name`
  and `word` 0 (bits [31:0], lower address) / 1 (bits [63:32]). `ident` is unique:
  the name for 32-bit registers, NAME_LO / NAME_HI for the words of a 64-bit one.
* `Field.lsb`/`width` are positions inside the 32-bit word. `part_lsb` is the bit of the
  logical (TRM) field that sits at `lsb` (e.g. QBASE high word: field `offset`, lsb 0,
  width 8, part_lsb 32 = offset[39:32]).
* `access` is the TRM access class (ro, rw, wo; TRM 3.4). A field can override it (PMCR).
* `reset` is the reset word; `reset_source` tells where a word that is not a constant
  comes from: 'config' (CONFIG), 'pins' (CFG_* mirrors, PROT), 'const' otherwise.
  Field resets of None mean the TRM gives '-' (undefined / pin value).
* `behaviour` is a hint for generators: 'store' (plain storage), 'status' (hardware
  driven, read-only), 'cmd' (stores the written word, actions on write), 'reset'
  (soft reset on write), 'set'/'clr' (write-1-to-set / write-1-to-clear views of one
  state, `shared` names it), 'counter' (hardware-incremented, software writable),
  'mirror' (read-only copy of input pins or configuration), 'const'.
* Reserved offsets are absent from the table.

Facts not in the TRM text: the bit tables of RESET (Table 3-7) and PROT (Table 3-12) are
missing from the TRM copy; their field positions ([0] pending_CPL/active_CPL,
[1] pending_CSL/active_CSL) follow the TRM prose of 3.1.1/2.3.5 and Arm's published
register description. PMCR.mask_en has no access class in the TRM; it is taken as rw.
"""
from __future__ import annotations

from typing import Iterator, Mapping

from ..core.regtable import RO, RW, WO, Field, Page, Register, RegisterMap  # noqa: F401 - the table's types

# ----------------------------------------------------------------------------------------
# Enumerations (TRM names)
# ----------------------------------------------------------------------------------------
STATE_T = ((0, "stopped"), (1, "running"))
DMA_FAULT_SRC_T = ((0, "sram"), (1, "ext"))
PMU_AXI_CHANNEL_T = ((0x0, "rd_cmd"), (0x1, "rd_ifm"), (0x2, "rd_weights"), (0x3, "rd_scale_bias"),
                     (0x4, "rd_mem2mem"), (0x5, "rd_ifm_stream"), (0x6, "rd_mem2mem_idx"),
                     (0x8, "wr_ofm"), (0x9, "wr_mem2mem"))
AXI_MEM_DOMAIN_T = ((0, "non_sharable"), (1, "inner_sharable"), (2, "outer_sharable"), (3, "system"))
AXI_PORT_T = ((0, "sram"), (1, "ext"))
AXI_MEM_ENCODING_T = ((0x0, "device_non_bufferable"), (0x1, "device_bufferable"),
                      (0x2, "normal_non_cacheable_non_bufferable"),
                      (0x3, "normal_non_cacheable_bufferable"),
                      (0x4, "write_through_no_allocate"), (0x5, "write_through_read_allocate"),
                      (0x6, "write_through_write_allocate"),
                      (0x7, "write_through_read_and_write_allocate"),
                      (0x8, "write_back_no_allocate"), (0x9, "write_back_read_allocate"),
                      (0xA, "write_back_write_allocate"), (0xB, "write_back_read_and_write_allocate"))
MAX_BEATS_T = ((0, "B64"), (1, "B128"), (2, "B256"))
CUSTOM_DMA_T = ((0, "not_implemented"), (1, "implemented"))
PMU_PORT_DISABLE_T = ((0, "enable"), (1, "disable"))
PRIVILEGE_T = ((0, "user"), (1, "privileged"))
SECURITY_T = ((0, "secure"), (1, "non_secure"))


def _pmu_events() -> dict[int, tuple[str, str]]:
    """pmu_event_t (TRM Table 3-55/3-56/3-69..3-83). Values not listed are Reserved."""
    ev: dict[int, tuple[str, str]] = {
        0: ("no_event", "No event. Event never occurs"),
        17: ("cycle", "Elapsed cycle. Event occurs every cycle"),
        32: ("npu_idle", "NPU in stopped state"),
        35: ("npu_active", "NPU in running state"),
        48: ("mac_active", "MAC is doing block traversal. Valid blk_cmd and not stalled"),
        51: ("mac_dpu_active", "At least one dot product unit is active"),
        64: ("ao_active", "AO is doing block traversal of accumulation or chaining buffer"),
        80: ("wd_active", "WD is decoding weight stream. Valid blk_cmd and not stalled"),
        81: ("wd_stalled", "WD stalled on lack of weight stream data or free WD buffer space"),
        160: ("axi_latency_any", "Total number of transactions for the PMCAXI_CHAN channel"),
        161: ("axi_latency_32", "Latency was >= 32 cycles"),
        162: ("axi_latency_64", "Latency was >= 64 cycles"),
        163: ("axi_latency_128", "Latency was >= 128 cycles"),
        164: ("axi_latency_256", "Latency was >= 256 cycles"),
        165: ("axi_latency_512", "Latency was >= 512 cycles"),
        166: ("axi_latency_1024", "Latency was >= 1024 cycles"),
        176: ("ecc_dma", "ECC event in DMA controller RAM"),
        177: ("ecc_mac_ib", "ECC event in MAC input buffer RAM"),
        178: ("ecc_mac_ab", "ECC event in MAC AB RAM"),
        179: ("ecc_ao_cb", "ECC event in AO CB RAM"),
        180: ("ecc_ao_ob", "ECC event in AO output buffer RAM"),
        181: ("ecc_ao_lut", "ECC event in AO lookup table RAM"),
    }
    family = {0: ("rd_trans_accepted", "Read transfer (arready & arvalid)"),
              1: ("rd_trans_completed", "Read complete (rready & rvalid & rlast)"),
              2: ("rd_data_beat_received", "Read bandwidth (rready & rvalid)"),
              3: ("rd_tran_req_stalled", "Read stalls (arvalid & ~arready)"),
              4: ("wr_trans_accepted", "Write transfers (awready & awvalid)"),
              7: ("wr_data_beat_written", "Write bandwidth (wvalid & wready)"),
              8: ("wr_tran_req_stalled", "Write transfer stalled by memory (awvalid & ~awready)"),
              9: ("wr_data_beat_stalled", "Write beat stalled by memory (wvalid & ~wready)"),
              12: ("enabled_cycles", "Memory clock cycle (aclken_input)"),
              14: ("rd_stall_limit", "Read stalls due to max outstanding transactions limit"),
              15: ("wr_stall_limit", "Write stalls due to max outstanding transactions limit")}
    for base, prefix, where in ((128, "sram", "sum over SRAM AXI ports"),
                                (384, "ext", "sum over EXT AXI ports")):
        for off, (n, d) in family.items():
            ev[base + off] = (f"{prefix}_{n}", f"{d} {where}")
    for grp, base, nports in (("sram", 512, 4), ("ext", 640, 2)):
        for p in range(nports):
            for off, (n, d) in family.items():
                ev[base + 16 * p + off] = (f"{grp}{p}_{n}", f"{d} for {grp.upper()} AXI port {p}")
    return dict(sorted(ev.items()))


PMU_EVENTS: Mapping[int, tuple[str, str]] = _pmu_events()
PMU_EVENT_T = tuple((v, n) for v, (n, _) in PMU_EVENTS.items())
PMU_EVENT_BY_NAME: Mapping[str, int] = {n: v for v, (n, _) in PMU_EVENTS.items()}

ENUMS: Mapping[str, tuple] = {
    "state_t": STATE_T, "dma_fault_src_t": DMA_FAULT_SRC_T, "pmu_axi_channel_t": PMU_AXI_CHANNEL_T,
    "axi_mem_domain_t": AXI_MEM_DOMAIN_T, "axi_port_t": AXI_PORT_T,
    "axi_mem_encoding_t": AXI_MEM_ENCODING_T, "max_beats_t": MAX_BEATS_T,
    "custom_dma_t": CUSTOM_DMA_T, "pmu_port_disable_t": PMU_PORT_DISABLE_T,
    "pmu_event_t": PMU_EVENT_T, "privilege_t": PRIVILEGE_T, "security_t": SECURITY_T,
}


# ----------------------------------------------------------------------------------------
# Data classes: tlm/core/regtable.py (device-neutral)
# ----------------------------------------------------------------------------------------
# ----------------------------------------------------------------------------------------
# Pages (TRM Table 3-1, 3-2)
# ----------------------------------------------------------------------------------------
PAGES = (
    Page("BASE", 0x0000, 0x80, "NPU base registers"),
    Page("BASE_POINTERS", 0x0080, 0x80, "NPU base pointers"),
    Page("ID", 0x0F00, 0x100, "NPU ID registers"),
    Page("PMU", 0x1180, 0x80, "NPU PMU registers"),
    Page("PMU_COUNTERS", 0x1300, 0x100, "NPU PMU counters"),
)
APB_WINDOW = 0x2000          # PADDR[12:0]

F = Field


def _r(name, offset, page, access, reset, fields, desc="", **kw) -> Register:
    return Register(name, offset, page, access, reset, tuple(fields), desc, **kw)


def _ptr40(name, offset, page, access, desc, behaviour="store", reset_source="const", lo_fields=None,
           hi_fields=None, stopped_only=""):
    """A 64-bit register holding a 40-bit pointer: two words."""
    lo = lo_fields or [F("offset", 0, 32, access, 0)]
    hi = hi_fields or [F("offset", 0, 8, access, 0, part_lsb=32)]
    return [
        _r(name, offset, page, access, 0, lo, desc, word=0, behaviour=behaviour,
           reset_source=reset_source, stopped_only=stopped_only),
        _r(name, offset + 4, page, access, 0, hi, desc, word=1, behaviour=behaviour,
           reset_source=reset_source, stopped_only=stopped_only),
    ]


def _hash(name, offset, desc):
    return _ptr40(name, offset, "BASE", RO, desc, behaviour="mirror", reset_source="pins",
                  lo_fields=[F("zero", 0, 6, RO, 0), F("hash", 6, 26, RO, None)],
                  hi_fields=[F("hash", 0, 8, RO, None, part_lsb=26)])


def _axi_fields(access, reset):
    return [F("max_outstanding_read_m1", 0, 6, access, reset, abbr="max_read"),
            F("max_outstanding_write_m1", 8, 5, access, reset, abbr="max_write"),
            F("max_beats", 16, 2, access, reset, "max_beats_t", abbr="MB")]


def _mem_attr(n):
    return _r(f"MEM_ATTR{n}", 0x40 + 4 * n, "BASE", RW, 0, [
        F("mem_domain", 0, 2, RW, 0, "axi_mem_domain_t", "MEMD"),
        F("axi_port", 2, 1, RW, 0, "axi_port_t", "AP"),
        F("memtype", 4, 4, RW, 0, "axi_mem_encoding_t")], f"Memory attributes {n}")


def _cnt_bits(prefix, suffix=""):
    return ([F(f"EVENT_CNT_{i}{suffix}", i, 1, RW, 0, abbr=f"E{i}") for i in range(8)]
            + [F(f"CYCLE_CNT{suffix}", 31, 1, RW, 0, abbr="CC")])


def _build() -> tuple:
    regs: list[Register] = []
    add = regs.append
    # ---------------- BASE (TRM 3.3.1) ----------------
    add(_r("ID", 0x0000, "BASE", RO, 0x20007001, [
        F("version_status", 0, 4, RO, 1, abbr="VST"), F("version_minor", 4, 4, RO, 0, abbr="VMI"),
        F("version_major", 8, 4, RO, 0, abbr="VMA"), F("product_major", 12, 4, RO, 7, abbr="PMA"),
        F("arch_patch_rev", 16, 4, RO, 0, abbr="APR"), F("arch_minor_rev", 20, 8, RO, 0, abbr="AMIR"),
        F("arch_major_rev", 28, 4, RO, 2, abbr="AMAR")], "ID register", behaviour="const"))
    add(_r("STATUS", 0x0004, "BASE", RO, 0x00000008, [
        F("state", 0, 1, RO, 0, "state_t", "ST"), F("irq_raised", 1, 1, RO, 0, abbr="IQ"),
        F("bus_status", 2, 1, RO, 0, abbr="BT"), F("reset_status", 3, 1, RO, 1, abbr="RT"),
        F("cmd_parse_error", 4, 1, RO, 0, abbr="PE"), F("cmd_end_reached", 5, 1, RO, 0, abbr="ER"),
        F("pmu_irq_raised", 6, 1, RO, 0, abbr="PQ"), F("ecc_fault", 8, 1, RO, 0, abbr="EF"),
        F("branch_fault", 9, 1, RO, 0, abbr="BF"),
        F("faulting_interface", 11, 1, RO, None, "dma_fault_src_t", "FI"),
        F("faulting_channel", 12, 4, RO, None, "pmu_axi_channel_t", "FC"),
        F("irq_history_mask", 16, 16, RO, 0, abbr="IRQ_MSK")],
        "Current operating status of the NPU", behaviour="status"))
    add(_r("CMD", 0x0008, "BASE", RW, 0x0000000C, [
        F("transition_to_running_state", 0, 1, RW, 0, abbr="RS"), F("clear_irq", 1, 1, RW, 0, abbr="CQ"),
        F("clock_q_enable", 2, 1, RW, 1, abbr="CE"), F("power_q_enable", 3, 1, RW, 1, abbr="PE"),
        F("stop_request", 4, 1, RW, 0, abbr="SQ"),
        F("clear_irq_history", 16, 16, RW, 0, abbr="CLR_IRQ_HIST")],
        "Command register; reads as last written command", behaviour="cmd"))
    add(_r("RESET", 0x000C, "BASE", RW, 0, [
        F("pending_CPL", 0, 1, RW, 0, "privilege_t"), F("pending_CSL", 1, 1, RW, 0, "security_t")],
        "Request reset and new security mode", behaviour="reset"))
    regs += _ptr40("QBASE", 0x0010, "BASE", RW, "Command stream base address (bytes)", stopped_only="rw")
    add(_r("QREAD", 0x0018, "BASE", RO, 0, [F("QREAD", 0, 32, RO, 0)],
           "Read offset in the command stream (bytes)", behaviour="status"))
    add(_r("QCONFIG", 0x001C, "BASE", RW, 0, [F("cmd_region0", 0, 2, RW, 0, abbr="CR")],
           "AXI configuration (MEM_ATTR index) for the command stream", stopped_only="rw"))
    add(_r("QSIZE", 0x0020, "BASE", RW, 0, [F("QSIZE", 0, 32, RW, 0)],
           "Command stream size (bytes)", stopped_only="rw"))
    add(_r("PROT", 0x0024, "BASE", RO, 0, [
        F("active_CPL", 0, 1, RO, 0, "privilege_t"), F("active_CSL", 1, 1, RO, 0, "security_t")],
        "Protection level of the NPU as an AXI requester", reset_source="pins", behaviour="status"))
    add(_r("CONFIG", 0x0028, "BASE", RO, None, [
        F("macs_per_cc", 0, 4, RO, None, abbr="MACS"), F("cmd_stream_version", 4, 4, RO, 1, abbr="CS_VER"),
        F("num_axi_sram", 8, 2, RO, None, abbr="AS"), F("num_axi_ext", 10, 1, RO, None, abbr="AE"),
        F("num_wd", 12, 2, RO, None, abbr="WD"), F("custom_dma", 27, 1, RO, 0, "custom_dma_t", "CD"),
        F("product", 28, 4, RO, 2)], "RTL configuration", reset_source="config", behaviour="mirror"))
    add(_r("COND_STATUS", 0x0030, "BASE", RO, 0, [F("result_flag", 0, 1, RO, 0, abbr="RF")],
           "Condition status", behaviour="status", stopped_only="rw"))
    add(_r("POWER_CTRL", 0x0038, "BASE", RW, 0, [F("mac_step_cycles", 0, 6, RW, 0)],
           "Power control", stopped_only="rw"))
    add(_r("REGIONCFG", 0x003C, "BASE", RW, 0,
           [F(f"region{i}", 2 * i, 2, RW, 0, abbr=f"R{i}") for i in range(8)],
           "MEM_ATTR index of each region", stopped_only="w"))
    for n in range(4):
        add(_mem_attr(n))
    add(_r("AXI_SRAM", 0x0050, "BASE", RW, 0, _axi_fields(RW, 0), "AXI configuration for SRAM ports"))
    add(_r("AXI_EXT", 0x0054, "BASE", RW, 0, _axi_fields(RW, 0), "AXI configuration for EXT ports"))
    add(_r("CFG_SRAM_CAP", 0x0060, "BASE", RO, None, _axi_fields(RO, None),
           "CFGSRAMCAP pins", reset_source="pins", behaviour="mirror"))
    add(_r("CFG_EXT_CAP", 0x0064, "BASE", RO, None, _axi_fields(RO, None),
           "CFGEXTCAP pins", reset_source="pins", behaviour="mirror"))
    regs += _hash("CFG_SRAM_HASH0", 0x0068, "CFGSRAMHASH0 pins (SRAM port select bit 0)")
    regs += _hash("CFG_SRAM_HASH1", 0x0070, "CFGSRAMHASH1 pins (SRAM port select bit 1)")
    regs += _hash("CFG_EXT_HASH0", 0x0078, "CFGEXTHASH0 pins (EXT port select bit 0)")
    # ---------------- BASE_POINTERS (TRM 3.3.2) ----------------
    for n in range(8):
        regs += _ptr40(f"BASEP{n}", 0x0080 + 8 * n, "BASE_POINTERS", RW,
                       f"AXI base address of region {n}")
    # ---------------- ID (TRM 3.3.3) ----------------
    for name, off, val in (("PID4", 0xFD0, 0x04), ("PID5", 0xFD4, 0x00), ("PID6", 0xFD8, 0x00),
                           ("PID7", 0xFDC, 0x00), ("PID0", 0xFE0, 0x82), ("PID1", 0xFE4, 0xB5),
                           ("PID2", 0xFE8, 0x0B), ("PID3", 0xFEC, 0x00), ("CID0", 0xFF0, 0x0D),
                           ("CID1", 0xFF4, 0xF0), ("CID2", 0xFF8, 0x05), ("CID3", 0xFFC, 0xB1)):
        add(_r(name, off, "ID", RO, val, [F(name, 0, 32, RO, val)],
               f"{'Peripheral' if name[0] == 'P' else 'Component'} ID byte {name[-1]}", behaviour="const"))
    # ---------------- PMU (TRM 3.3.4) ----------------
    add(_r("PMCR", 0x1180, "PMU", RW, 0x00004000, [
        F("cnt_en", 0, 1, RW, 0, abbr="CE"), F("event_cnt_rst", 1, 1, WO, None, abbr="ER"),
        F("cycle_cnt_rst", 2, 1, WO, None, abbr="CR"), F("mask_en", 3, 1, RW, 0, abbr="ME"),
        F("num_event_cnt", 11, 5, RO, 8, abbr="NC")], "PMU control"))
    add(_r("PMCNTENSET", 0x1184, "PMU", RW, 0, _cnt_bits("E"), "Count enable set",
           behaviour="set", shared="PMCNTEN"))
    add(_r("PMCNTENCLR", 0x1188, "PMU", RW, 0, _cnt_bits("E"), "Count enable clear",
           behaviour="clr", shared="PMCNTEN"))
    add(_r("PMOVSSET", 0x118C, "PMU", RW, 0, _cnt_bits("E", "_OVF"), "Overflow flag status set",
           behaviour="set", shared="PMOVS"))
    add(_r("PMOVSCLR", 0x1190, "PMU", RW, 0, _cnt_bits("E", "_OVF"), "Overflow flag status clear",
           behaviour="clr", shared="PMOVS"))
    add(_r("PMINTSET", 0x1194, "PMU", RW, 0, _cnt_bits("E", "_INT"), "Interrupt enable set",
           behaviour="set", shared="PMINT"))
    add(_r("PMINTCLR", 0x1198, "PMU", RW, 0, _cnt_bits("E", "_INT"), "Interrupt enable clear",
           behaviour="clr", shared="PMINT"))
    add(_r("PMCCNTR", 0x11A0, "PMU", RW, 0, [F("CYCLE_CNT", 0, 32, RW, 0)],
           "Cycle counter (48-bit)", word=0, behaviour="counter"))
    add(_r("PMCCNTR", 0x11A4, "PMU", RW, 0, [F("CYCLE_CNT", 0, 16, RW, 0, part_lsb=32)],
           "Cycle counter (48-bit)", word=1, behaviour="counter"))
    add(_r("PMCCNTR_CFG", 0x11A8, "PMU", RW, 0, [
        F("CYCLE_CNT_CFG_START", 0, 10, RW, 0, "pmu_event_t", "START"),
        F("S0", 12, 1, RW, 0, "pmu_port_disable_t"), F("S1", 13, 1, RW, 0, "pmu_port_disable_t"),
        F("S2", 14, 1, RW, 0, "pmu_port_disable_t"), F("S3", 15, 1, RW, 0, "pmu_port_disable_t"),
        F("CYCLE_CNT_CFG_STOP", 16, 10, RW, 0, "pmu_event_t", "STOP"),
        F("E0", 28, 1, RW, 0, "pmu_port_disable_t"), F("E1", 29, 1, RW, 0, "pmu_port_disable_t"),
        F("E2", 30, 1, RW, 0, "pmu_port_disable_t"), F("E3", 31, 1, RW, 0, "pmu_port_disable_t")],
        "Start/stop events of the cycle counter"))
    add(_r("PMCAXI_CHAN", 0x11AC, "PMU", RW, 0, [
        F("CH_SEL", 0, 4, RW, 0, "pmu_axi_channel_t", "CH"), F("AXI_SEL", 8, 1, RW, 0, "axi_port_t", "AS"),
        F("BW_CH_SEL_EN", 10, 1, RW, 0, abbr="BE")], "AXI channel for latency/bandwidth events"))
    add(_r("PMCLUT", 0x11B0, "PMU", RW, 0, [
        F("PCM_LUT_EN_0", 0, 1, RW, 0, abbr="LE"), F("PMC_LUT_0", 16, 16, RW, 0, abbr="L0")],
        "Lookup table (compound event) for event counter 0"))
    # ---------------- PMU_COUNTERS (TRM 3.3.5) ----------------
    for n in range(8):
        add(_r(f"PMEVCNTR{n}", 0x1300 + 4 * n, "PMU_COUNTERS", RW, 0, [F("count", 0, 32, RW, 0)],
               f"Event counter {n}", behaviour="counter"))
    for n in range(8):
        add(_r(f"PMEVTYPER{n}", 0x1380 + 4 * n, "PMU_COUNTERS", RW, 0, [
            F("EV_TYPE", 0, 10, RW, 0, "pmu_event_t"),
            F("D0", 12, 1, RW, 0, "pmu_port_disable_t"), F("D1", 13, 1, RW, 0, "pmu_port_disable_t"),
            F("D2", 14, 1, RW, 0, "pmu_port_disable_t"), F("D3", 15, 1, RW, 0, "pmu_port_disable_t")],
            f"Event type of counter {n}"))
    return tuple(sorted(regs, key=lambda r: r.offset))


REGISTERS: tuple = _build()
REGS = RegisterMap(REGISTERS, PAGES)          # accessors by TRM name: REGS.STATUS.bus_status.mask
BY_OFFSET: Mapping[int, Register] = REGS.by_offset
BY_IDENT: Mapping[str, Register] = REGS.by_ident
OFFSET: Mapping[str, int] = REGS.OFFSET      # ident -> offset


# ----------------------------------------------------------------------------------------
# Iteration / lookup API
# ----------------------------------------------------------------------------------------
def iter_registers(page: "str | None" = None) -> Iterator[Register]:
    """All 32-bit register words in offset order, optionally of one page."""
    for r in REGISTERS:
        if page is None or r.page == page:
            yield r


def by_offset(offset: int) -> "Register | None":
    """The register word at a byte offset, None for reserved offsets."""
    return BY_OFFSET.get(offset)


def get(name: str, word: "int | None" = None) -> Register:
    """Look up by ident ('QBASE_HI') or by TRM name plus word ('QBASE', 1)."""
    return REGS.get(name, word)


def offset_of(name: str, word: "int | None" = None) -> int:
    return REGS.offset(name, word)


def page_of(offset: int) -> "Page | None":
    return REGS.page_of(offset)


def enum_values(name: str) -> dict:
    """{value: name} of an enumeration."""
    return dict(ENUMS[name])


def reset_word(reg: Register, config=None, pins=None) -> int:
    """The value a register word holds after a (hard) reset, for a configuration and pins.

    STATUS is given with reset_status=1 (its TRM reset value); faulting_interface and
    faulting_channel ('-' in the TRM) are 0. CFG_SRAM_HASH1 follows the configuration's
    sram_hash1_mirrors_pins (TRM 3.3.1.23)."""
    from .config import Pins, get_config
    if reg.reset_source == "const":
        return reg.reset or 0
    cfg = get_config(config)
    p = Pins.make(pins)
    if reg.name == "CONFIG":
        return cfg.config_word
    if reg.name == "PROT":
        return (p.PORSL & 1) << 1 | (p.PORPL & 1)
    if reg.name == "CFG_SRAM_CAP":
        return p.CFGSRAMCAP & reg.defined_mask
    if reg.name == "CFG_EXT_CAP":
        return p.CFGEXTCAP & reg.defined_mask
    pin = {"CFG_SRAM_HASH0": p.CFGSRAMHASH0, "CFG_EXT_HASH0": p.CFGEXTHASH0,
           "CFG_SRAM_HASH1": p.CFGSRAMHASH1 if cfg.sram_hash1_mirrors_pins else 0}[reg.name]
    v = pin & 0xFF_FFFF_FFC0
    return (v & 0xFFFFFFFF) if reg.word == 0 else (v >> 32) & 0xFF


def summary_table() -> str:
    """A text table of the map (offset, ident, access, reset, fields)."""
    lines = []
    for r in REGISTERS:
        reset = f"0x{r.reset:08X}" if r.reset is not None else r.reset_source
        flds = ", ".join(f"{f.name}[{f.msb}:{f.lsb}]{'' if f.access == r.access else ':' + f.access}"
                         for f in r.fields)
        lines.append(f"0x{r.offset:04X} {r.ident:<16} {r.access:<2} {reset:<10} {flds}")
    return "\n".join(lines)
