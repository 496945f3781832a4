"""The K210 KPU TLM behind the pins of the port-only shell (DUT=tlm).

``KpuPins(dut)`` puts a ``tlm.k210_kpu.device.KPU`` behind rtl_stub/k210_kpu/k210_kpu_shell.v:

* ``s_axi`` (cocotbext-axi ``AxiSlave``): 64-bit accesses to the register window
  (0x40800000 + kpu_config_t offset) go to ``KPU.write``/``KPU.read``; accesses to the KPU
  RAM (0x40600000 or 0x80600000, 2 MiB) read and write it. Anything else, and a register
  access that is not one aligned 8-byte beat, answers SLVERR.
* ``m_axi`` (cocotbext-axi ``AxiMasterRead``): when a write to layer_argument_fifo completes a
  layer, the layer's fetches (``KPU.pending_plan``: activation, batch norm, weights, in
  bursts of dma_burst_size + 1 beats, never across 4 KiB, ARID = ``FetchChannel``) are read
  over the pins into the model's memory first; an error response reaches the model as that
  error. Then the write is handed to the model, which computes the layer; the write's B
  response waits for it (the FIFO holds the bus, as a full FIFO would).
* ``dma_out``: while ``dma_out_en`` is 1 the model's output FIFO drains to the stream, one
  64-bit word a beat (TKEEP marks the data bytes of a layer's last word, TLAST ends it);
  otherwise the words wait for fifo_data_out reads.
* ``irq`` follows ``KPU.irq``. The model has no clock: a layer's pending calc_done is
  raised when the host waits (``K210Env.host_waits``) or reads a register (the TLM's
  timing rule, tlm/k210_kpu/device.py). ``rst_n`` low replaces the model by a fresh one (registers at
  their reset values and, unlike a chip, a zeroed KPU RAM, like the scoreboard's model).

``plant=("stream", n)`` / ``plant=("ram", offset)`` flips one bit of the n-th output stream
byte / of the KPU RAM byte at `offset` after each layer: the bench's self-check that the
scoreboard catches a wrong byte.
"""
from __future__ import annotations

import cocotb
from cocotb.triggers import RisingEdge
from cocotbext.axi import AxiBus, AxiMasterRead, AxiReadBus, AxiSlave

from tb.k210_kpu.ports import BY_NAME
from tlm.core.memory import Resp
from tlm.k210_kpu.device import (AI_BASE_ADDR, AI_IO_BASE_ADDR, AI_RAM_BASE_ADDR, AI_RAM_SIZE,
                                 BEAT, KPU, bursts, phys)
from tlm.k210_kpu.registers import OFFSET

AI_SIZE_USED = 0x1000       # registers decoded by the shell's subordinate port


class AccessError(Exception):
    """Answered as SLVERR."""


def kpu_ram_offset(addr: int, length: int = 1) -> "int | None":
    """Offset in KPU RAM of a bus address in one of its two windows, else None."""
    for base in (AI_IO_BASE_ADDR, AI_RAM_BASE_ADDR):
        if base <= addr and addr + length <= base + AI_RAM_SIZE:
            return addr - base
    return None


def redirect_outputs(dut, bus, prefix: str) -> None:
    """Point a cocotbext bus's KPU-output signals at the shell's tlm_<port> variables."""
    for name, port in BY_NAME.items():
        if name.startswith(prefix + "_") and port.direction == "output":
            sig = name[len(prefix) + 1:]
            if hasattr(bus, sig):
                handle = getattr(dut, f"tlm_{name}")
                setattr(bus, sig, handle)
                bus._signals[sig] = handle          # cocotb_bus Bus.drive() goes through this map


