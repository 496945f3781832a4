"""Shared machinery of the kernel operations (TRM r0p0 issue 05, 3.6.4-3.6.7, 3.10).

Every kernel operation (CONV, DEPTHWISE, POOL, ELEMENTWISE, RESIZE) is called by the device
as ``KERNEL_OPS[name](snapshot, dataport, device)`` and builds an :class:`OpContext`:

* the derived geometry of TRM section 4 (OFM shape, strides, padding, kernel, derived IFM
  size);
* the TRM tensor-access functions, vectorised over whole blocks: :meth:`OpContext.read_ifm`,
  :meth:`OpContext.read_ifm2`, :meth:`OpContext.initial_acc` (read_accumulator),
  :meth:`OpContext.write_accumulator` (bias, rescale, activation, write_ofm) and
  :meth:`OpContext.write_ofm`;
* chaining (TRM 3.6.4): :meth:`OpContext.add_operation_to_chain` against the persistent
  :class:`OpState` (``device.op_state``), with the three chaining FIFOs modelled as unbounded
  FIFOs of truncated OFM values.

Memory traffic goes through the :class:`~tlm.memory.DataPort` with the TRM channel of each
stream (``rd_ifm`` IFM, ``rd_ifm_stream`` IFM2 - "IFM to weights or elementwise" -,
``rd_scale_bias``, ``wr_ofm``), one transaction per contiguous byte run, so AXI errors
surface as :class:`~tlm.memory.BusFault`.  Failed TRM asserts raise
:class:`~tlm.errors.Unpredictable` naming the operation and the check.

Value domains: everything is int64 numpy.  Reads return the zero-point-subtracted value as
read_ifm/read_ifm2 do; padding and upscale-inserted zeros are 0 in that domain.

Decisions where the TRM text is incomplete (digest E-nn numbers):

* E-02: the bare ``();`` after invalidating the FIFOs at chain start is read as "empty the
  FIFOs".
* E-04: accumulator restore from IFM2 reads b64 (i48) or b32 (i32) signed elements.
* E-11: ``write_accumulator`` always adds ``read_bias(oc)`` in the TRM; the bias comes from the
  scale/bias stream, which only exists for ``scale_mode == per_channel``, so the bias is 0 in
  global scale mode.
* COND_STATUS.result_flag is UNPREDICTABLE for an OFM with more than one element; the model
  sets it to bit 0 of the last element in (y, x, c) order.
* Scale/bias stream: E-23 - SCALE_BASE and SCALE_LENGTH must be multiples of 16.
* rescale(): the TRM asserts ``scale == sign_extend(scale, 16)`` when acc_format is i48.  It is
  applied only to per-channel scales (15-bit record fields, so it always holds): Vela 5.2
  programs int16 ELEMENTWISE ops with acc_format i48 and a 31-bit OFM_SCALE, and the exact
  product matches LiteRT bit for bit (add_int16, mul_int16, int16_net).  The accumulator range
  assert (32/48 bits) is kept, except for RESIZE (E-27) and the b32 MUL product (E-15).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from .. import arith
from ..arith import AccFormat, ActType, Precision, RescaleMode, ScaleMode
from ..errors import BudgetExceeded, Unpredictable
from ..fmap import AllowedPerms, FeatureMap, Storage, read_fmap, write_fmap
from ..memory import Channel

__all__ = [
    "OpState", "OpContext", "get_op_state", "op_fields", "MAX_ELEMENTS", "MAX_WORK",
    "NUM_CHAINING_FIFO", "RESCALE_NONE", "RESCALE_NORMAL", "RESCALE_GLOBAL", "RESCALE_SHIFT_ONLY",
    "RESCALE_AVPOOL", "ALLOWED_PERMS_RTRANS", "ALLOWED_PERMS_ALL",
]

NUM_CHAINING_FIFO = 3
MAX_CHAIN_LENGTH = 4
# Work budgets of one operation in the model (a model limit, not an architectural one: beyond
# them the op stops with cmd_parse_error, event 'model_limit'). They bound the host time of any
# command stream; Vela stripes real layers far below them.
MAX_ELEMENTS = 1 << 22        # budget: OFM elements / IFM elements read by one operation
MAX_WORK = 1 << 28            # budget: element-taps of one operation (pool kernels)

RESCALE_NONE = RescaleMode.NONE
RESCALE_NORMAL = RescaleMode.NORMAL
RESCALE_GLOBAL = RescaleMode.GLOBAL
RESCALE_SHIFT_ONLY = RescaleMode.SHIFT_ONLY
RESCALE_AVPOOL = RescaleMode.AVPOOL
ALLOWED_PERMS_RTRANS = AllowedPerms.RTRANS
ALLOWED_PERMS_ALL = AllowedPerms.ALL

# enum values (tlm.isa has the IntEnums; plain ints here keep the hot path cheap)
UPSCALE_NONE, UPSCALE_NEAREST, UPSCALE_ZEROS = 0, 1, 2
ACC_RESET, ACC_KEEP, ACC_IFM2 = 0, 1, 2
ACC_OUT_ENABLE, ACC_OUT_DISABLE = 0, 1
_MB_DIV = (8, 16, 32, 32, 64, 128)   # microblock_depth(): u1x1 u1x2 u1x4 u2x2 u2x4 u4x4


def _unpred(cond, msg: str) -> None:
    if not cond:
        raise Unpredictable(msg)


# =========================================================================== persistent state
class OpState:
    """State that persists across kernel operations (TRM 3.6.4, 3.6.5): the chaining FIFOs,
    g_chain_length / g_num_ifm / g_fifo_valid, and the accumulator storage used by
    acc_output = disable / acc_input = keep.  The device owns one (``device.op_state``) and
    replaces it at reset."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.chain_length = 0                               # g_chain_length
        self.num_ifm = 0                                    # g_num_ifm
        self.fifo_valid = [False] * NUM_CHAINING_FIFO       # g_fifo_valid
        self.fifo: list[list[np.ndarray]] = [[] for _ in range(NUM_CHAINING_FIFO)]
        self.fifo_count = [0] * NUM_CHAINING_FIFO           # head - tail
        self.acc_storage = np.zeros((0, 0, 0), np.int64)    # read/write_accumulator_storage

    # ---- chaining FIFOs (unbounded, in write order) -------------------------------------
    def clear_fifos(self) -> None:
        for i in range(NUM_CHAINING_FIFO):
            self.fifo[i] = []
            self.fifo_count[i] = 0

    def write_chaining_fifo(self, n: int, values) -> None:
        """Push values (in order) into FIFO n (TRM write_chaining_fifo)."""
        _unpred(0 <= n < NUM_CHAINING_FIFO, f"write_chaining_fifo: FIFO {n} outside 0..2")
        v = np.asarray(values, dtype=np.int64).ravel().copy()
        if v.size:
            self.fifo[n].append(v)
            self.fifo_count[n] += v.size

    def read_chaining_fifo(self, n: int, count: int, who: str = "read_chaining_fifo") -> np.ndarray:
        """Pop ``count`` values from FIFO n in FIFO order (TRM read_chaining_fifo, with its
        ``assert(head >= tail)``: an underflow is UNPREDICTABLE)."""
        _unpred(0 <= n < NUM_CHAINING_FIFO, f"{who}: chaining FIFO {n} outside 0..2")
        _unpred(self.fifo_count[n] >= count,
                f"{who}: chaining FIFO {n} underflow ({count} values read, {self.fifo_count[n]} held)")
        out = []
        need = count
        chunks = self.fifo[n]
        while need:
            c = chunks[0]
            if c.size <= need:
                out.append(c)
                need -= c.size
                chunks.pop(0)
            else:
                out.append(c[:need])
                chunks[0] = c[need:]
                need = 0
        self.fifo_count[n] -= count
        return np.concatenate(out) if out else np.zeros(0, np.int64)

    # ---- accumulator storage ---------------------------------------------------------------
    def store_acc(self, acc: np.ndarray) -> None:
        """write_accumulator_storage for the block [0:h, 0:w, 0:d] (coordinates are block
        relative; entries outside keep their old value)."""
        h, w, d = acc.shape
        s = self.acc_storage
        if s.shape[0] < h or s.shape[1] < w or s.shape[2] < d:
            n = np.zeros((max(h, s.shape[0]), max(w, s.shape[1]), max(d, s.shape[2])), np.int64)
            n[:s.shape[0], :s.shape[1], :s.shape[2]] = s
            self.acc_storage = s = n
        s[:h, :w, :d] = acc

    def load_acc(self, h: int, w: int, d: int) -> np.ndarray:
        """read_accumulator_storage for the block [0:h, 0:w, 0:d]; never-written entries
        read as 0 (reset value of the storage)."""
        out = np.zeros((h, w, d), np.int64)
        s = self.acc_storage
        hh, ww, dd = min(h, s.shape[0]), min(w, s.shape[1]), min(d, s.shape[2])
        out[:hh, :ww, :dd] = s[:hh, :ww, :dd]
        return out


