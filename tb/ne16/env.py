"""The NE16 bench environment: clock, reset, the agents on the NE16's own ports, the TLM behind
the shell's pins (DUT=tlm), the scoreboard, and a host driver that does what the pulp-nnx
driver does (acquire, program, trigger, wait for the end-of-job event, resolve jobs) and plays
traces through the pins.

Environment variables: TB_DUT (tlm: the Python model behind the shell's pins, the default;
rtl: the design's own logic, e.g. a licensee's ne16_top_wrap), NE16_PINMAP (a JSON file
{port table name: top-level name} for a design whose ports are named otherwise: every agent,
monitor and the scoreboard bind through it), NE16_TLM_SCOPE (DUT=tlm inside a wrapper: the
hierarchical name of the shell instance the model drives, e.g. "u_ne16").
"""
from __future__ import annotations

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge

from tb.agents.hwpe import HwpePeriphMaster, HwpePeriphMonitor
from tb.agents.tcdm import TcdmMemory, TcdmMonitor
from tb.core.trace_player import play
from tb.ne16.ports import MP, N_EVT
from tb.ne16.scoreboard import Ne16Scoreboard
from tlm.core.memory import Memory
from tlm.core.trace import ReplayResult, Trace
from tlm.ne16 import registers as R
from tlm.ne16.builder import Program
from tlm.ne16.trace_target import Ne16TraceTarget

OFF = R.OFFSETS
PERIOD_NS = 10
WAIT_CYCLES = 2_000_000          # wait_irq default budget (cycles)


def load_pinmap(path: "str | None" = None) -> dict:
    path = path or os.environ.get("NE16_PINMAP") or ""
    if not path:
        return {}
    with open(path) as f:
        return json.load(f)


def stall_pattern(kind: str, rng: random.Random):
    """Grant backpressure of the TCDM memory: none, random 0-3 cycles, or bursts."""
    if kind == "none":
        return lambda: 0
    if kind == "random":
        return lambda: rng.choice((0, 0, 0, 1, 2, 3))
    if kind == "always":
        return lambda: 2
    if kind == "bursty":
        state = {"n": 0}

        def f():
            state["n"] += 1
            return 6 if state["n"] % 11 == 0 else 0
        return f
    raise ValueError(f"unknown stall pattern {kind!r}")


