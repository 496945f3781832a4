"""Command streams of the tests: encoding, feature maps, DMA (with the DMA reference of
tlm/ethos_u85/dma_reference.py as oracle), byte checks, small kernel operations."""
from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

from tb.ethos_u85.testlib.memmap import (
    EXT_REGIONS,
    REGION_BASE,
    SRAM_REGIONS,
)
from tb.ethos_u85.testlib.regs import (
    CH_RD_IFM,
    CH_RD_IFM_STREAM,
    CH_RD_SCALE,
    CH_RD_WEIGHTS,
    CH_WR_OFM,
)
from tlm.ethos_u85 import isa
from tlm.ethos_u85.dma_reference import DictMemory, DmaParams, dma_copy


def enc(*cmds) -> list:
    """Command words from ("NAME", {fields}) pairs or bare names (tlm.ethos_u85.isa.encode)."""
    words = []
    for c in cmds:
        name, kw = (c, {}) if isinstance(c, str) else c
        words += isa.encode(name, **kw)
    return words


STRIDE_MODE = {"1d": 0, "2d": 1, "3d": 2}

def fmap_cmds(p: str, prec: dict, region: int, bases, sx: int, sy: int, sc: int, w0m1: int,
              h0m1: int, h1m1: int, zp: int) -> list:
    """NPU_SET commands (for enc) of feature map *p* (IFM, IFM2 or OFM): precision fields,
    region, BASE0..3, strides, tile sizes and zero point."""
    c = [(f"NPU_SET_{p}_PRECISION", prec), (f"NPU_SET_{p}_REGION", dict(region=region))]
    c += [(f"NPU_SET_{p}_BASE{i}", dict(addr=b)) for i, b in enumerate(bases)]
    c += [(f"NPU_SET_{p}_STRIDE_X", dict(addr=sx)), (f"NPU_SET_{p}_STRIDE_Y", dict(addr=sy)),
          (f"NPU_SET_{p}_STRIDE_C", dict(addr=sc)),
          (f"NPU_SET_{p}_WIDTH0_M1", dict(width_m1=w0m1)),
          (f"NPU_SET_{p}_HEIGHT0_M1", dict(height_m1=h0m1)),
          (f"NPU_SET_{p}_HEIGHT1_M1", dict(height_m1=h1m1)),
          (f"NPU_SET_{p}_ZERO_POINT", dict(zero_point=zp & 0xFFFF))]
    return c

def dma_case(rng, mode: str, min_length: int = 1) -> dict:
    """Random DMA parameters (for dma_cmds/dma_expect): SRAM -> EXT or EXT -> SRAM,
    unaligned, strided; *mode* 1d, 2d or 3d."""
    if rng.random() < 0.5:
        src_region, dst_region = rng.choice(SRAM_REGIONS), rng.choice(EXT_REGIONS)
    else:
        src_region, dst_region = rng.choice(EXT_REGIONS), rng.choice(SRAM_REGIONS)
    p = dict(src_region=src_region, dst_region=dst_region, src=rng.randrange(0, 0x300),
             dst=rng.randrange(0, 0x300), length=rng.randrange(min_length, 300), mode=mode)
    if mode in ("2d", "3d"):
        p["size0"] = rng.randrange(2, 5)
        p["src_stride0"] = p["length"] + rng.randrange(0, 40)
        p["dst_stride0"] = p["length"] + rng.randrange(0, 40)
    if mode == "3d":
        p["size1"] = rng.randrange(2, 4)
        p["src_stride1"] = p["size0"] * p["src_stride0"] + rng.randrange(0, 64)
        p["dst_stride1"] = p["size0"] * p["dst_stride0"] + rng.randrange(0, 64)
    return p

def span(p: dict, side: str) -> tuple[int, int]:
    """Byte range a DMA side touches (for filling / checking)."""
    w = p.get("size0", 1) if p["mode"] != "1d" else 1
    h = p.get("size1", 1) if p["mode"] == "3d" else 1
    base = REGION_BASE[p[f"{side}_region"]] + p[side]
    s0, s1 = p.get(f"{side}_stride0", 0), p.get(f"{side}_stride1", 0)
    hi = base + (w - 1) * s0 + (h - 1) * s1 + p["length"]
    return base, hi

