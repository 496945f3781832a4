"""A kernel operation on a Device (``OpBench``): collect NPU_SET commands and memory
contents, run; feature-map layouts; checks of a clean run; end-to-end runs of catalog
networks against LiteRT. Used by the kernel-op tests (test_ops_*.py, test_device_control.py)."""
from __future__ import annotations

import numpy as np

from tlm.ethos_u85 import isa
from tlm.ethos_u85 import registers as R
from tlm.ethos_u85.device import Device
from tlm.ethos_u85.memory import Memory
from tlm.ethos_u85.ops import KERNEL_OPS
from tlm.ethos_u85.ops.pool import pool_ref

OFF = {r.ident: r.offset for r in R.REGISTERS}
STREAM = 0x0F00_0000
REGION_BASE = {n: 0x0100_0000 * (n + 1) for n in range(8)}
DT = {np.dtype(np.int8): (0, 1), np.dtype(np.uint8): (0, 0), np.dtype(np.int16): (1, 1),
      np.dtype(np.uint16): (1, 0), np.dtype(np.int32): (2, 1), np.dtype(np.int64): (3, 1)}
TYPE_RANGE = {np.dtype(np.int8): (-128, 127), np.dtype(np.uint8): (0, 255),
              np.dtype(np.int16): (-32768, 32767), np.dtype(np.uint16): (0, 65535)}


