"""The DTPU TLM behind the pins of the port-only shell (DUT=tlm).

`TlmPins(dut, config)` is one coroutine that makes `tlm.dtpu.adapter.Dtpu` look like the
stand-in at the pins of module `dtpu` (rtl_stub/dtpu/dtpu_shell.v, ports of
contract.top_ports): an AXI4-Lite completer (one write and one read at a time; a CMD write
to a full queue waits for room, as the RTL does), AXI4-Stream targets whose TREADY is
`stream_ready(n)`, the initiator of the output FIFO, and `irq`. aresetn low rebuilds the
model (a hardware reset).

Timing: inputs are sampled at the falling clock edge (the bench's drivers change them
after the rising edge); a handshake whose VALID and READY were both high then is applied
to the model; outputs are driven right after the rising edge from the model's new state.
Outputs are written through the shell's `tlm_<port>` variables.
"""
from __future__ import annotations

import cocotb
from cocotb.triggers import FallingEdge, RisingEdge

from tlm.dtpu import contract as C
from tlm.dtpu.adapter import Dtpu


class TlmPins:
    def __init__(self, dut, config: str = C.DEFAULT_CONFIG):
        self.dut, self.config = dut, config
        self.model = Dtpu(config)
        self._aw = self._w = None            # captured AW address / (W data, strobe)
        self._b = self._r = None             # pending B response / (R data, response)
        self._task = None
        self._tready = {a.index: False for a in C.IN_ARGS}   # what the pins show now
        self._tvalid = False
        self.listeners = []                  # callables(model) after a rebuild

    def _out(self, name: str, value: int) -> None:
        getattr(self.dut, f"tlm_{name}").value = int(value)

    def _in(self, name: str) -> int:
        v = getattr(self.dut, name).value
        return int(v) if v.is_resolvable else 0

    def start(self) -> "TlmPins":
        self._drive()
        self._task = cocotb.start_soon(self._run())
        return self

    def _drive(self) -> None:
        m = self.model
        self._out("s_axi_awready", self._aw is None and self._b is None)
        self._out("s_axi_wready", self._w is None and self._b is None)
        self._out("s_axi_bvalid", self._b is not None)
        self._out("s_axi_bresp", self._b or 0)
        self._out("s_axi_arready", self._r is None)
        self._out("s_axi_rvalid", self._r is not None)
        self._out("s_axi_rdata", self._r[0] if self._r else 0)
        self._out("s_axi_rresp", self._r[1] if self._r else 0)
        for a in C.IN_ARGS:
            self._tready[a.index] = m.stream_ready(a.index)
            self._out(f"{a.port}_tready", self._tready[a.index])
        ov = self._tvalid = m.out_valid()
        word, last = m.out_peek() if ov else (0, False)
        self._out("m_axis_0_tvalid", ov)
        self._out("m_axis_0_tdata", word)
        self._out("m_axis_0_tlast", last)
        self._out("irq", m.interrupt)

    async def _run(self) -> None:
        clk = self.dut.aclk
        while True:
            await FallingEdge(clk)
            if not self._in("aresetn"):
                self.model = Dtpu(self.config)
                self._aw = self._w = self._b = self._r = None
                for cb in self.listeners:
                    cb(self.model)
            else:
                self._sample()
            await RisingEdge(clk)
            self._drive()

    def _sample(self) -> None:
        m, i = self.model, self._in
        # streams first: a beat and a register write at the same edge act in this order in
        # the RTL too (the beat is stored at the edge, the write's effect follows)
        for a in C.IN_ARGS:
            if self._tready[a.index] and i(f"{a.port}_tvalid"):
                m.stream_beat(a.index, i(f"{a.port}_tdata"), bool(i(f"{a.port}_tlast")))
        if self._tvalid and i("m_axis_0_tready") and m.out_valid():
            m.out_pop()
        # AXI4-Lite (our READY/VALID outputs are the values driven after the last edge)
        if self._aw is None and self._b is None and i("s_axi_awvalid"):
            self._aw = i("s_axi_awaddr")
        if self._w is None and self._b is None and i("s_axi_wvalid"):
            self._w = (i("s_axi_wdata"), i("s_axi_wstrb"))
        if self._b is not None and i("s_axi_bready"):
            self._b = None
        elif self._aw is not None and self._w is not None and self._b is None:
            is_cmd = self._aw == C.OFFSET["CMD"] and self._w[1] == 0xF
            if not (is_cmd and not m.soft_reset and not m.cmd_space()):
                self._b = m.axil_write(self._aw, self._w[0], self._w[1])
                self._aw = self._w = None
        if self._r is not None and i("s_axi_rready"):
            self._r = None
        elif self._r is None and i("s_axi_arvalid"):
            self._r = m.axil_read(i("s_axi_araddr"))