class Ne16Env:
    # the trace player's view (tb/core/trace_player.py)
    device = Ne16TraceTarget.device
    reg_bits = Ne16TraceTarget.reg_bits
    addr_bits = Ne16TraceTarget.addr_bits
    reg_align = Ne16TraceTarget.reg_align
    wait_default = WAIT_CYCLES

    def __init__(self, dut, *, stall: str = "random", seed: int = 1, corrupt=None,
                 pinmap: "dict | None" = None, core: int = 0, dut_kind: "str | None" = None,
                 violate: "str | None" = None):
        self.dut = dut
        self.pm = pinmap if pinmap is not None else load_pinmap()
        self.sig = lambda name: getattr(dut, self.pm.get(name, name))
        self.clk = self.sig("clk_i")
        self.rst = self.sig("rst_ni")
        self.rng = random.Random(seed)
        self.memory = Memory(log=False)                      # the bench's TCDM
        self.core = core
        self.dut_kind = dut_kind or os.environ.get("TB_DUT", "tlm")
        self.pins = None
        if self.dut_kind == "tlm":
            from tb.ne16.tlm_pins import Ne16Pins
            scope, pm = dut, self.pm
            for part in filter(None, os.environ.get("NE16_TLM_SCOPE", "").split(".")):
                scope, pm = getattr(scope, part), {}       # the shell keeps the table's names
            self.pins = Ne16Pins(scope, self.clk, pm, corrupt=corrupt, violate=violate)
        self.periph = HwpePeriphMaster(dut, self.clk, pinmap=self.pm, core_id=core)
        self.periph_mon = HwpePeriphMonitor(dut, self.clk, pinmap=self.pm, reset_n=self.rst)
        self.tcdm = TcdmMemory(dut, self.clk, self.memory, ports=MP, pinmap=self.pm,
                               stall=stall_pattern(stall, self.rng), reset_n=self.rst)
        self.tcdm_mon = TcdmMonitor(dut, self.clk, ports=MP, pinmap=self.pm, reset_n=self.rst)
        self.sb = Ne16Scoreboard(dut, self.clk, self.memory, self.periph_mon, self.tcdm_mon,
                                 self.sig("evt_o"), reset_n=self.rst)
        self.events = 0                                       # end-of-job pulses not consumed
        self.events_total = 0
        self.cycles = 0

    async def start(self) -> None:
        cocotb.start_soon(Clock(self.clk, PERIOD_NS, unit="ns").start())
        self.sig("test_mode_i").value = 0
        self.rst.value = 0
        if self.pins is not None:
            cocotb.start_soon(self.pins.run())
        cocotb.start_soon(self.tcdm.run())
        cocotb.start_soon(self.sb.run())
        cocotb.start_soon(self._count())
        for _ in range(4):
            await RisingEdge(self.clk)
        self.rst.value = 1
        for _ in range(2):
            await RisingEdge(self.clk)

    async def _count(self) -> None:
        evt = self.sig("evt_o")
        while True:
            await FallingEdge(self.clk)
            self.cycles += 1
            try:
                v = int(evt.value)
            except ValueError:
                continue
            if (v >> (self.core * N_EVT)) & 1:
                self.events += 1
                self.events_total += 1

    def problems(self) -> list:
        return self.periph_mon.errors + self.tcdm_mon.errors + self.sb.errors

    # ---- host primitives (the trace target interface, async) ---------------------------------
    async def write_reg(self, offset: int, value: int) -> None:
        await self.periph.write(offset, value)

    async def read_reg(self, offset: int) -> int:
        return await self.periph.read(offset)

    def load_mem(self, addr: int, data: bytes) -> None:
        self.memory.write(addr, data)
        self.sb.load(addr, data)

    def read_mem(self, addr: int, length: int) -> bytes:
        return self.memory.read(addr, length)

    async def wait_irq(self, max_cycles: int = WAIT_CYCLES) -> bool:
        """Wait for an end-of-job event not yet consumed (one that came already counts)."""
        for _ in range(max_cycles):
            if self.events:
                self.events -= 1
                return True
            await FallingEdge(self.clk)
        return False

    async def idle(self, cycles: int = 8) -> None:
        for _ in range(cycles):
            await RisingEdge(self.clk)

    # ---- the pulp-nnx driver ------------------------------------------------------------------
    async def acquire(self) -> "int | None":
        v = await self.read_reg(OFF["ACQUIRE"])
        return None if v >= 256 else v

    async def dispatch(self, regs, start: bool = True) -> "int | None":
        job_id = await self.acquire()
        if job_id is None:
            return None
        for reg, value in zip(R.JOB_REGS, regs):
            await self.write_reg(reg.offset, value)
        await self.write_reg(OFF["TRIGGER"], 0 if start else 1)
        return job_id

    async def resolve_check(self, job_id: int) -> bool:
        last = (await self.read_reg(OFF["RUNNING_JOB"])) & 0xFF
        if last == ((job_id - 1) & 0xFF):
            return False
        return not (last == job_id and await self.read_reg(OFF["STATUS"]) != 0)

    async def resolve_wait(self, job_id: int) -> None:
        while not await self.resolve_check(job_id):
            if not await self.wait_irq():
                raise AssertionError(f"job {job_id}: no end-of-job event")

    def load(self, prog: Program) -> None:
        for addr, data in prog.loads:
            self.load_mem(addr, data)

    async def run_program(self, prog: Program):
        """Load, dispatch every job (waiting when the queue is full), resolve the last one,
        and return the output (Ho, Wo, Cout)."""
        self.load(prog)
        ids = []
        for regs in prog.jobs:
            while True:
                job_id = await self.dispatch(regs)
                if job_id is not None:
                    break
                assert await self.wait_irq(), "queue full and no end-of-job event"
            ids.append(job_id)
        await self.resolve_wait(ids[-1])
        self.events = 0
        return prog.decode_output(self.read_mem(prog.out_addr, prog.out_size))

    # ---- traces through the pins ----------------------------------------------------------------
    async def replay(self, trace: Trace) -> ReplayResult:
        """The trace through the pins: the device-neutral player (tb/core/trace_player.py)
        with this env as its adapter."""
        return await play(trace, self)

    def faults(self) -> list:
        return []