def dma_cmds(src_region, src, dst_region, dst, length, mode="1d", size0=1, size1=1,
             src_stride0=0, src_stride1=0, dst_stride0=0, dst_stride1=0, wait=True) -> list:
    m40 = (1 << 40) - 1
    cmds = [("NPU_SET_DMA0_SRC_REGION", dict(region=src_region, stride_mode=STRIDE_MODE[mode])),
            ("NPU_SET_DMA0_DST_REGION", dict(region=dst_region)),
            ("NPU_SET_DMA0_SRC", dict(addr=src)), ("NPU_SET_DMA0_DST", dict(addr=dst)),
            ("NPU_SET_DMA0_LEN", dict(addr=length)),
            ("NPU_SET_DMA0_SIZE0", dict(size=size0)), ("NPU_SET_DMA0_SIZE1", dict(size=size1)),
            ("NPU_SET_DMA0_SRC_STRIDE0", dict(addr=src_stride0 & m40)),
            ("NPU_SET_DMA0_SRC_STRIDE1", dict(addr=src_stride1 & m40)),
            ("NPU_SET_DMA0_DST_STRIDE0", dict(addr=dst_stride0 & m40)),
            ("NPU_SET_DMA0_DST_STRIDE1", dict(addr=dst_stride1 & m40)),
            "NPU_OP_DMA_START"]
    if wait:
        cmds.append(("NPU_OP_DMA_WAIT", dict(k=0)))
    return enc(*cmds)

def dma_expect(mem: dict, src_region, src, dst_region, dst, length, mode="1d", size0=1,
               size1=1, src_stride0=0, src_stride1=0, dst_stride0=0, dst_stride1=0) -> dict:
    """The DMA copy of the TRM 3.10.4 pseudocode (the one DMA reference,
    tlm/ethos_u85/dma_reference.py, independent of tlm.ethos_u85.ops.dma) on a dict address -> byte
    (*mem*, changed in place and returned)."""
    p = DmaParams.of(src_region, src, dst_region, dst, length, mode, size0, size1,
                     src_stride0=src_stride0, src_stride1=src_stride1, dst_stride0=dst_stride0,
                     dst_stride1=dst_stride1)
    dma_copy(DictMemory(mem), p, REGION_BASE)
    return mem

def fill_random(env, rng: random.Random, addr: int, n: int, shadow: dict) -> None:
    data = bytes(rng.getrandbits(8) for _ in range(n))
    env.memory.write(addr, data)
    for i, v in enumerate(data):
        shadow[addr + i] = v

def check_bytes(env, shadow: dict, lo: int, hi: int, what: str) -> None:
    got = env.memory.read(lo, hi - lo)
    for i, g in enumerate(got):
        w = shadow.get(lo + i, 0)
        assert g == w, (f"{what}: byte at 0x{lo + i:010x} is 0x{g:02x}, expected 0x{w:02x} "
                        "(hand model of the TRM DMA pseudocode)")

# ---------------------------------------------------------------- kernel-operation streams
def dense_fmap_cmds(which: str, shape, region: int, base: int) -> list:
    """NPU_SET_<IFM|IFM2|OFM>_* for a dense int8 NHWC [H, W, C] map at region + base."""
    H, W, C = shape
    cmds = []
    if which == "OFM":
        cmds += [("NPU_SET_OFM_PRECISION", dict(activation_type=1, activation_precision=0,
                                                activation_format=0, scale_mode=1)),
                 ("NPU_SET_OFM_HEIGHT_M1", dict(height_m1=H - 1)),
                 ("NPU_SET_OFM_WIDTH_M1", dict(width_m1=W - 1)),
                 ("NPU_SET_OFM_DEPTH_M1", dict(depth_m1=C - 1)),
                 ("NPU_SET_OFM_BLK_HEIGHT_M1", dict(height_m1=H - 1)),
                 ("NPU_SET_OFM_BLK_WIDTH_M1", dict(width_m1=W - 1)),
                 ("NPU_SET_OFM_BLK_DEPTH_M1", dict(depth_m1=C - 1)),
                 ("NPU_SET_ACTIVATION", dict(activation_function=0, table=0, activation_clip_range=0)),
                 ("NPU_SET_ACTIVATION_MIN", dict(clip_boundary=(-128) & 0xFFFF)),
                 ("NPU_SET_ACTIVATION_MAX", dict(clip_boundary=127))]
    else:
        cmds += [(f"NPU_SET_{which}_PRECISION", dict(activation_type=1, activation_precision=0,
                                                      activation_format=0, activation_storage=0)),
                 (f"NPU_SET_{which}_ZERO_POINT", dict(zero_point=0))]
        if which == "IFM":
            cmds.append(("NPU_SET_IFM_DEPTH_M1", dict(depth_m1=C - 1)))
    cmds.append((f"NPU_SET_{which}_REGION", dict(region=region)))
    cmds += [(f"NPU_SET_{which}_BASE{t}", dict(addr=base)) for t in range(4)]
    cmds += [(f"NPU_SET_{which}_STRIDE_X", dict(addr=C)), (f"NPU_SET_{which}_STRIDE_Y", dict(addr=W * C)),
             (f"NPU_SET_{which}_STRIDE_C", dict(addr=1)),
             (f"NPU_SET_{which}_WIDTH0_M1", dict(width_m1=W - 1)),
             (f"NPU_SET_{which}_HEIGHT0_M1", dict(height_m1=H - 1)),
             (f"NPU_SET_{which}_HEIGHT1_M1", dict(height_m1=H - 1))]
    return enc(*cmds)

