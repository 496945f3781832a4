"""One AXI burst as the agents record it, and the beat arithmetic of AXI A3.4 (device-neutral)."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Iterable

from tlm.core.memory import Resp

BURST_FIXED, BURST_INCR, BURST_WRAP = 0, 1, 2


@dataclass
class AxiBurst:
    """One burst as seen on a manager port."""
    port: str
    write: bool
    id: int
    addr: int
    len: int                 # AxLEN (beats - 1)
    size: int                # AxSIZE
    burst: int               # AxBURST
    prot: int
    cache: int
    domain: int
    resp: Resp = Resp.OKAY   # worst response (BRESP, or the first non-OKAY RRESP)
    # (address, bytes) runs actually moved: strobed bytes of a write, addressed bytes of a read
    runs: list = field(default_factory=list)
    start_ns: float = 0.0     # AW/AR accepted
    end_ns: float = 0.0       # last R beat / B response handed to the channel

    @property
    def beats(self) -> int:
        return self.len + 1

    @property
    def nbytes(self) -> int:
        return sum(len(d) for _, d in self.runs)

    def __str__(self) -> str:
        kind = "W" if self.write else "R"
        return (f"{self.port} {kind} id={self.id} addr=0x{self.addr:010x} len={self.len} "
                f"size={self.size} burst={self.burst} prot={self.prot:03b} cache={self.cache:04b} "
                f"domain={self.domain} resp={self.resp.name}")


def random_pause(seed: int = 0, p: float = 0.3) -> Iterable[int]:
    """Endless pause pattern: each cycle paused with probability *p*."""
    rng = random.Random(seed)
    while True:
        yield int(rng.random() < p)


def bus_bytes(value, lanes: int) -> "tuple[bytes, int]":
    """Bytes of a data bus value and a mask of the byte lanes holding X/Z (read as 0)."""
    try:
        return int(value).to_bytes(lanes, "little"), 0
    except ValueError:
        bits = str(value).lower()[-8 * lanes:].rjust(8 * lanes, "0")
        out, xmask = bytearray(lanes), 0
        for i in range(lanes):
            chunk = bits[len(bits) - 8 * (i + 1):len(bits) - 8 * i]
            if any(c not in "01" for c in chunk):
                xmask |= 1 << i
                chunk = "".join(c if c in "01" else "0" for c in chunk)
            out[i] = int(chunk, 2)
        return bytes(out), xmask


def to_int(v, default=0) -> int:
    """int(v), or *default* for X/Z or None."""
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def beat_addr(addr: int, aligned: int, n: int, nbytes: int, beats: int, burst: int) -> int:
    """Address of beat *n* of a burst (AXI A3.4.1): FIXED, WRAP or INCR."""
    if burst == BURST_FIXED:
        return addr
    if burst == BURST_WRAP:
        total = nbytes * beats
        lo = addr - addr % total
        return lo + (addr - lo + n * nbytes) % total if n else addr
    return addr if n == 0 else aligned + n * nbytes


def beat_span(addr: int, n: int, size: int, beats: int, burst: int, lanes: int,
              addr_mask: int = -1):
    """Beat *n* of a burst on a *lanes*-byte bus: (first addressed byte, end of the
    transfer's container, address of the bus word). Addresses wrap at *addr_mask*."""
    nbytes = min(1 << size, lanes)
    baddr = beat_addr(addr, addr - addr % nbytes, n, nbytes, beats, burst) & addr_mask
    return baddr, baddr - baddr % nbytes + nbytes, baddr - baddr % lanes


def lane_mask(lo: int, hi: int, word: int) -> int:
    """WSTRB bits of the bytes [lo, hi) in the bus word at *word*."""
    return ((1 << (hi - word)) - 1) & ~((1 << (lo - word)) - 1)


def strobe_runs(word: int, data: bytes, strb: int) -> list:
    """(address, bytes) runs of the strobed bytes of one W beat."""
    runs, i, lanes = [], 0, len(data)
    while i < lanes:
        if strb >> i & 1:
            j = i
            while j < lanes and strb >> j & 1:
                j += 1
            runs.append((word + i, data[i:j]))
            i = j
        else:
            i += 1
    return runs
