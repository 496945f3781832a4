"""The NE16 TLM as the bench's predictor, for any DUT with the NE16's pins.

`Ne16Scoreboard` keeps its own `tlm.ne16.device.Ne16` with its own memory (every back-door
load of the bench is mirrored into it with `load`). It listens to the monitors:
* each peripheral transfer (HwpePeriphMonitor) is applied to the model in order: writes as
  written, reads as reads (an ACQUIRE read acquires in the model too) whose data must equal
  what the DUT answered;
* each end-of-job pulse on evt_o makes the model run its job to the end; then every byte the
  model wrote in that job must be in the bench memory, and every byte the DUT wrote on the
  TCDM ports (TcdmMonitor) since the previous end must be one the model wrote, with the
  model's value ("write containment");
* a DUT end-of-job event without a model job, or a model job that does not end within the
  budget, is an error.
The model runs a job only when the DUT's event arrives, so tensors must not be reloaded
behind a job in flight (the tests lay jobs out in disjoint memory). Ordering within a cycle:
at each falling edge (after every monitor has sampled) the transfers answered this cycle are
applied first, then the end-of-job pulses, then the TCDM writes.
"""
from __future__ import annotations

import logging

from cocotb.triggers import FallingEdge, ReadOnly

from tb.ne16.coverage import current as coverage
from tb.ne16.ports import N_CORES, N_EVT
from tlm.core.memory import Memory
from tlm.ne16 import registers as R
from tlm.ne16.device import Ne16
from tlm.ne16.engine import Stream
from tlm.ne16.job import JobConfig
from tb.agents.pins import pin_int

BUDGET = 1 << 22                 # model steps per job (a job of the bench is far smaller)



class Ne16Scoreboard:
    def __init__(self, dut, clock, bench_memory, periph_monitor, tcdm_monitor, evt_handle,
                 reset_n=None):
        self.dut = dut
        self.clock = clock
        self.bench = bench_memory
        self.evt = evt_handle
        self.reset_n = reset_n
        self.log = logging.getLogger("cocotb.ne16.scoreboard")
        self.cov = coverage()
        self.errors: list[str] = []
        self.jobs_checked = 0
        self.bytes_checked = 0
        self._periph: list = []
        self._tcdm: list = []
        self.model = Ne16(Memory(log=True))
        self.model.listeners.append(self._on_model)
        self._written: dict = {}              # address -> byte the DUT wrote since the last end
        periph_monitor.add_callback(self._periph.append)
        tcdm_monitor.add_callback(self._tcdm.append)

    def load(self, addr: int, data: bytes) -> None:
        self.model.memory.write(addr, data)

    def error(self, text: str) -> None:
        self.errors.append(text)
        self.log.error(text)

    def _on_model(self, event: str, **d) -> None:
        if event == "start":
            self.cov.sample_job(JobConfig.from_regs(self.model.regs(d["ctx"])))
        elif event == "end":
            self.cov.sample_outcome(d["outcome"])

    def reset(self) -> None:
        """rst_ni asserted: the DUT's state is gone; so is the model's (memory kept)."""
        mem = self.model.memory
        self.model = Ne16(mem)
        self.model.listeners.append(self._on_model)
        self._periph.clear()
        self._tcdm.clear()
        self._written.clear()

    async def run(self) -> None:
        while True:
            await FallingEdge(self.clock)
            await ReadOnly()
            if self.reset_n is not None and pin_int(self.reset_n) != 1:
                self.reset()
                continue
            for t in self._periph:
                self._transfer(t)
            self._periph.clear()
            evt = pin_int(self.evt)
            for core in range(N_CORES):
                if (evt >> (core * N_EVT)) & 1:
                    self._job_end()
            for acc in self._tcdm:
                self.cov.sample_tcdm(acc.write, bin(acc.be).count("1"), acc.stall)
                if acc.write:
                    for a, b in acc.bytes_enabled():
                        self._written[a & 0xFFFFFFFF] = b
            self._tcdm.clear()

    def _transfer(self, t) -> None:
        off = t.addr & (R.WINDOW - 1)
        self.cov.sample_periph(t.write, off)
        if t.write:
            self.model.periph_write(off, t.data, t.be)
            return
        want = self.model.periph_read(off)
        if t.data != want:
            reg = R.by_offset(off & ~3)
            self.error(f"cycle {t.cycle}: read of {reg.name if reg else hex(off)}: DUT 0x{t.data:08x}, "
                       f"model 0x{want:08x}")

    def _job_end(self) -> None:
        m = self.model
        if m.running is None and not m.events_pending:
            self.error("the DUT raised an end-of-job event, the model has no job running")
            return
        mark = len(m.memory.log)
        if not m.wait_event(BUDGET):
            self.error(f"the model's job did not end within {BUDGET} steps")
            return
        expected: dict = {}
        for txn in m.memory.log[mark:]:
            if txn.write and txn.channel == Stream.outfeat:
                for i, b in enumerate(m.memory.read(txn.addr, txn.length)):
                    expected[(txn.addr + i) & 0xFFFFFFFF] = b
        # every byte the model wrote is in the bench memory
        bad = [(a, e, self.bench.read(a, 1)[0]) for a, e in sorted(expected.items())
               if self.bench.read(a, 1)[0] != e]
        if bad:
            a, e, g = bad[0]
            self.error(f"job {m.history[-1].job_id}: output byte at 0x{a:08x} is 0x{g:02x}, the model "
                       f"wrote 0x{e:02x} ({len(bad)} of {len(expected)} bytes differ)")
        # every byte the DUT wrote is one the model wrote, with its value
        stray = [(a, b) for a, b in sorted(self._written.items()) if expected.get(a) != b]
        if stray:
            a, b = stray[0]
            what = ("outside the model's output" if a not in expected
                    else f"0x{b:02x} where the model wrote 0x{expected[a]:02x}")
            self.error(f"job {m.history[-1].job_id}: the DUT wrote 0x{a:08x} {what} "
                       f"({len(stray)} bytes)")
        self._written.clear()
        self.jobs_checked += 1
        self.bytes_checked += len(expected)
