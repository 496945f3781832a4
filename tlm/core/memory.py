"""Sparse byte memory and bus transactions, shared by every device.

`Memory` is a sparse byte store of `addr_bits` address bits (a device passes its own width;
the default is the Ethos-U85's 40). Its back door (`read`, `write`, `view`, `equals`) is for
loading programs and data and checking results; the front door (`access`) is what a device
model uses: every front-door access is a `Transaction` (port, channel, address, length,
AxPROT/AxCACHE/AxDOMAIN, response) that is logged, offered to listeners (PMU, bench
replay) and checked against injected faults. A faulting access has no effect. The port and
channel values are the device's (its own channel enum; the Ethos-U85 adds the port group,
`tlm.ethos_u85.memory.Transaction.interface`).

Batched accesses: `Memory.access_batch` performs a `TxnBatch` (transactions as arrays) with a
vectorised fault check and one gather/scatter over the pages, exactly as one `access` per
transaction would (`batch_capable` says when that holds: this class's front door, every
listener with `on_batch`, and `batching=True`). `FaultList` gives the injected faults a
token that names their contents.
"""
from __future__ import annotations

import bisect
import enum
from dataclasses import dataclass, replace
from typing import Callable, Iterable

import numpy as np

DEFAULT_ADDR_BITS = 40
PAGE_BITS = 16
PAGE_SIZE = 1 << PAGE_BITS


class Resp(enum.IntEnum):
    """AXI xRESP encoding."""
    OKAY = 0
    EXOKAY = 1
    SLVERR = 2
    DECERR = 3



@dataclass(frozen=True)
class Transaction:
    port: str            # the device's port name ('SRAM0', 'EXT1', 'AXI', ...)
    channel: enum.IntEnum  # the device's channel enum (what the access is for)
    write: bool
    addr: int
    length: int
    prot: int = 0        # AxPROT[2:0]: [0] privileged, [1] non-secure
    cache: int = 0       # AxCACHE
    domain: int = 0      # AxDOMAIN
    resp: Resp = Resp.OKAY


@dataclass(frozen=True)
class Fault:
    lo: int
    hi: int              # exclusive
    resp: Resp
    kind: str            # 'r', 'w' or 'rw'

    def hits(self, addr: int, length: int, write: bool) -> bool:
        return ("w" if write else "r") in self.kind and addr < self.hi and addr + length > self.lo


class BusFault(Exception):
    """An error response seen by a device's bus manager (the device turns it into its fault
    status). ``interface`` is the transaction's port group if the device's Transaction
    type names one (the Ethos-U85's does), else None."""

    def __init__(self, txn: Transaction):
        super().__init__(f"{txn.resp.name} on {getattr(txn.channel, 'name', txn.channel)} {txn.port} "
                         f"{'write' if txn.write else 'read'} @0x{txn.addr:010x}+{txn.length}")
        self.txn = txn
        self.channel = txn.channel
        self.interface = getattr(txn, "interface", None)
        self.resp = txn.resp
        self.addr = txn.addr




