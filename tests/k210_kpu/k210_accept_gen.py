"""Acceptance traces for the K210 KPU, written the way an outside author would: from
docs/trace-format.md, the digest's §8 address map and §9 decisions, kpu.h/kpu.c and nncase's
K210 runtime; expected bytes from k210_accept_ref (not from the TLM).

    .venv/bin/python -m tests.k210_kpu.k210_accept_gen [OUT_DIR]

writes traces/accept_*/trace.txt (+ mem_NNN.bin). Deterministic: the seeds are fixed per
trace and printed in each trace's header; test_k210_accept.py regenerates them and checks
the committed files are what this script writes.

Host flows, as the open software does them:
  nncase  (nncase 1.x k210 runtime): clear 7, mask 0b110, int_en on the layer, 12 words,
          wait for the interrupt, the ISR writes clear 7 and mask 7.
  kpu_run (SDK kpu.c): clear 7, fifo_threshold {full 10, empty 1}, eight_bit_mode, mask with
          calc_done and layer_cfg_almost_empty open, then one layer per interrupt
          (kpu_continue clears and pushes); the last layer has int_en and send_data_out; the
          output DMA reads fifo_data_out (dma_total_byte+1+7)/8 times.
  burst   (SDK kpu_start/kpu_data_ready): mask 7, clear 7, threshold {12, 1}, up to 12 layers
          pushed at once, then mask with only almost_empty open; output through fifo_data_out.
  polled  everything masked; poll interrupt_raw.calc_done.
Layer-argument and table words are packed with the model's register table
(tlm.k210_kpu.registers, the one source of bit positions; reviewed against kpu.h)."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

from tests.k210_kpu import k210_accept_ref as ref
from tlm.core.trace import TraceWriter
from tlm.k210_kpu.device import (AI_IO_BASE_ADDR, AI_RAM_BASE_ADDR, AI_RAM_SIZE, IO_BASE_ADDR,
                                 RAM_BASE_ADDR)
from tlm.k210_kpu.registers import (LAYER_FIELDS, OFFSET, LayerArgument, encode_activation,
                                    encode_batchnorm, words_to_bytes)

HERE = Path(__file__).resolve().parent
OUT = HERE / "traces"

# kpu_config_t offsets from AI_BASE_ADDR (the register table; kpu.h order)
FIFO, STATUS, RAW, MASK, CLEAR, THRESH, DATA_OUT, EIGHT = (OFFSET[n] for n in (
    "layer_argument_fifo", "interrupt_status", "interrupt_raw", "interrupt_mask", "interrupt_clear",
    "fifo_threshold", "fifo_data_out", "eight_bit_mode"))
KPU_RAM_IO, KPU_RAM_CACHED = AI_IO_BASE_ADDR, AI_RAM_BASE_ADDR   # platform.h (digest §8)
RAM_SIZE = AI_RAM_SIZE
IOMEM = RAM_BASE_ADDR - IO_BASE_ADDR                                # kpu.h IOMEM: runtimes subtract it
CALC_DONE, ALMOST_EMPTY, ALMOST_FULL = 1, 2, 4


def _pack_layer(fields: dict) -> list[int]:
    """Twelve 64-bit words (kpu_layer_argument_t in struct order) from field values; signed
    fields are given as their two's-complement bit patterns."""
    signed = {n for n, (_, f) in LAYER_FIELDS.items() if f.signed}
    vals = {n: (ref.wrap_signed(v, LAYER_FIELDS[n][1].width) if n in signed else v) for n, v in fields.items()}
    return list(LayerArgument.from_fields(vals).words)


def bn_bytes(bn: ref.BN) -> bytes:
    """kpu_batchnorm_argument_t, one word per output channel."""
    return words_to_bytes(encode_batchnorm(bn.mul, bn.shift, bn.add))


def act_bytes(act: ref.Act) -> bytes:
    """kpu_activate_table_t: 16 segment words, then the 16 result_bias bytes."""
    return words_to_bytes(encode_activation(act.x_start, act.y_mul, act.shift, act.bias))


