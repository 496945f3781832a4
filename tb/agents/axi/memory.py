"""The bench's system memory: a sparse byte store with faults per AXI port (device-neutral)."""
from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Callable, Iterable

from tlm.core.memory import Memory, Resp, Transaction


@dataclass(frozen=True)
class BenchFault:
    """Accesses overlapping [lo, hi) answer *resp*; *kind* 'r', 'w' or 'rw'; *ports* None = all."""
    lo: int
    hi: int
    resp: Resp
    kind: str = "rw"
    ports: "frozenset | None" = None

    def hits(self, addr: int, length: int, write: bool, port: "str | None" = None) -> bool:
        if ("w" if write else "r") not in self.kind:
            return False
        if self.ports is not None and port is not None and port not in self.ports:
            return False
        return addr < self.hi and addr + length > self.lo


class BenchMemory(Memory):
    """The system memory of the bench: a sparse ``tlm.core.memory.Memory`` of ``addr_bits``
    address bits whose faults are per AXI port (``BenchFault``).

    ``read``/``write`` are the back door. ``access(txn)`` is a front door with
    ``tlm.core.memory.Memory`` semantics (a faulting access has no effect), used by a reference
    model on a copy (``snapshot``); when an executor is attached for the calling thread
    (``attach``, DUT=tlm), the access is instead performed on the AXI pins by that executor.
    """

    def __init__(self, log: bool = False, addr_bits: int = 40):
        super().__init__(log=log, addr_bits=addr_bits)
        self.faults = []              # BenchFault entries (a FaultList)
        self._front = {}              # thread ident -> callable(txn, data) -> (resp, data)

    # faults ------------------------------------------------------------------------
    def inject_fault(self, lo: int, hi: int, resp="SLVERR", kind: str = "rw",
                     ports: "Iterable[str] | None" = None) -> BenchFault:
        resp = Resp[resp] if isinstance(resp, str) else Resp(resp)
        if resp not in (Resp.SLVERR, Resp.DECERR):
            raise ValueError("an injected fault answers SLVERR or DECERR")
        if kind not in ("r", "w", "rw"):
            raise ValueError("fault kind is 'r', 'w' or 'rw'")
        if not 0 <= lo < hi <= 1 << self.addr_bits:
            raise ValueError(f"fault range 0x{lo:x}..0x{hi:x} is empty or outside {self.addr_bits} bits")
        f = BenchFault(int(lo), int(hi), resp, kind, None if ports is None else frozenset(ports))
        self.faults.append(f)
        return f

    def remove_fault(self, f: BenchFault) -> None:
        self.faults.remove(f)

    def fault_for(self, port: str, addr: int, length: int, write: bool) -> "Resp | None":
        end = addr + length                 # BenchFault.hits, inlined (per burst)
        kind = "w" if write else "r"
        for f in self.faults:
            if (addr < f.hi and end > f.lo and kind in f.kind
                    and (f.ports is None or port is None or port in f.ports)):
                return f.resp
        return None

    # front door --------------------------------------------------------------------
    def attach(self, ident: int, front: Callable) -> None:
        self._front[ident] = front

    def detach(self, ident: int) -> None:
        self._front.pop(ident, None)

    def access(self, txn: Transaction, data=None):
        front = self._front.get(threading.get_ident()) if self._front else None
        if front is not None:
            resp, rdata = front(txn, data)
            if resp != txn.resp:
                txn = replace(txn, resp=Resp(resp))          # (the device's Transaction type)
            self._post(txn)
            return txn, rdata
        resp = self.fault_for(txn.port, txn.addr, txn.length, txn.write)
        if txn.addr + txn.length > self.addr_limit:
            resp = Resp.DECERR
        if resp is not None:
            txn = replace(txn, resp=resp)
        self._post(txn)
        if txn.resp != Resp.OKAY:
            return txn, None
        if txn.write:
            self.write(txn.addr, data)
            return txn, None
        return txn, self.read_array(txn.addr, txn.length)

    def _post(self, txn: Transaction) -> None:
        if self.log_enabled:
            self.log.append(txn)
        for cb in self.listeners:
            cb(txn)

    # copies ------------------------------------------------------------------------
    def snapshot(self, log: bool = True) -> "BenchMemory":
        """A detached copy (contents and faults) for a reference model."""
        m = BenchMemory(log=log, addr_bits=self.addr_bits)
        m.load_pages(self.page_items())
        m.faults = list(self.faults)
        return m

    def load_from(self, other: Memory) -> None:
        """Make the contents equal to *other*'s (faults: *other*'s if it has bench faults)."""
        self.load_pages(other.page_items())
        if isinstance(other, BenchMemory):
            self.faults = list(other.faults)

    def pages(self) -> set:
        return {k for k, _ in self.page_items()}