def kernel_cmds(kh: int, kw: int, stride: int = 1) -> list:
    s = stride - 1
    return enc(("NPU_SET_KERNEL_HEIGHT_M1", dict(height_m1=kh - 1)),
               ("NPU_SET_KERNEL_WIDTH_M1", dict(width_m1=kw - 1)),
               ("NPU_SET_KERNEL_STRIDE", dict(stride_x_lsb=s & 1, stride_y_lsb=s & 1,
                                              stride_x_msb=s >> 1, stride_y_msb=s >> 1)),
               *[(f"NPU_SET_IFM_PAD_{p}", dict(pad=0)) for p in ("TOP", "LEFT", "BOTTOM", "RIGHT")])


# operand -> (TRM pmu_axi_channel of its accesses, read or write); the IFM of an ELEMENTWISE
# op may come on rd_ifm or rd_ifm_stream (TRM 2.3.4: "IFMS reads IFMs for the AO unit
# (elementwise operands) ... twice for binary ones"; the TLM reads it on rd_ifm).
KERNEL_OPERANDS = {"ifm": ((CH_RD_IFM,), "r"), "ifm2": ((CH_RD_IFM_STREAM,), "r"),
                   "weights": ((CH_RD_WEIGHTS,), "r"), "scale": ((CH_RD_SCALE,), "r"),
                   "ofm": ((CH_WR_OFM,), "w")}

@dataclass
class KernelCase:
    """A small kernel operation: its command words (without the final STOP), the memory
    image it reads, and where each operand lives (region, byte range)."""
    op: str
    words: list
    image: dict
    operands: dict = field(default_factory=dict)      # name -> (region, lo, hi)
    op_offset: int = 0                                # byte offset of the NPU_OP in words

    def channels(self, operand: str) -> tuple:
        chans = KERNEL_OPERANDS[operand][0]
        if self.op == "elementwise" and operand == "ifm":
            chans = (CH_RD_IFM, CH_RD_IFM_STREAM)
        return chans