# ------------------------------------------------------------------------------------------
# Building layers from logical tensors (the Model Compiler's choices, §3.3)
# ------------------------------------------------------------------------------------------
def normalise(v: float, bits: int = 24, max_shift: int = 15) -> tuple[int, int]:
    """pow_next_log_of_2: (shift, int(v * 2**shift)) with the value kept inside `bits` signed."""
    s = 0
    while v != 0 and -(1 << (bits - 2)) <= v < (1 << (bits - 2)) and s < max_shift:
        v *= 2
        s += 1
    return s, int(round(v))


def make_bn(rng, acc: np.ndarray, vbits: int, neg_mul: bool) -> ref.BN:
    """Per channel: v = acc*mul >> shift + add spanning about +-2**vbits."""
    mul, shift, add = [], [], []
    for o in range(acc.shape[0]):
        amax = max(int(np.abs(acc[o]).max()), 1)
        g = (1 << vbits) / amax * rng.uniform(0.5, 1.5)
        s = 15
        while s > 0 and abs(g * (1 << s)) >= (1 << 23) - 1:
            s -= 1
        s = int(rng.integers(max(0, s - 3), s + 1))
        m = max(1, min(int(round(g * (1 << s))), (1 << 23) - 1))
        if neg_mul and o % 3 == 1:
            m = -m
        mul.append(m)
        shift.append(s)
        a = int(rng.integers(-(1 << vbits) // 3, (1 << vbits) // 3 + 1))
        add.append(max(-(1 << 31), min(a, (1 << 31) - 1)))
    return ref.BN(mul, shift, add)


def make_act(rng, v: np.ndarray, segments: int = 16, ties: bool = False) -> ref.Act:
    """A 16-segment table from the distribution of v: breakpoints at quantiles, a random
    target output at each, slopes (positive and negative) as y_mul / 2**shift."""
    hi = int(v.max())
    qs = np.unique(np.quantile(v, np.linspace(0.02, 0.98, segments - 1)).astype(np.int64))
    starts = [-(1 << 35)] + sorted(set(int(q) for q in qs))
    while len(starts) < 16:                                 # pad with segments above the data
        starts.append(starts[-1] + int(rng.integers(1, 1 << 10)))
    ends = starts[1:] + [max(hi, starts[-1]) + 1]
    y_mul, shift, bias = [], [], []
    for i, (xs, xe) in enumerate(zip(starts, ends)):
        y0 = int(rng.integers(0, 256))
        if i == 0:                                          # below the data: flat, as the MC does
            y_mul.append(0), shift.append(0), bias.append(y0)
            continue
        y1 = int(rng.integers(-20, 276))
        slope = (y1 - y0) / max(xe - xs, 1)
        if slope == 0:
            m, s = 0, 0
        else:
            s = max(0, min(63, int(math.floor(math.log2(32767 / abs(slope))))))
            m = int(round(slope * (1 << s)))
            m = max(-32768, min(m, 32767))
        if ties and i % 4 == 2:                             # odd multiplier, shift 1: exact halves
            m, s = int(rng.choice([-7, -5, -3, -1, 1, 3, 5, 7])), 1
        y_mul.append(m)
        shift.append(s)
        bias.append(y0)
    return ref.Act(starts, y_mul, shift, bias)


def make_layer(rng, x: np.ndarray, o_ch: int, kernel: int, pool: int, wbits: int,
               depthwise: bool = False, vbits: int = 28, ties: bool = False,
               neg_mul: bool = True) -> ref.Layer:
    c, h, w = x.shape
    qmax = 255 if wbits == 8 else 65535
    shape = (c, kernel, kernel) if depthwise else (o_ch, c, kernel, kernel)
    weights = rng.integers(0, qmax + 1, size=shape).astype(np.uint16 if wbits == 16 else np.uint8)
    zw = -rng.uniform(0.05, 0.95) * qmax                    # bw/sw: weight zero in quantised units
    zx = -rng.uniform(0.0, 0.6) * 255                       # bx/sx: input zero
    shr_x, arg_x = normalise(zw)
    shr_w, arg_w = normalise(zx)
    arg_add = int(round(kernel * kernel * zw * zx))
    L = ref.Layer(x_shape=x.shape, o_ch=c if depthwise else o_ch, kernel=kernel, depthwise=depthwise,
                  pool=pool, weights=weights, wbits=wbits, pad_value=int(round(-zx)),
                  arg_x=arg_x, shr_x=shr_x, arg_w=arg_w, shr_w=shr_w, arg_add=arg_add,
                  bn=ref.BN([1], [0], [0]), act=ref.Act([0] * 16, [0] * 16, [0] * 16, [0] * 16))
    acc = ref.conv_acc(L, x)
    assert np.abs(acc).max() < 1 << 35
    L.bn = make_bn(rng, acc, vbits, neg_mul)
    v = ref.batch_norm(L, acc)
    assert np.abs(v).max() < 1 << 35
    L.act = make_act(rng, v, ties=ties)
    return L


# ------------------------------------------------------------------------------------------
# Registers
# ------------------------------------------------------------------------------------------
def layer_fields(L: ref.Layer, src: int, dst: int, weights: int, bn: int, act: int,
                 int_en: int, send_out: int, coef: "int | None" = None) -> dict:
    """Field values of kpu_layer_argument_t for layer L (seed/MC formulas, §2)."""
    c, h, w = L.x_shape
    oh, ow = L.out_hw
    g_in, rl_in, _ = ref.row_layout(w)
    g_out, rl_out, _ = ref.row_layout(ow)
    per_oc = L.kernel * L.kernel * (1 if L.depthwise else c) * (L.wbits // 8)
    if coef is None:                                        # MC: one load when it fits in 72 KiB
        coef = min(73728 // per_oc, L.o_ch)
    loads = -(-L.o_ch // coef)
    return dict(
        int_en=int_en, ram_flag=0, full_add=0, depth_wise_layer=int(L.depthwise),
        image_src_addr=src, image_dst_addr=dst,
        i_ch_num=c - 1, o_ch_num=L.o_ch - 1, o_ch_num_coef=coef - 1,
        i_row_wid=w - 1, i_col_high=h - 1, o_row_wid=ow - 1, o_col_high=oh - 1,
        kernel_type=1 if L.kernel == 3 else 0, pad_type=0, pool_type=L.pool, first_stride=0,
        bypass_conv=0, load_para=1, dma_burst_size=15, pad_value=L.pad_value, bwsx_base_addr=bn,
        load_coor=1, load_time=loads - 1, para_size=coef * per_oc, para_start_addr=weights,
        coef_column_offset=0, coef_row_offset=0,
        channel_switch_addr=rl_in * h, row_switch_addr=rl_in, coef_size=0, coef_group=g_in,
        load_act=1, active_addr=act,
        wb_channel_switch_addr=rl_out * oh, wb_row_switch_addr=rl_out, wb_group=g_out,
        shr_w=L.shr_w, shr_x=L.shr_x, arg_w=L.arg_w & 0xFFFFFF, arg_x=L.arg_x & 0xFFFFFF,
        arg_add=L.arg_add & ((1 << 40) - 1),
        send_data_out=send_out, channel_byte_num=oh * ow - 1, dma_total_byte=oh * ow * L.o_ch - 1,
    )


class Author:
    """One trace: a TraceWriter plus the author's own picture of memory."""

    def __init__(self, name: str, seed: int, title: str):
        self.name, self.seed = name, seed
        self.rng = np.random.default_rng(seed)
        self.w = TraceWriter("k210-kpu", reg_bits=64)
        self.w.comment(f"{name} (seed {seed}): {title}")
        self.w.comment("Written from trace-format.md, k210-kpu.md s8/s9, kpu.h/kpu.c and nncase's k210")
        self.w.comment("runtime; expected bytes from tests/k210_kpu/k210_accept_ref.py, not from the TLM.")
        self.kpu = np.zeros(RAM_SIZE, np.uint8)            # what the author believes KPU RAM holds
        self.sysmem_next = 0x80100000
        self.stream: list[int] = []                         # output bytes not yet read

    # memory -------------------------------------------------------------------------------
    def table(self, data: bytes, align: int, what: str) -> int:
        a = -(-self.sysmem_next // align) * align
        self.w.comment(f"{what}: {len(data)} bytes at 0x{a:x}")
        self.w.load_mem(a, data)
        self.sysmem_next = a + len(data)
        return a

    def load_fmap(self, fmap: np.ndarray, unit: int, base: int = KPU_RAM_IO) -> None:
        img = ref.to_kpu(fmap)
        self.kpu[unit * 64:unit * 64 + img.size] = img
        self.w.comment(f"input map {fmap.shape} in the KPU layout at unit 0x{unit:x}")
        self.w.load_mem(base + unit * 64, img.tobytes())

    def check_fmap(self, c: int, h: int, w: int, unit: int, base: int = KPU_RAM_IO) -> None:
        n = ref.kpu_bytes(c, h, w)
        self.w.check_mem(base + unit * 64, self.kpu[unit * 64:unit * 64 + n].tobytes())

    # registers ----------------------------------------------------------------------------
    def reg(self, off: int, v: int, why: str = "") -> None:
        if why:
            self.w.comment(why)
        self.w.write_reg(off, v)

    def push(self, L: ref.Layer, x: np.ndarray, src: int, dst: int, tables: tuple, int_en: int,
             send_out: int, coef: "int | None" = None, addr_fix=lambda a: a) -> np.ndarray:
        """Twelve writes to layer_argument_fifo; the author's memory picture follows."""
        wa, ba, aa = (addr_fix(a) for a in tables)
        words = _pack_layer(layer_fields(L, src, dst, wa, ba, aa, int_en, send_out, coef))
        oh, ow = L.out_hw
        self.w.comment(f"layer: {L.x_shape} -> ({L.o_ch}, {oh}, {ow}), {L.kernel}x{L.kernel}"
                       f"{' depthwise' if L.depthwise else ''}, pool_type {L.pool}, {L.wbits}-bit weights,"
                       f" src 0x{src:x} dst 0x{dst:x}, int_en {int_en}, send_data_out {send_out}")
        for v in words:
            self.w.write_reg(FIFO, v)
        out = ref.run_layer(L, x)["out"]
        off = ref.kpu_offsets(*out.shape) + dst * 64
        self.kpu[off] = out
        if send_out:
            self.stream.extend(out.ravel().tolist())
        return out

    def read_stream(self, nbytes: int) -> None:
        """The output DMA: ceil(n/8) reads of fifo_data_out, little-endian; the padding of
        a last partial word is not checked."""
        data, self.stream = self.stream[:nbytes], self.stream[nbytes:]
        self.w.comment(f"output DMA: {-(-nbytes // 8)} reads of fifo_data_out ({nbytes} bytes)")
        for i in range(0, nbytes, 8):
            chunk = data[i:i + 8]
            val = int.from_bytes(bytes(chunk), "little")
            if len(chunk) == 8:
                self.w.read_reg(DATA_OUT, val)
            else:
                self.w.read_reg(DATA_OUT, val, (1 << (8 * len(chunk))) - 1)

    def save(self, out_dir: Path) -> Path:
        return self.w.save(out_dir / self.name)


def ping_pong(idx: int, out_bytes: int) -> int:
    """MC: image_dst_addr = (0 if idx & 1 else img_ram_size - img_output_size) / 64."""
    return 0 if idx & 1 else (RAM_SIZE - out_bytes) // 64


def tables_for(a: Author, L: ref.Layer, i: int) -> tuple:
    return (a.table(L.weight_bytes(), 128, f"layer {i} weights ({L.wbits}-bit, O I kh kw)"),
            a.table(bn_bytes(L.bn), 128, f"layer {i} batch-norm table"),
            a.table(act_bytes(L.act), 256, f"layer {i} activation table"))


# ------------------------------------------------------------------------------------------
# The traces
# ------------------------------------------------------------------------------------------
def net_shapes(a: Author, x: np.ndarray, specs: list) -> list:
    """Layers of a chain: spec = (o_ch, kernel, pool, wbits, depthwise, kwargs)."""
    layers = []
    for o_ch, k, pool, wbits, dw, kw in specs:
        L = make_layer(a.rng, x, o_ch, k, pool, wbits, depthwise=dw, **kw)
        layers.append(L)
        x = ref.run_layer(L, x)["out"]
    return layers


def trace_nncase(out_dir: Path) -> Path:
    """nncase 1.x flow, 8-bit weights, tables addressed through the uncached alias."""
    a = Author("accept_nncase_w8", 1501, "nncase runtime flow, one interrupt per layer, 8-bit weights;"
               " 3x3 / depthwise / 1x1, max, mean and bypass pooling; tables loaded at 0x80..., layer"
               " arguments carry the address minus IOMEM (0x40...), as nncase's runtime does")
    x0 = a.rng.integers(0, 256, size=(3, 25, 40)).astype(np.uint8)
    layers = net_shapes(a, x0, [
        (8, 3, 1, 8, False, dict(vbits=27)),                 # 40x25 -> max 2x2 s2 -> 20x12 (odd height)
        (8, 3, 2, 8, True, dict(vbits=12, ties=True)),       # depthwise, mean 2x2 s2 -> 10x6
        (16, 1, 0, 8, False, dict(vbits=30)),                # 1x1, bypass
    ])
    tabs = [tables_for(a, L, i) for i, L in enumerate(layers)]
    a.load_fmap(x0, 0)
    a.reg(EIGHT, 1, "nncase runtime init: clear, mask all, fifo_threshold 10 | 1 << 4, eight_bit_mode 1")
    a.reg(CLEAR, 7)
    a.reg(MASK, 7)
    a.reg(THRESH, 10 | 1 << 4)
    a.w.read_reg(THRESH, 0x1a, 0xff)
    a.w.read_reg(EIGHT, 1, 1)
    x, src = x0, 0
    for i, L in enumerate(layers):
        oh, ow = L.out_hw
        dst = ping_pong(i, ref.kpu_bytes(L.o_ch, oh, ow))
        a.reg(CLEAR, 7, f"layer {i}: kpu_conv2d_normal")
        a.reg(MASK, 0b110)
        a.w.read_reg(MASK, 0b110, 7)
        x = a.push(L, x, src, dst, tabs[i], int_en=1, send_out=0, addr_fix=lambda p: p - IOMEM)
        a.w.wait_irq(100000)
        a.w.read_reg(STATUS, CALC_DONE, CALC_DONE)
        a.w.read_reg(RAW, CALC_DONE, CALC_DONE)
        a.reg(CLEAR, 7, "kpu_plic_thunk: clear, mask all")
        a.reg(MASK, 7)
        a.w.read_reg(RAW, 0, CALC_DONE)
        a.w.read_reg(STATUS, 0, 7)
        a.check_fmap(L.o_ch, oh, ow, dst, KPU_RAM_IO if i != 1 else KPU_RAM_CACHED)
        src = dst
    return a.save(out_dir)


def trace_kpu_run(out_dir: Path) -> Path:
    """kpu.c kpu_run flow, 16-bit weights (eight_bit_mode 0), one layer per interrupt."""
    a = Author("accept_kpu_run_w16", 1502, "SDK kpu_run flow, 16-bit weights, one layer per"
               " almost_empty interrupt, int_en and send_data_out on the last layer only; 4x4 max,"
               " left-top and right-top pooling; output read through fifo_data_out")
    x0 = a.rng.integers(0, 256, size=(4, 32, 64)).astype(np.uint8)
    layers = net_shapes(a, x0, [
        (8, 3, 3, 16, False, dict(vbits=30)),                # 64x32 -> max 4x4 s4 -> 16x8
        (8, 3, 5, 16, True, dict(vbits=20, ties=True)),      # depthwise, left-top 2 s2 -> 8x4
        (8, 1, 6, 16, False, dict(vbits=26)),                # 1x1, right-top 2 s2 -> 4x2
    ])
    tabs = [tables_for(a, L, i) for i, L in enumerate(layers)]
    a.w.comment("kpu_run_dma_input: the input DMA writes the map to AI_IO_BASE_ADDR")
    a.load_fmap(x0, 0)
    a.reg(CLEAR, 7, "kpu_run_dma_input_done_push_layers")
    a.reg(THRESH, 10 | 1 << 4)
    a.reg(EIGHT, 0)
    a.reg(MASK, ALMOST_FULL, "interrupt_mask: calc_done and layer_cfg_almost_empty open")
    x, src = x0, 0
    last = len(layers) - 1
    for i, L in enumerate(layers):
        oh, ow = L.out_hw
        dst = ping_pong(i, ref.kpu_bytes(L.o_ch, oh, ow))
        a.reg(CLEAR, 7, f"kpu_continue: layer {i}")
        x = a.push(L, x, src, dst, tabs[i], int_en=int(i == last), send_out=int(i == last))
        a.w.wait_irq(100000)
        if i == 0:
            a.w.read_reg(STATUS, ALMOST_EMPTY, ALMOST_EMPTY)
        src = dst
    a.w.read_reg(RAW, CALC_DONE, CALC_DONE)
    a.reg(CLEAR, 7, "the last interrupt: kpu_continue clears, nothing left to push")
    L = layers[-1]
    oh, ow = L.out_hw
    a.read_stream(oh * ow * L.o_ch)
    a.check_fmap(L.o_ch, oh, ow, src)
    a.check_fmap(layers[1].o_ch, *layers[1].out_hw, 0x0, KPU_RAM_CACHED)
    return a.save(out_dir)


def trace_burst(out_dir: Path) -> Path:
    """kpu_start / kpu_data_ready flow: all layers in one burst, then the almost_empty interrupt."""
    a = Author("accept_burst_pools_w8", 1503, "SDK kpu_start flow: five layers pushed back to back"
               " (60 writes) before any interrupt; mean 4x4 s4, mean 2x2 s1, max 2x2 s1, left-top"
               " 4x4 s4 pooling; output of the last layer through fifo_data_out")
    x0 = a.rng.integers(0, 256, size=(2, 64, 96)).astype(np.uint8)
    layers = net_shapes(a, x0, [
        (6, 3, 4, 8, False, dict(vbits=26)),                 # 96x64 -> mean 4x4 s4 -> 24x16
        (6, 3, 8, 8, True, dict(vbits=16, ties=True)),       # depthwise, mean 2x2 s1 -> 24x16
        (10, 3, 9, 8, False, dict(vbits=24)),                # max 2x2 s1 -> 24x16
        (5, 1, 7, 8, False, dict(vbits=22)),                 # left-top 4x4 s4 -> 6x4
        (4, 3, 0, 8, False, dict(vbits=25)),                 # bypass on 6x4
    ])
    tabs = [tables_for(a, L, i) for i, L in enumerate(layers)]
    a.load_fmap(x0, 0)
    a.reg(EIGHT, 1, "kpu_data_ready")
    a.reg(MASK, 7)
    a.reg(CLEAR, 7)
    a.reg(THRESH, 12 | 1 << 4)
    x, src = x0, 0
    last = len(layers) - 1
    dsts = []
    for i, L in enumerate(layers):
        oh, ow = L.out_hw
        dst = ping_pong(i, ref.kpu_bytes(L.o_ch, oh, ow))
        x = a.push(L, x, src, dst, tabs[i], int_en=int(i == last), send_out=int(i == last))
        dsts.append(dst)
        src = dst
    a.reg(MASK, CALC_DONE | ALMOST_FULL, "interrupt_mask: only layer_cfg_almost_empty open")
    a.w.wait_irq(100000)
    a.reg(CLEAR, 7, "kpu_config_input: nothing left; clear and mask all")
    a.reg(MASK, 7)
    L = layers[-1]
    oh, ow = L.out_hw
    a.read_stream(oh * ow * L.o_ch)
    a.check_fmap(L.o_ch, oh, ow, dsts[-1])
    a.check_fmap(layers[-2].o_ch, *layers[-2].out_hw, dsts[-2])
    return a.save(out_dir)


def trace_polled(out_dir: Path) -> Path:
    """Polling with everything masked; several weight loads; odd DMA sizes; large shifts."""
    a = Author("accept_polled_loads", 1504, "polled: all interrupts masked, poll interrupt_raw;"
               " 1x1 conv 78 wide (two 64-byte lines a row) with four weight loads (load_time 3),"
               " a 3x3 layer on an odd height; send_data_out on both layers, byte counts not"
               " multiples of 8; input loaded through the cached alias")
    x0 = a.rng.integers(0, 256, size=(5, 7, 78)).astype(np.uint8)
    layers = net_shapes(a, x0, [
        (14, 1, 0, 8, False, dict(vbits=33)),                # 1x1, 78x7 bypass
        (3, 3, 6, 8, False, dict(vbits=10, ties=True)),      # 3x3, right-top 2 s2 -> 39x3
    ])
    tabs = [tables_for(a, L, i) for i, L in enumerate(layers)]
    a.w.comment("the input is loaded through the cached alias 0x80600000")
    a.load_fmap(x0, 0x100, KPU_RAM_CACHED)
    a.reg(EIGHT, 1)
    a.reg(MASK, 7)
    a.reg(CLEAR, 7)
    x, src = x0, 0x100
    dsts = [0x2000, 0x6000]
    for i, L in enumerate(layers):
        oh, ow = L.out_hw
        x = a.push(L, x, src, dsts[i], tabs[i], int_en=1, send_out=1, coef=4 if i == 0 else None)
        a.w.poll_reg(RAW, CALC_DONE, CALC_DONE, 1000)
        a.w.read_reg(STATUS, 0, 7)
        a.reg(CLEAR, CALC_DONE)
        a.w.read_reg(RAW, 0, CALC_DONE)
        a.read_stream(oh * ow * L.o_ch)
        a.check_fmap(L.o_ch, oh, ow, dsts[i])
        src = dsts[i]
    return a.save(out_dir)


def trace_kpu_run_isr(out_dir: Path) -> Path:
    """kpu_run with the ISR translated literally: after the last layer, one interrupt for its
    almost_empty (clear, nothing to push) and one for its calc_done."""
    a = Author("accept_kpu_run_isr_w8", 1505, "SDK kpu_run, the ISR translated one interrupt at a"
               " time: the last layer gives almost_empty (kpu_continue clears, nothing to push),"
               " then calc_done; 8-bit weights, mean 2x2 s2 and max 2x2 s1; a second run"
               " waits for the last calc_done by polling interrupt_raw after the clear")
    x0 = a.rng.integers(0, 256, size=(3, 16, 48)).astype(np.uint8)
    layers = net_shapes(a, x0, [
        (6, 3, 2, 8, False, dict(vbits=25)),                 # 48x16 -> mean 2x2 s2 -> 24x8
        (5, 3, 9, 8, False, dict(vbits=14, ties=True)),      # max 2x2 s1 -> 24x8
    ])
    tabs = [tables_for(a, L, i) for i, L in enumerate(layers)]
    for run in range(2):
        a.w.comment(f"run {run}: kpu_run_dma_input (the last run's layer 1 wrote over the input)")
        a.load_fmap(x0, 0)
        a.reg(CLEAR, 7, "kpu_run_dma_input_done_push_layers")
        a.reg(THRESH, 10 | 1 << 4)
        a.reg(EIGHT, 1)
        a.reg(MASK, ALMOST_FULL)
        x, src = x0, 0
        for i, L in enumerate(layers):
            oh, ow = L.out_hw
            dst = ping_pong(i, ref.kpu_bytes(L.o_ch, oh, ow))
            last = i == len(layers) - 1
            a.reg(CLEAR, 7, f"kpu_continue: layer {i}")
            x = a.push(L, x, src, dst, tabs[i], int_en=int(last), send_out=int(last))
            a.w.wait_irq(1000)
            src = dst
        a.reg(CLEAR, 7, "kpu_continue on the last layer's almost_empty: clear, nothing to push")
        if run == 0:
            a.w.wait_irq(1000)
            a.w.comment("the last layer's calc_done")
            a.w.read_reg(STATUS, CALC_DONE, CALC_DONE | ALMOST_EMPTY)
            a.reg(CLEAR, 7)
        else:
            a.w.poll_reg(RAW, CALC_DONE, CALC_DONE, 1000)
            a.reg(CLEAR, 7)
        a.w.read_reg(RAW, 0, 7)
        L = layers[-1]
        oh, ow = L.out_hw
        a.read_stream(oh * ow * L.o_ch)
        a.check_fmap(L.o_ch, oh, ow, src)
    return a.save(out_dir)


def trace_registers(out_dir: Path) -> Path:
    """Register behaviour a host may rely on, around one small layer run several ways."""
    a = Author("accept_register_semantics", 1506, "read-backs, fifo_data_out read before any data"
               " (reads 0, not an error), calc_done read without a wait, a clear then a read,"
               " two streaming layers read back after both; tables loaded at the uncached alias"
               " 0x40100000 while the layer arguments give 0x80100000")
    x0 = a.rng.integers(0, 256, size=(2, 8, 12)).astype(np.uint8)
    L = make_layer(a.rng, x0, 3, 3, 1, 8, vbits=18, ties=True)
    a.sysmem_next = 0x40100000
    tabs = tables_for(a, L, 0)
    a.load_fmap(x0, 0x40)
    oh, ow = L.out_hw
    a.w.comment("read-backs")
    for off, v in ((MASK, 5), (THRESH, 10 | 1 << 4), (EIGHT, 1), (MASK, 7)):
        a.reg(off, v)
        a.w.read_reg(off, v)
    a.reg(CLEAR, 7)
    a.w.read_reg(CLEAR, 0)
    a.w.comment("the output FIFO is empty: fifo_data_out reads 0")
    a.w.read_reg(DATA_OUT, 0)
    fix = lambda p: p + IOMEM                                 # noqa: E731 - 0x40... -> 0x80...
    a.w.comment("1: everything masked, int_en: raw shows calc_done without a wait")
    a.push(L, x0, 0x40, 0x100, tabs, int_en=1, send_out=1, addr_fix=fix)
    a.w.read_reg(RAW, CALC_DONE, CALC_DONE)
    a.w.read_reg(STATUS, 0)
    a.reg(CLEAR, 7)
    a.w.read_reg(RAW, 0, CALC_DONE)
    a.check_fmap(L.o_ch, oh, ow, 0x100)
    a.w.comment("2: the same layer again, streaming too; both outputs read after it")
    a.reg(MASK, ALMOST_EMPTY | ALMOST_FULL)
    a.push(L, x0, 0x40, 0x200, tabs, int_en=1, send_out=1, addr_fix=fix)
    a.w.wait_irq(10)
    a.w.read_reg(STATUS, CALC_DONE)
    a.reg(CLEAR, 7)
    a.reg(MASK, 7)
    a.read_stream(2 * oh * ow * L.o_ch)
    a.w.read_reg(DATA_OUT, 0)
    a.check_fmap(L.o_ch, oh, ow, 0x200, KPU_RAM_CACHED)
    a.w.comment("3: calc_done and almost_empty open; wait, clear, read: nothing left pending")
    a.reg(MASK, ALMOST_FULL)
    a.push(L, x0, 0x40, 0x300, tabs, int_en=1, send_out=0, addr_fix=fix)
    a.w.wait_irq(10)
    a.reg(CLEAR, 7)
    a.w.read_reg(STATUS, 0)
    a.check_fmap(L.o_ch, oh, ow, 0x300)
    return a.save(out_dir)


TRACES = (trace_nncase, trace_kpu_run, trace_burst, trace_polled, trace_kpu_run_isr, trace_registers)


def main(argv: list[str]) -> int:
    out_dir = Path(argv[1]) if len(argv) > 1 else OUT
    for make in TRACES:
        print(make(out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
