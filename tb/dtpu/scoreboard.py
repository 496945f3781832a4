"""The TLM as the DTPU bench's scoreboard.

`Scoreboard` keeps a reference `tlm.dtpu.adapter.Dtpu` and feeds it what the DUT was seen
to accept, in the order it was seen: every completed AXI4-Lite write (`on_write`), every
input packet completed on an AXI4-Stream target (`on_in_packet`, from a monitor). The model
runs at once, so it predicts each output packet before the DUT sends it; every packet the
DUT sends (`on_out_packet`) must be the next predicted one, word for word, TLAST included.

AXI4-Lite responses are compared on every access. Read data are compared for the
registers whose value does not depend on timing (configuration registers, RAZ/WI words,
CMD, unmapped words); STATUS and the argument status words only when the caller says the
system is quiet (every predicted output received, nothing in flight), where the model's
"everything already ran" state is the DUT's too.

A mismatch is recorded (`errors`, first one logged) and `check()` raises it at the end.
"""
from __future__ import annotations

import logging

import numpy as np

from tlm.dtpu import contract as C
from tlm.dtpu.adapter import CmdQueueFull, Dtpu

_VOLATILE = {"STATUS", "IARG_STATUS", "OARG_STATUS"}


class Scoreboard:
    def __init__(self, cfg: C.Config, coverage=None, log: "logging.Logger | None" = None):
        self.cfg, self.coverage = cfg, coverage
        self.log = log or logging.getLogger("dtpu.scoreboard")
        self.errors: list[str] = []
        self.received_packets = 0
        self.received_words = 0
        self.reset()

    def reset(self) -> None:
        """A hardware reset of the DUT: a fresh reference."""
        self.ref = Dtpu(self.cfg)
        if self.coverage is not None:
            self.ref.events.append(self.coverage.on_event)
        self._pending: list[int] = []           # predicted words not yet seen, with TLAST flags
        self._pending_last: list[bool] = []

    def _error(self, msg: str) -> None:
        if not self.errors:
            self.log.error("scoreboard: %s", msg)
        self.errors.append(msg)

    # ---------------------------------------------------------------- inputs
    def on_write(self, offset: int, value: int, strb: int, resp: int) -> None:
        try:
            want = self.ref.axil_write(offset, value, strb)
        except CmdQueueFull as e:
            self._error(f"write 0x{value:08x} to 0x{offset:04x} completed on the DUT, model: {e}")
            return
        if want != resp:
            self._error(f"write 0x{value:08x} to 0x{offset:04x}: BRESP {resp}, model {want}")

    def on_read(self, offset: int, value: int, resp: int, quiet: bool = False) -> None:
        want, want_resp = self.ref.axil_read(offset)
        if want_resp != resp:
            self._error(f"read of 0x{offset:04x}: RRESP {resp}, model {want_resp}")
            return
        w = C.WORDS.get(offset)
        volatile = w is not None and w.exists and w.reg.name in _VOLATILE
        if (quiet or not volatile) and value != want:
            name = w.name if w else f"0x{offset:04x}"
            self._error(f"read of {name}: 0x{value:08x}, model 0x{want:08x}")

    def on_in_packet(self, arg: int, words) -> None:
        ws = [int(x) for x in np.asarray(words, np.uint64).reshape(-1)]
        try:
            self.ref.stream_packet(arg, ws)
        except RuntimeError as e:
            self._error(f"{C.IN_ARGS[arg].port}: the DUT took a packet of {len(ws)} words the model "
                        f"cannot: {e}")

    # ---------------------------------------------------------------- outputs
    def _collect(self) -> None:
        while self.ref.out:
            w, last = self.ref.out_pop()
            self._pending.append(w)
            self._pending_last.append(last)

    def on_out_packet(self, words) -> None:
        self._collect()
        ws = [int(x) for x in np.asarray(words, np.uint64).reshape(-1)]
        n = len(ws)
        if n > len(self._pending):
            self._error(f"output packet of {n} words, model predicts only {len(self._pending)} "
                        f"more words: {[hex(x) for x in ws[:4]]}...")
            self._pending.clear()
            self._pending_last.clear()
            return
        exp, lasts = self._pending[:n], self._pending_last[:n]
        del self._pending[:n], self._pending_last[:n]
        self.received_packets += 1
        self.received_words += n
        if ws != exp:
            i = next(k for k in range(n) if ws[k] != exp[k])
            self._error(f"output packet {self.received_packets}: word {i} is 0x{ws[i]:016x}, model "
                        f"0x{exp[i]:016x} ({sum(a != b for a, b in zip(ws, exp))} of {n} words differ)")
        elif not lasts[-1] or any(lasts[:-1]):
            cut = [k for k, x in enumerate(lasts) if x]
            self._error(f"output packet {self.received_packets} of {n} words: the model ends packets "
                        f"after words {cut}")
        if self.coverage is not None:
            mode = self.ref.reg("OARG_LENGTH_MODE") & 1 and self.ref.reg("OARG0_LENGTH")
            self.coverage["length_mode"].sample("software" if mode and n == self.ref.reg("OARG0_LENGTH")
                                                else "hardware")

    def outstanding(self) -> int:
        """Predicted output words the DUT has not sent yet."""
        self._collect()
        return len(self._pending)

    def check(self, drained: bool = True) -> None:
        if drained and self.outstanding():
            self._error(f"{self.outstanding()} predicted output words never came")
        if self.errors:
            raise AssertionError(f"{len(self.errors)} scoreboard mismatch(es); first: {self.errors[0]}")
