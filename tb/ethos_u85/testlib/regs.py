"""Register facts the tests use, derived from the tables (tlm/registers.py, the TRM channel and
port group enums of tlm/memory.py): offsets, STATUS field masks, channel numbers, the PROT rules
of TRM 3.1.1. Nothing here is typed twice: every number comes from a table."""
from __future__ import annotations

from tlm.ethos_u85 import registers as R
from tlm.ethos_u85.device import STICKY_FAULTS
from tlm.ethos_u85.memory import Channel, Interface

OFF = R.OFFSET                          # ident -> offset
STATUS_F = R.get("STATUS")
RESET_F, PROT_F = R.get("RESET"), R.get("PROT")

# STATUS bits (TRM 3.3.1.2) as masks
ST_RUN, ST_IRQ, ST_BUS, ST_RESET, ST_PARSE, ST_END = (
    STATUS_F.field(f).mask for f in ("state", "irq_raised", "bus_status", "reset_status",
                                     "cmd_parse_error", "cmd_end_reached"))
# pmu_axi_channel (TRM; STATUS.faulting_channel) and dma_fault_src (faulting_interface)
CH_RD_CMD, CH_RD_IFM, CH_RD_WEIGHTS, CH_RD_SCALE, CH_RD_M2M, CH_RD_IFM_STREAM, CH_RD_M2M_IDX, CH_WR_OFM, \
    CH_WR_M2M = (int(Channel[c]) for c in ("rd_cmd", "rd_ifm", "rd_weights", "rd_scale_bias", "rd_mem2mem",
                                           "rd_ifm_stream", "rd_mem2mem_idx", "wr_ofm", "wr_mem2mem"))
IF_SRAM, IF_EXT = int(Interface.sram), int(Interface.ext)
FAULT_FIELDS = STICKY_FAULTS           # the sticky STATUS fault fields (bus_status, ...)

PROT_SP = 0b001                         # APB PPROT secure privileged: permitted in every CPL/CSL state
REGS = tuple(R.iter_registers())
RW_REGS = tuple(r for r in REGS if r.access == R.RW)


def status_fields(word: int) -> dict:
    return STATUS_F.decode(word)


def permitted(pprot: int, cpl: int, csl: int) -> bool:
    """TRM 3.1.1: PPROT[0] >= CPL and PPROT[1] <= CSL (PPROT[2] is not used; PPROT bits are
    the APB protocol's)."""
    return (pprot & 1) >= cpl and ((pprot >> 1) & 1) <= csl


def prot_after_reset_write(pending: int, pprot: int) -> int:
    """PROT after a permitted RESET write of *pending* (TRM 3.3.1.4, 2.2): CPL =
    min(PPROT[0], pending_CPL); CSL = pending_CSL | PPROT[1] (a requester cannot raise the
    security level)."""
    cpl = min(pprot & 1, RESET_F.field("pending_CPL").get(pending))
    csl = RESET_F.field("pending_CSL").get(pending) | ((pprot >> 1) & 1)
    return PROT_F.encode(active_CPL=cpl, active_CSL=csl)