def kernel_case(op: str, rng: random.Random) -> KernelCase:
    """CONV or DEPTHWISE (1x1, SWD weights, per-channel scale/bias stream), POOL (2x2 max,
    stride 2) or ELEMENTWISE (add) on int8 NHWC 4x4x8 maps, operands in distinct regions
    picked by *rng* (SRAM and EXT)."""
    import numpy as np
    nrng = np.random.default_rng(rng.getrandbits(32))
    H, W, C = 4, 4, 8
    regions = rng.sample(range(8), 4)
    ifm_r, ofm_r, x_r = regions[0], regions[1], regions[2]
    offs = [0x40 * rng.randrange(1, 16) for _ in range(3)]
    image, operands, words = {}, {}, []
    ifm = nrng.integers(-128, 128, (H, W, C), dtype=np.int8).tobytes()
    image[REGION_BASE[ifm_r] + offs[0]] = ifm
    operands["ifm"] = (ifm_r, REGION_BASE[ifm_r] + offs[0], REGION_BASE[ifm_r] + offs[0] + len(ifm))
    words += dense_fmap_cmds("IFM", (H, W, C), ifm_r, offs[0])
    if op == "pool":
        oshape = (H // 2, W // 2, C)
        words += dense_fmap_cmds("OFM", oshape, ofm_r, offs[1]) + kernel_cmds(2, 2, 2)
        words += enc(("NPU_SET_OFM_SCALE", dict(scale=1, shift=0, round_mode=1)),
                     ("NPU_SET_ACC_FORMAT", dict(acc_format=0, acc_input=0, acc_output=0, microblock=1)))
        opw = enc(("NPU_OP_POOL", dict(pooling_mode=0)))
    elif op == "elementwise":
        oshape = (H, W, C)
        ifm2 = nrng.integers(-128, 128, (H, W, C), dtype=np.int8).tobytes()
        image[REGION_BASE[x_r] + offs[2]] = ifm2
        operands["ifm2"] = (x_r, REGION_BASE[x_r] + offs[2], REGION_BASE[x_r] + offs[2] + len(ifm2))
        words += dense_fmap_cmds("IFM2", (H, W, C), x_r, offs[2]) + dense_fmap_cmds("OFM", oshape, ofm_r, offs[1])
        words += enc(("NPU_SET_IFM_SCALE", dict(scale=1, shift=0)),
                     ("NPU_SET_IFM2_SCALE", dict(scale=1, shift=0)),
                     ("NPU_SET_OFM_SCALE", dict(scale=1, shift=0, round_mode=1)),
                     ("NPU_SET_IFM_BROADCAST", dict(broadcast_mode=0)),
                     ("NPU_SET_IFM2_BROADCAST", dict(broadcast_mode=0)),
                     ("NPU_SET_ACC_FORMAT", dict(acc_format=0, acc_input=0, acc_output=0, microblock=1)))
        opw = enc(("NPU_OP_ELEMENTWISE", dict(elementwise_mode=0)))          # add
    elif op in ("conv", "depthwise"):
        from tlm.ethos_u85.config import get_config
        from tlm.ethos_u85.scale_bias import channels_in_set, encode_scale_bias
        from tlm.ethos_u85.weights import WeightOrder, encode_swd, streams_from_weights
        dw = op == "depthwise"
        od = 8
        oshape = (H, W, od)
        macs = get_config(os.environ.get("NPU_CONFIG", "ethos-u85-256")).macs
        mb = 1 if macs == 128 else 3                  # u1x2 / u2x2: every configuration takes it
        wts = nrng.integers(-20, 21, (od, 1, 1, 1 if dw else C), dtype=np.int8)
        order = WeightOrder(macs=macs, microblock=mb, depthwise=dw, part_kernel_first=False,
                            sparse=False, ifm16bit=False, ofm_depth=od, ifm_depth=C,
                            ofm_block_depth=od, kernel_height=1, kernel_width=1, dilation_x=0,
                            dilation_y=0, stride_x=1, stride_y=1, d8x8=True)
        # one stream per weight decoder (num_wd), back to back (multiples of 16 bytes)
        wcmds, a = [], offs[2]
        for n, blob in enumerate(bytes(encode_swd(s)) for s in streams_from_weights(order, wts)):
            image[REGION_BASE[x_r] + a] = blob
            wcmds += [(f"NPU_SET_WEIGHT{n or ''}_BASE", dict(addr=a)),
                      (f"NPU_SET_WEIGHT{n or ''}_LENGTH", dict(length=len(blob)))]
            a += len(blob)
        operands["weights"] = (x_r, REGION_BASE[x_r] + offs[2], REGION_BASE[x_r] + a)
        # per-channel scale/bias stream (TRM 3.7) in the fourth region
        s_r, s_off = regions[3], 0x40 * rng.randrange(1, 16)
        sb = encode_scale_bias(nrng.integers(-64, 65, od), nrng.integers(1 << 14, 1 << 15, od),
                               nrng.integers(18, 21, od), acc48=False,
                               set_channels=channels_in_set(macs, mb))
        image[REGION_BASE[s_r] + s_off] = sb
        operands["scale"] = (s_r, REGION_BASE[s_r] + s_off, REGION_BASE[s_r] + s_off + len(sb))
        words += dense_fmap_cmds("OFM", oshape, ofm_r, offs[1]) + kernel_cmds(1, 1)
        words += enc(("NPU_SET_OFM_PRECISION", dict(activation_type=1, activation_precision=0,
                                                    activation_format=0, scale_mode=0)),
                     ("NPU_SET_SCALE_REGION", dict(region=s_r)),
                     ("NPU_SET_SCALE_BASE", dict(addr=s_off)),
                     ("NPU_SET_SCALE_LENGTH", dict(length=len(sb))),
                     ("NPU_SET_OFM_SCALE", dict(scale=1, shift=4, round_mode=1)),
                     ("NPU_SET_ACC_FORMAT", dict(acc_format=0, acc_input=0, acc_output=0, microblock=mb)),
                     ("NPU_SET_WEIGHT_FORMAT", dict(weight_format=0, weight_sparsity=0)),
                     ("NPU_SET_WEIGHT_REGION", dict(region=x_r)), *wcmds)
        opw = enc(("NPU_OP_DEPTHWISE", {})) if dw else enc(("NPU_OP_CONV", dict(weights_ifm2=0)))
    else:
        raise ValueError(op)
    n_ofm = oshape[0] * oshape[1] * oshape[2]
    operands["ofm"] = (ofm_r, REGION_BASE[ofm_r] + offs[1], REGION_BASE[ofm_r] + offs[1] + n_ofm)
    case = KernelCase(op, words + opw, image, operands, op_offset=4 * len(words))
    return case
