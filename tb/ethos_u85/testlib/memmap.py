"""The bench's memory map (port-group windows, MEM_ATTR0..3, REGIONCFG, BASEP0..7), its
programming through the host driver, and TLM runs of a stream with the same map."""
from __future__ import annotations

import os

from tb.ethos_u85.testlib.regs import (
    OFF,
)
from tlm.ethos_u85 import registers as R

# ---------------------------------------------------------------- memory map
SRAM_BASE = 0x00_1000_0000            # SRAM port group window

EXT_BASE = 0x01_6000_0000             # EXT port group window (above 4 GB: 40-bit addresses)

STREAM_ADDR = EXT_BASE + 0x0F_0000    # command stream (QCONFIG -> MEM_ATTR2, EXT)

MEM_ATTR = R.get("MEM_ATTR0")

# MEM_ATTR0..3: two SRAM and two EXT entries with distinct memtype/domain, so AxCACHE and
# AxDOMAIN tell which entry an access used.
MEM_ATTRS = (MEM_ATTR.encode(axi_port=0, memtype=0x3, mem_domain=0),
             MEM_ATTR.encode(axi_port=0, memtype=0xB, mem_domain=1),
             MEM_ATTR.encode(axi_port=1, memtype=0x6, mem_domain=2),
             MEM_ATTR.encode(axi_port=1, memtype=0xF, mem_domain=0))

# region -> MEM_ATTR index; region n's BASEP
REGION_ATTR = {0: 3, 1: 2, 2: 1, 3: 0, 4: 2, 5: 0, 6: 3, 7: 1}

REGION_BASE = {0: EXT_BASE + 0x1_0000, 1: EXT_BASE + 0x4_0000, 2: SRAM_BASE,
               3: SRAM_BASE + 0x4_0000, 4: EXT_BASE + 0x8_0000, 5: SRAM_BASE + 0x8_0000,
               6: EXT_BASE + 0xC_0000, 7: SRAM_BASE + 0xC_0000}

SRAM_REGIONS = tuple(r for r, a in REGION_ATTR.items() if a < 2)

EXT_REGIONS = tuple(r for r, a in REGION_ATTR.items() if a >= 2)

def regioncfg() -> int:
    return R.get("REGIONCFG").encode(**{f"region{r}": a for r, a in REGION_ATTR.items()})

async def program_regions(env, max_beats: "tuple[int, int] | None" = None, qconfig: int = 2) -> None:
    """The bench's memory map through the host driver's AXI set-up: MEM_ATTR0..3, REGIONCFG,
    BASEP0..7, AXI_SRAM/AXI_EXT (max_beats for SRAM and EXT: 0 = 64 B, 1 = 128 B,
    2 = 256 B bursts), then QCONFIG."""
    mb_s, mb_e = max_beats if max_beats is not None else (2, 2)
    axi = R.get("AXI_SRAM")
    await env.driver.setup_axi(
        MEM_ATTRS, regioncfg(),
        axi_sram=axi.encode(max_outstanding_read_m1=7, max_outstanding_write_m1=7, max_beats=mb_s),
        axi_ext=axi.encode(max_outstanding_read_m1=15, max_outstanding_write_m1=15, max_beats=mb_e),
        basep=REGION_BASE)
    await env.write_ok(OFF["QCONFIG"], qconfig)

def region_interface(region: int) -> int:
    """Port group (STATUS.faulting_interface) of a region in the bench's map."""
    return MEM_ATTR.field("axi_port").get(MEM_ATTRS[REGION_ATTR[region]])

def qconfig_interface(qconfig: int) -> int:
    return MEM_ATTR.field("axi_port").get(MEM_ATTRS[R.get("QCONFIG").field("cmd_region0").get(qconfig)])

# ---------------------------------------------------------------- TLM runs of a stream
def tlm_run(words, image: dict, faults=(), qconfig: int = 2, stream_addr: int = STREAM_ADDR):
    """Run *words* on a plain tlm.ethos_u85.device.Device with the bench's memory map (MEM_ATTRS,
    REGIONCFG, BASEPs) over a fresh memory holding *image* ({addr: bytes}); *faults* are
    (lo, hi, resp, kind). Returns (device, StopReason); ``device.memory.log`` holds every
    transaction. For checking that a test's stream does what the test needs, before the run
    on the pins."""
    from tlm.ethos_u85.device import Device
    from tlm.ethos_u85.memory import Memory
    mem = Memory()
    for a, d in image.items():
        mem.write(a, d)
    for lo, hi, resp, kind in faults:
        mem.inject_fault(lo, hi, resp, kind)
    dev = Device(os.environ.get("NPU_CONFIG", "ethos-u85-256"), mem, pins=dict(PORPL=1), settle=True)
    for n, v in enumerate(MEM_ATTRS):
        dev.apb_write(OFF[f"MEM_ATTR{n}"], v)
    dev.apb_write(OFF["REGIONCFG"], regioncfg())
    for r, b in REGION_BASE.items():
        dev.apb_write(OFF[f"BASEP{r}_LO"], b & 0xFFFFFFFF)
        dev.apb_write(OFF[f"BASEP{r}_HI"], b >> 32)
    mem.log_enabled = True
    dev.load_stream(stream_addr, words, qconfig=qconfig)
    dev.start()
    return dev, dev.run()
