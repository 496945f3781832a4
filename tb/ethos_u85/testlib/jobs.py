"""A DMA job loaded through the host driver, and the key that compares two records of a burst."""
from __future__ import annotations

from tb.ethos_u85.testlib.marks import seeded_rng
from tb.ethos_u85.testlib.memmap import REGION_BASE, STREAM_ADDR
from tb.ethos_u85.testlib.streams import dma_cmds, enc

DMA = dict(src_region=2, src=0x10, dst_region=1, dst=0x30, length=200)   # SRAM -> EXT

async def dma_job(env, p: dict = DMA, stream: int = STREAM_ADDR, qconfig=None) -> list:
    """A DMA job (random source bytes) loaded through the driver; returns its words."""
    rng = seeded_rng()
    env.memory.write(REGION_BASE[p["src_region"]] + p["src"],
                     bytes(rng.getrandbits(8) for _ in range(p["length"])))
    words = dma_cmds(**p) + enc(("NPU_OP_STOP", dict(mask=1)))
    await env.driver.load_job(stream, words, qconfig)
    return words

def burst_key(b) -> tuple:
    return (b.port, b.write, b.id, b.addr, b.len, b.size, b.burst, b.prot, b.cache, b.domain,
            b.resp, tuple(b.runs))