def get_op_state(device) -> OpState:
    """The device's OpState (created on first use if the device has none)."""
    st = getattr(device, "op_state", None)
    if st is None:
        st = OpState()
        try:
            device.op_state = st
        except AttributeError:
            pass
    return st


def op_fields(device) -> dict:
    """The decoded payload fields of the NPU_OP being executed (``device.op_fields``)."""
    f = getattr(device, "op_fields", None)
    return dict(f) if f is not None else {}


class _RegionMem:
    """Byte accessor for tlm.fmap: region-relative offsets -> DataPort transactions."""
    __slots__ = ("port", "region", "channel")

    def __init__(self, port, region: int, channel: Channel):
        self.port, self.region, self.channel = port, region, channel

    def read(self, addr: int, n: int):
        return self.port.read(self.region, int(addr), int(n), self.channel)

    def write(self, addr: int, data) -> None:
        self.port.write(self.region, int(addr), data, self.channel)

    # batched forms (tlm.fmap uses them: all runs of a block in one DataPort call, with the
    # same transactions as one read/write per run)
    def read_span(self, lo: int, mask):
        return self.port.read_span(self.region, lo, mask, self.channel)

    def write_span(self, lo: int, mask, buf) -> None:
        self.port.write_span(self.region, lo, mask, buf, self.channel)

    def read_runs(self, starts, lengths):
        return self.port.read_runs(self.region, starts, lengths, self.channel)

    def write_runs(self, starts, lengths, data) -> None:
        self.port.write_runs(self.region, starts, lengths, data, self.channel)


