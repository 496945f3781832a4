"""The DTPU host library: an int8 DEPTHWISE_CONV_2D layer on the accelerator, the thesis'
TFLite delegate (App. A, DTPU_delegate.py) done right.

    plan = plan_depthwise(layer, x, cfg)        # weight images + runs (CSR word, input packet)
    outs = run_direct(plan)                     # on the adapter TLM
    outs = run_system(plan, target)             # through DDR + DMAs + registers of a trace target
    y = finish(plan, outs)                      # host reduction + TFLite requantisation -> int8

Mapping (docs/devices/dtpu.md "Host library"). For every input channel c the layer is a
2D correlation with the filters of its M = depth-multiplier output channels. The MXU runs
in int8 with row groups (contract "row groups"): group rows are kernel rows, so one group
output is a full 2D window sum, computed as the stream of input rows passes through the
chained rows. Vertical stride and dilation are handled by streaming only the input rows of
one residue class r = (ky*dh) mod sh (a polyphase split: the kernel rows of class r are
consecutive in that stream); kernel rows past ROWS are split over several runs. Columns
are lanes: one input vector is COLUMNS consecutive input pixels of one row; a group's
weights sit at lane dx*sw + (kx - k0)*dw, so one vector serves several output columns dx
(when the window fits) and the groups of a run are (output channel m, column offset dx)
pairs; kernel columns past COLUMNS lanes are split over runs. A run streams, for each tile
of output columns and batch, OH + G - 1 rows (the first G-1 outputs of a tile are the
chain filling: discarded); a stream longer than the input FIFO is split into pieces that
overlap by G-1 rows.

Out-of-image taps are zero lanes, so a run computes sum(w * x) over the in-image taps; the
host adds input_offset * sum(w over in-image taps) (TFLite's acc += w * (x + input_offset)
for in-image taps only), the bias, and requantises exactly as TFLite's reference kernel
(quant.py).

Thesis bugs fixed here (docs/devices/dtpu.md lists them with their lines): off-by-one window
and output loops, the bias multiplied instead of added, no requantisation / zero points /
activation, padding/stride/dilation/depth multiplier ignored, an int8 reduction of partial
products, weight padding written to the wrong buffer, lane count compared with the kernel
height, an 8 KiB CSR buffer for a 1 KiB memory, a 16384-word weight buffer for an 8192-word
memory, no signedness in the CSR word, weight start addresses not rebased per weight load.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import contract as C
from . import quant
from .adapter import Dtpu
from .layers import DepthwiseLayer, LayerError

PRECISION = "int8"
RUN_OVERHEAD = 40        # cycles a run costs beyond its steps (CSR fetch, weight load, drain)


@dataclass
class Run:
    csr: int
    image: int                          # weight image (packet) index
    inputs: np.ndarray                  # uint64 input FIFO packet
    groups: list[tuple[int, int]]       # output lane k -> (output channel, column offset dx)
    n: np.ndarray                       # per step: batch,
    oy: np.ndarray                      # output row (any value where not valid),
    ox0: np.ndarray                     # first output column of the tile,
    valid: np.ndarray                   # and whether the step's outputs are real
    q: int                              # output words per step

    @property
    def steps(self) -> int:
        return int(self.valid.size)

    @property
    def out_words(self) -> int:
        return self.steps * self.q


@dataclass
class Plan:
    layer: DepthwiseLayer
    cfg: C.Config
    images: list[np.ndarray] = field(default_factory=list)     # weight packets
    runs: list[Run] = field(default_factory=list)

    @property
    def steps(self) -> int:
        return sum(r.steps for r in self.runs)

    def estimated_cycles(self) -> int:
        """The planner's cost model: max(P, Q) cycles a step, RUN_OVERHEAD a run."""
        p = self.cfg.words_per_vector(C.PRECISION_BY_NAME[PRECISION])
        return sum(r.steps * max(p, r.q) + RUN_OVERHEAD for r in self.runs)


def _check(layer: DepthwiseLayer, x: np.ndarray, cfg: C.Config) -> None:
    if PRECISION not in cfg.precisions:
        raise LayerError(f"{cfg.name} has no int8 PEs")
    if x.shape != tuple(layer.input_shape) or x.dtype != np.int8:
        raise LayerError(f"{layer.name}: input must be int8 {tuple(layer.input_shape)}, got {x.dtype} {x.shape}")
    if cfg.rows * cfg.columns > 1 << 15:
        raise LayerError("int8 sums of more than 2^15 products may wrap the 32-bit lanes")


