"""The top-level ports of the NE16, as data: `ne16_top_wrap` of pulp-platform/ne16
(rtl/ne16_top_wrap.sv) with its default parameters. One table serves the DUT=tlm shell
(tools/gen_ne16.py writes rtl_stub/ne16/ne16_shell.v from it) and the bench's binding.

EXT facts (ne16_package.sv, hwpe-ctrl 1.6 hwpe_ctrl_package.sv): MP = 288/32 = 9 TCDM ports,
ID_WIDTH = 16, N_CORES = NR_CORES = 9, REGFILE_N_EVT = 2. The SystemVerilog top packs
`[MP-1:0][31:0]` arrays; the shell flattens them to one vector per port name (port i is bits
[32*i+31:32*i]), which is what a Verilog-2005 wrapper of the packed array sees as well.
"""
from __future__ import annotations

from typing import NamedTuple

MP = 9                    # TCDM ports of 32 bits (NE16_MEM_BANDWIDTH_EXT = 288)
ID_WIDTH = 16
N_CORES = 9
N_EVT = 2                 # per core: [0] end of job, [1] the engine's extra event (unused)
TOPLEVEL = "ne16_top_wrap"


class Port(NamedTuple):
    name: str
    direction: str        # "input" | "output" (of the NE16)
    width: int = 1
    group: str = ""


PORTS: tuple = (
    Port("clk_i", "input", 1, "global"),
    Port("rst_ni", "input", 1, "global"),
    Port("test_mode_i", "input", 1, "global"),
    Port("evt_o", "output", N_CORES * N_EVT, "events"),
    Port("busy_o", "output", 1, "events"),
    Port("tcdm_req", "output", MP, "tcdm"),
    Port("tcdm_gnt", "input", MP, "tcdm"),
    Port("tcdm_add", "output", MP * 32, "tcdm"),
    Port("tcdm_wen", "output", MP, "tcdm"),
    Port("tcdm_be", "output", MP * 4, "tcdm"),
    Port("tcdm_data", "output", MP * 32, "tcdm"),
    Port("tcdm_r_data", "input", MP * 32, "tcdm"),
    Port("tcdm_r_valid", "input", MP, "tcdm"),
    Port("periph_req", "input", 1, "periph"),
    Port("periph_gnt", "output", 1, "periph"),
    Port("periph_add", "input", 32, "periph"),
    Port("periph_wen", "input", 1, "periph"),
    Port("periph_be", "input", 4, "periph"),
    Port("periph_data", "input", 32, "periph"),
    Port("periph_id", "input", ID_WIDTH, "periph"),
    Port("periph_r_data", "output", 32, "periph"),
    Port("periph_r_valid", "output", 1, "periph"),
    Port("periph_r_id", "output", ID_WIDTH, "periph"),
)


def group(name: str) -> tuple:
    return tuple(p for p in PORTS if p.group == name)


def signals(name: str) -> list:
    """Signal names of a bus without its prefix ("tcdm" -> ["req", "gnt", ...])."""
    return [p.name[len(name) + 1:] for p in group(name)]