@dataclass
class _Scale:
    bias: np.ndarray
    scale: np.ndarray
    shift: np.ndarray


# =========================================================================== per-op context
class OpContext:
    """One kernel operation: register snapshot, derived geometry and TRM tensor access.

    Attributes (TRM section 4 names): ``ofm_h, ofm_w, ofm_d, ifm_depth, stride_y, stride_x,
    dilation_y, dilation_x, pad_top, pad_left, pad_bottom, pad_right, kernel_h, kernel_w``
    (KERNEL_*_M1 + 1 as the registers say: the dilated extent for conv), ``ifm_h, ifm_w``
    (``(ofm - 1)*stride + kernel - pad``), ``fields`` (the op's payload fields), ``state``
    (the device's :class:`OpState`), ``ifm/ifm2/ofm`` (:class:`~tlm.fmap.FeatureMap`, bases
    region-relative).
    """

    def __init__(self, snap, port, device, name: str):
        self.snap = snap
        self.port = port
        self.device = device
        self.name = name
        self.state = get_op_state(device)
        self.fields = op_fields(device)
        f = snap.field
        self.f = f
        self.ofm_h = f("NPU_SET_OFM_HEIGHT_M1", "height_m1") + 1
        self.ofm_w = f("NPU_SET_OFM_WIDTH_M1", "width_m1") + 1
        self.ofm_d = f("NPU_SET_OFM_DEPTH_M1", "depth_m1") + 1
        self.ifm_depth = f("NPU_SET_IFM_DEPTH_M1", "depth_m1") + 1
        self.stride_y = 2 * f("NPU_SET_KERNEL_STRIDE", "stride_y_msb") + f("NPU_SET_KERNEL_STRIDE", "stride_y_lsb") + 1
        self.stride_x = 2 * f("NPU_SET_KERNEL_STRIDE", "stride_x_msb") + f("NPU_SET_KERNEL_STRIDE", "stride_x_lsb") + 1
        self.dilation_y = f("NPU_SET_KERNEL_STRIDE", "dilation_y") + 1
        self.dilation_x = f("NPU_SET_KERNEL_STRIDE", "dilation_x") + 1
        self.pad_top = f("NPU_SET_IFM_PAD_TOP", "pad")
        self.pad_left = f("NPU_SET_IFM_PAD_LEFT", "pad")
        self.pad_bottom = f("NPU_SET_IFM_PAD_BOTTOM", "pad")
        self.pad_right = f("NPU_SET_IFM_PAD_RIGHT", "pad")
        self.kernel_h = f("NPU_SET_KERNEL_HEIGHT_M1", "height_m1") + 1
        self.kernel_w = f("NPU_SET_KERNEL_WIDTH_M1", "width_m1") + 1
        self.ifm_h = (self.ofm_h - 1) * self.stride_y + self.kernel_h - (self.pad_top + self.pad_bottom)
        self.ifm_w = (self.ofm_w - 1) * self.stride_x + self.kernel_w - (self.pad_left + self.pad_right)
        self.upscale = f("NPU_SET_IFM_UPSCALE", "mode")
        self.acc_format = f("NPU_SET_ACC_FORMAT", "acc_format")
        self.acc_input = f("NPU_SET_ACC_FORMAT", "acc_input")
        self.acc_output = f("NPU_SET_ACC_FORMAT", "acc_output")
        self.microblock = f("NPU_SET_ACC_FORMAT", "microblock")
        self.ifm = FeatureMap.from_registers(snap, "IFM")
        self.ofm = FeatureMap.from_registers(snap, "OFM")
        cfg = getattr(device, "config", None)
        self.macs = int(getattr(cfg, "macs", 256))
        _unpred(self.acc_format in (0, 1), f"{name}: reserved acc_format {self.acc_format}")
        self.acc_bits = 32 if self.acc_format == AccFormat.I32 else 48
        self._scale_cache: _Scale | None = None
        n = self.ofm_h * self.ofm_w * self.ofm_d
        if n > MAX_ELEMENTS:
            raise BudgetExceeded(f"{name}: {n} OFM elements exceed the model's budget of {MAX_ELEMENTS}")

    @functools.cached_property
    def ifm2(self) -> FeatureMap:
        """The IFM2 feature map, decoded on first use (most ops never read IFM2)."""
        return FeatureMap.from_registers(self.snap, "IFM2")

    # ---------------------------------------------------------------- small helpers
    def check(self, cond, what: str) -> None:
        """TRM assert(): raise Unpredictable('<op>: <what>') when cond is false."""
        if not cond:
            raise Unpredictable(f"{self.name}: {what}")

    def budget(self, work: int, what: str, limit: int = MAX_WORK) -> None:
        if work > limit:
            raise BudgetExceeded(f"{self.name}: {what} ({work}) exceeds the model's budget of {limit}")

    def microblock_depth(self) -> int:
        self.check(0 <= self.microblock < len(_MB_DIV), f"reserved microblock {self.microblock}")
        return self.macs // _MB_DIV[self.microblock]

    def accumulate(self, acc, value):
        """TRM accumulate(): acc + value wrapped at 32/48 bits."""
        return arith.accumulate(acc, value, self.acc_format)

    def sync_device(self) -> None:
        """Mirror g_chain_length into the device (a stop request waits for the chain end)."""
        try:
            self.device.chain_length = self.state.chain_length
        except AttributeError:
            pass

    # ---------------------------------------------------------------- chaining (3.6.4)
    def add_operation_to_chain(self, use_ifm: bool, use_ifm2: bool, append: bool) -> None:
        st = self.state
        n = self.name
        self.check(st.chain_length == 0 or append, "add_operation_to_chain: operation cannot be appended to a chain")
        if st.chain_length == 0:
            st.num_ifm = 0
            st.fifo_valid = [False] * NUM_CHAINING_FIFO
            st.clear_fifos()                          # the TRM's bare '();' (E-02)
        st.chain_length += 1
        try:
            _unpred(st.chain_length <= MAX_CHAIN_LENGTH, f"{n}: add_operation_to_chain: more than 4 operations")
            if use_ifm:
                if self.ifm.storage == Storage.CHAINED:
                    _unpred(self.ifm.region < NUM_CHAINING_FIFO, f"{n}: add_operation_to_chain: IFM FIFO >= 3")
                    _unpred(st.fifo_valid[self.ifm.region],
                            f"{n}: add_operation_to_chain: IFM chaining FIFO {self.ifm.region} not valid")
                else:
                    st.num_ifm += 1
            if use_ifm2:
                if self.ifm2.storage == Storage.CHAINED:
                    _unpred(self.ifm2.region < NUM_CHAINING_FIFO, f"{n}: add_operation_to_chain: IFM2 FIFO >= 3")
                    _unpred(st.fifo_valid[self.ifm2.region],
                            f"{n}: add_operation_to_chain: IFM2 chaining FIFO {self.ifm2.region} not valid")
                    if use_ifm and self.ifm.storage == Storage.CHAINED:
                        _unpred(self.ifm.region != self.ifm2.region,
                                f"{n}: add_operation_to_chain: IFM and IFM2 read the same chaining FIFO")
                else:
                    st.num_ifm += 1
            _unpred(st.num_ifm <= 3, f"{n}: add_operation_to_chain: more than 3 external IFMs in a chain")
            if self.ofm.storage == Storage.CHAINED:
                _unpred(self.ofm.region < NUM_CHAINING_FIFO, f"{n}: add_operation_to_chain: OFM FIFO >= 3")
                st.fifo_valid[self.ofm.region] = True
            else:
                st.chain_length = 0                   # end of the chain
        finally:
            self.sync_device()

    # ---------------------------------------------------------------- IFM / IFM2 reads
    def _read_fm(self, fm: FeatureMap, which: str, ys, xs, cs, channel: Channel, precision=None,
                 act_type=None, subtract_zp=True) -> np.ndarray:
        ys = np.atleast_1d(np.asarray(ys, dtype=np.int64))
        xs = np.atleast_1d(np.asarray(xs, dtype=np.int64))
        cs = np.atleast_1d(np.asarray(cs, dtype=np.int64))
        shape = (ys.size, xs.size, cs.size)
        count = shape[0] * shape[1] * shape[2]
        owned = False
        self.budget(count, f"{which} elements read", MAX_ELEMENTS)
        if precision is not None:
            fm = replace(fm, precision=precision, act_type=act_type)
        if fm.storage == Storage.CHAINED:
            vals = self.state.read_chaining_fifo(fm.region, count, f"{self.name}: read_{which.lower()}")
            vals = vals.reshape(shape)
        elif fm.storage == Storage.NONE:
            raise Unpredictable(f"{self.name}: read_{which.lower()}: activation_storage none has no address")
        elif count == 0:
            vals = np.zeros(shape, np.int64)
        else:
            _unpred(fm.storage in (Storage.TILE2X2, Storage.TILE3X1),
                    f"{self.name}: reserved {which} activation_storage {fm.storage}")
            mem = _RegionMem(self.port, fm.region, channel)
            try:
                vals = read_fmap(mem, fm, ys, xs, cs)
            except Unpredictable as e:
                raise Unpredictable(f"{self.name}: read_{which.lower()}: {e}") from None
            if vals.dtype == np.uint64:                        # unsigned b64: keep the bits
                vals = vals.astype(np.int64)
            owned = vals.dtype == np.int64                     # read_fmap returns a fresh array
        if subtract_zp and count:
            try:
                zp = arith.ifm_zero_point(fm.zero_point, fm.precision, fm.act_type)
            except Unpredictable as e:
                raise Unpredictable(f"{self.name}: read_{which.lower()}: {e}") from None
            if zp:
                if owned:
                    vals -= np.int64(zp)
                else:
                    vals = vals - np.int64(zp)
        return vals

    def read_ifm(self, ys, xs, cs) -> np.ndarray:
        """TRM read_ifm for the block ys x xs x cs (1-D coordinate vectors; any values, e.g.
        broadcast index vectors) -> int64 [len(ys), len(xs), len(cs)], zero point subtracted.

        IFM_UPSCALE is applied (nearest: (y>>1, x>>1); zeros: 0 at odd y or x).  A chained
        IFM pops len(ys)*len(xs)*len(cs) values in (y, x, c) order."""
        ys = np.atleast_1d(np.asarray(ys, dtype=np.int64))
        xs = np.atleast_1d(np.asarray(xs, dtype=np.int64))
        cs = np.atleast_1d(np.asarray(cs, dtype=np.int64))
        up = self.upscale
        if up != UPSCALE_NONE:
            self.check(up in (UPSCALE_NEAREST, UPSCALE_ZEROS), f"read_ifm: reserved IFM_UPSCALE mode {up}")
            self.check(self.stride_x == 1 and self.stride_y == 1, "read_ifm: upscale needs stride 1")
            self.check(self.ifm.storage != Storage.CHAINED, "read_ifm: upscale of a chained IFM")
            vals = self._read_fm(self.ifm, "IFM", ys >> 1, xs >> 1, cs, Channel.rd_ifm)
            if up == UPSCALE_ZEROS:
                odd = ((ys & 1) == 1)[:, None, None] | ((xs & 1) == 1)[None, :, None]
                vals = np.where(odd, np.int64(0), vals)
            return vals
        return self._read_fm(self.ifm, "IFM", ys, xs, cs, Channel.rd_ifm)

    def read_ifm_padded(self, depth: int | None = None, pad_value: int = 0) -> np.ndarray:
        """The whole padded IFM window the kernel sweeps: int64
        [pad_top + ifm_h + pad_bottom, pad_left + ifm_w + pad_right, depth] where the IFM part
        is read_ifm(0..ifm_h-1, 0..ifm_w-1, 0..depth-1) and the padding is ``pad_value``
        (0 = the zero point, in the zero-point-subtracted domain).  ``depth`` defaults to
        IFM_DEPTH (conv); depthwise/pool pass the OFM depth."""
        d = self.ifm_depth if depth is None else int(depth)
        self.check(self.ifm_h >= 1 and self.ifm_w >= 1, "pad range: derived IFM size < 1")
        H = self.pad_top + self.ifm_h + self.pad_bottom
        W = self.pad_left + self.ifm_w + self.pad_right
        self.budget(H * W * d, "padded IFM elements", MAX_ELEMENTS)
        core = self.read_ifm(np.arange(self.ifm_h), np.arange(self.ifm_w), np.arange(d))
        if H == self.ifm_h and W == self.ifm_w:
            return core
        out = np.full((H, W, d), np.int64(pad_value), np.int64)
        out[self.pad_top:self.pad_top + self.ifm_h, self.pad_left:self.pad_left + self.ifm_w] = core
        return out

    def read_ifm2(self, ys, xs, cs, read_accumulator: bool = False) -> np.ndarray:
        """TRM read_ifm2 (no upscale).  read_accumulator: accumulator restore - the IFM2 must
        be b64 signed (acc_format i48) or b32 signed (i32) (E-04); the value is held at the
        accumulator width."""
        if read_accumulator:
            prec = Precision.B64 if self.acc_format == AccFormat.I48 else Precision.B32
            self.check(self.ifm2.precision == prec and self.ifm2.act_type == ActType.SIGNED,
                       f"read_ifm2: accumulator restore needs a signed {arith.number_of_bits(prec)}-bit IFM2")
            v = self._read_fm(self.ifm2, "IFM2", ys, xs, cs, Channel.rd_ifm_stream)
            return arith.sign_extend(v, self.acc_bits)
        return self._read_fm(self.ifm2, "IFM2", ys, xs, cs, Channel.rd_ifm_stream)

    # ---------------------------------------------------------------- accumulators
    def initial_acc(self, identity: int = 0, depth: int | None = None) -> np.ndarray:
        """TRM read_accumulator(oy, ox, oc, identity) for the whole OFM: int64
        [ofm_h, ofm_w, depth] (depth defaults to the OFM depth)."""
        d = self.ofm_d if depth is None else int(depth)
        h, w = self.ofm_h, self.ofm_w
        ai = self.acc_input
        if ai == ACC_RESET:
            return np.full((h, w, d), np.int64(identity), np.int64)
        if ai == ACC_KEEP:
            self._check_block(h, w, d, "read_accumulator")
            return self.state.load_acc(h, w, d)
        if ai == ACC_IFM2:
            return self.read_ifm2(np.arange(h), np.arange(w), np.arange(d), read_accumulator=True)
        raise Unpredictable(f"{self.name}: read_accumulator: reserved acc_input {ai}")

    def _check_block(self, h, w, d, what):
        bh = self.f("NPU_SET_OFM_BLK_HEIGHT_M1", "height_m1") + 1
        bw = self.f("NPU_SET_OFM_BLK_WIDTH_M1", "width_m1") + 1
        bd = self.f("NPU_SET_OFM_BLK_DEPTH_M1", "depth_m1") + 1
        self.check(h <= bh and w <= bw and d <= bd,
                   f"{what}: accumulator storage coordinates outside the OFM block "
                   f"({h}x{w}x{d} > {bh}x{bw}x{bd})")

    def scale_bias(self):
        """(bias, scale, shift) int64 arrays per OFM channel: from the scale/bias stream
        (TRM 3.7) when OFM scale_mode == per_channel, else bias 0 and OFM_SCALE (E-11)."""
        if self._scale_cache is None:
            d = self.ofm_d
            if self.ofm.scale_mode == ScaleMode.PER_CHANNEL:
                from ..scale_bias import channels_in_set, decode_scale_bias, stream_size
                self.microblock_depth()
                cis = channels_in_set(self.macs, self.microblock)
                need = stream_size(d, cis)
                base = self.f("NPU_SET_SCALE_BASE", "addr")
                length = self.f("NPU_SET_SCALE_LENGTH", "length")
                region = self.f("NPU_SET_SCALE_REGION", "region")
                # E-23: the 16-byte alignment is stated under SCALE_LENGTH ("this offset");
                # both are required here.
                self.check(base % 16 == 0, f"SCALE_BASE 0x{base:x} not 16-byte aligned")
                self.check(length % 16 == 0, f"SCALE_LENGTH {length} not a multiple of 16")
                self.check(length >= need, f"scale/bias stream of {length} bytes, {need} needed "
                                           f"for {d} channels")
                data = self.port.read(region, base, need, Channel.rd_scale_bias)
                reverse_c = self.ofm.reverse == 3
                try:
                    sb = decode_scale_bias(data.tobytes(), d, acc48=self.acc_format == AccFormat.I48,
                                           set_channels=cis, reverse_c=reverse_c)
                except Unpredictable as e:
                    raise Unpredictable(f"{self.name}: {e}") from None
                self._scale_cache = _Scale(sb.bias, sb.scale, sb.shift)
            else:
                sc = self.f("NPU_SET_OFM_SCALE", "scale")
                sh = self.f("NPU_SET_OFM_SCALE", "shift")
                self._scale_cache = _Scale(np.zeros(d, np.int64), np.full(d, sc, np.int64),
                                           np.full(d, sh, np.int64))
        s = self._scale_cache
        return s.bias, s.scale, s.shift

    def rescale(self, acc, rescale_mode: int, *, divisor=None, range_check: bool = True) -> np.ndarray:
        """TRM rescale(acc, oc, rescale_mode) over an [h, w, c] block.

        rescale_mode: RESCALE_NONE / NORMAL / GLOBAL / SHIFT_ONLY, or RESCALE_AVPOOL with
        ``divisor`` (array broadcastable to acc: the per-element d = count of valid taps).
        NORMAL uses the per-channel stream when scale_mode == per_channel (channel axis = last).
        range_check=False skips the acc_format range asserts (RESIZE, E-27)."""
        acc = np.asarray(acc, dtype=np.int64)
        if rescale_mode == RESCALE_NONE:
            return acc
        rm = self.f("NPU_SET_OFM_SCALE", "round_mode")
        dbl = self.f("NPU_SET_OFM_SCALE", "dbl_rnd")
        if rescale_mode >= RESCALE_AVPOOL:
            self.check(divisor is not None, "rescale: avgpool without a divisor")
            scale, shift = arith.avgpool_scale(np.asarray(divisor, dtype=np.int64))
        elif self.ofm.scale_mode == ScaleMode.PER_CHANNEL:
            self.check(rescale_mode == RESCALE_NORMAL,
                       "rescale: per-channel scale_mode needs rescale_mode_normal (per-channel scale not permitted)")
            _, scale, shift = self.scale_bias()
            c = acc.shape[-1]
            scale, shift = scale[:c], shift[:c]
        else:
            scale = self.f("NPU_SET_OFM_SCALE", "scale")
            shift = self.f("NPU_SET_OFM_SCALE", "shift")
        lo_hi = None
        if range_check and acc.size:
            # assert(acc == sign_extend(acc, 32 | 48)) per acc_format.  The TRM also asserts
            # scale == sign_extend(scale, 16) under i48; that is only applied to the
            # per-channel stream (where the record field is 15 bits wide anyway): Vela 5.2
            # programs 31-bit OFM_SCALE values with acc_format i48 for int16 elementwise ops,
            # and the exact product reproduces LiteRT bit for bit.
            lo, hi = lo_hi = int(acc.min()), int(acc.max())
            b = self.acc_bits
            self.check(lo >= -(1 << (b - 1)) and hi < (1 << (b - 1)),
                       f"rescale: acc does not fit {b} bits (acc_format i{b})")
        try:
            return arith.rescale(acc, scale, shift, rm, dbl, shift_only=(rescale_mode == RESCALE_SHIFT_ONLY),
                                 acc_format=None, lo_hi=lo_hi)
        except Unpredictable as e:
            raise Unpredictable(f"{self.name}: {e}") from None

    def activation(self, acc) -> np.ndarray:
        """TRM activation() (without write_ofm's truncation)."""
        f = self.f
        try:
            return arith.activation(
                acc, precision=self.ofm.precision, act_type=self.ofm.act_type,
                zero_point=f("NPU_SET_OFM_ZERO_POINT", "zero_point"),
                act_min=f("NPU_SET_ACTIVATION_MIN", "clip_boundary"),
                act_max=f("NPU_SET_ACTIVATION_MAX", "clip_boundary"),
                function=f("NPU_SET_ACTIVATION", "activation_function"),
                clip_range=f("NPU_SET_ACTIVATION", "activation_clip_range"),
                table=f("NPU_SET_ACTIVATION", "table"), lut=getattr(self.device, "lut", None),
                truncate_ofm=False)
        except Unpredictable as e:
            raise Unpredictable(f"{self.name}: {e}") from None

    def write_accumulator(self, acc, rescale_mode: int = RESCALE_NORMAL, *, divisor=None) -> None:
        """TRM write_accumulator for the whole OFM (acc: int64 [ofm_h, ofm_w, depth]).

        acc_output == enable: bias add (wrapping at the accumulator width), rescale (per
        channel / global / avgpool with the per-element ``divisor`` array), activation,
        write_ofm(allowed_perms_all).  acc_output == disable: kept in the accumulator storage
        (block-relative coordinates asserted)."""
        acc = np.asarray(acc, dtype=np.int64)
        h, w, d = acc.shape
        if self.acc_output == ACC_OUT_DISABLE:
            self._check_block(h, w, d, "write_accumulator")
            self.state.store_acc(arith.sign_extend(acc, self.acc_bits))
            return
        self.check(self.acc_output == ACC_OUT_ENABLE, f"reserved acc_output {self.acc_output}")
        if self.ofm.scale_mode == ScaleMode.PER_CHANNEL:
            bias = self.scale_bias()[0][:d]
            acc = self.accumulate(acc, bias)
        v = self.rescale(acc, rescale_mode, divisor=divisor)
        v = self.activation(v)
        self.write_ofm(v, ALLOWED_PERMS_ALL)

    # ---------------------------------------------------------------- OFM writes
    def write_ofm(self, values, allowed_perms: int = ALLOWED_PERMS_ALL) -> None:
        """TRM write_ofm for the whole OFM block (values: int64 [ofm_h, ofm_w, depth] after
        activation): truncate to the OFM type, COND_STATUS.result_flag, then chained push /
        storage none / reverse+transpose+tiles memory write over wr_ofm."""
        fm = self.ofm
        v = np.asarray(values, dtype=np.int64)
        h, w, d = v.shape
        if fm.precision == Precision.B64 and fm.act_type == ActType.UNSIGNED:
            tv = v                                           # 64 bits: the bit pattern is the value
        else:
            tv = arith.truncate(v, fm.bits, fm.act_type)
        if tv.size:
            self._set_result_flag(int(tv[-1, -1, -1]) & 1)     # last element (y, x, c order)
        if fm.storage == Storage.CHAINED:
            self.check(fm.reverse == 0 and fm.transpose == 0, "write_ofm: chained OFM with reverse/transpose")
            self.state.write_chaining_fifo(fm.region, tv)
            return
        mbd = self.microblock_depth() if fm.reverse == 3 else None
        try:
            if fm.storage == Storage.NONE:
                from ..fmap import check_ofm_write
                check_ofm_write(fm, allowed_perms, mbd)
                return
            self.check(fm.storage in (Storage.TILE2X2, Storage.TILE3X1),
                       f"reserved OFM activation_storage {fm.storage}")
            mem = _RegionMem(self.port, fm.region, Channel.wr_ofm)
            write_fmap(mem, fm, np.arange(h), np.arange(w), np.arange(d), tv,
                       allowed_perms=allowed_perms, microblock_depth=mbd)
        except Unpredictable as e:
            if str(e).startswith(self.name):
                raise
            raise Unpredictable(f"{self.name}: {e}") from None

    def _set_result_flag(self, bit: int) -> None:
        fn = getattr(self.device, "set_result_flag", None)
        if fn is not None:
            fn(bit)