def plan_depthwise(layer: DepthwiseLayer, x: np.ndarray, cfg: "C.Config | str" = C.DEFAULT_CONFIG) -> Plan:
    cfg = C.CONFIGS[cfg] if isinstance(cfg, str) else cfg
    x = np.asarray(x)
    _check(layer, x, cfg)
    N, H, W, Cin = layer.input_shape
    KH, KW = layer.kernel
    (sh, sw), (dh, dw), M = layer.stride, layer.dilation, layer.depth_multiplier
    OH, OW, pt, pl = layer.geometry()
    R, CC = cfg.rows, cfg.columns
    prec = C.PRECISION_BY_NAME[PRECISION]
    P = cfg.words_per_vector(prec)
    L = cfg.infifo_depth // P                               # steps a run's packet holds
    wq = layer.weights.astype(np.int8)
    plan = Plan(layer, cfg)
    blocks: list[np.ndarray] = []                           # weight blocks (R*P words each)
    block_of: dict[bytes, int] = {}

    def block_index(Wb: np.ndarray) -> int:
        words = np.zeros((R, P * 8), np.int8)
        words[:, :CC] = Wb
        key = words.tobytes()
        if key not in block_of:
            block_of[key] = len(blocks)
            blocks.append(words.view("<u8").reshape(-1).copy())
        return block_of[key]

    # kernel-column chunks: contiguous lanes, window span <= COLUMNS
    kchunks, k0 = [], 0
    while k0 < KW:
        k1 = min(KW, k0 + (CC - 1) // dw + 1)
        kchunks.append((k0, k1, (CC - ((k1 - 1 - k0) * dw + 1)) // sw + 1))   # (k0, k1, ndx_max)
        k0 = k1

    def slots_cost(G: int, ndx_max: int) -> tuple[float, int, int]:
        """Estimated cycles of one (kernel-row chunk of G rows, kernel-column chunk), and
        the groups a run (ng) and output columns a vector (ndx) that minimise them: a step
        costs max(P, Q) cycles (input words or output words), a run RUN_OVERHEAD."""
        best = None
        for ng in range(1, R // G + 1):
            ndx = max(1, min(ndx_max, ng // M)) if ng >= M else 1
            runs_per_c = -(-(M * ndx) // ng)
            tiles = N * -(-OW // ndx)
            steps = tiles * (OH + G - 1)
            q = cfg.words_per_step(prec, min(ng, M * ndx))
            cost = Cin * runs_per_c * (steps * max(P, q) + RUN_OVERHEAD * -(-steps * P // cfg.infifo_depth))
            if best is None or cost < best[0]:
                best = (cost, ng, ndx)
        return best

    pending = []                                            # (block, G, groups, stream spec)
    for r in range(sh):
        taps = {(ky * dh - r) // sh: ky for ky in range(KH) if (ky * dh) % sh == r}
        if not taps:
            continue
        E = max(taps)
        # split the class's kernel rows into chunks of <= ROWS rows: cheapest partition
        best: dict[int, tuple[float, list]] = {E + 1: (0.0, [])}
        for i in range(E, -1, -1):
            if i not in taps:
                best[i] = best[i + 1]
                continue
            cands = []
            for g in range(1, min(R, E + 1 - i) + 1):
                rows = [e for e in range(i, i + g) if e in taps]
                G = max(rows) - i + 1
                if G != g:
                    continue
                cost = sum(slots_cost(G, nd)[0] for _, _, nd in kchunks)
                cands.append((cost + best[i + g][0], [(i, G)] + best[i + g][1]))
            best[i] = min(cands, key=lambda cnd: cnd[0])
        for e0, G in best[0][1]:
            chunk = {e: taps[e] for e in range(e0, e0 + G) if e in taps}
            for k0, k1, ndx_max in kchunks:
                _, ng, ndx = slots_cost(G, ndx_max)
                pairs = [(m, dx) for m in range(M) for dx in range(ndx)]
                for c in range(Cin):
                    for p0 in range(0, len(pairs), ng):
                        slots = pairs[p0:p0 + ng]
                        Wb = np.zeros((R, CC), np.int8)
                        for g, (m, dx) in enumerate(slots):
                            for e, ky in chunk.items():
                                for kx in range(k0, k1):
                                    Wb[g * G + e - e0, dx * sw + (kx - k0) * dw] = wq[ky, kx, c * M + m]
                        pending.append((block_index(Wb), G, [(c * M + m, dx) for m, dx in slots],
                                        (r, e0, k0, c, ndx)))

    # weight images: blocks in order, cut at SIZE_WMEMORY words
    per_image = max(1, cfg.size_wmemory // (R * P))
    image_of = [b // per_image for b in range(len(blocks))]
    for i in range(0, len(blocks), per_image):
        plan.images.append(np.concatenate(blocks[i:i + per_image]))

    xi = x.astype(np.int64)
    for blk, G, groups, (r, e0, k0, c, ndx) in sorted(pending, key=lambda p: image_of[p[0]]):
        S = OH + G - 1                                      # steps of one tile
        tiles = [(n, ox0) for n in range(N) for ox0 in range(0, OW, ndx)]
        # pieces of tiles no longer than L steps, overlapping by G-1 steps
        pieces = []
        for n, ox0 in tiles:
            s = 0
            while True:
                pieces.append((n, ox0, s, min(S, s + L)))
                if s + L >= S:
                    break
                s += L - (G - 1)
        runs_pieces, cur, used = [], [], 0
        for pc in pieces:
            ln = pc[3] - pc[2]
            if cur and used + ln > L:
                runs_pieces.append(cur)
                cur, used = [], 0
            cur.append(pc)
            used += ln
        runs_pieces.append(cur)
        wm_start = (blk % per_image) * R * P
        NGr = len(groups)
        q = cfg.words_per_step(prec, NGr)
        csr = C.csr_word(PRECISION, signed=True, group_rows=G, out_groups=NGr, wm_start=wm_start)
        lanes = np.arange(CC)
        for rp in runs_pieces:
            n_s, oy_s, ox_s, v_s, vecs = [], [], [], [], []
            for n, ox0, s0, s1 in rp:
                s = np.arange(s0, s1)
                t = e0 + s
                yy = r + t * sh - pt                       # input rows
                xx = ox0 * sw - pl + k0 * dw + lanes       # input columns of the lanes
                vy, vx = (yy >= 0) & (yy < H), (xx >= 0) & (xx < W)
                blockv = xi[n, np.clip(yy, 0, H - 1)][:, np.clip(xx, 0, W - 1), c]
                vecs.append(np.where(vy[:, None] & vx[None, :], blockv, 0))
                oy = s - (G - 1)
                n_s.append(np.full(s.size, n))
                oy_s.append(oy)
                ox_s.append(np.full(s.size, ox0))
                v_s.append((s - s0 >= G - 1) & (oy >= 0) & (oy < OH))
            lanes8 = np.zeros((sum(v.size for v in v_s), P * 8), np.int8)
            lanes8[:, :CC] = np.concatenate(vecs).astype(np.int8)
            plan.runs.append(Run(csr, image_of[blk], lanes8.view("<u8").reshape(-1).copy(), groups,
                                 np.concatenate(n_s), np.concatenate(oy_s), np.concatenate(ox_s),
                                 np.concatenate(v_s), q))
    return plan


# ------------------------------------------------------------------------------------------
# Host reduction and requantisation
# ------------------------------------------------------------------------------------------
def accumulate(plan: Plan, outputs: "list[np.ndarray]") -> np.ndarray:
    """The sum(w * x) of every output element over its in-image taps, from the runs' output
    words (int64 [N, OH, OW, C*M])."""
    L = plan.layer
    OH, OW, _, _ = L.geometry()
    acc = np.zeros((L.input_shape[0], OH, OW, L.out_channels), np.int64)
    if len(outputs) != len(plan.runs):
        raise ValueError(f"{len(outputs)} output packets for {len(plan.runs)} runs")
    for k, (run, words) in enumerate(zip(plan.runs, outputs)):
        w = np.asarray(words, np.uint64)
        if w.size != run.out_words:
            raise ValueError(f"run {k}: {w.size} output words, expected {run.out_words}")
        lanes = w.view("<i4").reshape(run.steps, 2 * run.q)[:, :len(run.groups)].astype(np.int64)
        for g, (ch, dx) in enumerate(run.groups):
            ox = run.ox0 + dx
            ok = run.valid & (ox < OW)
            np.add.at(acc, (run.n[ok], run.oy[ok], ox[ok], np.full(int(ok.sum()), ch)), lanes[ok, g])
    return acc


def in_image_weight_sums(layer: DepthwiseLayer) -> np.ndarray:
    """sum of the filter over the taps inside the image, per (OH, OW, C*M)."""
    _, H, W, _ = layer.input_shape
    OH, OW, pt, pl = layer.geometry()
    (KH, KW), (sh, sw), (dh, dw) = layer.kernel, layer.stride, layer.dilation
    iy = np.arange(OH)[:, None] * sh - pt + np.arange(KH)[None, :] * dh
    ix = np.arange(OW)[:, None] * sw - pl + np.arange(KW)[None, :] * dw
    vy, vx = ((iy >= 0) & (iy < H)).astype(np.int64), ((ix >= 0) & (ix < W)).astype(np.int64)
    return np.einsum("yk,xl,klc->yxc", vy, vx, layer.weights.astype(np.int64))


def requantize(layer: DepthwiseLayer, acc: np.ndarray) -> np.ndarray:
    """TFLite's int8 depthwise tail: + input offset x in-image weight sum, + bias, per-channel
    multiplier, + output zero point, activation clamp."""
    total = acc + (-layer.input_zp) * in_image_weight_sums(layer)[None]
    if layer.bias is not None:
        total = total + layer.bias
    mult, shift = quant.channel_multipliers(layer.input_scale, layer.weight_scales, layer.output_scale,
                                            layer.out_channels)
    y = quant.multiply_by_quantized_multiplier(quant.wrap_int32(total), mult, shift) + layer.output_zp
    lo, hi = quant.activation_range(layer.activation, layer.output_scale, layer.output_zp)
    return np.clip(y, lo, hi).astype(np.int8)


def finish(plan: Plan, outputs: "list[np.ndarray]") -> np.ndarray:
    return requantize(plan.layer, accumulate(plan, outputs))


# ------------------------------------------------------------------------------------------
# Executors
# ------------------------------------------------------------------------------------------
IN = {a.name: a.index for a in C.IN_ARGS}


def command_sequence(plan: Plan):
    """The host's actions on the adapter, as data: ("reg", name, value), ("send", arg,
    words, what) with what = ("image", i) | ("run", k), ("run", k) (the output packet of
    run k follows). Step mode: each run
    is EXECUTE_STEP then UPDATE_IN_ARG of its CSR and input buffers; the next run's packets
    stream into the second buffers meanwhile; a new weight image releases the old one."""
    yield from (("reg", "CTRL", 1), ("reg", "CTRL", 0), ("reg", "IARG_RQT_EN", 0x7),
                ("reg", "OARG_LENGTH_MODE", 0), ("reg", "OARG0_LENGTH", 0))
    image = None
    for k, run in enumerate(plan.runs):
        if run.image != image:
            if image is not None:
                yield ("reg", "CMD", C.cmd_word("UPDATE_IN_ARG", 1 << IN["WMEM"]))
            image = run.image
            yield ("send", IN["WMEM"], plan.images[image], ("image", image))
        yield ("send", IN["CSR"], np.array([run.csr], np.uint64), ("run", k))
        yield ("send", IN["INFIFO"], run.inputs, ("run", k))
        yield ("reg", "CMD", C.cmd_word("EXECUTE_STEP"))
        yield ("reg", "CMD", C.cmd_word("UPDATE_IN_ARG", (1 << IN["CSR"]) | (1 << IN["INFIFO"])))
        yield ("run", k)
    yield ("reg", "CMD", C.cmd_word("UPDATE_IN_ARG", 1 << IN["WMEM"]))


class HostError(RuntimeError):
    pass


def run_direct(plan: Plan, dtpu: "Dtpu | None" = None) -> list[np.ndarray]:
    """Execute on the adapter TLM through its register and stream calls."""
    d = dtpu or Dtpu(plan.cfg)
    outs: list[np.ndarray] = []
    for act in command_sequence(plan):
        if act[0] == "reg":
            if d.axil_write(C.OFFSET[act[1]], act[2]) != C.RESP_OKAY:
                raise HostError(f"SLVERR writing {act[1]}")
        elif act[0] == "send":
            d.stream_packet(act[1], act[2])
        else:
            words = []
            while d.out_valid():
                w, last = d.out_pop()
                words.append(w)
                if last:
                    break
            outs.append(np.array(words, np.uint64))
    st = d.status()
    if C.REG["STATUS"].field("CORE_ERR").get(st):
        raise HostError(f"the DTPU reported core error {C.REG['STATUS'].field('ERR_CODE').get(st)}")
    return outs


# ---- through DDR, the AXI DMAs and the registers (a TraceTarget: the TLM system, a
#      RecordingTarget around it, or the bench's pins)
DDR_BASE = 0x1000_0000
ST_IDLE = C.dma_field("IDLE")


def _dma_off(window: str, reg: str) -> int:
    return C.WINDOW[window].offset + C.DMA_REG[reg].offset


def _adapter_off(name: str) -> int:
    return C.WINDOW["DTPU"].offset + C.OFFSET[name]


def _poll(target, offset: int, expect: int, mask: int, max_reads: int = 1_000_000) -> None:
    if hasattr(target, "poll_reg"):
        ok = target.poll_reg(offset, expect, mask, max_reads)
    else:
        ok = False
        for _ in range(max_reads):
            if target.read_reg(offset) & mask == expect:
                ok = True
                break
            target.idle()
    if not ok:
        raise HostError(f"register 0x{offset:x} never read 0x{expect:x} under mask 0x{mask:x}")


def run_system(plan: Plan, target, check: bool = False, base: int = DDR_BASE) -> list[np.ndarray]:
    """Execute through DDR memory and the four AXI DMAs of the thesis' system
    (contract.WINDOWS), as a host CPU does: buffers are written to DDR, each packet is one
    MM2S transfer, each run's output one S2MM transfer whose completion interrupt the host
    waits for. `check=True` asks a RecordingTarget to record the outputs as check_mem."""
    rs = C.dma_field("RS").mask
    ioc_en, ioc = C.dma_field("IOC_IRQEN").mask, C.dma_field("IOC_IRQ").mask
    # DDR layout
    addr = base
    img_addr = []
    for img in plan.images:
        img_addr.append(addr)
        target.load_mem(addr, img.tobytes())
        addr += img.nbytes
    csr_addr, in_addr, out_addr = [], [], []
    for run in plan.runs:
        csr_addr.append(addr)
        target.load_mem(addr, np.array([run.csr], "<u8").tobytes())
        addr += 8
        in_addr.append(addr)
        target.load_mem(addr, run.inputs.astype("<u8").tobytes())
        addr += run.inputs.nbytes
    for run in plan.runs:
        out_addr.append(addr)
        addr += run.out_words * 8
    if addr >= 1 << C.TRACE_ADDR_BITS:
        raise HostError("the layer's buffers do not fit the 32-bit DDR space")

    def mm2s(window: str, src: int, nbytes: int) -> None:
        _poll(target, _dma_off(window, "MM2S_DMASR"), ST_IDLE.mask, ST_IDLE.mask)
        target.write_reg(_dma_off(window, "MM2S_SA"), src)
        target.write_reg(_dma_off(window, "MM2S_LENGTH"), nbytes)

    def s2mm(k: int) -> None:
        target.write_reg(_dma_off("DMA_OUTFIFO", "S2MM_DA"), out_addr[k])
        target.write_reg(_dma_off("DMA_OUTFIFO", "S2MM_LENGTH"), plan.runs[k].out_words * 8)

    def wait_out() -> None:
        if not target.wait_irq(target.wait_default):
            raise HostError("the output DMA never completed")
        target.write_reg(_dma_off("DMA_OUTFIFO", "S2MM_DMASR"), ioc)

    for w in ("DMA_CSR", "DMA_WM", "DMA_INFIFO"):
        target.write_reg(_dma_off(w, "MM2S_DMACR"), rs)
    target.write_reg(_dma_off("DMA_OUTFIFO", "S2MM_DMACR"), rs | ioc_en)
    for act in command_sequence(plan):
        if act[0] == "reg":
            target.write_reg(_adapter_off(act[1]), act[2])
        elif act[0] == "send":
            arg, (_, i) = act[1], act[3]
            if arg == IN["WMEM"]:
                mm2s("DMA_WM", img_addr[i], plan.images[i].nbytes)
            elif arg == IN["CSR"]:
                mm2s("DMA_CSR", csr_addr[i], 8)
            else:
                mm2s("DMA_INFIFO", in_addr[i], plan.runs[i].inputs.nbytes)
        else:
            k = act[1]
            if k > 0:
                wait_out()                     # run k-1's output is in DDR; run k is running
            s2mm(k)
    if plan.runs:
        wait_out()
    outs = []
    for k, run in enumerate(plan.runs):
        n = run.out_words * 8
        data = target.check_mem(out_addr[k], n) if check and hasattr(target, "check_mem") \
            else target.read_mem(out_addr[k], n)
        outs.append(np.frombuffer(data, "<u8").copy())
    st = target.read_reg(_adapter_off("STATUS"))
    if C.REG["STATUS"].field("CORE_ERR").get(st):
        raise HostError(f"the DTPU reported core error {C.REG['STATUS'].field('ERR_CODE').get(st)}")
    return outs


def run_layer(layer: DepthwiseLayer, x: np.ndarray, cfg: "C.Config | str" = C.DEFAULT_CONFIG,
              target=None) -> np.ndarray:
    """The whole layer: plan, execute (the adapter TLM, or `target`), reduce, requantise."""
    plan = plan_depthwise(layer, x, cfg)
    outs = run_direct(plan) if target is None else run_system(plan, target)
    return finish(plan, outs)