class KpuPins:
    def __init__(self, dut, plant: "tuple | None" = None):
        self.dut = dut
        self.clk = dut.clk
        self.kpu = KPU()
        self.plant = plant
        self.planted = False
        sbus = AxiBus.from_prefix(dut, "s_axi")
        for ch, pre in ((sbus.write.aw, "s_axi"), (sbus.write.w, "s_axi"), (sbus.write.b, "s_axi"),
                        (sbus.read.ar, "s_axi"), (sbus.read.r, "s_axi")):
            redirect_outputs(dut, ch, pre)
        mbus = AxiReadBus.from_prefix(dut, "m_axi")
        for ch in (mbus.ar, mbus.r):
            redirect_outputs(dut, ch, "m_axi")
        self.slave = AxiSlave(sbus, dut.clk, dut.rst_n, target=self, reset_active_level=False)
        self.master = AxiMasterRead(mbus, dut.clk, dut.rst_n, reset_active_level=False)
        for name in ("dma_out_tvalid", "dma_out_tlast", "dma_out_tdata", "dma_out_tkeep", "irq"):
            getattr(dut, f"tlm_{name}").value = 0
        self._task = cocotb.start_soon(self._run())

    # ---- s_axi target (cocotbext AxiSlave calls these) --------------------------------------
    async def write(self, address: int, data: bytes) -> None:
        ram = kpu_ram_offset(address, len(data))
        if ram is not None:
            self.kpu.memory.write(AI_RAM_BASE_ADDR + ram, data)
            return
        off = address - AI_BASE_ADDR
        if not 0 <= off < AI_SIZE_USED or off % BEAT or len(data) != BEAT:
            raise AccessError(f"write 0x{address:08x}+{len(data)}")
        value = int.from_bytes(bytes(data), "little")
        if off == OFFSET["layer_argument_fifo"] and self.kpu.completes_layer():
            await self._prefetch(self.kpu.pending_plan(value))
        taken = self.kpu.layers_taken
        self.kpu.write(off, value)
        if self.plant and self.plant[0] == "ram" and self.kpu.layers_taken != taken:
            a = AI_RAM_BASE_ADDR + self.plant[1]
            self.kpu.memory.write(a, bytes([self.kpu.memory.read(a, 1)[0] ^ 0x01]))
            self.planted = True

    async def read(self, address: int, length: int) -> bytes:
        ram = kpu_ram_offset(address, length)
        if ram is not None:
            return self.kpu.memory.read(AI_RAM_BASE_ADDR + ram, length)
        off = address - AI_BASE_ADDR
        if not 0 <= off < AI_SIZE_USED or off % BEAT or length != BEAT:
            raise AccessError(f"read 0x{address:08x}+{length}")
        return self.kpu.read(off).to_bytes(BEAT, "little")

    async def _prefetch(self, plan) -> None:
        mem = self.kpu.memory
        mem.clear_faults()
        burst = (plan.la.dma_burst_size + 1) * BEAT
        for ch, addr, n in plan.fetches:
            for a, m in bursts(phys(addr), n, burst):
                resp = await self.master.read(a, m, arid=int(ch))
                if int(resp.resp) != 0:
                    mem.inject_fault(a, a + m, Resp(int(resp.resp)), "r")
                else:
                    mem.write(a, bytes(resp.data))

    # ---- stream and interrupt ------------------------------------------------------------------
    async def _run(self) -> None:
        dut = self.dut
        cur = None
        sent = 0                                   # stream bytes presented so far
        in_reset = None
        while True:
            await RisingEdge(self.clk)
            if not dut.rst_n.value:
                if in_reset is False:
                    self.kpu = KPU()           # a fresh model (KPU RAM zero, as the scoreboard's)
                in_reset = True
                cur = None
                dut.tlm_dma_out_tvalid.value = 0
                dut.tlm_irq.value = 0
                sent = 0
                continue
            in_reset = False
            if cur is not None and dut.dma_out_tready.value:
                cur = None
            if cur is None and dut.dma_out_en.value:
                cur = self.kpu.pop_output()
                if cur is not None:
                    word, n, last = cur
                    if self.plant and self.plant[0] == "stream" and sent <= self.plant[1] < sent + n:
                        word ^= 1 << (8 * (self.plant[1] - sent))
                        self.planted = True
                    sent += n
                    dut.tlm_dma_out_tdata.value = word
                    dut.tlm_dma_out_tkeep.value = (1 << n) - 1
                    dut.tlm_dma_out_tlast.value = int(last)
            dut.tlm_dma_out_tvalid.value = int(cur is not None)
            dut.tlm_irq.value = int(self.kpu.irq)