def mask_runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, stops) index arrays of the maximal True stretches of a boolean vector."""
    m = np.asarray(mask, dtype=bool).reshape(-1)
    d = np.diff(m.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    return np.flatnonzero(d == 1), np.flatnonzero(d == -1)


class SpanRuns:
    """The runs of a reused span mask (``mask_runs``), with a memo of the TxnBatch built
    for them per (route, absolute address, channel, direction): a device caches one per block
    layout (tlm.ethos_u85.fmap), so an op that runs again with the same registers skips both."""
    __slots__ = ("starts", "stops", "batches")

    def __init__(self, starts: np.ndarray, stops: np.ndarray):
        self.starts, self.stops = starts, stops
        self.batches: dict = {}


def range_index(starts: np.ndarray, lengths: np.ndarray, total: int) -> np.ndarray:
    """Concatenation of arange(s, s + n) for every (s, n) pair, as one int64 array."""
    if lengths.size and int(lengths.min()) == int(lengths.max()):
        n = int(lengths[0])
        return (starts[:, None] + np.arange(n, dtype=np.int64)).ravel()
    shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    return np.arange(total, dtype=np.int64) + shift


class TxnBatch:
    """A run of transactions that share port group, channel, direction and attributes, held
    as arrays (`addr`, `length`, `port_idx`: index into `ports`), all with response `resp`.

    Iterating (or `transactions()`) gives the equivalent `Transaction` records in order, of
    type `txn_type` (the device's Transaction class); `interface` is the port group in the
    device's terms (None if it has none).
    """
    __slots__ = ("ports", "port_idx", "channel", "write", "addr", "length", "prot", "cache", "domain",
                 "resp", "interface", "txn_type", "_beats16", "_extent", "_pages")

    def __init__(self, ports, port_idx, channel, write, addr, length, prot=0, cache=0, domain=0,
                 resp=Resp.OKAY, interface=None, txn_type: type = Transaction):
        self.ports = ports                       # port names, indexed by port_idx
        self.port_idx = port_idx                 # int array, or None: every transaction on ports[0]
        self.channel = channel
        self.write = bool(write)
        self.addr = addr                         # int64 array of absolute addresses
        self.length = length                     # int64 array
        self.prot, self.cache, self.domain = prot, cache, domain
        self.resp = Resp(resp)
        self.interface = interface
        self.txn_type = txn_type
        self._beats16 = None                     # (total beats, per_port) on a 16-byte bus, memo
        self._extent = None                      # (lowest address, highest end), memo
        self._pages = None                       # distinct pages touched, memo

    def __len__(self) -> int:
        return int(self.addr.size)

    def __getitem__(self, sl: slice) -> "TxnBatch":
        if not isinstance(sl, slice):
            raise TypeError("TxnBatch supports slicing only (iterate for Transaction records)")
        return TxnBatch(self.ports, None if self.port_idx is None else self.port_idx[sl], self.channel,
                        self.write, self.addr[sl], self.length[sl], self.prot, self.cache, self.domain,
                        self.resp, self.interface, self.txn_type)

    def port_index_list(self) -> list:
        return [0] * len(self) if self.port_idx is None else self.port_idx.tolist()

    def transactions(self) -> list:
        """The equivalent Transaction records (built without the frozen dataclass __init__,
        which costs more than the rest of a batched access; the records are identical)."""
        ports = self.ports
        common = dict(channel=self.channel, write=self.write, prot=self.prot, cache=self.cache,
                      domain=self.domain, resp=self.resp)
        new = object.__new__
        cls = self.txn_type
        out = []
        append = out.append
        for p, a, n in zip(self.port_index_list(), self.addr.tolist(), self.length.tolist()):
            t = new(cls)
            d = t.__dict__
            d.update(common)
            d["port"] = ports[p]
            d["addr"] = a
            d["length"] = n
            append(t)
        return out

    def __iter__(self):
        return iter(self.transactions())

    def beats(self, width: int = 16) -> np.ndarray:
        """Data beats of every transaction on a `width`-byte bus (address-aligned)."""
        a = self.addr
        return (a + self.length - 1) // width - a // width + 1

    def total_beats(self, width: int = 16) -> int:
        if width == 16:
            return self._memo16()[0]
        return int(self.beats(width).sum()) if len(self) else 0

    def total_bytes(self) -> int:
        """Sum of the transaction lengths (memo, with the extent)."""
        e = self._extent
        if e is None or len(e) < 3:
            lo, hi = self.extent()
            e = self._extent = (lo, hi, int(self.length.sum()) if len(self) else 0)
        return e[2]

    def extent(self) -> tuple[int, int]:
        """(lowest start address, highest end address) of the transactions (memo)."""
        e = self._extent
        if e is None:
            e = self._extent = ((int(self.addr.min()), int((self.addr + self.length).max())) if len(self)
                                else (0, 0))
        return e[0], e[1]

    def pages(self, page_bits: int = PAGE_BITS) -> tuple:
        """The distinct pages (address >> page_bits) the transactions touch, ascending
        (memo for the default page size: a cached batch is performed many times)."""
        if page_bits == PAGE_BITS and self._pages is not None:
            return self._pages
        if not len(self):
            r: tuple = ()
        else:
            a = self.addr
            p0, p1 = a >> page_bits, (a + self.length - 1) >> page_bits
            if int((p1 - p0).max()) > 1:
                n = p1 - p0 + 1
                p0 = np.repeat(p0 - (np.cumsum(n) - n), n) + np.arange(int(n.sum()))
            r = tuple(np.unique(np.concatenate((p0, p1))).tolist())
        if page_bits == PAGE_BITS:
            self._pages = r
        return r

    def _memo16(self):
        # a batch is never modified after construction (slicing makes a new one), so the
        # 16-byte-bus figures are computed once (cached batches are performed many times)
        m = self._beats16
        if m is None:
            m = self._beats16 = (int(self.beats(16).sum()) if len(self) else 0, tuple(self._per_port(16)))
        return m

    def per_port(self, width: int = 16) -> list:
        """[(port index, transactions, beats)] for the ports that carry transactions."""
        if width == 16:
            return list(self._memo16()[1])
        return self._per_port(width)

    def _per_port(self, width: int) -> list:
        n = len(self)
        if not n:
            return []
        b = self.beats(width)
        if self.port_idx is None:
            return [(0, n, int(b.sum()))]
        cnt = np.bincount(self.port_idx)
        bts = np.bincount(self.port_idx, weights=b)          # float64: exact below 2**53
        return [(p, int(cnt[p]), int(bts[p])) for p in range(cnt.size) if cnt[p]]


_FAULT_SERIAL = [0]
_FAULT_SETS: dict = {}               # fault list contents -> token (equal contents, equal token)


class FaultList(list):
    """Memory.faults: a list with a ``token`` that names its contents - equal for equal
    contents (another Memory with the same guard bands), different for any other contents -
    updated by every change, so the warm paths can tell in one comparison that the faults
    their checks saw are still the faults."""
    __slots__ = ("token",)

    def __init__(self, *a):
        super().__init__(*a)
        self._changed()

    def _changed(self):
        key = tuple(self)
        try:
            tok = _FAULT_SETS.get(key)
        except TypeError:                                    # unhashable entries: a token of its own
            key, tok = None, None
        if tok is None:
            _FAULT_SERIAL[0] += 1
            tok = _FAULT_SERIAL[0]
            if key is not None:
                if len(_FAULT_SETS) >= 4096:
                    _FAULT_SETS.clear()
                _FAULT_SETS[key] = tok
        self.token = tok


def _mutator(name):
    base = getattr(list, name)

    def fn(self, *a, **kw):
        r = base(self, *a, **kw)
        self._changed()
        return r
    fn.__name__ = name
    return fn


for _name in ("append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse", "__setitem__",
              "__delitem__", "__iadd__", "__imul__"):
    setattr(FaultList, _name, _mutator(_name))
del _name


def _fault_intervals(faults, kind: str) -> tuple[list, list]:
    """The merged, sorted [lo, hi) ranges of the faults of one kind ('r' or 'w')."""
    los: list = []
    his: list = []
    for lo, hi in sorted((f.lo, f.hi) for f in faults if kind in f.kind and f.hi > f.lo):
        if his and lo <= his[-1]:
            his[-1] = max(his[-1], hi)
        else:
            los.append(lo)
            his.append(hi)
    return los, his


class Memory:
    """Sparse byte-addressed memory of ``addr_bits`` address bits; unwritten bytes read as zero.

    ``batching=False`` makes ``batch_capable`` answer False, so batched callers (the
    Ethos-U85's DataPort) take their per-transaction reference path.

    ``version`` counts the calls that change contents (write, store, the batched front
    door's writes, load_pages, restore_pages; a warm path that writes through its page
    views adds one itself); ``pages_out`` becomes True for good once
    ``page`` or ``page_items`` handed out a live page array (which can be written without
    the memory seeing it).  Together they tell an owner whether anything but itself can
    have changed the contents since it last looked (runner.Session's span restore); the
    warm paths' own page accesses, which write only inside their owner's runs, use
    ``live_page``."""
    version = 0
    pages_out = False

    def __init__(self, log: bool = True, *, addr_bits: int = DEFAULT_ADDR_BITS, batching: bool = True):
        self.addr_bits = addr_bits
        self.addr_limit = 1 << addr_bits          # first address past the address space
        self.batching = batching
        self._pages: dict[int, np.ndarray] = {}
        self._faults = FaultList()
        self.log_enabled = log
        self.log: list[Transaction] = []
        self.listeners: list[Callable[[Transaction], None]] = []
        self._fault_index = None          # fault_free's sorted intervals, by fault list contents

    @property
    def faults(self) -> FaultList:
        """The injected faults (a FaultList; assigning a list stores a FaultList copy)."""
        return self._faults

    @faults.setter
    def faults(self, value) -> None:
        self._faults = FaultList(value)

    # ---- back door -----------------------------------------------------------------
    def _check(self, addr: int, length: int) -> None:
        if addr < 0 or length < 0 or addr + length > self.addr_limit:
            raise ValueError(f"access 0x{addr:x}+{length} is outside the {self.addr_bits}-bit address space")

    def _spans(self, addr: int, length: int) -> Iterable[tuple[int, int, int, int]]:
        """(page index, offset in page, offset in buffer, count) for a byte range."""
        done = 0
        while done < length:
            a = addr + done
            page, off = a >> PAGE_BITS, a & (PAGE_SIZE - 1)
            n = min(PAGE_SIZE - off, length - done)
            yield page, off, done, n
            done += n

    def read_array(self, addr: int, length: int) -> np.ndarray:
        self._check(addr, length)
        off = addr & (PAGE_SIZE - 1)
        if off + length <= PAGE_SIZE:                       # within one page
            p = self._pages.get(addr >> PAGE_BITS)
            return np.zeros(length, np.uint8) if p is None else p[off:off + length].copy()
        out = np.empty(length, np.uint8)
        for page, off, pos, n in self._spans(addr, length):
            p = self._pages.get(page)
            if p is not None:
                out[pos:pos + n] = p[off:off + n]
            else:
                out[pos:pos + n] = 0                          # unwritten bytes read as zero
        return out

    def read(self, addr: int, length: int) -> bytes:
        return self.read_array(addr, length).tobytes()

    def view(self, addr: int, length: int) -> np.ndarray:
        """The bytes [addr, addr + length) without side effects: a read-only view of the page
        when they lie in one written page, else a fresh copy (the warm paths' back door)."""
        off = addr & (PAGE_SIZE - 1)
        if off + length <= PAGE_SIZE and addr >= 0:
            p = self._pages.get(addr >> PAGE_BITS)
            if p is not None:
                v = p[off:off + length]
                v.flags.writeable = False
                return v
        return self.read_array(addr, length)

    def equals(self, addr: int, data: bytes) -> bool:
        """Whether memory holds exactly ``data`` at ``addr`` (back door, no side effects)."""
        n = len(data)
        off = addr & (PAGE_SIZE - 1)
        if off + n <= PAGE_SIZE and addr >= 0:
            p = self._pages.get(addr >> PAGE_BITS)
            if p is not None:
                return p[off:off + n].tobytes() == data
        return self.read_array(addr, n).tobytes() == data

    def fault_free(self, lo: int, hi: int, write: bool) -> bool:
        """True when no access inside [lo, hi) in this direction can get an error response:
        no injected fault of that kind overlaps it and it stays inside the address space.  (The fault
        list is indexed once per distinct list contents: a sorted interval search.)"""
        if hi > self.addr_limit or lo < 0:
            return False
        faults = self.faults
        if not faults:
            return True
        key = getattr(faults, "token", None)
        if key is None:                                      # a subclass with a plain list
            key = tuple(faults)
        idx = getattr(self, "_fault_index", None)
        if idx is None or idx[0] != key:
            idx = self._fault_index = (key, _fault_intervals(faults, "r"), _fault_intervals(faults, "w"))
        los, his = idx[2] if write else idx[1]
        if not los:
            return True
        j = bisect.bisect_right(his, lo)                     # first interval ending after lo
        return j >= len(los) or los[j] >= hi

    def write(self, addr: int, data) -> None:
        buf = np.frombuffer(bytes(data), np.uint8) if not isinstance(data, np.ndarray) \
            else data.reshape(-1).view(np.uint8)
        self._check(addr, buf.size)
        for page, off, pos, n in self._spans(addr, buf.size):
            p = self._pages.get(page)
            if p is None:
                p = self._pages[page] = np.zeros(PAGE_SIZE, np.uint8)
            p[off:off + n] = buf[pos:pos + n]
        self.version += 1

    write_array = write

    def store(self, addr: int, buf: np.ndarray) -> None:
        """write() of a uint8 array (the warm paths' back door; one page without a loop)."""
        off = addr & (PAGE_SIZE - 1)
        n = buf.size
        if off + n <= PAGE_SIZE and addr >= 0 and addr + n <= self.addr_limit:
            p = self._pages.get(addr >> PAGE_BITS)
            if p is None:
                p = self._pages[addr >> PAGE_BITS] = np.zeros(PAGE_SIZE, np.uint8)
            p[off:off + n] = buf
            self.version += 1
            return
        self.write(addr, buf)

    def read_u32(self, addr: int) -> int:
        return int.from_bytes(self.read(addr, 4), "little")

    def write_u32(self, addr: int, value: int) -> None:
        self.write(addr, (value & 0xFFFFFFFF).to_bytes(4, "little"))

    # ---- contents as pages (copies, comparisons, footprints) ---------------------------
    @property
    def page_count(self) -> int:
        """Pages of PAGE_SIZE bytes the sparse store holds (every page ever written)."""
        return len(self._pages)

    def page(self, index: int) -> "np.ndarray | None":
        """The live array of page *index* (address >> PAGE_BITS), None if never written (a
        page array stays the same object until load_pages); sets ``pages_out``."""
        self.pages_out = True
        return self._pages.get(index)

    def live_page(self, index: int) -> "np.ndarray | None":
        """``page(index)`` for the warm paths, which keep views of it and write them only
        inside their owner's runs: not counted as handed out (``pages_out``)."""
        return self._pages.get(index)

    def page_items(self):
        """(page index, page array) of every stored page: the live arrays, not to be
        modified; sets ``pages_out``."""
        self.pages_out = True
        return self._pages.items()

    def page_indices(self) -> list:
        """The indices of the stored pages, ascending."""
        return sorted(self._pages)

    def copy_pages(self) -> dict:
        """A copy of the contents: page index -> page array."""
        return {k: v.copy() for k, v in self._pages.items()}

    def load_pages(self, pages) -> None:
        """Make the contents those of *pages* (a dict or ``page_items()`` of another memory;
        copied). Faults, log and listeners are kept."""
        items = pages.items() if isinstance(pages, dict) else pages
        self._pages = {k: np.array(v, np.uint8, copy=True) for k, v in items}
        self.version += 1

    def restore_pages(self, pages: dict) -> None:
        """Make the contents those of *pages* (a ``copy_pages()`` result, not modified) in
        place: a page both hold keeps its array (views of it stay valid), pages *pages*
        lacks are dropped.  Faults, log and listeners are kept."""
        own = self._pages
        self.version += 1
        for k in [k for k in own if k not in pages]:
            del own[k]
        for k, v in pages.items():
            p = own.get(k)
            if p is None:
                own[k] = v.copy()
            else:
                np.copyto(p, v)

    # ---- fault injection -------------------------------------------------------------
    def inject_fault(self, lo: int, hi: int, resp: Resp | str = Resp.SLVERR, kind: str = "rw") -> Fault:
        """Make accesses overlapping [lo, hi) answer `resp` (SLVERR or DECERR)."""
        resp = Resp[resp] if isinstance(resp, str) else Resp(resp)
        if resp not in (Resp.SLVERR, Resp.DECERR):
            raise ValueError("an injected fault answers SLVERR or DECERR")
        if kind not in ("r", "w", "rw"):
            raise ValueError("fault kind is 'r', 'w' or 'rw'")
        f = Fault(lo, hi, resp, kind)
        self.faults.append(f)
        return f

    def clear_faults(self) -> None:
        self.faults.clear()

    # ---- front door ------------------------------------------------------------------
    def access(self, txn: Transaction, data=None):
        """Perform one transaction. Returns (logged transaction, data or None)."""
        kind = "w" if txn.write else "r"
        a = txn.addr
        e = a + txn.length
        for f in self._faults:
            if a < f.hi and e > f.lo and kind in f.kind:          # Fault.hits, inlined
                txn = replace(txn, resp=f.resp)                   # (the device's Transaction type)
                break
        if txn.addr + txn.length > self.addr_limit:
            txn = replace(txn, resp=Resp.DECERR)
        if self.log_enabled:
            self.log.append(txn)
        for cb in self.listeners:
            cb(txn)
        if txn.resp != Resp.OKAY:
            return txn, None
        if txn.write:
            self.write(txn.addr, data)
            return txn, None
        return txn, self.read_array(txn.addr, txn.length)

    # ---- batched front door -------------------------------------------------------------
    def batch_capable(self) -> bool:
        """Whether `access_batch` is equivalent to calling `access` per transaction: the
        front door is this class's and every listener accepts batches (`on_batch`)."""
        if not self.batching or type(self).access is not Memory.access:
            return False
        for cb in self.listeners:
            if getattr(cb, "on_batch", None) is None:
                return False
        return True

    def _first_error(self, b: TxnBatch) -> int:
        """Index of the first transaction of `b` that gets an error response (len(b) if none)."""
        n = len(b)
        kind = "w" if b.write else "r"
        lo, hi = b.extent()
        faults = [f for f in self._faults if kind in f.kind and f.lo < hi and f.hi > lo]
        if hi <= self.addr_limit and not faults:
            return n                                        # nothing can answer an error
        a, ln = b.addr, b.length
        end = a + ln
        hit = None
        if int(end.max()) > self.addr_limit:
            hit = end > self.addr_limit
        if len(faults) > 8:                                 # merged ranges + binary search
            iv = sorted((int(f.lo), int(f.hi)) for f in faults if f.hi > f.lo)
            los, his = [], []
            for lo, hi in iv:
                if his and lo <= his[-1]:
                    his[-1] = max(his[-1], hi)
                else:
                    los.append(lo)
                    his.append(hi)
            if los:
                los_a, his_a = np.asarray(los, np.int64), np.asarray(his, np.int64)
                j = np.searchsorted(his_a, a, side="right")          # first range with hi > a
                jj = np.minimum(j, los_a.size - 1)
                h = (j < los_a.size) & (los_a[jj] < end) & (ln > 0)
                hit = h if hit is None else hit | h
        else:
            for f in faults:
                h = (a < f.hi) & (end > f.lo)
                hit = h if hit is None else hit | h
        if hit is None:
            return n
        k = int(np.argmax(hit))
        return k if hit[k] else n

    def _gather(self, addr: np.ndarray, length: np.ndarray) -> np.ndarray:
        n = addr.size
        total = int(length.sum())
        if n == 1:
            return self.read_array(int(addr[0]), int(length[0]))
        lo, hi = int(addr.min()), int((addr + length).max())
        if hi - lo <= 2 * total + PAGE_SIZE:
            span = self.read_array(lo, hi - lo)
            return span[range_index(addr - lo, length, total)]
        out = np.empty(total, np.uint8)
        pos = 0
        for a, ln in zip(addr.tolist(), length.tolist()):
            out[pos:pos + ln] = self.read_array(a, ln)
            pos += ln
        return out

    def _scatter(self, addr: np.ndarray, length: np.ndarray, buf: np.ndarray) -> None:
        n = addr.size
        if n == 0:
            return
        self.version += 1
        end = addr + length
        first, last = int(addr[0]) >> PAGE_BITS, (int(end[-1]) - 1) >> PAGE_BITS
        if n == 1 or not bool(np.all(addr[1:] >= end[:-1])) or last - first > 4 * n:
            pos = 0                                          # overlapping (order matters) / sparse
            for a, ln in zip(addr.tolist(), length.tolist()):
                self.write(a, buf[pos:pos + ln])
                pos += ln
            return
        total = buf.size
        pos = range_index(addr, length, total)              # ascending absolute byte addresses
        cuts = np.searchsorted(pos, np.arange(first, last + 2, dtype=np.int64) << PAGE_BITS).tolist()
        pages = self._pages
        for k, page in enumerate(range(first, last + 1)):
            i, j = cuts[k], cuts[k + 1]
            if i == j:
                continue
            p = pages.get(page)
            if p is None:
                p = pages[page] = np.zeros(PAGE_SIZE, np.uint8)
            if j - i == pos[j - 1] - pos[i] + 1:             # one contiguous stretch
                o = int(pos[i]) & (PAGE_SIZE - 1)
                p[o:o + j - i] = buf[i:j]
            else:
                p[pos[i:j] & (PAGE_SIZE - 1)] = buf[i:j]

    def _write_masked(self, lo: int, mask: np.ndarray, buf: np.ndarray, full: bool = False) -> None:
        """Store buf[i] at lo + i for every i with mask[i] (pages created only where written).
        ``full``: the caller knows every mask bit is set."""
        n = mask.size
        pos = 0
        pages = self._pages
        self.version += 1
        while pos < n:
            a = lo + pos
            page, off = a >> PAGE_BITS, a & (PAGE_SIZE - 1)
            k = min(PAGE_SIZE - off, n - pos)
            m = mask[pos:pos + k]
            cnt = k if full else int(np.count_nonzero(m))
            if cnt:
                p = pages.get(page)
                if p is None:
                    p = pages[page] = np.zeros(PAGE_SIZE, np.uint8)
                if cnt == k:
                    p[off:off + k] = buf[pos:pos + k]
                else:
                    np.copyto(p[off:off + k], buf[pos:pos + k], where=m)
            pos += k

    def access_batch(self, b: TxnBatch, data=None, *, span=None):
        """Perform the transactions of `b` in order, as `access` would one by one, stopping
        at the first error response.  Returns (error Transaction or None, data): for a read
        without error the concatenated bytes of all transactions, else None.  `data` (writes)
        is the concatenation of every transaction's bytes.  The transactions before an error
        are logged, offered to the listeners (`on_batch`) and performed; the erroring one is
        logged and offered (`listener(txn)`) and has no effect.

        ``span=(lo, mask, buf)``: the transactions are ascending, disjoint and cover exactly
        the bytes lo + i with mask[i] (no wrap past the address space); data moves through the span
        instead: a read returns the whole span lo .. lo + mask.size - 1 (bytes outside the
        transactions are unspecified), a write stores buf[i] where mask[i].  An optional fourth
        element ``full`` (True) says every mask bit is set (the mask is then not scanned)."""
        n = len(b)
        if n == 0:
            return None, (np.zeros(0, np.uint8) if not b.write else None)
        k = self._first_error(b)
        ok = b if k == n else b[:k]
        if k:
            if self.log_enabled:
                self.log.extend(ok.transactions())
            for cb in self.listeners:
                cb.on_batch(ok)
        if b.write and k:
            if span is not None:
                lo, mask, sbuf = span[:3]
                full = len(span) > 3 and span[3] and k == n
                if k < n:
                    mask = mask.copy()
                    mask[int(b.addr[k]) - lo:] = False      # transactions are ascending
                self._write_masked(lo, mask, sbuf, full)
            else:
                buf = data if isinstance(data, np.ndarray) else np.frombuffer(bytes(data), np.uint8)
                buf = buf.reshape(-1).view(np.uint8)
                if k < n:
                    buf = buf[:int(ok.length.sum())]
                self._scatter(ok.addr, ok.length, buf)
        if k == n:
            if b.write:
                return None, None
            if span is not None:
                return None, self.read_array(span[0], span[1].size)
            return None, self._gather(b.addr, b.length)
        a, ln = int(b.addr[k]), int(b.length[k])
        resp = Resp.OKAY
        for f in self._faults:                                # as access(): first fault, then range
            if f.hits(a, ln, b.write):
                resp = f.resp
                break
        if a + ln > self.addr_limit:
            resp = Resp.DECERR
        p = 0 if b.port_idx is None else int(b.port_idx[k])
        err = b.txn_type(b.ports[p], b.channel, b.write, a, ln, b.prot, b.cache, b.domain, resp)
        if resp == Resp.OKAY:                                # cannot happen: _first_error agrees with hits()
            raise AssertionError(f"access_batch: no fault for {err}")
        if self.log_enabled:
            self.log.append(err)
        for cb in self.listeners:
            cb(err)
        return err, None


