"""The Ethos-U85's AXI side: channels, port groups, region routing, the data port.

The memory itself, its transactions and injected faults are device-neutral
(tlm/core/memory.py: `Memory`, `Transaction`, `Resp`, `Fault`, `FaultList`, `BusFault`,
`TxnBatch`); this module adds what is the Ethos-U85's: the 40-bit address space (`Memory`
here is the core memory with that width), the DMA channels (`Channel`, STATUS.faulting_channel),
the port groups (`Interface`, STATUS.faulting_interface; `Transaction.interface`), and
`DataPort`, which turns the NPU's (region, offset) view into transactions: the device
supplies a `route(region)` callable that resolves BASEP[region], REGIONCFG -> MEM_ATTR -> AXI
port group, AxCACHE and AxDOMAIN (TRM 3.3.1.13-14, 3.6.3). Port selection inside a group uses
the CFG*HASH xor-reduce of addr[39:6] (TRM 2.3.3).

Batched accesses: `DataPort.read_runs` / `write_runs` perform a list of (offset, length)
runs - exactly the transactions, in exactly the order, that one `read`/`write` call per run
would make - with one route lookup, a vectorised fault check and one gather/scatter over the
memory pages (`Memory.access_batch`). The transactions travel as a `TxnBatch` (arrays);
the log still receives one `Transaction` per transaction, and a listener that defines
`on_batch(batch)` gets the whole batch in one call. `DataPort.read_span` / `write_span` do
the same for the bytes marked in a boolean mask over an address span (one run per maximal
stretch, ascending), moving the data as one span buffer. When the memory's front door is
overridden (a subclass `access`, e.g. the cocotb bench), a listener has no `on_batch`, or the
memory was made with `batching=False`, the batched calls fall back to the per-run path, so
every listener still sees every transaction in order, one call each. `DataPort(...,
reference=True)` marks the port as taking the reference paths (tlm/ethos_u85/fmap.py's
literal gather/scatter).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..core import memory as _core
from ..core.memory import (  # noqa: F401 - the names the Ethos-U85's modules use, in one place
    PAGE_BITS,
    PAGE_SIZE,
    BusFault,
    Fault,
    FaultList,
    Resp,
    SpanRuns,
    TxnBatch,
    mask_runs,
)

from .registers import REGS

ADDR_BITS = 40
ADDR_MASK = (1 << ADDR_BITS) - 1
_MEM_ATTR = REGS.MEM_ATTR0          # the fields of every MEM_ATTR<n> (TRM 3.3.1.14)


class Channel(enum.IntEnum):
    """TRM pmu_axi_channel: the DMA channel an access belongs to (STATUS.faulting_channel)."""
    rd_cmd = 0
    rd_ifm = 1
    rd_weights = 2
    rd_scale_bias = 3
    rd_mem2mem = 4
    rd_ifm_stream = 5
    rd_mem2mem_idx = 6
    wr_ofm = 8
    wr_mem2mem = 9

    @property
    def is_write(self) -> bool:
        return self >= Channel.wr_ofm


class Interface(enum.IntEnum):
    """TRM axi_port / STATUS.faulting_interface: the port group."""
    sram = 0
    ext = 1


# MEM_ATTR.memtype -> (ARCACHE, AWCACHE), TRM 3.3.1.14 (axi_mem_encoding).
MEMTYPE_AXCACHE = {
    0x0: (0b0000, 0b0000), 0x1: (0b0001, 0b0001), 0x2: (0b0010, 0b0010), 0x3: (0b0011, 0b0011),
    0x4: (0b1010, 0b0110), 0x5: (0b1110, 0b0110), 0x6: (0b1010, 0b1110), 0x7: (0b1110, 0b1110),
    0x8: (0b1011, 0b0111), 0x9: (0b1111, 0b0111), 0xA: (0b1011, 0b1111), 0xB: (0b1111, 0b1111),
}


# ------------------------------------------------------------- address runs of transactions
NO_PAIRS = (np.zeros(0, np.int64), np.zeros(0, np.int64))


def addr_pairs(pairs) -> tuple:
    """(starts, lengths) int64 arrays of (address, length) pairs given as such arrays, a
    list of tuples, or a list of such array pairs (concatenated)."""
    if isinstance(pairs, tuple) and len(pairs) == 2 and isinstance(pairs[0], np.ndarray):
        return pairs
    pairs = list(pairs)
    if not pairs:
        return NO_PAIRS
    if isinstance(pairs[0], tuple) and len(pairs[0]) == 2 and isinstance(pairs[0][0], np.ndarray):
        return (np.concatenate([a for a, _ in pairs]).astype(np.int64),
                np.concatenate([n for _, n in pairs]).astype(np.int64))
    a = np.array(pairs, np.int64).reshape(-1, 2)
    return a[:, 0].copy(), a[:, 1].copy()


def merged_intervals(pairs) -> tuple:
    """Merged sorted [lo, hi) intervals of (address, length) pairs: (los, his) arrays."""
    s, n = addr_pairs(pairs)
    keep = n > 0
    s, n = s[keep], n[keep]
    if not s.size:
        return NO_PAIRS
    order = np.argsort(s, kind="stable")
    s = s[order]
    e = np.maximum.accumulate(s + n[order])
    new = np.empty(s.size, bool)
    new[0] = True
    new[1:] = s[1:] > e[:-1]
    first = np.flatnonzero(new)
    return s[first], e[np.r_[first[1:] - 1, s.size - 1]]


def txn_pairs(txns, channel=None, write=None) -> tuple:
    """(starts, lengths) of every transaction (batches expanded), optionally of one channel /
    direction."""
    parts = []
    for t in txns:
        if channel is not None and t.channel != channel:
            continue
        if write is not None and bool(t.write) != write:
            continue
        if hasattr(t, "per_port"):                          # a TxnBatch
            parts.append((t.addr, t.length))
        else:
            parts.append((np.array([t.addr], np.int64), np.array([t.length], np.int64)))
    return addr_pairs(parts)


def axcache(memtype: int, write: bool) -> int:
    """AxCACHE for a MEM_ATTR.memtype value; reserved encodings (0xC-0xF) give 0."""
    rd, wr = MEMTYPE_AXCACHE.get(memtype & 0xF, (0, 0))
    return wr if write else rd


def hash_select(mask: int, addr: int) -> int:
    """One port-select bit: XOR-reduce of (CFG*HASH[39:6] & addr[39:6]) (TRM 2.3.3)."""
    return bin(mask & addr & ADDR_MASK & ~0x3F).count("1") & 1


@dataclass(frozen=True)
class Transaction(_core.Transaction):
    """A transaction on one of the NPU's manager ports ('SRAM0'..'SRAM3', 'EXT0', 'EXT1'),
    channel a `Channel`."""

    @property
    def interface(self) -> Interface:
        return Interface.ext if self.port.startswith("EXT") else Interface.sram


class Memory(_core.Memory):
    """The system memory as the NPU sees it: the core sparse memory with 40 address bits."""

    def __init__(self, log: bool = True, *, batching: bool = True):
        super().__init__(log, addr_bits=ADDR_BITS, batching=batching)


_new = object.__new__
_PREFIX = {Interface.sram: "SRAM", Interface.ext: "EXT"}
_PORT_NAMES = {itf: tuple(f"{pre}{i}" for i in range(4)) for itf, pre in _PREFIX.items()}


@dataclass(frozen=True)
class RegionRoute:
    """Where a region's accesses go: resolved from BASEP, REGIONCFG, MEM_ATTR and PROT."""
    base: int
    interface: Interface
    memtype: int
    domain: int
    prot: int
    hash0: int = 0       # CFGSRAMHASH0 or CFGEXTHASH0 for this interface
    hash1: int = 0       # CFGSRAMHASH1 (SRAM only)
    nports: int = 1      # ports present in this group

    @classmethod
    def from_mem_attr(cls, attr: int, base: int, prot: int, sram_hash: "tuple[int, int]" = (0, 0),
                      ext_hash: int = 0, sram_ports: int = 1, ext_ports: int = 1) -> "RegionRoute":
        """The route of a MEM_ATTR word (TRM 3.3.1.14): axi_port (bit 2) picks the port group,
        memtype (bits 7:4) the AxCACHE (``axcache``), mem_domain (bits 1:0) AxDOMAIN; AxPROT
        is *prot* (from PROT, TRM 2.2); the striping hash and port count of the group."""
        memtype, domain = _MEM_ATTR.memtype.get(attr), _MEM_ATTR.mem_domain.get(attr)
        if _MEM_ATTR.axi_port.get(attr):
            return cls(base, Interface.ext, memtype, domain, prot, ext_hash, 0, ext_ports)
        return cls(base, Interface.sram, memtype, domain, prot, sram_hash[0], sram_hash[1], sram_ports)

    def axi_attrs(self, addr: int, write: bool) -> "tuple[str, int, int, int]":
        """(port, AxPROT, AxCACHE, AxDOMAIN) of an access at *addr* by this route."""
        return self.port_of(addr), self.prot & 7, axcache(self.memtype, write), self.domain & 3

    def port_of(self, addr: int) -> str:
        sel = 0
        if self.nports > 1:
            sel = hash_select(self.hash0, addr)
            if self.nports > 2:
                sel |= hash_select(self.hash1, addr) << 1
        return ("EXT" if self.interface == Interface.ext else "SRAM") + str(sel)

    def granule(self) -> int:
        """Largest power-of-two span that cannot change port (64 B minimum)."""
        mask = self.hash0 | (self.hash1 if self.nports > 2 else 0)
        if self.nports == 1 or not mask & ADDR_MASK & ~0x3F:
            return 1 << ADDR_BITS
        return (mask & -mask) if mask & 0x3F == 0 else 64