def layout(arr: np.ndarray, fmt: str):
    """Bytes of [H, W, C] `arr` in NHWC or NHCWB16, and (stride_x, stride_y, stride_c)."""
    H, W, C = arr.shape
    es = arr.dtype.itemsize
    if fmt == "nhwc":
        return np.ascontiguousarray(arr).tobytes(), (C * es, W * C * es, es)
    nb = -(-C // 16)
    pad = np.zeros((H, W, nb * 16), arr.dtype)
    pad[:, :, :C] = arr
    blk = pad.reshape(H, W, nb, 16).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(blk).tobytes(), (16 * es, nb * W * 16 * es, W * 16 * es)


def unlayout(raw: bytes, shape, dtype, fmt: str) -> np.ndarray:
    H, W, C = shape
    dt = np.dtype(dtype)
    a = np.frombuffer(raw, dt)
    if fmt == "nhwc":
        return a[:H * W * C].reshape(H, W, C)
    nb = -(-C // 16)
    return a[:H * nb * W * 16].reshape(H, nb, W, 16).transpose(0, 2, 1, 3).reshape(H, W, nb * 16)[:, :, :C]


class OpBench:
    """A kernel operation on a Device: collect NPU_SET commands and memory contents, run."""

    def __init__(self, config="ethos-u85-256"):
        self.config = config
        self.cmds: list = []
        self.puts: list = []
        self.faults: list = []
        self.pre_ops: list = []
        self.ofm_desc = None

    # ---- stream ------------------------------------------------------------------------
    def set(self, name, **fields):
        self.cmds.append((name, fields))
        return self

    def put(self, region, offset, data):
        self.puts.append((REGION_BASE[region] + offset, bytes(data)))

    def fmap(self, which, arr=None, *, shape=None, dtype=None, region=1, base=0, fmt="nhwc", zp=0,
             storage="tile2x2"):
        """Program IFM/IFM2/OFM registers for an [H, W, C] tensor (and store `arr`)."""
        if arr is not None:
            arr = np.asarray(arr)
            shape, dtype = arr.shape, arr.dtype
        dtype = np.dtype(dtype)
        H, W, C = shape
        prec, typ = DT[dtype]
        data, (sx, sy, sc) = layout(arr if arr is not None else np.zeros(shape, dtype), fmt)
        if arr is not None:
            self.put(region, base, data)
        st = {"tile2x2": 0, "tile3x1": 1, "chained": 2, "none": 3}[storage]
        f = {"nhwc": 0, "nhcwb16": 1}[fmt]
        if which == "OFM":
            self.set("NPU_SET_OFM_PRECISION", activation_type=typ, activation_precision=prec,
                     activation_format=f, activation_storage=st, scale_mode=1)
            self.set("NPU_SET_OFM_HEIGHT_M1", height_m1=H - 1)
            self.set("NPU_SET_OFM_WIDTH_M1", width_m1=W - 1)
            self.set("NPU_SET_OFM_DEPTH_M1", depth_m1=C - 1)
            self.set("NPU_SET_OFM_BLK_HEIGHT_M1", height_m1=min(H, 128) - 1)
            self.set("NPU_SET_OFM_BLK_WIDTH_M1", width_m1=min(W, 128) - 1)
            self.set("NPU_SET_OFM_BLK_DEPTH_M1", depth_m1=min(C, 1024) - 1)
            lo, hi = TYPE_RANGE.get(dtype, (0, 0))
            self.set("NPU_SET_ACTIVATION", activation_function=0, table=0,
                     activation_clip_range=0 if dtype in TYPE_RANGE else 1)
            self.set("NPU_SET_ACTIVATION_MIN", clip_boundary=lo & 0xFFFF)
            self.set("NPU_SET_ACTIVATION_MAX", clip_boundary=hi & 0xFFFF)
            self.ofm_desc = (region, base, shape, dtype, fmt)
        else:
            self.set(f"NPU_SET_{which}_PRECISION", activation_type=typ, activation_precision=prec,
                     activation_format=f, activation_storage=st)
            if which == "IFM":
                self.set("NPU_SET_IFM_DEPTH_M1", depth_m1=C - 1)
        self.set(f"NPU_SET_{which}_REGION", region=region)
        for t in range(4):
            self.set(f"NPU_SET_{which}_BASE{t}", addr=base)
        self.set(f"NPU_SET_{which}_STRIDE_X", addr=sx)
        self.set(f"NPU_SET_{which}_STRIDE_Y", addr=sy)
        self.set(f"NPU_SET_{which}_STRIDE_C", addr=sc)
        self.set(f"NPU_SET_{which}_WIDTH0_M1", width_m1=W - 1)
        self.set(f"NPU_SET_{which}_HEIGHT0_M1", height_m1=H - 1)
        self.set(f"NPU_SET_{which}_HEIGHT1_M1", height_m1=H - 1)
        self.set(f"NPU_SET_{which}_ZERO_POINT", zero_point=zp & 0xFFFF)
        return self

    def lut(self, table: bytes, region=7, base=0):
        """Load the 2048-byte LUT RAM by DMA (region -> internal) before the operation."""
        self.put(region, base, table)
        self.pre_ops += [
            ("NPU_SET_DMA0_SRC_REGION", dict(region=region, region_mode=0, stride_mode=0)),
            ("NPU_SET_DMA0_DST_REGION", dict(region=0, region_mode=1)),
            ("NPU_SET_DMA0_SRC", dict(addr=base)), ("NPU_SET_DMA0_DST", dict(addr=0)),
            ("NPU_SET_DMA0_LEN", dict(addr=len(table))),
            ("NPU_OP_DMA_START", {}), ("NPU_OP_DMA_WAIT", dict(k=0))]
        return self

    def kernel(self, kh, kw, sy=1, sx=1, pads=(0, 0, 0, 0), **stride_fields):
        t, l, b, r = pads
        self.set("NPU_SET_KERNEL_HEIGHT_M1", height_m1=kh - 1)
        self.set("NPU_SET_KERNEL_WIDTH_M1", width_m1=kw - 1)
        self.set("NPU_SET_KERNEL_STRIDE", stride_y_lsb=(sy - 1) & 1, stride_y_msb=(sy - 1) >> 1,
                 stride_x_lsb=(sx - 1) & 1, stride_x_msb=(sx - 1) >> 1, **stride_fields)
        self.set("NPU_SET_IFM_PAD_TOP", pad=t)
        self.set("NPU_SET_IFM_PAD_LEFT", pad=l)
        self.set("NPU_SET_IFM_PAD_BOTTOM", pad=b)
        self.set("NPU_SET_IFM_PAD_RIGHT", pad=r)
        return self

    def ofm_scale(self, scale=1, shift=0, round_mode=1, dbl_rnd=0):
        return self.set("NPU_SET_OFM_SCALE", scale=scale, shift=shift, round_mode=round_mode, dbl_rnd=dbl_rnd)

    def acc(self, acc_format=0, acc_input=0, acc_output=0, microblock=1):
        return self.set("NPU_SET_ACC_FORMAT", acc_format=acc_format, acc_input=acc_input,
                        acc_output=acc_output, microblock=microblock)

    # ---- run ---------------------------------------------------------------------------
    def words(self, ops):
        w = []
        for name, f in self.pre_ops:
            w += isa.encode(name, **f)
        for name, f in self.cmds:
            w += isa.encode(name, **f)
        for name, f in ops:
            w += isa.encode(name, **f)
        return w + isa.encode("NPU_OP_STOP", mask=0)

    def run(self, op, *, ops=None, kernel_ops=None, device=None, plans=True, **fields):
        """Run the collected state followed by `op` (name) with payload `fields` (or the
        list `ops` of (name, fields)), on a fresh Device (or `device`, keeping its state);
        `plans=False`: without operation plans (Device(plans=False))."""
        ops = ops if ops is not None else [(op, fields)]
        if device is None:
            mem = Memory()
            for addr, data in self.puts:
                mem.write(addr, data)
            for lo, hi, resp, kind in self.faults:
                mem.inject_fault(lo, hi, resp, kind)
            d = Device(self.config, mem, kernel_ops=kernel_ops, settle=True, plans=plans)
            for n, b in REGION_BASE.items():
                d.apb_write(OFF[f"BASEP{n}_LO"], b & 0xFFFFFFFF)
                d.apb_write(OFF[f"BASEP{n}_HI"], b >> 32)
        else:
            d = device
            for addr, data in self.puts:
                d.memory.write(addr, data)
        d.memory.log.clear()
        d.load_stream(STREAM, self.words(ops))
        d.start()
        self.stop = d.run(max_steps=100000)
        self.dev = d
        return d

    def output(self, dev=None, desc=None):
        d = dev or self.dev
        region, base, shape, dtype, fmt = desc or self.ofm_desc
        H, W, C = shape
        es = np.dtype(dtype).itemsize
        n = H * W * C * es if fmt == "nhwc" else H * W * (-(-C // 16)) * 16 * es
        return unlayout(d.memory.read(REGION_BASE[region] + base, n), shape, dtype, fmt)


def unpredictable(dev):
    return [e["what"] for n, e in dev.events if n == "unpredictable"]


def limits(dev):
    return [e["error"] for n, e in dev.events if n in ("model_limit", "internal_error")]


def clean(dev):
    bad = unpredictable(dev) + limits(dev)
    assert not bad, bad
    assert not dev.status.bus_status
    return dev


REF_OPS = dict(KERNEL_OPS, NPU_OP_POOL=pool_ref)
MAX, AVERAGE, REDUCE_SUM, SUM, NONE, MIN, ARGMAX_X, ARGMAX_Y = range(8)


def pool_bench(ifm, ofm_shape, ofm_dtype=np.int8, k=(1, 1), s=(1, 1), pads=(0, 0, 0, 0), zp=0, ofm_zp=0,
               scale=(1, 0), round_mode=1, fmt="nhwc", ofm_fmt="nhwc", acc_format=0, **kernel_kw):
    b = OpBench()
    b.fmap("IFM", ifm, region=1, zp=zp, fmt=fmt)
    b.fmap("OFM", shape=ofm_shape, dtype=ofm_dtype, region=2, fmt=ofm_fmt)
    b.set("NPU_SET_OFM_ZERO_POINT", zero_point=ofm_zp & 0xFFFF)
    b.kernel(k[0], k[1], s[0], s[1], pads, **kernel_kw)
    b.ofm_scale(scale[0], scale[1], round_mode)
    b.acc(acc_format=acc_format)
    return b


def e2e(name, accel="ethos-u85-256", mode="default"):
    from tests import nets
    from tlm.ethos_u85.runner import run_model
    path = nets.compiled(name, accel, memory_mode=mode)
    inputs, ref = nets.reference(nets.build(name))
    res = run_model(path, inputs)
    for o, r in zip(res.outputs, ref, strict=True):
        o, r = np.asarray(o).reshape(-1), np.asarray(r).reshape(-1)
        bad = np.flatnonzero(o != r)
        assert bad.size == 0, f"{name} {accel} {mode}: {bad.size}/{r.size} differ, first at {bad[:5]}"


def e2e_names(*tags, exclude=()):
    from tests import nets
    out = []
    for n in nets.NAMES:
        t = set(nets.MODELS[n].tags)
        if t & set(tags) and n not in exclude:
            out.append(n)
    return out
