"""The DTPU behind Xilinx's AXI4-Stream Accelerator Adapter, at transaction level.

`Dtpu` is what sits behind the adapter's pins: the AXI4-Lite register map, the argument
buffers filled by the input streams, the command queue, the output FIFO and dtpu_core
(`core.run`). Every behaviour is the contract's (contract.ADAPTER_RULES, REGISTERS,
COMMANDS). Runs complete at once (the model has no clock): a command that can run, runs;
the words of a run go to the output FIFO, which is unbounded here (the RTL's backpressure
only delays them).

Interfaces, all plain calls:
* `axil_write(offset, value, strb=0xF) -> resp`, `axil_read(offset) -> (value, resp)`;
  `resp` is contract.RESP_OKAY or RESP_SLVERR (unmapped offset, a write to a read-only
  register, a partial-strobe write, a misaligned offset). A CMD write to a full queue is
  refused with `CmdQueueFull` only where nothing can drain it (the RTL would stall the
  write forever); the pins adapter waits instead (`cmd_space()`).
* input streams: `stream_ready(arg)`, `stream_beat(arg, word, last)`; `stream_packet`.
* output stream: `out_valid()`, `out_peek() -> (word, last)`, `out_pop()`.
* `interrupt` (CTRL.GIE & STATUS.DONE).
`events` receives (name, details) tuples (runs, errors) for coverage and scoreboards.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import contract as C
from . import core

_ST = {f.name: f for f in C.STATUS_FIELDS}
_STICKY = ("DONE", "READY", "CORE_ERR", "CMD_ERR", "OVERFLOW", "UNDERRUN")


class CmdQueueFull(RuntimeError):
    pass


@dataclass
class Buffer:
    data: np.ndarray            # uint8 (CSR) or uint64 (WMEM, INFIFO) elements
    length: int = 0             # elements received in the packet
    read: int = 0               # FIFO arguments: elements the core has read


@dataclass
class InArg:
    arg: C.Argument
    buffers: list[Buffer]
    head: int = 0               # oldest ready buffer
    ready: int = 0              # ready buffers
    filling: "int | None" = None  # elements written to the buffer being filled (None: none)

    @property
    def capacity(self) -> int:
        return self.buffers[0].data.size

    def fill_index(self) -> int:
        return (self.head + self.ready) % len(self.buffers)

    def head_buffer(self) -> "Buffer | None":
        return self.buffers[self.head] if self.ready else None

    def release(self) -> None:
        if self.ready:
            b = self.buffers[self.head]
            b.length = b.read = 0
            self.head = (self.head + 1) % len(self.buffers)
            self.ready -= 1


@dataclass
class Run:
    """What one run did (for scoreboards and coverage)."""
    index: int
    csr: int
    result: core.RunResult
    auto: bool                  # started by continuous mode
    inputs: int                 # input FIFO words read


class Dtpu:
    def __init__(self, config: "str | C.Config" = C.DEFAULT_CONFIG, fast: bool = True):
        self.cfg = config if isinstance(config, C.Config) else C.CONFIGS[config]
        self.fast = fast
        self.events: list[Callable[[str, dict], None]] = []
        self.runs: list[Run] = []
        self.regs = {w.offset: 0 for w in C.words() if w.exists and w.reg.access == C.RW
                     and w.reg.name != "STATUS"}
        self.soft_reset = False
        self._reset_state()

    # ---------------------------------------------------------------- state
    def _reset_state(self) -> None:
        cfg = self.cfg
        self.args = []
        for a in C.IN_ARGS:
            cap = getattr(cfg, a.size_attr)
            dt = np.uint8 if a.unit == 1 else np.uint64
            self.args.append(InArg(a, [Buffer(np.zeros(cap, dt)) for _ in range(cfg.buffer_depth)]))
        self.sticky = dict.fromkeys(_STICKY, 0)
        self.err_code = 0
        self.continuous = False
        self.cmdq: deque[int] = deque()
        self.out: deque[tuple[int, bool]] = deque()

    def _emit(self, event: str, **details) -> None:
        for cb in self.events:
            cb(event, details)

    def reg(self, name: str) -> int:
        return self.regs[C.OFFSET[name]]

    @property
    def interrupt(self) -> bool:
        return bool(C.REG["CTRL"].field("GIE").get(self.reg("CTRL")) and self.sticky["DONE"])

    def status(self) -> int:
        v = 0
        for name in _STICKY:
            v |= self.sticky[name] << _ST[name].lsb
        v |= 1 << _ST["IDLE"].lsb                   # runs complete at once: never active here
        v |= int(self.continuous) << _ST["CONTINUOUS"].lsb
        v |= self.err_code << _ST["ERR_CODE"].lsb
        v |= min(len(self.cmdq), 15) << _ST["CMDQ"].lsb
        return v

    def arg_status(self, n: int) -> int:
        a = self.args[n]
        f = {x.name: x for x in C.ARG_STATUS_FIELDS}
        return ((a.ready << f["USED_BUF"].lsb) | (int(a.ready == 0) << f["EMPTY"].lsb)
                | (int(a.ready == len(a.buffers)) << f["FULL"].lsb))

    def oarg_status(self) -> int:
        """EMPTY: no word waits; FULL: OUTFIFO_DEPTH or more wait (the RTL's FIFO is then
        full and its core stalls; here the runs have already completed)."""
        f = {x.name: x for x in C.OARG_STATUS_FIELDS}
        return ((int(not self.out) << f["EMPTY"].lsb)
                | (int(len(self.out) >= self.cfg.outfifo_depth) << f["FULL"].lsb))

    # ---------------------------------------------------------------- AXI4-Lite
    def axil_read(self, offset: int) -> tuple[int, int]:
        w = C.WORDS.get(offset)
        if w is None or offset % 4:
            return 0, C.RESP_SLVERR
        if not w.exists or w.reg.access == C.WO:
            return 0, C.RESP_OKAY
        name = w.reg.name
        if name == "STATUS":
            return self.status(), C.RESP_OKAY
        if name == "IARG_STATUS":
            return self.arg_status(w.index), C.RESP_OKAY
        if name == "OARG_STATUS":
            return self.oarg_status(), C.RESP_OKAY
        return self.regs[offset] & w.reg.read_mask, C.RESP_OKAY

    def cmd_space(self) -> bool:
        return len(self.cmdq) < self.cfg.cmdq_depth

    def axil_write(self, offset: int, value: int, strb: int = 0xF) -> int:
        w = C.WORDS.get(offset)
        if w is None or offset % 4 or strb != 0xF or (w.exists and w.reg.access == C.RO):
            return C.RESP_SLVERR
        if not w.exists:
            return C.RESP_OKAY
        name, value = w.reg.name, value & 0xFFFFFFFF
        if name == "STATUS":
            clear = value & w.reg.mask(C.W1C)
            for n in _STICKY:
                if clear & _ST[n].mask:
                    self.sticky[n] = 0
                    if n == "CORE_ERR":
                        self.err_code = 0
        elif name == "CMD":
            if self.soft_reset:
                return C.RESP_OKAY                  # ignored while held in reset
            if not self.cmd_space():
                raise CmdQueueFull(f"CMD write 0x{value:08x} with {len(self.cmdq)} commands queued: "
                                   f"the adapter would stall the write until one can run")
            self.cmdq.append(value)
        else:
            self.regs[offset] = value & w.reg.write_mask
            if name == "CTRL":
                sr = bool(C.REG["CTRL"].field("SOFT_RESET").get(value))
                if sr:
                    self._reset_state()
                    self._emit("soft_reset")
                self.soft_reset = sr
        self.process()
        return C.RESP_OKAY

    # ---------------------------------------------------------------- streams
    def stream_ready(self, n: int) -> bool:
        a = self.args[n]
        return not self.soft_reset and (a.filling is not None or a.ready < len(a.buffers))

    def stream_beat(self, n: int, word: int, last: bool) -> None:
        """One accepted beat on S_AXIS_n (call only when stream_ready(n))."""
        self._fill(n, np.array([word], np.uint64), last)

    def stream_packet(self, n: int, words) -> None:
        """A whole packet on S_AXIS_n (its last beat carries TLAST): the beats of
        ``stream_beat``, at once."""
        ws = np.asarray(words, np.uint64).reshape(-1)
        if not ws.size:
            raise ValueError("an AXI4-Stream packet has at least one beat")
        self._fill(n, ws, True)

    def _fill(self, n: int, words: np.ndarray, last: bool) -> None:
        if not self.stream_ready(n):
            raise RuntimeError(f"beat on {C.IN_ARGS[n].port} while TREADY is low")
        a = self.args[n]
        if a.filling is None:
            a.filling = 0
        b = a.buffers[a.fill_index()]
        # the 64-bit beats split into elements, lowest bytes first
        elems = words.astype("<u8").view(np.uint8) if a.arg.unit == 1 else words
        take = min(elems.size, b.data.size - a.filling)
        b.data[a.filling:a.filling + take] = elems[:take]
        a.filling += take
        if take < elems.size:
            self.sticky["OVERFLOW"] = 1             # past the capacity: dropped
        if last:
            b.length, b.read = a.filling, 0
            a.filling = None
            a.ready += 1
            self._emit("packet", arg=a.arg.name, length=b.length)
            self.process()

    def out_valid(self) -> bool:
        return bool(self.out) and not self.soft_reset

    def out_peek(self) -> tuple[int, bool]:
        return self.out[0]

    def out_pop(self) -> tuple[int, bool]:
        return self.out.popleft()

    # ---------------------------------------------------------------- commands and runs
    def _args_ready(self) -> bool:
        en = self.reg("IARG_RQT_EN")
        return all(a.ready for i, a in enumerate(self.args) if en >> i & 1)

    def process(self) -> None:
        """Run every command and automatic run that can run now."""
        if self.soft_reset:
            return
        while True:
            if self.cmdq:
                if not self._command(self.cmdq[0]):
                    return
                self.cmdq.popleft()
            elif self.continuous and self.reg("IARG_RQT_EN") and self._args_ready():
                self._run(auto=True)
            else:
                return

    def _command(self, word: int) -> bool:
        """Execute the head command; False when it has to wait."""
        f = {x.name: x for x in C.CMD_FIELDS}
        op, mask = f["OPCODE"].get(word), f["ARG_MASK"].get(word)
        reserved = word & ~(f["OPCODE"].mask | f["ARG_MASK"].mask)
        name = next((c.name for c in C.COMMANDS if c.opcode == op), None)
        bad = (reserved or name is None
               or (name == "UPDATE_IN_ARG" and mask >> len(self.args))
               or (name == "UPDATE_OUT_ARG" and mask >> len(C.OUT_ARGS))
               or (name in ("EXECUTE_STEP", "EXECUTE_CONTINOUS", "STOP_EXECUTE_CONTINOUS") and mask)
               or (self.continuous and name in ("UPDATE_IN_ARG", "EXECUTE_STEP"))
               or (name == "EXECUTE_CONTINOUS" and not self.reg("IARG_RQT_EN")))
        self._emit("command", name=name or f"opcode{op}", mask=mask, error=bool(bad),
                   continuous=self.continuous)
        if bad:
            self.sticky["CMD_ERR"] = 1
            return True
        if name == "UPDATE_IN_ARG":
            for i, a in enumerate(self.args):
                if mask >> i & 1:
                    a.release()
        elif name == "EXECUTE_STEP":
            if not self._args_ready():
                return False
            self._run(auto=False)
        elif name == "EXECUTE_CONTINOUS":
            self.continuous = True
        elif name == "STOP_EXECUTE_CONTINOUS":
            self.continuous = False
        return True

    def _run(self, auto: bool) -> None:
        cfg = self.cfg
        csr_a, wm_a, in_a = self.args
        under = [False]
        cb = csr_a.head_buffer()
        csr_bytes = np.zeros(C.CSR_BYTES, np.uint8)
        if cb is not None:
            n = min(cb.length, C.CSR_BYTES)
            csr_bytes[:n] = cb.data[:n]
        if cb is None or cb.length < C.CSR_BYTES:
            under[0] = True
        csr = int.from_bytes(csr_bytes.tobytes(), "little")
        wb = wm_a.head_buffer()

        def wm_read(addr: int):
            if wb is None or addr >= wb.length:
                return None
            return int(wb.data[addr])

        ib = in_a.head_buffer()
        inputs = ib.data[ib.read:ib.length] if ib is not None else np.zeros(0, np.uint64)
        dec = core.decode_csr(csr, cfg)
        fn = core.run if self.fast else core.run_reference
        res = fn(cfg, csr, wm_read, inputs)
        if dec.error:
            used = 0
        else:
            used = inputs.size
            if ib is not None:
                ib.read = ib.length                 # the run drains the FIFO buffer
            under[0] |= res.underrun
        self.sticky["READY"] = 1
        if under[0]:
            self.sticky["UNDERRUN"] = 1
        words = [int(x) for x in res.words]
        n_len = self.reg("OARG0_LENGTH") if (self.reg("OARG_LENGTH_MODE") & 1) else 0
        for i, wd in enumerate(words):
            last = i == len(words) - 1 or (n_len and (i + 1) % n_len == 0)
            self.out.append((wd, bool(last)))
        if res.error:
            self.sticky["CORE_ERR"] = 1
            self.err_code = res.error
        self.sticky["DONE"] = 1
        run = Run(len(self.runs), csr, res, auto, used)
        self.runs.append(run)
        self._emit("run", run=run, dec=dec)
        if auto:
            en = self.reg("IARG_RQT_EN")
            for i, a in enumerate(self.args):
                if en >> i & 1:
                    a.release()
