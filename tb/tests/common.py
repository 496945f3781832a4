"""Shared pieces of the cocotb job tests: the memory map, region programming, DMA streams and
an independent Python model of the DMA copy (TRM 3.10.4 pseudocode, byte loops), and the
list of features the RTL stand-in does not implement.

Not a test module (tb.run collects ``test_*.py`` only).
"""
from __future__ import annotations

import os
import random

import cocotb

from tlm import isa
from tlm import registers as R

DUT = os.environ.get("TB_DUT", "rtl").lower()
TIMEOUT = dict(timeout_time=5, timeout_unit="ms")

OFF = {r.ident: r.offset for r in R.iter_registers()}
STATUS_F = R.get("STATUS")

# STATUS bits (TRM 3.3.1.2)
ST_RUN, ST_IRQ, ST_BUS, ST_PARSE, ST_END = 0x1, 0x2, 0x4, 0x10, 0x20
# pmu_axi_channel (TRM) and dma_fault_src (faulting_interface)
CH_RD_CMD, CH_RD_M2M, CH_RD_M2M_IDX, CH_WR_M2M = 0, 4, 6, 9
IF_SRAM, IF_EXT = 0, 1

# ---------------------------------------------------------------- RTL stand-in coverage
# What rtl_stub/ethosu85.v (phase 1: control plane + DMA, including indexed and LUT-RAM
# DMA) does not implement, from its header and npu_cmd_decode.v (rtl_stub/README.md when it
# exists). Tests of these
# features are expected to fail on DUT=rtl (cocotb xfail), so they report "failed as expected"
# until the stand-in grows the feature, and then fail loudly ("passed but we expected a
# failure") so that the marker is removed.
RTL_UNSUPPORTED = {
    "kernel_ops": "kernel operations (NPU_OP_CONV/DEPTHWISE/POOL/ELEMENTWISE/RESIZE stop with "
                  "cmd_parse_error in phase 1)",
}


def rtl_unsupported(feature: str, condition: bool = True):
    """cocotb.xfail for DUT=rtl when the stand-in lacks *feature* (RTL_UNSUPPORTED key)."""
    return cocotb.xfail(DUT == "rtl" and condition,
                        reason=f"RTL stand-in does not implement {RTL_UNSUPPORTED[feature]}")


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
    """MEM_ATTR0..3, REGIONCFG, BASEP0..7, QCONFIG and AXI_SRAM/AXI_EXT (max_beats for SRAM
    and EXT: 0 = 64 B, 1 = 128 B, 2 = 256 B bursts) over APB."""
    for n, v in enumerate(MEM_ATTRS):
        await env.write_ok(OFF[f"MEM_ATTR{n}"], v)
    await env.write_ok(OFF["REGIONCFG"], regioncfg())
    for r, base in REGION_BASE.items():
        await env.write_ok(OFF[f"BASEP{r}_LO"], base & 0xFFFFFFFF)
        await env.write_ok(OFF[f"BASEP{r}_HI"], base >> 32)
    await env.write_ok(OFF["QCONFIG"], qconfig)
    mb_s, mb_e = max_beats if max_beats is not None else (2, 2)
    axi = R.get("AXI_SRAM")
    await env.write_ok(OFF["AXI_SRAM"], axi.encode(max_outstanding_read_m1=7,
                                                   max_outstanding_write_m1=7, max_beats=mb_s))
    await env.write_ok(OFF["AXI_EXT"], axi.encode(max_outstanding_read_m1=15,
                                                  max_outstanding_write_m1=15, max_beats=mb_e))


def enc(*cmds) -> list:
    """Command words from ("NAME", {fields}) pairs or bare names (tlm.isa.encode)."""
    words = []
    for c in cmds:
        name, kw = (c, {}) if isinstance(c, str) else c
        words += isa.encode(name, **kw)
    return words


STRIDE_MODE = {"1d": 0, "2d": 1, "3d": 2}


def dma_cmds(src_region, src, dst_region, dst, length, mode="1d", size0=1, size1=1,
             src_stride0=0, src_stride1=0, dst_stride0=0, dst_stride1=0, wait=True) -> list:
    m40 = (1 << 40) - 1
    cmds = [("NPU_SET_DMA0_SRC_REGION", dict(region=src_region, stride_mode=STRIDE_MODE[mode])),
            ("NPU_SET_DMA0_DST_REGION", dict(region=dst_region)),
            ("NPU_SET_DMA0_SRC", dict(addr=src)), ("NPU_SET_DMA0_DST", dict(addr=dst)),
            ("NPU_SET_DMA0_LEN", dict(addr=length)),
            ("NPU_SET_DMA0_SIZE0", dict(size=size0)), ("NPU_SET_DMA0_SIZE1", dict(size=size1)),
            ("NPU_SET_DMA0_SRC_STRIDE0", dict(addr=src_stride0 & m40)),
            ("NPU_SET_DMA0_SRC_STRIDE1", dict(addr=src_stride1 & m40)),
            ("NPU_SET_DMA0_DST_STRIDE0", dict(addr=dst_stride0 & m40)),
            ("NPU_SET_DMA0_DST_STRIDE1", dict(addr=dst_stride1 & m40)),
            "NPU_OP_DMA_START"]
    if wait:
        cmds.append(("NPU_OP_DMA_WAIT", dict(k=0)))
    return enc(*cmds)


def dma_expect(mem: dict, src_region, src, dst_region, dst, length, mode="1d", size0=1,
               size1=1, src_stride0=0, src_stride1=0, dst_stride0=0, dst_stride1=0) -> dict:
    """The DMA copy as the TRM 3.10.4 pseudocode states it (STRIDE1 steps once per 2D
    slice), byte by byte on a dict address -> byte (*mem*, changed in place and returned).
    Written independently of tlm.ops.dma."""
    width = 1 if mode == "1d" else size0
    height = size1 if mode == "3d" else 1
    sb, db = REGION_BASE[src_region], REGION_BASE[dst_region]
    for _y in range(height):
        for x in range(width):
            s = sb + src + x * src_stride0
            d = db + dst + x * dst_stride0
            line = [mem.get(s + i, 0) for i in range(length)]
            for i, v in enumerate(line):
                mem[d + i] = v
        src += src_stride1
        dst += dst_stride1
    return mem


def fill_random(env, rng: random.Random, addr: int, n: int, shadow: dict) -> None:
    data = bytes(rng.getrandbits(8) for _ in range(n))
    env.memory.write(addr, data)
    for i, v in enumerate(data):
        shadow[addr + i] = v


def check_bytes(env, shadow: dict, lo: int, hi: int, what: str) -> None:
    got = env.memory.read(lo, hi - lo)
    for i, g in enumerate(got):
        w = shadow.get(lo + i, 0)
        assert g == w, (f"{what}: byte at 0x{lo + i:010x} is 0x{g:02x}, expected 0x{w:02x} "
                        "(hand model of the TRM DMA pseudocode)")


def status_fields(word: int) -> dict:
    return STATUS_F.decode(word)


def skip_now(reason: str) -> None:
    """Skip the running test. ``cocotb.test(skip=...)``/``cocotb.skipif`` are ignored for a
    test that a TESTS filter selects explicitly; this is not."""
    import pytest
    pytest.skip(reason)


def named(values, fmt=str) -> list:
    """cocotb.parametrize values named by *fmt* (cocotb numbers long strings instead)."""
    return [cocotb.Param(value=v, name=fmt(v)) for v in values]


def seeded_rng() -> random.Random:
    seed = random.getrandbits(32)
    cocotb.log.info("test seed %d", seed)
    return random.Random(seed)
