"""The DTPU bench environment: clock, reset, cocotbext-axi agents, monitors, scoreboard.

`DtpuEnv(dut)` binds module `dtpu` by its port names (contract.top_ports): an AxiLiteMaster
on `s_axi`, one AxiStreamSource a input argument (`s_axis_0..2`), an AxiStreamSink on
`m_axis_0`, and a passive AxiStreamMonitor on each of the four streams that feeds the
scoreboard (tb/dtpu/scoreboard.py) with what the DUT accepted and sent. With TB_DUT=tlm
the TLM is started behind the shell's pins (tb/dtpu/tlm_pins.py). The configuration is
NPU_CONFIG (set by the bench runner, tb/core/run.py), else DTPU_CONFIG (contract.CONFIGS;
default contract.DEFAULT_CONFIG). Functional coverage is the process's model
(tb.core.coverage.current), written to TB_COVERAGE_DIR for the runner's summary, and to
DTPU_COVERAGE_FILE when set.

Backpressure: `set_pauses(kind, probability, seed)` installs a seeded pause generator on
the sources ("sources"), on the sink ("sink"), or both ("all"); the seed is logged.
"""
from __future__ import annotations

import logging
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import (AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame, AxiStreamMonitor,
                           AxiStreamSink, AxiStreamSource)

from tb.core import coverage
from tlm.dtpu import contract as C

from .coverage import DtpuCoverage
from .scoreboard import Scoreboard
from .tlm_pins import TlmPins

CLOCK_NS = 10


def words_of(frame) -> list[int]:
    data = bytes(frame.tdata)
    if len(data) % 8:
        raise AssertionError(f"stream frame of {len(data)} bytes is not whole 64-bit beats")
    return [int(x) for x in np.frombuffer(data, "<u8")]


def frame_of(words) -> AxiStreamFrame:
    return AxiStreamFrame(np.asarray(words, "<u8").tobytes())


_COVERAGE: dict[str, DtpuCoverage] = {}


def coverage_model(cfg: C.Config) -> DtpuCoverage:
    """The process's coverage model of a configuration (kept over the tests of a run; the
    first configuration's is the process model of tb.core.coverage, which the runner merges)."""
    if cfg.name not in _COVERAGE:
        _COVERAGE[cfg.name] = (DtpuCoverage(cfg) if _COVERAGE
                               else coverage.current(lambda: DtpuCoverage(cfg)))
    return _COVERAGE[cfg.name]


def _pauses(p: float, rng: random.Random):
    while True:
        yield rng.random() < p