class DataPort:
    """The NPU's data-side view: region-relative accesses become logged transactions.

    `route(region) -> RegionRoute`; region -1 is not routed here (internal LUT RAM).
    Reads and writes raise `BusFault` on an error response; a multi-port group splits an
    access where the striping hash changes port.
    """

    def __init__(self, memory: _core.Memory, route: Callable[[int], RegionRoute], reference: bool = False):
        self.memory = memory
        self.route = route
        self.reference = reference          # the ops take their literal reference paths

    def address(self, region: int, offset: int) -> int:
        return (self.route(region).base + offset) & ADDR_MASK

    def _pieces(self, r: RegionRoute, addr: int, length: int):
        g = r.granule()
        pos = 0
        while pos < length:
            a = (addr + pos) & ADDR_MASK
            n = min(length - pos, g - (a % g), (1 << ADDR_BITS) - a)
            yield a, pos, n
            pos += n

    def _txn(self, r: RegionRoute, channel: Channel, write: bool, addr: int, n: int) -> Transaction:
        # the frozen dataclass built without its __init__ (a hot path: command fetch, weight
        # and scale streams); the record is identical to Transaction(...)
        t = _new(Transaction)
        t.__dict__.update(port=r.port_of(addr) if r.nports > 1 else _PORT_NAMES[r.interface][0],
                          channel=channel, write=write, addr=addr, length=n, prot=r.prot,
                          cache=axcache(r.memtype, write), domain=r.domain, resp=Resp.OKAY)
        return t

    def read_abs(self, r: RegionRoute, addr: int, length: int, channel: Channel) -> np.ndarray:
        if r.nports == 1 and 0 < length and addr + length <= (1 << ADDR_BITS) and 0 <= addr:
            txn, data = self.memory.access(self._txn(r, channel, False, addr, length))   # one piece
            if txn.resp != Resp.OKAY:
                raise BusFault(txn)
            if type(data) is np.ndarray and data.dtype == np.uint8 and data.shape == (length,):
                return data
            out = np.empty(length, np.uint8)
            out[:] = data
            return out
        out = np.empty(length, np.uint8)
        for a, pos, n in self._pieces(r, addr, length):
            txn, data = self.memory.access(self._txn(r, channel, False, a, n))
            if txn.resp != Resp.OKAY:
                raise BusFault(txn)
            out[pos:pos + n] = data
        return out

    def write_abs(self, r: RegionRoute, addr: int, data, channel: Channel) -> None:
        buf = np.frombuffer(bytes(data), np.uint8) if not isinstance(data, np.ndarray) \
            else data.reshape(-1).view(np.uint8)
        for a, pos, n in self._pieces(r, addr, buf.size):
            txn, _ = self.memory.access(self._txn(r, channel, True, a, n), buf[pos:pos + n])
            if txn.resp != Resp.OKAY:
                raise BusFault(txn)

    def read(self, region: int, offset: int, length: int, channel: Channel) -> np.ndarray:
        r = self.route(region)
        return self.read_abs(r, (r.base + offset) & ADDR_MASK, length, channel)

    # ---- batched runs --------------------------------------------------------------------
    def _batch(self, r: RegionRoute, starts: np.ndarray, lengths: np.ndarray, channel: Channel,
               write: bool) -> TxnBatch:
        """The transactions of `read_abs`/`write_abs` for every run (absolute start
        addresses), in order, as one TxnBatch."""
        keep = lengths > 0
        if not bool(keep.all()):
            starts, lengths = starts[keep], lengths[keep]
        g = r.granule()
        off = starts & (g - 1)
        npc = (off + lengths - 1) // g + 1                      # pieces per run
        if starts.size and int(npc.max()) > 1:
            total = int(npc.sum())
            run = np.repeat(np.arange(starts.size), npc)
            k = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(npc) - npc, npc)
            s0, e0 = starts[run], (starts + lengths)[run]
            ps = np.where(k == 0, s0, (s0 - off[run]) + k * g)
            pe = np.minimum((s0 - off[run]) + (k + 1) * g, e0)
            starts, lengths = ps & ADDR_MASK, pe - ps
        port_idx = None
        if r.nports > 1:
            m = r.hash0 & ADDR_MASK & ~0x3F
            port_idx = np.bitwise_count(starts & np.int64(m)).astype(np.intp) & 1
            if r.nports > 2:
                m1 = r.hash1 & ADDR_MASK & ~0x3F
                port_idx |= (np.bitwise_count(starts & np.int64(m1)).astype(np.intp) & 1) << 1
        return TxnBatch(_PORT_NAMES[r.interface], port_idx, Channel(channel), write, starts, lengths, r.prot,
                        axcache(r.memtype, write), r.domain, Resp.OKAY, r.interface, Transaction)

    @staticmethod
    def _runs(starts, lengths) -> tuple[np.ndarray, np.ndarray]:
        s = np.asarray(starts, dtype=np.int64).reshape(-1)
        n = np.asarray(lengths, dtype=np.int64).reshape(-1)
        if s.shape != n.shape:
            raise ValueError("starts and lengths differ in size")
        if n.size and int(n.min()) < 0:
            raise ValueError("negative run length")
        return s, n

    def read_runs(self, region: int, starts, lengths, channel: Channel) -> np.ndarray:
        """Read every run (region offset, length) in order: the same transactions as one
        `read(region, start, length, channel)` per run.  Returns the concatenated bytes.
        Raises BusFault at the first error response (after the preceding transactions)."""
        s, n = self._runs(starts, lengths)
        if not self.memory.batch_capable():
            out = [self.read(region, a, ln, channel) for a, ln in zip(s.tolist(), n.tolist())]
            return np.concatenate(out) if out else np.zeros(0, np.uint8)
        r = self.route(region)
        b = self._batch(r, (s + r.base) & ADDR_MASK, n, channel, False)
        err, data = self.memory.access_batch(b)
        if err is not None:
            raise BusFault(err)
        return data

    def _span_batch(self, r: RegionRoute, alo: int, st, sp, channel: Channel, write: bool, runs):
        if runs is None:
            return self._batch(r, alo + st, sp - st, channel, write)
        key = (r, alo, channel, write)
        b = runs.batches.get(key)
        if b is None:
            if len(runs.batches) >= 8:
                runs.batches.clear()
            b = runs.batches[key] = self._batch(r, alo + st, sp - st, channel, write)
        return b

    def read_span(self, region: int, lo: int, mask, channel: Channel, runs: SpanRuns | None = None) -> np.ndarray:
        """Read the bytes at region offsets lo + i where mask[i], one run per maximal stretch
        of the mask, ascending - the transactions of one `read` per run.  Returns a uint8
        buffer of mask.size bytes holding them at their positions (other bytes unspecified).
        Raises BusFault at the first error response.  ``runs``: the mask's runs, when the
        caller has them (a cached layout; see SpanRuns)."""
        mask = np.asarray(mask, dtype=bool).reshape(-1)
        st, sp = mask_runs(mask) if runs is None else (runs.starts, runs.stops)
        if not st.size:
            return np.zeros(mask.size, np.uint8)
        if self.memory.batch_capable():
            r = self.route(region)
            alo = (r.base + int(lo)) & ADDR_MASK
            if alo + mask.size <= (1 << ADDR_BITS):
                b = self._span_batch(r, alo, st, sp, channel, False, runs)
                err, buf = self.memory.access_batch(b, span=(alo, mask, None))
                if err is not None:
                    raise BusFault(err)
                return buf
        buf = np.zeros(mask.size, np.uint8)
        data = self.read_runs(region, st + int(lo), sp - st, channel)
        buf[mask] = data
        return buf

    def write_span(self, region: int, lo: int, mask, buf, channel: Channel, runs: SpanRuns | None = None) -> None:
        """Write buf[i] to region offset lo + i where mask[i], one run per maximal stretch of
        the mask, ascending - the transactions and effects of one `write` per run.  Raises
        BusFault at the first error response (the runs before it have been written).
        ``runs``: as for read_span."""
        mask = np.asarray(mask, dtype=bool).reshape(-1)
        buf = np.asarray(buf).reshape(-1).view(np.uint8)
        if buf.size != mask.size:
            raise ValueError("write_span: mask and buffer differ in size")
        st, sp = mask_runs(mask) if runs is None else (runs.starts, runs.stops)
        if not st.size:
            return
        if self.memory.batch_capable():
            r = self.route(region)
            alo = (r.base + int(lo)) & ADDR_MASK
            if alo + mask.size <= (1 << ADDR_BITS):
                b = self._span_batch(r, alo, st, sp, channel, True, runs)
                full = st.size == 1 and st[0] == 0 and sp[0] == mask.size
                err, _ = self.memory.access_batch(b, span=(alo, mask, buf, full))
                if err is not None:
                    raise BusFault(err)
                return
        self.write_runs(region, st + int(lo), sp - st, buf[mask], channel)

    def write_runs(self, region: int, starts, lengths, data, channel: Channel) -> None:
        """Write every run (region offset, length) in order, taking the bytes from `data` (the
        concatenation of all runs): the same transactions and effects as one
        `write(region, start, data_i, channel)` per run.  Raises BusFault at the first error
        response (the runs before it have been written)."""
        s, n = self._runs(starts, lengths)
        buf = np.frombuffer(bytes(data), np.uint8) if not isinstance(data, np.ndarray) \
            else np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        if buf.size != int(n.sum()):
            raise ValueError(f"write_runs: {buf.size} bytes of data for {int(n.sum())} bytes of runs")
        if not self.memory.batch_capable():
            pos = 0
            for a, ln in zip(s.tolist(), n.tolist()):
                self.write(region, a, buf[pos:pos + ln], channel)
                pos += ln
            return
        r = self.route(region)
        b = self._batch(r, (s + r.base) & ADDR_MASK, n, channel, True)
        err, _ = self.memory.access_batch(b, buf)
        if err is not None:
            raise BusFault(err)

    def write(self, region: int, offset: int, data, channel: Channel) -> None:
        r = self.route(region)
        self.write_abs(r, (r.base + offset) & ADDR_MASK, data, channel)
