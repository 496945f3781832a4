"""The K210 scoreboard: a second TLM (``tlm.k210_kpu.device.KPU``) as predictor.

The bench's host agent tells it what it does (register writes, memory loads) and what it
saw (register read data, KPU RAM read data, the interrupt pin), the output-stream monitor
hands it every received frame, and the system-memory subordinate every read beat. It checks

* every register read (fifo_data_out words included) against the model;
* every KPU RAM byte read back;
* the interrupt pin where the host samples it;
* every output-stream frame: its bytes (TKEEP applied) and its end (TLAST) against the
  model's output FIFO;
* the table fetch of every layer: the 8-byte words the DUT read on m_axi, and their ARID,
  equal the words of the model's fetch transactions (nothing missing, nothing stray).

Mismatches are collected in ``errors`` (one line each); ``check()`` raises with them.
"""
from __future__ import annotations

from tlm.k210_kpu.device import KPU, phys

BEAT = 8


def _words(addr: int, length: int) -> range:
    return range(addr // BEAT, (addr + length - 1) // BEAT + 1)


class Scoreboard:
    def __init__(self):
        self.model = KPU()
        self.model.memory.log_enabled = True
        self.errors: list = []
        self.checks = 0
        self.frames: list = []               # received stream frames not yet compared
        self.fetch_beats: list = []          # (address, length, arid) read by the DUT on m_axi
        self._log_seen = 0
        self.stats = dict(reg_reads=0, ram_bytes=0, frames=0, fetched_layers=0, irq=0)

    def _cmp(self, ok: bool, what: str) -> None:
        self.checks += 1
        if not ok:
            self.errors.append(what)

    # ---- host side ------------------------------------------------------------------------
    def write_reg(self, offset: int, value: int) -> None:
        self.model.write(offset, value)
        self.compare_fetches()
        self.drain_stream()

    def read_reg(self, offset: int, dut_value: int) -> int:
        expect = self.model.read(offset)
        self.stats["reg_reads"] += 1
        self._cmp(dut_value == expect, f"register 0x{offset:02x}: DUT read 0x{dut_value:016x}, "
                                       f"model 0x{expect:016x}")
        return expect

    def load(self, addr: int, data: bytes) -> None:
        self.model.bus_write(addr, data)

    def mem_read(self, addr: int, dut_bytes: bytes) -> None:
        expect = self.model.bus_read(addr, len(dut_bytes))
        self.stats["ram_bytes"] += len(dut_bytes)
        if dut_bytes != expect:
            i = next(i for i, (a, b) in enumerate(zip(dut_bytes, expect)) if a != b)
            self._cmp(False, f"KPU RAM 0x{addr + i:08x}: DUT 0x{dut_bytes[i]:02x}, model 0x{expect[i]:02x} "
                             f"({sum(a != b for a, b in zip(dut_bytes, expect))} bytes differ)")
        else:
            self._cmp(True, "")

    def irq(self, level: int) -> None:
        self.stats["irq"] += 1
        self._cmp(bool(level) == self.model.irq,
                  f"irq pin {int(level)}, model {int(self.model.irq)} (interrupt_raw 0x{self.model.raw:x})")

    # ---- monitors -----------------------------------------------------------------------------
    def on_frame(self, data: bytes) -> None:
        self.frames.append(bytes(data))
        self.drain_stream()

    def drain_stream(self) -> None:
        """Compare received frames with the model's output FIFO as far as it has data."""
        while self.frames:
            need = (len(self.frames[0]) + BEAT - 1) // BEAT
            if len(self.model.out_fifo) < need * BEAT:
                return
            frame = self.frames.pop(0)
            self.stats["frames"] += 1
            expect, last = b"", False
            for _ in range(need):
                word, n, last = self.model.pop_output()
                expect += word.to_bytes(BEAT, "little")[:n]
            if frame != expect:
                n = min(len(frame), len(expect))
                i = next((i for i in range(n) if frame[i] != expect[i]), n)
                where = (f"first difference at byte {i} (DUT 0x{frame[i]:02x}, model 0x{expect[i]:02x})"
                         if i < n else f"model frame {len(expect)} bytes")
                self._cmp(False, f"output stream frame of {len(frame)} bytes: {where}")
            else:
                self._cmp(last, f"output stream frame of {len(frame)} bytes ends before the model's TLAST")

    def on_fetch(self, addr: int, length: int, arid: int) -> None:
        self.fetch_beats.append((addr, length, arid))

    def compare_fetches(self) -> None:
        """After a layer: the words the DUT fetched == the words of the model's transactions."""
        log = self.model.memory.log[self._log_seen:]
        if not log and not self.fetch_beats:
            return
        self._log_seen = len(self.model.memory.log)
        self.stats["fetched_layers"] += 1
        want: dict = {}
        for t in log:
            for w in _words(t.addr, t.length):
                want[w] = int(t.channel)
        got: dict = {}
        for a, n, arid in self.fetch_beats:
            for w in _words(phys(a), n):
                got[w] = arid
        self.fetch_beats = []
        missing = sorted(set(want) - set(got))
        stray = sorted(set(got) - set(want))
        wrong = sorted(w for w in set(want) & set(got) if want[w] != got[w])
        self._cmp(not missing, f"table fetch: {len(missing)} words not read, first 0x{missing[0] * BEAT:08x}"
                  if missing else "")
        self._cmp(not stray, f"table fetch: {len(stray)} words read outside the model's fetch, "
                             f"first 0x{stray[0] * BEAT:08x}" if stray else "")
        self._cmp(not wrong, f"table fetch: ARID differs at 0x{wrong[0] * BEAT:08x} (DUT {got[wrong[0]]}, "
                             f"model {want[wrong[0]]})" if wrong else "")

    def finish(self) -> None:
        self.drain_stream()
        if self.frames:
            self._cmp(False, f"{len(self.frames)} output stream frame(s) the model did not produce")
        self.frames = []

    def check(self) -> None:
        if self.errors:
            raise AssertionError(f"scoreboard: {len(self.errors)} mismatch(es); first: "
                                 + "; ".join(self.errors[:3]))
