"""Host-side sequences: what kpu.c and nncase's K210 runtime do to the KPU.

A ``host`` is anything with ``write_reg(offset, value)``, ``read_reg(offset)``,
``load_mem(addr, data)``, ``read_mem(addr, length)`` and ``wait_irq(max)``: the trace target
(``K210TraceTarget``), a ``RecordingTarget`` around it (the run becomes a trace), or the
bench's pin driver. Offsets come from the register table.

* ``place(layers)``: KPU RAM ping-pong (seed: image_dst_addr = (0 if idx & 1 else
  img_ram_size - img_output_size) / 64, the next layer reads where the last one wrote) and
  table addresses in system memory (weights and BN 128-byte aligned, activation 256).
* ``load(host, net, x)``: tables into system memory, the input map into KPU RAM (what
  kpu_run's input DMA does: the map already in the KPU layout, digest §9).
* Flows: ``run_calc_done`` (nncase v1 runtime: per layer clear 7, mask 0b110, int_en, wait
  for the interrupt, clear and mask 7), ``run_kpu_run`` (kpu.c kpu_run: thresholds 10/1,
  mask with calc_done and almost_empty open, one layer pushed per interrupt, the last with
  int_en and send_data_out, whose calc_done is a last interrupt), ``run_burst`` (kpu_start-like: all interrupts
  masked, every layer pushed at once, completion seen on the output stream).
* ``run_flow(host, net, flow)``: one of the three by name (FLOWS).
* ``read_output(host, n)``: ceil(n / 8) 64-bit reads of fifo_data_out (the output DMA).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .convert import K210Layer, output_bytes
from .device import AI_IO_BASE_ADDR
from .layout import LINE, RAM_SIZE, Fmap
from .registers import IRQ_ALL, OFFSET, LayerArgument, irq_bits, reg_value, words_to_bytes

TABLE_BASE = 0x80100000            # system SRAM (kpu.c's model buffer lives in 0x80000000..)
FIFO_FULL, FIFO_EMPTY = 10, 1      # kpu.c thresholds


def _align(a: int, n: int) -> int:
    return (a + n - 1) // n * n


@dataclass
class PlacedLayer:
    la: LayerArgument              # with addresses; int_en / send_data_out set by the flow
    weights: bytes
    bn: bytes
    act: bytes
    in_shape: tuple
    out_shape: tuple


@dataclass
class Network:
    layers: list
    eight_bit: bool
    tables: list = field(default_factory=list)        # (address, bytes) in system memory

    @property
    def in_map(self) -> Fmap:
        la = self.layers[0].la
        return Fmap(la.image_src_addr, la.i_ch_num + 1, la.i_col_high + 1, la.i_row_wid + 1,
                    la.coef_group, la.row_switch_addr, la.channel_switch_addr)

    @property
    def out_map(self) -> Fmap:
        la = self.layers[-1].la
        return Fmap(la.image_dst_addr, la.o_ch_num + 1, la.o_col_high + 1, la.o_row_wid + 1,
                    la.wb_group, la.wb_row_switch_addr, la.wb_channel_switch_addr)

    def out_bytes(self) -> int:
        return self.layers[-1].la.dma_total_byte + 1


def place(layers: "list[K210Layer]", table_base: int = TABLE_BASE) -> Network:
    """Addresses for a chain of converted layers (all in one weight mode)."""
    if len({l.eight_bit for l in layers}) != 1:
        raise ValueError("eight_bit_mode is one register: every layer needs the same weight mode")
    placed, tables, a = [], [], table_base
    src = 0
    for i, l in enumerate(layers):
        if i and l.in_shape != layers[i - 1].out_shape:
            raise ValueError(f"layer {i} input {l.in_shape} != layer {i - 1} output "
                             f"{layers[i - 1].out_shape}")
        dst = (0 if i & 1 else RAM_SIZE - output_bytes(l.out_shape)) // LINE
        wa = a = _align(a, 128)
        a += len(l.weights)
        ba = a = _align(a, 128)
        bn = words_to_bytes(l.bn)
        a += len(bn)
        aa = a = _align(a, 256)
        act = words_to_bytes(l.act)
        a += len(act)
        tables += [(wa, l.weights), (ba, bn), (aa, act)]
        placed.append(PlacedLayer(l.placed(src, dst, wa, ba, aa), l.weights, bn, act,
                                  l.in_shape, l.out_shape))
        src = dst
    return Network(placed, layers[0].eight_bit, tables)


def input_image(net: Network, x: np.ndarray) -> bytes:
    """The bytes kpu_run's input DMA copies to KPU RAM: the map in the KPU layout (the
    bytes between rows are 0)."""
    m = net.in_map
    buf = np.zeros(m.nbytes, np.uint8)
    m.scatter(buf, np.asarray(x, np.uint8), LINE * m.base)
    return buf.tobytes()


def load(host, net: Network, x: np.ndarray) -> None:
    for addr, data in net.tables:
        host.load_mem(addr, data)
    host.load_mem(AI_IO_BASE_ADDR + LINE * net.in_map.base, input_image(net, x))


def push(host, la: LayerArgument) -> None:
    """Twelve 64-bit writes to layer_argument_fifo, in struct order (kpu_send_layer)."""
    for w in la.words:
        host.write_reg(OFFSET["layer_argument_fifo"], w)


def read_output(host, nbytes: int) -> bytes:
    """The output DMA: (nbytes + 7) / 8 64-bit reads of fifo_data_out."""
    out = bytearray()
    for _ in range((nbytes + 7) // 8):
        out += int(host.read_reg(OFFSET["fifo_data_out"])).to_bytes(8, "little")
    return bytes(out[:nbytes])


def read_map(host, m: Fmap) -> np.ndarray:
    """A feature map read back from KPU RAM (kpu_download)."""
    lo, hi = m.span()
    raw = np.frombuffer(host.read_mem(AI_IO_BASE_ADDR + lo, hi - lo), np.uint8)
    return m.gather(raw, lo)


def _prologue(host, net: Network, full: int, empty: int, mask: int) -> None:
    host.write_reg(OFFSET["interrupt_clear"], IRQ_ALL)
    host.write_reg(OFFSET["fifo_threshold"], reg_value("fifo_threshold", fifo_full_threshold=full,
                                                       fifo_empty_threshold=empty))
    host.write_reg(OFFSET["eight_bit_mode"], reg_value("eight_bit_mode", eight_bit_mode=int(net.eight_bit)))
    host.write_reg(OFFSET["interrupt_mask"], mask)


def run_calc_done(host, net: Network, send_last: bool = False, wait: int = 1000) -> bool:
    """nncase runtime: every layer with int_en, interrupt on calc_done only (mask 0b110)."""
    _prologue(host, net, FIFO_FULL, FIFO_EMPTY, IRQ_ALL)
    ok = True
    for i, l in enumerate(net.layers):
        last = i == len(net.layers) - 1
        host.write_reg(OFFSET["interrupt_clear"], IRQ_ALL)
        host.write_reg(OFFSET["interrupt_mask"], IRQ_ALL & ~irq_bits(calc_done_int=1))
        push(host, l.la.replace(int_en=1, send_data_out=int(send_last and last)))
        ok &= bool(host.wait_irq(wait))
        host.write_reg(OFFSET["interrupt_clear"], IRQ_ALL)
        host.write_reg(OFFSET["interrupt_mask"], IRQ_ALL)
    return ok


def run_kpu_run(host, net: Network, wait: int = 1000) -> bool:
    """kpu.c kpu_run: the last layer gets int_en and send_data_out; each interrupt clears
    and pushes the next layer (kpu_continue): one almost_empty per layer, then, after the
    last layer's almost_empty (nothing left to push), its calc_done."""
    _prologue(host, net, FIFO_FULL, FIFO_EMPTY, irq_bits(layer_cfg_almost_full_int=1))
    ok = True
    for i, l in enumerate(net.layers):
        last = i == len(net.layers) - 1
        if i:
            ok &= bool(host.wait_irq(wait))
            host.write_reg(OFFSET["interrupt_clear"], IRQ_ALL)
        push(host, l.la.replace(int_en=int(last), send_data_out=int(last)))
    for _ in range(2):
        ok &= bool(host.wait_irq(wait))
        host.write_reg(OFFSET["interrupt_clear"], IRQ_ALL)
    return ok


def run_burst(host, net: Network) -> None:
    """kpu_start-like: interrupts masked, all layers pushed, the last streams its output."""
    _prologue(host, net, 12, FIFO_EMPTY, IRQ_ALL)
    n = len(net.layers)
    for i, l in enumerate(net.layers):
        push(host, l.la.replace(int_en=int(i == n - 1), send_data_out=int(i == n - 1)))


FLOWS = {"calc_done": lambda host, net: run_calc_done(host, net, send_last=True),
         "kpu_run": run_kpu_run, "burst": run_burst}


def run_flow(host, net: Network, flow: str):
    """Run `net` by one of the FLOWS ("calc_done" streams the last layer's output too)."""
    if flow not in FLOWS:
        raise ValueError(f"unknown K210 driver flow {flow!r} (one of {', '.join(FLOWS)})")
    return FLOWS[flow](host, net)
