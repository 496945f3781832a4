"""The K210 KPU: control registers, layer-argument FIFO, table fetch, datapath, output FIFO.

Address map (EXT platform.h, digest §8): registers ``kpu_config_t`` at AI_BASE_ADDR
0x40800000; KPU RAM at AI_RAM_BASE_ADDR 0x80600000 with its uncached alias AI_IO_BASE_ADDR
0x40600000; system SRAM at 0x80000000 with its uncached alias IO_BASE_ADDR 0x40000000
(kpu.c's runtime hands the KPU ``address - IOMEM``). ``phys()`` folds the 0x40000000 alias
window onto 0x80000000, so tables and maps may be given by either address. One
``tlm.core.memory.Memory`` holds system memory and the KPU RAM (at 0x80600000).

Execution: a layer runs when the twelfth word of its argument reaches
``layer_argument_fifo`` (the KPU is never busy in this model: a real KPU would stall the
bus or let words wait; its data results are the same). A layer

1. is checked (``plan``): every field combination the sources fix or cannot define is
   rejected with one ``bad_layer_argument`` event naming the fields; a rejected layer
   fetches, computes and writes nothing, but still raises calc_done if int_en is set, so a
   host waiting for it does not hang;
2. fetches its activation table, batch-norm table and weight loads over the AXI master
   (each burst one ``Transaction``, port "AXI", ``channel`` a ``FetchChannel``,
   ``dma_burst_size + 1`` beats of 8 bytes, never across 4 KiB); an error response ends
   the layer like a rejection (``bus_error``);
3. reads its input map from KPU RAM, computes (``datapath``), writes the output map back
   (only the pixels; the padding bytes of a line keep their contents) and, with
   send_data_out, appends the output (channel by channel, rows in order, padded with zero
   bytes to a multiple of 8) to the output FIFO read through ``fifo_data_out``;
4. with int_en, makes calc_done *pending* (see below).

Interrupts (EXT kpu.c usage, digest §4/§9): ``interrupt_raw`` collects events,
``interrupt_status = raw & ~interrupt_mask``, the AI interrupt line is its OR, writing 1s
to ``interrupt_clear`` clears raw bits. layer_cfg_almost_empty is raised each time the KPU
takes a layer and at most ``fifo_empty_threshold`` complete layers remain;
layer_cfg_almost_full when a write completes a layer and at least ``fifo_full_threshold``
complete layers wait. Both are events, not levels: kpu.c's ``kpu_continue`` clears them and
returns without pushing on the last layer, which a level would turn into an interrupt storm.

calc_done comes after the layer's almost_empty, as on hardware (the KPU takes a layer, then
computes it), and the model must not guess how long a layer takes against the host. So a
pending calc_done is raised in interrupt_raw

* when the host waits (a ``wait_irq`` step with the interrupt line low, a ``poll_reg``
  pause; ``advance``), or
* just before a register read, unless the host wrote interrupt_clear after the layer's
  twelfth word (``_settle``).

Hence ``wait_irq``, then reading interrupt_raw, sees calc_done; ``wait_irq`` (returning at
once on almost_empty), ``interrupt_clear`` and then a read sees it cleared, as if the layer
was done by then; and the same clear followed by another ``wait_irq`` or a poll of
calc_done gets calc_done as a second interrupt, as kpu.c's kpu_run ISR does (it runs for
the almost_empty and the calc_done of the last layer). Every sequence kpu.c, nncase or a
trace that waits before it looks gives the same result.

Reset values (not documented anywhere; chosen): every register 0.

Nothing here raises for register values or memory contents: problems are ``Event``s
(``events``; ``fault`` ones are what a trace replay reports).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

from ..core.memory import Memory, Resp, Transaction
from . import datapath
from .layout import LINE, Fmap
from .registers import (ACT_TABLE_ALIGN, ACT_TABLE_BYTES, ACT_TABLE_WORDS, BATCHNORM,
                        CONFIG_REGISTERS, KERNEL_TYPES, LAYER_FIELDS,
                        LAYER_WORDS, POOL_TYPES, REG_BY_OFFSET, WORD_MASK, LayerArgument,
                        bytes_to_words, decode_activation, decode_batchnorm, irq_bits,
                        reg_field)

# ---- address map (EXT platform.h) ------------------------------------------------------
RAM_BASE_ADDR = 0x80000000
IO_BASE_ADDR = 0x40000000             # uncached alias of RAM_BASE_ADDR (IOMEM in kpu.c)
ALIAS_SIZE = 8 * 1024 * 1024          # 6 MiB SRAM + 2 MiB KPU RAM
AI_RAM_BASE_ADDR = 0x80600000
AI_IO_BASE_ADDR = 0x40600000
AI_RAM_SIZE = 2 * 1024 * 1024
AI_BASE_ADDR = 0x40800000
AI_SIZE = 12 * 1024 * 1024
ADDR_BITS = 32

WEIGHT_BUFFER = 2 * 9 * 4096          # bytes (EXT MC weight_buffer_size, digest §3.3)
WIDTH_RANGE = (4, 512)                # EXT nncase input limits (digest §9)
HEIGHT_RANGE = (4, 256)               # 512 with first_stride (seed)
BEAT = 8                              # AXI data bytes
BOUNDARY_4K = 4096


def phys(addr: int) -> int:
    """Fold the 0x40000000 uncached alias window onto 0x80000000 (EXT platform.h)."""
    return addr + (RAM_BASE_ADDR - IO_BASE_ADDR) if IO_BASE_ADDR <= addr < IO_BASE_ADDR + ALIAS_SIZE \
        else addr


def in_register_window(addr: int, length: int = 1) -> bool:
    return addr < AI_BASE_ADDR + AI_SIZE and addr + length > AI_BASE_ADDR


class FetchChannel(enum.IntEnum):
    """What a bus-master read fetches (Transaction.channel; the bench's ARID)."""
    activation = 0
    batchnorm = 1
    weights = 2


@dataclass
class Event:
    kind: str            # bad_layer_argument, bus_error, alu_overflow, register_access; fifo_empty_read (no fault)
    layer: int           # index of the layer (count of layers taken before it), -1 for registers
    detail: str
    fault: bool = True

    def __str__(self) -> str:
        where = f"layer {self.layer}: " if self.layer >= 0 else ""
        return f"{where}{self.kind}: {self.detail}"


@dataclass
class LayerPlan:
    """A decoded layer: geometry, fetches, and the reasons it cannot run (``errors``)."""
    la: LayerArgument
    eight_bit: bool
    errors: list = field(default_factory=list)
    fetches: list = field(default_factory=list)   # (FetchChannel, address, length), in order
    src: "Fmap | None" = None
    dst: "Fmap | None" = None
    kernel: int = 1
    depthwise: bool = False
    stride: int = 1
    weight_bytes: int = 1
    per_channel: int = 0                          # weight bytes per output channel

    @property
    def ok(self) -> bool:
        return not self.errors


def plan(la: LayerArgument, eight_bit: bool) -> LayerPlan:
    """Check a layer argument and list what it fetches (pure: no device state)."""
    p = LayerPlan(la, eight_bit)
    err = p.errors.append
    for wname, bits in la.reserved_bits():
        err(f"{wname}: reserved bits 0x{bits:x} set")
    for name, (_, f) in LAYER_FIELDS.items():
        if f.fixed is not None and getattr(la, name) != f.fixed:
            err(f"{name} = {getattr(la, name)} (the sources fix it at {f.fixed})")
    if la.kernel_type not in KERNEL_TYPES:
        err(f"kernel_type = {la.kernel_type} (0: 1x1, 1: 3x3)")
    if la.pool_type not in POOL_TYPES:
        err(f"pool_type = {la.pool_type} (0..9)")
    if la.first_stride and la.pool_type != 0:
        err("first_stride = 1 needs pool_type = 0 (bypass), MC reg_desc")
    ci, co = la.i_ch_num + 1, la.o_ch_num + 1
    h, w = la.i_col_high + 1, la.i_row_wid + 1
    p.depthwise = bool(la.depth_wise_layer)
    if p.depthwise and ci != co:
        err(f"depth_wise_layer with i_ch_num + 1 = {ci} != o_ch_num + 1 = {co}")
    hmax = HEIGHT_RANGE[1] * (2 if la.first_stride else 1)
    if not HEIGHT_RANGE[0] <= h <= hmax:
        err(f"input height {h} outside {HEIGHT_RANGE[0]}..{hmax}")
    if not WIDTH_RANGE[0] <= w <= WIDTH_RANGE[1]:
        err(f"input width {w} outside {WIDTH_RANGE[0]}..{WIDTH_RANGE[1]}")
    p.src = Fmap(la.image_src_addr, ci, h, w, la.coef_group, la.row_switch_addr, la.channel_switch_addr)
    err_src = p.src.problems()
    p.errors += [f"input map (coef_group/row_switch_addr/channel_switch_addr): {e}" for e in err_src]
    ho, wo = la.o_col_high + 1, la.o_row_wid + 1
    p.dst = Fmap(la.image_dst_addr, co, ho, wo, la.wb_group, la.wb_row_switch_addr,
                 la.wb_channel_switch_addr)
    p.errors += [f"output map (wb_group/wb_row_switch_addr/wb_channel_switch_addr): {e}"
                 for e in p.dst.problems()]
    p.stride = 2 if la.first_stride else 1
    if la.pool_type in POOL_TYPES and la.kernel_type in KERNEL_TYPES:
        ch, cw = -(-h // p.stride), -(-w // p.stride)
        eh, ew = datapath.pool_output_size(ch, cw, la.pool_type)
        if (ho, wo) != (eh, ew):
            err(f"output size {wo}x{ho} (o_row_wid/o_col_high) != {ew}x{eh} "
                f"({POOL_TYPES[la.pool_type].name} of {cw}x{ch})")
    if la.send_data_out:
        if la.channel_byte_num + 1 != ho * wo:
            err(f"channel_byte_num + 1 = {la.channel_byte_num + 1} != {wo}x{ho}")
        if la.dma_total_byte + 1 != ho * wo * co:
            err(f"dma_total_byte + 1 = {la.dma_total_byte + 1} != {wo}x{ho}x{co}")
    # weights
    p.kernel = KERNEL_TYPES.get(la.kernel_type, 1)
    p.weight_bytes = 1 if eight_bit else 2
    p.per_channel = p.kernel * p.kernel * (1 if p.depthwise else ci) * p.weight_bytes
    coef = la.o_ch_num_coef + 1
    if coef > co:
        err(f"o_ch_num_coef + 1 = {coef} > {co} output channels")
    else:
        if la.para_size != coef * p.per_channel:
            err(f"para_size = {la.para_size} != {coef} channels x {p.per_channel} bytes "
                f"({'8' if eight_bit else '16'}-bit weights)")
        if la.load_time + 1 != -(-co // coef):
            err(f"load_time + 1 = {la.load_time + 1} != ceil({co} / {coef}) loads")
    if la.para_size > WEIGHT_BUFFER:
        err(f"para_size = {la.para_size} > the {WEIGHT_BUFFER}-byte weight buffer")
    if la.active_addr % ACT_TABLE_ALIGN:
        err(f"active_addr 0x{la.active_addr:x} is not {ACT_TABLE_ALIGN}-byte aligned")
    if p.errors:
        return p
    p.fetches.append((FetchChannel.activation, la.active_addr, ACT_TABLE_BYTES))
    p.fetches.append((FetchChannel.batchnorm, la.bwsx_base_addr, 8 * co))
    for j in range(la.load_time + 1):
        n = min(coef, co - j * coef)
        p.fetches.append((FetchChannel.weights, la.para_start_addr + j * la.para_size, n * p.per_channel))
    for ch, a, n in p.fetches:
        if a + n > 1 << ADDR_BITS:
            err(f"{ch.name} fetch 0x{a:x}+{n} passes the end of the 32-bit address space")
    if p.errors:
        p.fetches.clear()
    return p


def bursts(addr: int, length: int, burst_bytes: int) -> list:
    """(address, length) pieces of a fetch: split at multiples of the burst size and of 4 KiB."""
    out = []
    a, end = addr, addr + length
    while a < end:
        nxt = min(end, (a // burst_bytes + 1) * burst_bytes, (a // BOUNDARY_4K + 1) * BOUNDARY_4K)
        out.append((a, nxt - a))
        a = nxt
    return out


IRQ_CALC_DONE = irq_bits(calc_done_int=1)
IRQ_EMPTY = irq_bits(layer_cfg_almost_empty_int=1)
IRQ_FULL = irq_bits(layer_cfg_almost_full_int=1)
_F_FULL = reg_field("fifo_threshold", "fifo_full_threshold")
_F_EMPTY = reg_field("fifo_threshold", "fifo_empty_threshold")
_F_EIGHT = reg_field("eight_bit_mode", "eight_bit_mode")
_F_DMA_FLUSH = reg_field("fifo_ctrl", "dma_fifo_flush_n")
_F_CFG_FLUSH = reg_field("fifo_ctrl", "cfg_fifo_flush_n")


class KPU:
    """The KPU with its registers, KPU RAM (inside `memory`) and output FIFO."""

    def __init__(self, memory: "Memory | None" = None):
        self.memory = memory if memory is not None else Memory(log=False)
        self.hooks: list = []            # callables (event: Event) -> None
        self.layer_hooks: list = []      # callables (plan: LayerPlan, output: ndarray | None)
        self.reset()

    # ---- state -------------------------------------------------------------------------
    def reset(self) -> None:
        self.regs = {r.name: r.reset for r in CONFIG_REGISTERS}
        self.raw = 0
        self.cfg_words: list = []        # layer_argument_fifo contents
        self.out_fifo = bytearray()      # output stream not yet read
        self.out_total = 0               # bytes ever appended to the output FIFO
        self.out_popped = 0              # bytes ever taken from it (8 per word)
        self.out_frames: list = []       # (start, end, data bytes) of each layer's output, unread
        self.events: list = []
        self._fault_cursor = 0
        self.layers_taken = 0
        self.done_pending = False        # calc_done of a layer with int_en not yet raised
        self.done_held = False           # interrupt_clear written since: only a wait raises it
        self.last_plan: "LayerPlan | None" = None

    @property
    def eight_bit(self) -> bool:
        return bool(_F_EIGHT.get(self.regs["eight_bit_mode"]))

    @property
    def status(self) -> int:
        return self.raw & ~self.regs["interrupt_mask"] & REG_BY_OFFSET[0x08].mask

    @property
    def irq(self) -> bool:
        return bool(self.status)

    def advance(self) -> bool:
        """The host waits: a pending calc_done is raised. True if something happened."""
        if not self.done_pending:
            return False
        self.raw |= IRQ_CALC_DONE
        self.done_pending = self.done_held = False
        return True

    def _settle(self) -> None:
        """Before a register read: the pending calc_done is raised unless held by a clear."""
        if not self.done_held:
            self.advance()

    def _event(self, kind: str, detail: str, layer: int = -1, fault: bool = True) -> None:
        ev = Event(kind, layer, detail, fault)
        self.events.append(ev)
        for h in self.hooks:
            h(ev)

    def new_faults(self) -> list:
        """Fault events since the last call."""
        out = [e for e in self.events[self._fault_cursor:] if e.fault]
        self._fault_cursor = len(self.events)
        return out

    # ---- bus side: registers -----------------------------------------------------------
    def write(self, offset: int, value: int) -> None:
        """A 64-bit register write at `offset` from AI_BASE_ADDR."""
        value &= WORD_MASK
        reg = REG_BY_OFFSET.get(offset)
        if reg is None:
            self._event("register_access", f"write of 0x{value:x} to offset 0x{offset:x}: no register")
            return
        if reg.access in ("ro", "pop"):
            self._event("register_access", f"write of 0x{value:x} to read-only {reg.name} (ignored)")
            return
        if reg.name == "layer_argument_fifo":
            self.cfg_words.append(value)
            if len(self.cfg_words) == LAYER_WORDS:
                self._layer_ready()
            return
        if reg.name == "interrupt_clear":
            self.raw &= ~(value & reg.mask)
            self.done_held = self.done_pending
            return
        self.regs[reg.name] = value & reg.mask
        if reg.name == "fifo_ctrl":
            if not _F_DMA_FLUSH.get(value):
                self.out_fifo.clear()
                self.out_frames.clear()
                self.out_popped = self.out_total
            if not _F_CFG_FLUSH.get(value):
                self.cfg_words.clear()

    def read(self, offset: int) -> int:
        """A 64-bit register read (fifo_data_out pops 8 bytes of the output stream); a
        pending calc_done is raised first (``_settle``)."""
        self._settle()
        reg = REG_BY_OFFSET.get(offset)
        if reg is None:
            self._event("register_access", f"read of offset 0x{offset:x}: no register (reads 0)")
            return 0
        if reg.name == "layer_argument_fifo":
            self._event("register_access", "read of write-only layer_argument_fifo (reads 0)")
            return 0
        if reg.name == "interrupt_clear":
            return 0
        if reg.name == "interrupt_raw":
            return self.raw
        if reg.name == "interrupt_status":
            return self.status
        if reg.name == "fifo_data_out":
            got = self.pop_output()
            if got is None:        # the CPU may read it any time (the DMA waits for AI_RX_REQ)
                self._event("fifo_empty_read", "fifo_data_out read with the output FIFO empty "
                                               "(reads 0)", fault=False)
                return 0
            return got[0]
        return self.regs[reg.name]

    def pop_output(self) -> "tuple | None":
        """Take one 64-bit word of the output stream: (word, data bytes in it, last word of a
        layer's output), or None when the FIFO is empty. fifo_data_out reads and the bench's
        output stream both take words here."""
        if not self.out_fifo:
            return None
        pos = self.out_popped
        word = int.from_bytes(bytes(self.out_fifo[:BEAT]), "little")
        del self.out_fifo[:BEAT]
        self.out_popped += BEAT
        start, end, n = self.out_frames[0]
        if self.out_popped >= end:
            self.out_frames.pop(0)
        return word, min(BEAT, start + n - pos), self.out_popped >= end

    def completes_layer(self) -> bool:
        """Whether the next layer_argument_fifo write completes a layer (bench prefetch)."""
        return len(self.cfg_words) == LAYER_WORDS - 1

    def pending_plan(self, last_word: int) -> LayerPlan:
        """The plan of the layer that writing `last_word` would complete."""
        return plan(LayerArgument(self.cfg_words + [last_word & WORD_MASK]), self.eight_bit)

    # ---- host side: memory -------------------------------------------------------------
    def bus_write(self, addr: int, data) -> None:
        """Back-door write at a CPU bus address (aliases folded)."""
        self.memory.write(phys(addr), data)

    def bus_read(self, addr: int, length: int) -> bytes:
        return self.memory.read(phys(addr), length)

    def ram_view(self, lo: int, hi: int) -> np.ndarray:
        return self.memory.read_array(AI_RAM_BASE_ADDR + lo, hi - lo)

    # ---- the layer -----------------------------------------------------------------------
    def _layer_ready(self) -> None:
        words, self.cfg_words = self.cfg_words, []
        thr = self.regs["fifo_threshold"]
        waiting = 1                                    # this layer, complete in the FIFO
        if waiting >= _F_FULL.get(thr):
            self.raw |= IRQ_FULL
        index = self.layers_taken
        self.layers_taken += 1
        remaining = waiting - 1                        # the KPU takes it at once
        if remaining <= _F_EMPTY.get(thr):
            self.raw |= IRQ_EMPTY
        self.run_layer(LayerArgument(words), index)

    def run_layer(self, la: LayerArgument, index: int = -1) -> "np.ndarray | None":
        """Fetch, compute and write back one layer; returns the output [C, H, W] or None."""
        p = plan(la, self.eight_bit)
        self.last_plan = p
        out = None
        if not p.ok:
            self._event("bad_layer_argument", "; ".join(p.errors), index)
        else:
            try:
                tables = self._fetch(p, index)
                if tables is not None:
                    out = self._compute(p, tables, index)
            except Exception as e:          # noqa: BLE001 - a model bug is an event, never a traceback
                self._event("model_error", f"{type(e).__name__}: {e}", index)
        if la.int_en:
            self.done_pending, self.done_held = True, False
        for h in self.layer_hooks:
            h(p, out)
        return out

    def _fetch(self, p: LayerPlan, index: int) -> "dict | None":
        burst = (p.la.dma_burst_size + 1) * BEAT
        got: dict = {ch: [] for ch in FetchChannel}
        for ch, addr, n in p.fetches:
            parts = []
            for a, m in bursts(phys(addr), n, burst):
                txn, data = self.memory.access(Transaction("AXI", ch, False, a, m))
                if txn.resp != Resp.OKAY:
                    self._event("bus_error", f"{txn.resp.name} on the {ch.name} fetch at 0x{a:08x}+{m} "
                                             f"(layer not computed)", index)
                    return None
                parts.append(data)
            got[ch].append(np.concatenate(parts) if parts else np.zeros(0, np.uint8))
        return got

    def _compute(self, p: LayerPlan, t: dict, index: int) -> np.ndarray:
        la = p.la
        act = decode_activation(bytes_to_words(t[FetchChannel.activation][0].tobytes()))
        bn = decode_batchnorm(bytes_to_words(t[FetchChannel.batchnorm][0].tobytes()))
        wraw = np.concatenate(t[FetchChannel.weights])
        wts = wraw.view("<u2") if p.weight_bytes == 2 else wraw
        co = la.o_ch_num + 1
        wts = wts.reshape(co, 1 if p.depthwise else la.i_ch_num + 1, p.kernel, p.kernel)
        lo, hi = p.src.span()
        x = p.src.gather(self.ram_view(lo, hi), lo)
        acc = datapath.conv(x, wts, p.kernel, p.depthwise, la.pad_value, la.arg_x, la.shr_x,
                            la.arg_w, la.shr_w, la.arg_add, p.stride)
        acc, n = datapath.wrap(acc)
        if n:
            self._event("alu_overflow", f"{n} convolution outputs outside 36 bits (wrapped)", index)
        v = datapath.batchnorm(acc, bn["norm_mul"], bn["norm_shift"], bn["norm_add"])
        v, n = datapath.wrap(v)
        if n:
            self._event("alu_overflow", f"{n} batch-norm outputs outside 36 bits (wrapped)", index)
        if la.load_act:
            y = datapath.activate(v, act["x_start"], act["y_mul"], act["shift_number"],
                                  act["result_bias"])
        else:                                          # seed: load_act = 0 gives all zeros
            y = np.zeros(v.shape, dtype=np.uint8)
        out = datapath.pool(y, la.pool_type)
        lo, hi = p.dst.span()
        ram = self.ram_view(lo, hi)
        p.dst.scatter(ram, out, lo)
        self.memory.write(AI_RAM_BASE_ADDR + lo, ram)
        if la.send_data_out:
            stream = out.tobytes()
            pad = -len(stream) % BEAT
            self.out_fifo += stream + bytes(pad)
            self.out_frames.append((self.out_total, self.out_total + len(stream) + pad, len(stream)))
            self.out_total += len(stream) + pad
        return out


__all__ = ["KPU", "LayerPlan", "Event", "FetchChannel", "plan", "phys", "bursts",
           "AI_BASE_ADDR", "AI_RAM_BASE_ADDR", "AI_IO_BASE_ADDR", "RAM_BASE_ADDR",
           "IO_BASE_ADDR", "AI_RAM_SIZE", "ACT_TABLE_WORDS", "BATCHNORM", "LINE"]
