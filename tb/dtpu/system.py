"""The thesis' system around the DUT, in the bench: DDR memory and the four AXI DMAs.

`PinSystem(env)` offers the trace-target primitives (tlm.core.trace.TraceTarget: write_reg,
read_reg, load_mem, read_mem, wait_irq, idle, poll_reg, check_mem) over the pins, with the
same register space as the TLM system (tlm/dtpu/system.py, contract.WINDOWS): offsets in
the DTPU window go to the DUT's AXI4-Lite port; the DMA windows are bench models whose
registers are tlm.dtpu.dma.DmaChannel and whose engines move DDR bytes (a tlm Memory)
through the bench's AxiStreamSource of an argument, or from its AxiStreamSink (paused while
no S2MM transfer is armed). The interrupt is the OR of the DMA interrupts and the DUT's irq.

Each primitive exists as a coroutine (`a*`) and as a blocking call for code that runs in a
cocotb bridge thread: the host library (tlm.dtpu.host.run_system) drives the RTL through
this object unchanged (`await bridge(host.run_system)(plan, pinsys)`).
"""
from __future__ import annotations

import cocotb
import numpy as np
from cocotb.task import resume
from cocotb.triggers import ClockCycles, RisingEdge

from tlm.core.memory import Memory, Resp, Transaction
from tlm.core.trace import POLL_MAX
from tlm.dtpu import contract as C
from tlm.dtpu.dma import DmaChannel, DmaDir

from .env import frame_of, words_of

ARG_INDEX = {a.name: a.index for a in C.IN_ARGS}
POLL_CYCLES = 4


class PinSystem:
    device = "dtpu"
    reg_bits = 32
    addr_bits = C.TRACE_ADDR_BITS
    reg_align = 4
    wait_default = 2_000_000            # cycles

    def __init__(self, env, memory: "Memory | None" = None):
        self.env = env
        self.memory = memory if memory is not None else Memory(log=False)
        self.dmas = {w.name: DmaChannel(w) for w in C.WINDOWS if w.kind != "adapter"}
        self._faults: list[str] = []
        self.env.sink.pause = True
        self._running = {name: False for name in self.dmas}

    # ---------------------------------------------------------------- helpers
    def _window(self, offset: int):
        for w in C.WINDOWS:
            if w.offset <= offset < w.offset + w.size:
                return w, offset - w.offset
        return None, None

    @property
    def irq(self) -> bool:
        return any(d.irq for d in self.dmas.values()) or bool(int(self.env.dut.irq.value))

    def _access(self, dma: DmaChannel, write: bool, addr: int, n: int, data=None):
        if addr + n > 1 << C.TRACE_ADDR_BITS:
            return "DMADECERR", None
        txn = Transaction(dma.window.name, DmaDir.s2mm if write else DmaDir.mm2s, write, addr, n)
        txn, got = self.memory.access(txn, data)
        if txn.resp == Resp.OKAY:
            return None, got
        return ("DMADECERR" if txn.resp == Resp.DECERR else "DMASLVERR"), None

    def _kick(self) -> None:
        for name, dma in self.dmas.items():
            start = dma.take_start()
            if start is not None:
                cocotb.start_soon(self._engine(name, dma, *start, dma.generation))

    async def _engine(self, name: str, dma: DmaChannel, addr: int, n: int, gen: int) -> None:
        if dma.kind == "mm2s":
            err, data = self._access(dma, False, addr, n)
            if err:
                dma.complete(0, err)
                return
            src = self.env.sources[ARG_INDEX[dma.window.arg]]
            await src.send(frame_of(np.frombuffer(data.tobytes(), "<u8")))
            await src.wait()
            if dma.generation == gen:
                dma.complete(n)
        else:
            sink = self.env.sink
            sink.pause = False
            words = words_of(await sink.recv())
            sink.pause = True
            if dma.generation != gen:
                return
            data = np.array(words, "<u8").tobytes()
            err, _ = self._access(dma, True, addr, min(n, len(data)), data[:n])
            dma.complete(min(n, len(data)), err or (None if len(data) <= n else "DMAINTERR"))

    # ---------------------------------------------------------------- primitives (async)
    async def awrite_reg(self, offset: int, value: int) -> None:
        w, local = self._window(offset)
        if w is None:
            self._faults.append(f"write to offset 0x{offset:x}: no device there")
        elif w.kind == "adapter":
            if await self.env.write(local, value) != C.RESP_OKAY:
                self._faults.append(f"SLVERR on write of 0x{value:08x} to DTPU offset 0x{local:x}")
        elif not self.dmas[w.name].write(local, value):
            self._faults.append(f"write to {w.name} offset 0x{local:x}: no such register")
        self._kick()

    async def aread_reg(self, offset: int) -> int:
        w, local = self._window(offset)
        if w is None:
            self._faults.append(f"read of offset 0x{offset:x}: no device there")
            return 0
        if w.kind == "adapter":
            v, resp = await self.env.read(local)
            if resp != C.RESP_OKAY:
                self._faults.append(f"SLVERR on read of DTPU offset 0x{local:x}")
            return v
        await RisingEdge(self.env.dut.aclk)
        v = self.dmas[w.name].read(local)
        if v is None:
            self._faults.append(f"read of {w.name} offset 0x{local:x}: no such register")
            return 0
        return v

    async def await_irq(self, max_cycles: int) -> bool:
        for _ in range(max_cycles):
            if self.irq:
                return True
            await RisingEdge(self.env.dut.aclk)
        return self.irq

    async def aidle(self) -> None:
        await ClockCycles(self.env.dut.aclk, POLL_CYCLES)

    async def apoll_reg(self, offset: int, expect: int, mask: int, max_reads: int = POLL_MAX) -> bool:
        for _ in range(max_reads):
            if (await self.aread_reg(offset)) & mask == expect:
                return True
            await self.aidle()
        return False

    # ---------------------------------------------------------------- blocking (bridge threads)
    @resume
    async def write_reg(self, offset: int, value: int) -> None:
        await self.awrite_reg(offset, value)

    @resume
    async def read_reg(self, offset: int) -> int:
        return await self.aread_reg(offset)

    @resume
    async def wait_irq(self, max_steps: int) -> bool:
        return await self.await_irq(max_steps)

    @resume
    async def idle(self) -> None:
        await self.aidle()

    @resume
    async def poll_reg(self, offset: int, expect: int, mask: int, max_reads: int = POLL_MAX) -> bool:
        return await self.apoll_reg(offset, expect, mask, max_reads)

    def load_mem(self, addr: int, data: bytes) -> None:
        self.memory.write(addr, data)

    def read_mem(self, addr: int, length: int) -> bytes:
        return self.memory.read(addr, length)

    def check_mem(self, addr: int, length: int) -> bytes:
        return self.read_mem(addr, length)

    def faults(self) -> list[str]:
        out, self._faults = self._faults, []
        for name, dma in self.dmas.items():
            if dma.errors:
                out.append(f"{name}: DMASR 0x{dma.sr():08x}")
        return out
