"""The top-level port list of the Ethos-U85 (TRM chapter 5), as data.

One table serves the RTL (``tools/gen_rtl_regs.py`` writes ``rtl_stub/ethos_u85/gen/ethosu85_ports.vh``,
the port list of both the stand-in ``ethosu85.v`` and the DUT=tlm shell, and the shell's
``tlm_*`` drivers) and the bench (signal names to bind). The configuration is the one the
stand-in and the shell implement: one SRAM and one EXT AXI manager port (SRAM0, EXT0), 128-bit
data, 40-bit addresses, 6-bit IDs.
"""
from __future__ import annotations

from typing import NamedTuple

from tb.agents.axi.signals import AXI5_SIGNALS

AXI_DATA_BITS = 128
AXI_ADDR_BITS = 40
AXI_ID_BITS = 6
AXI_PORTS = ("SRAM0", "EXT0")          # the manager ports this top level has
# every AXI manager port an Ethos-U85 may have (TRM 5.8); the bench binds those present
AXI_PORT_NAMES = ("SRAM0", "SRAM1", "SRAM2", "SRAM3", "EXT0", "EXT1")


class Port(NamedTuple):
    name: str
    direction: str      # "input" | "output" (of the NPU)
    width: int = 1


def _group(*ports) -> tuple:
    return tuple(Port(*p) for p in ports)


def axi_manager_signals() -> tuple:
    """The signals of one AXI5 manager port (TRM 5.8), without the port suffix: the agents'
    AXI5 signal list with this top level's widths."""
    d, a, i = AXI_DATA_BITS, AXI_ADDR_BITS, AXI_ID_BITS
    width = {"ID": i, "ADDR": a, "LEN": 8, "SIZE": 3, "BURST": 2, "CACHE": 4, "DOMAIN": 2,
             "PROT": 3, "RESP": 2, "DATA": d, "STRB": d // 8}
    def field(name: str) -> str:           # the signal without its channel prefix
        return name[2:] if name[:2] in ("AW", "AR") else name[1:]
    return tuple(Port(name, "output" if direction == "out" else "input", width.get(field(name), 1))
                 for name, direction in AXI5_SIGNALS)


def port_groups(axi_ports: tuple = AXI_PORTS) -> list:
    """[(heading, (Port, ...)), ...] in TRM chapter 5 order, for a top level with the AXI
    manager ports *axi_ports* (CFGSRAMHASH1 with more than two SRAM ports, CFGEXTHASH0 with
    more than one EXT port: TRM 5.2, "not present in all configurations")."""
    hashes = (("CFGSRAMHASH1", "input", 40),) if sum(p.startswith("SRAM") for p in axi_ports) > 2 \
        else ()
    hashes += (("CFGEXTHASH0", "input", 40),) if sum(p.startswith("EXT") for p in axi_ports) > 1 \
        else ()
    groups = [
        ("Clock and reset (TRM 5.1)",
         _group(("CLK", "input"), ("nRESET", "input"), ("nMBISTRESET", "input"))),
        ("Configuration (TRM 5.2); sampled at hard reset, CFG* also at soft reset",
         _group(("PORPL", "input"), ("PORSL", "input"), ("DBGEN", "input"), ("SPIDEN", "input"),
                ("CFGSRAMCAP", "input", 32), ("CFGEXTCAP", "input", 32),
                ("CFGSRAMHASH0", "input", 40), *hashes)),
        ("Interrupt (TRM 5.3), level", _group(("IRQ", "output"))),
        ("Power Q-Channel (TRM 5.4)",
         _group(("PWRQACTIVE", "output"), ("PWRQREQn", "input"), ("PWRQACCEPTn", "output"),
                ("PWRQDENY", "output"))),
        ("Clock Q-Channel (TRM 5.5)",
         _group(("CLKQACTIVE", "output"), ("CLKQREQn", "input"), ("CLKQACCEPTn", "output"),
                ("CLKQDENY", "output"))),
        ("Warm-reset halt (TRM 5.6)", _group(("WRSTQREQ", "input"), ("WRSTQACK", "output"))),
        ("Debug cross-trigger (TRM 5.7)",
         _group(("DBGHALTREQ", "input"), ("DBGRESTARTREQ", "input"), ("DBGHALTACK", "output"))),
    ]
    for port in axi_ports:
        groups.append((f"AXI5 manager port {port} (TRM 5.8)",
                       tuple(Port(p.name + port, p.direction, p.width)
                             for p in axi_manager_signals())))
    groups += [
        ("APB5 completer (TRM 5.9), 8 KiB register window",
         _group(("PWAKEUP", "input"), ("PCLKEN", "input"), ("PSEL", "input"),
                ("PENABLE", "input"), ("PPROT", "input", 3), ("PWRITE", "input"),
                ("PADDR", "input", 13), ("PWDATA", "input", 32), ("PSTRB", "input", 4),
                ("PREADY", "output"), ("PSLVERR", "output"), ("PRDATA", "output", 32))),
        ("DFT and MBIST (TRM 5.10); tie inactive",
         _group(("DFTCGEN", "input"), ("DFTRSTDISABLE", "input", 2), ("DFTRAMHOLD", "input"),
                ("MBISTREQ", "input"))),
    ]
    return groups


def ports(axi_ports: tuple = AXI_PORTS) -> list:
    """Every top-level port, in declaration order."""
    return [p for _, group in port_groups(axi_ports) for p in group]
