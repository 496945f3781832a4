"""The K210 bench environment: clock and reset, the host on ``s_axi`` (cocotbext-axi
``AxiMaster``, 64-bit), system memory on ``m_axi`` (``AxiRamRead``), the output-stream
monitor on ``dma_out`` (``AxiStreamSink``), the interrupt pin, and the scoreboard.

``K210Env`` is a trace-style host (``write_reg``, ``read_reg``, ``load_mem``, ``read_mem``,
``wait_irq``, all ``async``): the sequences of ``tlm.k210_kpu.driver`` and the trace player
run on it. System memory is loaded through the memory model's back door (the bench's
AxiRamRead); KPU RAM through the KPU's own AXI port, as the CPU or the input DMA would.
With ``TB_DUT=tlm`` (the only DUT so far) the TLM sits behind the shell (tb/k210_kpu/tlm_pins.py).
"""
from __future__ import annotations

import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import (AxiBus, AxiMaster, AxiRamRead, AxiReadBus, AxiResp, AxiStreamBus,
                           AxiStreamSink)

from tb.k210_kpu.scoreboard import Scoreboard
from tb.k210_kpu.tlm_pins import kpu_ram_offset
from tlm.k210_kpu.device import AI_BASE_ADDR, phys

CLOCK_NS = 10


class LoggedRamRead(AxiRamRead):
    """System memory: every read beat is reported to the scoreboard."""

    def __init__(self, *args, on_read=None, **kw):
        super().__init__(*args, **kw)
        self.on_read = on_read
        self._arid = 0

    async def _read(self, address, length):
        if self.on_read is not None:
            self.on_read(address, length, self._arid)
        return self.read(address % self.size, length)


class K210Env:
    def __init__(self, dut, plant=None):
        self.dut = dut
        self.sb = Scoreboard()
        self.dut_kind = os.environ.get("TB_DUT", "tlm")
        cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
        dut.rst_n.value = 0
        dut.dma_out_en.value = 0
        self.pins = None
        if self.dut_kind == "tlm":
            from tb.k210_kpu.tlm_pins import KpuPins
            self.pins = KpuPins(dut, plant=plant)
        elif self.dut_kind != "tlm":
            raise RuntimeError(f"TB_DUT={self.dut_kind}: the K210 KPU has no RTL stand-in (DUT=tlm only)")
        self.axi = AxiMaster(AxiBus.from_prefix(dut, "s_axi"), dut.clk, dut.rst_n, reset_active_level=False)
        self.sysmem = LoggedRamRead(AxiReadBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst_n,
                                    reset_active_level=False, size=2 ** 32, on_read=self._on_fetch)
        self.sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "dma_out"), dut.clk, dut.rst_n,
                                  reset_active_level=False)
        cocotb.start_soon(self._arid_monitor())
        cocotb.start_soon(self._stream_monitor())

    def _on_fetch(self, addr, length, arid):
        self.sb.on_fetch(addr, length, arid)

    async def _arid_monitor(self):
        """AxiRamRead does not pass ARID to _read: note it at each AR handshake (one burst in
        flight at a time from this manager)."""
        dut = self.dut
        while True:
            await RisingEdge(dut.clk)
            if dut.m_axi_arvalid.value and dut.m_axi_arready.value:
                self.sysmem._arid = int(dut.m_axi_arid.value)

    async def _stream_monitor(self):
        while True:
            frame = await self.sink.recv()
            self.sb.on_frame(bytes(frame.tdata))

    async def restart(self, plant=None) -> None:
        """A fresh scoreboard and a reset DUT (the next trace or run starts clean)."""
        self.sb = Scoreboard()
        if self.pins is not None:
            self.pins.plant, self.pins.planted = plant, False
        self.stream(False)
        await self.reset()

    async def reset(self, cycles: int = 5) -> None:
        self.dut.rst_n.value = 0
        await ClockCycles(self.dut.clk, cycles)
        self.dut.rst_n.value = 1
        await ClockCycles(self.dut.clk, 2)

    def stream(self, enabled: bool) -> None:
        """Route the output FIFO to dma_out (True) or leave it to fifo_data_out reads."""
        self.dut.dma_out_en.value = int(enabled)

    # ---- the host ---------------------------------------------------------------------------
    async def write_reg(self, offset: int, value: int) -> None:
        resp = await self.axi.write(AI_BASE_ADDR + offset, int(value).to_bytes(8, "little"))
        self.sb._cmp(resp.resp == AxiResp.OKAY, f"write 0x{offset:02x}: {resp.resp.name}")
        self.sb.write_reg(offset, value)

    async def read_reg(self, offset: int) -> int:
        resp = await self.axi.read(AI_BASE_ADDR + offset, 8)
        self.sb._cmp(resp.resp == AxiResp.OKAY, f"read 0x{offset:02x}: {resp.resp.name}")
        value = int.from_bytes(bytes(resp.data), "little")
        self.sb.read_reg(offset, value)
        return value

    async def load_mem(self, addr: int, data: bytes) -> None:
        data = bytes(data)
        if kpu_ram_offset(addr, len(data)) is not None:
            resp = await self.axi.write(addr, data)
            self.sb._cmp(resp.resp == AxiResp.OKAY, f"KPU RAM write 0x{addr:08x}: {resp.resp.name}")
        else:
            self.sysmem.write(phys(addr), data)
        self.sb.load(addr, data)

    async def read_mem(self, addr: int, length: int) -> bytes:
        if kpu_ram_offset(addr, length) is not None:
            resp = await self.axi.read(addr, length)
            data = bytes(resp.data)
            self.sb.mem_read(addr, data)
            return data
        return bytes(self.sysmem.read(phys(addr), length))

    async def settle(self, cycles: int = 3) -> None:
        await ClockCycles(self.dut.clk, cycles)

    def host_waits(self) -> None:
        """The host starts waiting (wait_irq, a poll pause): the models raise a pending
        calc_done if the line is low (``KPU.advance``, the TLM's one timing rule). The
        scoreboard's model always; with DUT=tlm the model behind the pins too (it has no
        clock of its own; an RTL DUT raises calc_done when it is done)."""
        for kpu in (self.sb.model, self.pins.kpu if self.pins is not None else None):
            if kpu is not None and not kpu.irq:
                kpu.advance()

    async def wait_irq(self, max_cycles: int = 100000) -> bool:
        self.host_waits()
        for _ in range(max_cycles):
            if self.dut.irq.value:
                break
            await RisingEdge(self.dut.clk)
        await self.settle()
        level = int(self.dut.irq.value)
        self.sb.irq(level)
        return bool(level)

    async def check_irq(self) -> None:
        await self.settle()
        self.sb.irq(int(self.dut.irq.value))

    async def finish(self, idle_cycles: int = 200) -> None:
        """Let the stream drain, then fail on any scoreboard mismatch."""
        await ClockCycles(self.dut.clk, idle_cycles)
        self.sb.finish()
        self.sb.check()