class DtpuEnv:
    def __init__(self, dut, config: "str | None" = None):
        self.dut = dut
        self.log = logging.getLogger("cocotb.dtpu")
        self.config = (config or os.environ.get("NPU_CONFIG") or os.environ.get("DTPU_CONFIG")
                       or C.DEFAULT_CONFIG)
        self.cfg = C.CONFIGS[self.config]
        self.dut_kind = os.environ.get("TB_DUT", "rtl")
        self.coverage = coverage_model(self.cfg)
        self.sb = Scoreboard(self.cfg, self.coverage, self.log)
        self.cycle = 0
        cocotb.start_soon(Clock(dut.aclk, CLOCK_NS, unit="ns").start())
        self.pins = TlmPins(dut, self.config).start() if self.dut_kind == "tlm" else None
        clk, rst = dut.aclk, dut.aresetn
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi"), clk, rst, reset_active_level=False)
        self.sources = [AxiStreamSource(AxiStreamBus.from_prefix(dut, a.port), clk, rst,
                                        reset_active_level=False) for a in C.IN_ARGS]
        self.sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_0"), clk, rst,
                                  reset_active_level=False)
        self.in_mons = [AxiStreamMonitor(AxiStreamBus.from_prefix(dut, a.port), clk, rst,
                                         reset_active_level=False) for a in C.IN_ARGS]
        self.out_mon = AxiStreamMonitor(AxiStreamBus.from_prefix(dut, "m_axis_0"), clk, rst,
                                        reset_active_level=False)
        for agent in [self.axil.write_if, self.axil.read_if, *self.sources, self.sink, *self.in_mons,
                      self.out_mon]:
            agent.log.setLevel(logging.WARNING)      # cocotbext-axi logs every transfer at INFO
        for a, mon in zip(C.IN_ARGS, self.in_mons):
            cocotb.start_soon(self._watch_in(a.index, mon))
        cocotb.start_soon(self._watch_out())
        cocotb.start_soon(self._sample_pins())
        self.log.info("dtpu bench: config %s, DUT=%s", self.config, self.dut_kind)

    # ---------------------------------------------------------------- background
    async def _watch_in(self, arg: int, mon) -> None:
        while True:
            frame = await mon.recv()
            self.sb.on_in_packet(arg, words_of(frame))

    async def _watch_out(self) -> None:
        while True:
            frame = await self.out_mon.recv()
            self.sb.on_out_packet(words_of(frame))

    async def _sample_pins(self) -> None:
        d = self.dut
        ports = [(a.name, getattr(d, f"{a.port}_tvalid"), getattr(d, f"{a.port}_tready")) for a in C.IN_ARGS]
        mv, mr = d.m_axis_0_tvalid, d.m_axis_0_tready
        fifo = self.coverage["fifo"]
        while True:
            await RisingEdge(d.aclk)
            self.cycle += 1
            for name, v, r in ports:
                if v.value.is_resolvable and r.value.is_resolvable and int(v.value) and not int(r.value):
                    fifo.sample(f"{name}_full")
            if mv.value.is_resolvable and mr.value.is_resolvable and int(mv.value) and not int(mr.value):
                fifo.sample("sink_backpressure")

    # ---------------------------------------------------------------- control
    async def reset(self, cycles: int = 5) -> None:
        self.dut.aresetn.value = 0
        await ClockCycles(self.dut.aclk, cycles)
        self.dut.aresetn.value = 1
        self.sb.reset()
        await ClockCycles(self.dut.aclk, 2)

    def set_pauses(self, kind: str, p: float, seed: int) -> None:
        """Seeded random backpressure: kind 'sources', 'sink', 'all' or 'none'."""
        self.log.info("backpressure %s p=%.2f seed=%d", kind, p, seed)
        rng = random.Random(seed)
        for s in self.sources:
            if kind in ("sources", "all"):
                s.set_pause_generator(_pauses(p, random.Random(rng.random())))
            else:
                s.clear_pause_generator()
        if kind in ("sink", "all"):
            self.sink.set_pause_generator(_pauses(p, random.Random(rng.random())))
        else:
            self.sink.clear_pause_generator()

    async def write(self, offset: "int | str", value: int, strb: int = 0xF) -> int:
        off = C.OFFSET[offset] if isinstance(offset, str) else offset
        data = int(value & 0xFFFFFFFF).to_bytes(4, "little")
        if strb == 0xF:
            r = await self.axil.write(off, data)
        else:      # a partial strobe: cocotbext-axi derives WSTRB from the byte span
            lanes = [k for k in range(4) if strb >> k & 1]
            r = await self.axil.write(off + lanes[0], data[lanes[0]:lanes[-1] + 1])
        resp = int(r.resp)
        self.sb.on_write(off, value & 0xFFFFFFFF, strb, resp)
        return resp

    async def read(self, offset: "int | str", quiet: bool = False) -> tuple[int, int]:
        off = C.OFFSET[offset] if isinstance(offset, str) else offset
        r = await self.axil.read(off, 4)
        value, resp = int.from_bytes(bytes(r.data), "little"), int(r.resp)
        self.sb.on_read(off, value, resp, quiet)
        if quiet and off == C.OFFSET["OARG0_STATUS"]:
            f = {x.name: x for x in C.OARG_STATUS_FIELDS}
            if f["EMPTY"].get(value):
                self.coverage["fifo"].sample("OUTFIFO_empty")
        if off == C.OFFSET["OARG0_STATUS"] and {x.name: x for x in C.OARG_STATUS_FIELDS}["FULL"].get(value):
            self.coverage["fifo"].sample("OUTFIFO_full")
        return value, resp

    async def cmd(self, name: str, mask: int = 0) -> int:
        return await self.write("CMD", C.cmd_word(name, mask))

    async def send(self, arg: int, words) -> None:
        await self.sources[arg].send(frame_of(words))

    async def recv(self) -> list[int]:
        return words_of(await self.sink.recv())

    async def init(self, rqt_en: int = 0x7, length_mode: int = 0, length: int = 0) -> None:
        """The library's Init_p sequence (soft reset, request enables, output length)."""
        for off, v in (("CTRL", 1), ("CTRL", 0), ("IARG_RQT_EN", rqt_en),
                       ("OARG_LENGTH_MODE", length_mode), ("OARG0_LENGTH", length),
                       ("ISCALAR_RQT_EN", 0), ("OSCALAR_RQT_EN", 0), ("OARG0_TDEST", 0)):
            assert await self.write(off, v) == C.RESP_OKAY, off

    async def drain(self, timeout_cycles: int = 400_000) -> None:
        """Wait until the system is quiet: the sources sent everything, the model has no
        command waiting, every predicted output word came, and the DUT's STATUS says no run
        is active or pending and its command queue is empty. Received packets are dropped
        from the sink (the scoreboard saw them through the monitor)."""
        st = {f.name: f for f in C.STATUS_FIELDS}
        for _ in range(timeout_cycles):
            while not self.sink.empty():
                self.sink.recv_nowait()
            if (all(s.idle() for s in self.sources) and not self.sb.ref.cmdq
                    and self.sb.outstanding() == 0):
                v, _ = await self.read("STATUS")         # not compared: timing-dependent
                if st["IDLE"].get(v) and not st["START"].get(v) and st["CMDQ"].get(v) == 0:
                    break
            await RisingEdge(self.dut.aclk)
        else:
            raise AssertionError(f"not quiet after {timeout_cycles} cycles: {self.sb.outstanding()} "
                                 f"predicted words outstanding, {len(self.sb.ref.cmdq)} model commands waiting")
        await ClockCycles(self.dut.aclk, 4)
        while not self.sink.empty():
            self.sink.recv_nowait()

    async def quiet_status(self) -> int:
        """Drain, then read and compare STATUS and every argument status word."""
        await self.drain()
        for n in range(len(C.IN_ARGS)):
            await self.read(f"IARG{n}_STATUS", quiet=True)
        await self.read("OARG0_STATUS", quiet=True)
        v, _ = await self.read("STATUS", quiet=True)
        return v

    def finish(self) -> None:
        for line in self.coverage.summary():
            self.log.info("coverage %s", line)
        path = os.environ.get("DTPU_COVERAGE_FILE")
        if path:
            self.coverage.save(path)
        coverage.flush()
        self.sb.check()
