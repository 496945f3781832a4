"""What the RTL stand-in claims to run (rtl_stub/ethos_u85/README.md, "What is implemented"), as a
predicate over a command stream, for the tests that sweep Vela networks on DUT=rtl.

``first_unsupported(words, macs)`` walks the stream with the sticky NPU_SET state and returns
``(offset, operation, reason)`` of the first kernel operation the stand-in refuses (it stops
there with cmd_parse_error), or None when it claims every operation. The tests hold the
stand-in to it both ways (tb/ethos_u85/tests/test_rtl_networks.py): a claimed network must run through
the pins with the scoreboard clean, and an unclaimed one must stop with cmd_parse_error at
exactly the named operation. So the README's support table, this predicate and the RTL's
checks (npu_kernel.v, npu_conv.v) cannot drift apart unnoticed.

Only the feature and implementation-limit checks are here: the streams these tests use are
legal (no TRM assert fails), and the UNPREDICTABLE rules are the TLM's, checked elsewhere.

Not a test module (tb.run collects ``test_*.py`` only).
"""
from __future__ import annotations

from tlm.ethos_u85 import isa
from tlm.ethos_u85.ops import common
from tlm.ethos_u85.weights import num_wd

P = isa.activation_precision
ST = isa.activation_storage
AF = isa.activation_function
EW = isa.elementwise_mode
PM = isa.pooling_mode
_MB_DIV = (8, 16, 32, 32, 64, 128)          # microblock_depth() divisor (tlm.weights.ordering)
_MB_HW = ((1, 1), (1, 2), (1, 4), (2, 2), (2, 4), (4, 4))
# Implementation sizes of the stand-in, the one source of rtl_stub/ethos_u85/gen/npu_sizes.vh
# (tools/gen_rtl_regs.py): AB words, scale/bias records, values per chaining FIFO, IFM buffer
# words (16 values) per half: IB_HALF_MIN below 128 MACs, else IB_HALF_PER_MAC * MACS.
AB_WORDS = 256
SB_RECORDS = 2048
CHAIN_DEPTH = 4096                          # a power of 2 (Vela catalog: up to 2304)
# a catalog network (tests/nets) with an operation the stand-in does not claim: Vela chains the
# 64x80 OFM of mean_w_64x4x80's DEPTHWISE (more than CHAIN_DEPTH values); tests of the refusal use it
UNCLAIMED_NET = "mean_w_64x4x80"
IB_HALF_MIN = 512
IB_HALF_PER_MAC = 4
NUM_CHAINING_FIFO = common.NUM_CHAINING_FIFO


def ib_half_words(macs: int) -> int:
    return IB_HALF_MIN if macs < 128 else IB_HALF_PER_MAC * macs


def _tile0(f, which: str, maxy: int, maxx: int) -> bool:
    st = f(f"NPU_SET_{which}_PRECISION", "activation_storage")
    h0 = f(f"NPU_SET_{which}_HEIGHT0_M1", "height_m1")
    if st == ST.tile2x2:
        return maxx <= f(f"NPU_SET_{which}_WIDTH0_M1", "width_m1") and maxy <= h0
    if st == ST.tile3x1:
        return maxy <= h0 and maxy <= f(f"NPU_SET_{which}_HEIGHT1_M1", "height_m1")
    return True


def conv_geometry(f):
    ks = "NPU_SET_KERNEL_STRIDE"
    sy = 2 * f(ks, "stride_y_msb") + f(ks, "stride_y_lsb") + 1
    sx = 2 * f(ks, "stride_x_msb") + f(ks, "stride_x_lsb") + 1
    kh = f("NPU_SET_KERNEL_HEIGHT_M1", "height_m1") + 1
    kw = f("NPU_SET_KERNEL_WIDTH_M1", "width_m1") + 1
    oh = f("NPU_SET_OFM_HEIGHT_M1", "height_m1") + 1
    ow = f("NPU_SET_OFM_WIDTH_M1", "width_m1") + 1
    ih = (oh - 1) * sy + kh - f("NPU_SET_IFM_PAD_TOP", "pad") - f("NPU_SET_IFM_PAD_BOTTOM", "pad")
    iw = (ow - 1) * sx + kw - f("NPU_SET_IFM_PAD_LEFT", "pad") - f("NPU_SET_IFM_PAD_RIGHT", "pad")
    return sy, sx, kh, kw, oh, ow, ih, iw


def _ofm_elements(f) -> int:
    return ((f("NPU_SET_OFM_HEIGHT_M1", "height_m1") + 1) * (f("NPU_SET_OFM_WIDTH_M1", "width_m1") + 1)
            * (f("NPU_SET_OFM_DEPTH_M1", "depth_m1") + 1))


def _conv_out(f) -> "str | None":
    """Output-stage features the CONV/DEPTHWISE unit lacks (LUT activations and a chained
    OFM run: npu_act.v, the kernel unit's chaining FIFOs)."""
    if f("NPU_SET_OFM_PRECISION", "activation_precision") == P.b64:
        return "b64 OFM"
    return None


def _conv(f, dw: bool, wi2: bool, macs: int) -> "str | None":
    if wi2 and f("NPU_SET_IFM_PRECISION", "activation_precision") != P.b8:
        return "matrix multiply (weights_ifm2) of 16-bit operands"
    if f("NPU_SET_IFM_UPSCALE", "mode") in (1, 2):
        return "IFM upscale"
    if f("NPU_SET_ACC_FORMAT", "acc_input") in (1, 2) or f("NPU_SET_ACC_FORMAT", "acc_output") != 0:
        return "accumulator keep/restore"
    why = _conv_out(f)
    if why:
        return why
    # implementation limits
    sy, sx, kh, kw, oh, ow, ih, iw = conv_geometry(f)
    if not _tile0(f, "IFM", ih - 1, iw - 1):
        return "IFM outside tile 0"
    if (f("NPU_SET_OFM_PRECISION", "activation_storage") != ST.none
            and not _tile0(f, "OFM", *_ofm_max(f))):
        return "OFM outside tile 0"
    mb = f("NPU_SET_ACC_FORMAT", "microblock")
    if wi2:
        # the IFM2 elements (y=0, x=oc) read as weights; the walker's bricks (microblock >= 4 deep)
        if (f("NPU_SET_IFM2_PRECISION", "activation_storage") != ST.none
                and not _tile0(f, "IFM2", 0, f("NPU_SET_OFM_DEPTH_M1", "depth_m1"))):
            return "IFM2 outside tile 0"
        if mb >= len(_MB_DIV) or macs // _MB_DIV[mb] < 4:
            return "matrix multiply with a microblock shallower than 4 channels"
    fwd = f("NPU_SET_WEIGHT_FORMAT", "weight_format") == 1 and not wi2
    if fwd and num_wd(macs) > 1:
        return "FWD with several weight decoders"
    mbd = macs // _MB_DIV[mb]
    if dw and mbd > 64:
        return "depthwise with a microblock deeper than 64"
    od = f("NPU_SET_OFM_DEPTH_M1", "depth_m1") + 1
    blkd = f("NPU_SET_OFM_BLK_DEPTH_M1", "depth_m1") + 1
    if od > blkd and blkd % 8:
        return "OFM_BLK_DEPTH not a multiple of 8"
    if -(-min(od, blkd) // mbd) > AB_WORDS:
        return "OFM block deeper than the accumulator buffer"
    if f("NPU_SET_OFM_PRECISION", "scale_mode") == 0 and od > SB_RECORDS:
        return "more OFM channels than the scale/bias RAM"
    if f("NPU_SET_OFM_PRECISION", "activation_storage") == ST.chained and _ofm_elements(f) > CHAIN_DEPTH:
        return f"a chaining FIFO holding more than {CHAIN_DEPTH} values"
    dil_y = f("NPU_SET_KERNEL_STRIDE", "dilation_y")
    dil_x = f("NPU_SET_KERNEL_STRIDE", "dilation_x")
    dcmp = 4 if f("NPU_SET_KERNEL_STRIDE", "decomposition") else 8
    khu, kwu = (kh + dil_y) >> dil_y, (kw + dil_x) >> dil_x
    subh, subw = min(khu, dcmp >> dil_y), min(kwu, dcmp >> dil_x)
    pk = dw or f("NPU_SET_KERNEL_STRIDE", "weight_order") == 1
    sparse = f("NPU_SET_WEIGHT_FORMAT", "weight_sparsity") == 1
    ibd = 16 if pk else (32 if not sparse and mbd == 16 and mb <= 1 else (64 if not sparse else 128))
    cw = mbd if dw else ibd
    cg = -(-cw // 16)
    mh, mw = _MB_HW[mb]
    words = ((mh - 1) * sy + (subh - 1) * (dil_y + 1) + 1) * ((mw - 1) * sx + (subw - 1) * (dil_x + 1) + 1) * cg
    if words > ib_half_words(macs):
        return "IFM patch larger than the IFM buffer"
    streams = 0 if wi2 else 1 if fwd else num_wd(macs)
    names = ("NPU_SET_WEIGHT_BASE", "NPU_SET_WEIGHT1_BASE", "NPU_SET_WEIGHT2_BASE", "NPU_SET_WEIGHT3_BASE")
    if any(f(n, "addr") % 16 for n in names[:streams]):
        return "weight stream base not 16-byte aligned"
    return None


def _pool(f, mode: int) -> "str | None":
    if mode not in (PM.max, PM.min, PM.average, PM.sum, PM.reduce_sum):
        return f"pooling mode {PM(mode).name}"
    if f("NPU_SET_ACC_FORMAT", "acc_input") in (1, 2) or f("NPU_SET_ACC_FORMAT", "acc_output") != 0:
        return "accumulator keep/restore"
    up = f("NPU_SET_IFM_UPSCALE", "mode")
    if mode != PM.reduce_sum and (up == 1 or (up == 2 and mode not in (PM.max, PM.min))):
        return "IFM upscale"
    if f("NPU_SET_IFM_PRECISION", "activation_storage") == ST.chained:
        return "chained IFM"
    if f("NPU_SET_OFM_PRECISION", "scale_mode") == 0:
        return "per-channel scale"
    if f("NPU_SET_OFM_PRECISION", "activation_precision") == P.b64:
        return "b64 OFM"
    if f("NPU_SET_OFM_PRECISION", "activation_storage") == ST.chained:
        return "chained OFM"
    sy, sx, kh, kw, oh, ow, ih, iw = conv_geometry(f)
    if mode in (PM.max, PM.min) and (kh > 256 or kw > 256):
        return "max/min kernel above 256"
    if mode == PM.reduce_sum:
        ih, iw = oh, ow
    if not _tile0(f, "IFM", ih - 1, iw - 1):
        return "IFM outside tile 0"
    if f("NPU_SET_OFM_PRECISION", "activation_storage") != ST.none and not _tile0(f, "OFM", *_ofm_max(f)):
        return "OFM outside tile 0"
    return None


def _ofm_max(f) -> tuple:
    """The OFM's largest memory (y, x) after write_ofm's transpose (npu_ofm_addr.v)."""
    y = f("NPU_SET_OFM_HEIGHT_M1", "height_m1")
    x = f("NPU_SET_OFM_WIDTH_M1", "width_m1")
    c = f("NPU_SET_OFM_DEPTH_M1", "depth_m1")
    return {1: (x, y), 2: (y, c), 7: (c, x), 6: (c, y), 3: (x, c)}.get(
        f("NPU_SET_OFM_PRECISION", "activation_transpose"), (y, x))


def _scaled(prec: int, sgn: int) -> bool:
    """scale_a / scale_b scale the operand (b8, signed b16); others pass unscaled."""
    return prec == P.b8 or (prec == P.b16 and sgn)


def _zp(raw: int, sgn: int) -> int:
    return raw - 0x10000 if sgn and raw & 0x8000 else raw


def _elementwise(f, mode: int) -> "str | None":
    if mode == EW.div:
        return "elementwise mode div"
    if f("NPU_SET_OFM_PRECISION", "activation_precision") == P.b64:
        return "b64 OFM"
    if (f("NPU_SET_OFM_PRECISION", "activation_storage") == ST.chained
            and f("NPU_SET_OFM_PRECISION", "activation_precision") == P.b32
            and not f("NPU_SET_OFM_PRECISION", "activation_type")):
        return "chained unsigned b32 OFM"
    scal1 = f("NPU_SET_IFM_BROADCAST", "broadcast_mode") == isa.broadcast_mode.scalar
    scal2 = f("NPU_SET_IFM2_BROADCAST", "broadcast_mode") == isa.broadcast_mode.scalar
    unary = mode in (EW.lrelu, EW.abs, EW.clz, EW["not"])
    if mode != EW.mul:
        scalar = f("NPU_SET_OP_SCALAR", "scalar")
        scalar = scalar - (1 << 32) if scalar & 0x80000000 else scalar
        for which, scal, used in (("IFM", scal1, True), ("IFM2", scal2, not unary)):
            prec = f(f"NPU_SET_{which}_PRECISION", "activation_precision")
            sgn = f(f"NPU_SET_{which}_PRECISION", "activation_type")
            v = scalar - _zp(f(f"NPU_SET_{which}_ZERO_POINT", "zero_point"), sgn)
            if scal and used and not _scaled(prec, sgn) and not -(1 << 31) <= v < (1 << 31):
                return "unscaled scalar operand outside int32"
    oh = f("NPU_SET_OFM_HEIGHT_M1", "height_m1")
    ow = f("NPU_SET_OFM_WIDTH_M1", "width_m1")
    bm1 = f("NPU_SET_IFM_BROADCAST", "broadcast_mode")
    bm2 = f("NPU_SET_IFM2_BROADCAST", "broadcast_mode")
    ch1 = f("NPU_SET_IFM_PRECISION", "activation_storage") == ST.chained
    ch2 = f("NPU_SET_IFM2_PRECISION", "activation_storage") == ST.chained
    if not scal1 and not ch1 and not _tile0(f, "IFM", 0 if bm1 & 1 else oh, 0 if bm1 & 2 else ow):
        return "IFM outside tile 0"
    if not unary and not scal2 and not ch2 and not _tile0(f, "IFM2", 0 if bm2 & 1 else oh, 0 if bm2 & 2 else ow):
        return "IFM2 outside tile 0"
    if f("NPU_SET_OFM_PRECISION", "activation_storage") in (0, 1) and not _tile0(f, "OFM", *_ofm_max(f)):
        return "OFM outside tile 0"
    return None


def _resize(f) -> "str | None":
    if f("NPU_SET_OFM_PRECISION", "activation_precision") == P.b64:
        return "b64 OFM"
    if f("NPU_SET_IFM_PRECISION", "activation_storage") == ST.chained:
        return "chained IFM"
    if not _tile0(f, "IFM", f("NPU_SET_KERNEL_HEIGHT_M1", "height_m1"), f("NPU_SET_KERNEL_WIDTH_M1", "width_m1")):
        return "IFM outside tile 0"
    if f("NPU_SET_OFM_PRECISION", "activation_storage") in (0, 1) and not _tile0(f, "OFM", *_ofm_max(f)):
        return "OFM outside tile 0"
    return None


class _Chain:
    """The chaining FIFOs' fill (npu_kernel.v CHAIN_DEPTH values each)."""

    def __init__(self):
        self.length = 0
        self.count = [0] * NUM_CHAINING_FIFO

    def elementwise(self, f, mode: int) -> "str | None":
        if self.length == 0:
            self.count = [0] * NUM_CHAINING_FIFO
        n = _ofm_elements(f)
        unary = mode in (EW.lrelu, EW.abs, EW.clz, EW["not"])
        for which, used in (("IFM", True), ("IFM2", not unary)):
            scal = f(f"NPU_SET_{which}_BROADCAST", "broadcast_mode") == isa.broadcast_mode.scalar
            if used and not scal and f(f"NPU_SET_{which}_PRECISION", "activation_storage") == ST.chained:
                r = f(f"NPU_SET_{which}_REGION", "region")
                if r < NUM_CHAINING_FIFO:
                    self.count[r] = max(0, self.count[r] - n)
        if f("NPU_SET_OFM_PRECISION", "activation_storage") == ST.chained:
            r = f("NPU_SET_OFM_REGION", "region")
            self.length += 1
            if r < NUM_CHAINING_FIFO:
                self.count[r] += n
                if self.count[r] > CHAIN_DEPTH:
                    return f"a chaining FIFO holding more than {CHAIN_DEPTH} values"
        else:
            self.length = 0
        return None

    def conv(self, f) -> None:
        """A CONV/DEPTHWISE opens a chain (its FIFOs empty) when its OFM is chained."""
        self.count = [0] * NUM_CHAINING_FIFO
        r = f("NPU_SET_OFM_REGION", "region")
        if f("NPU_SET_OFM_PRECISION", "activation_storage") == ST.chained and r < NUM_CHAINING_FIFO:
            self.length = 1
            self.count[r] = _ofm_elements(f)
        else:
            self.length = 0

    def other(self) -> None:
        self.length = 0


def first_unsupported(words, macs: int):
    """(byte offset, NPU_OP name, reason) of the first kernel operation of *words* the
    stand-in does not claim, or None."""
    regs = isa.RegisterFile()
    chain = _Chain()
    for d in isa.iter_decode(list(words)):
        name = d.cmd.name
        if name.startswith("NPU_SET_"):
            regs.set(d)
            continue
        f = regs.field
        why = None
        if name == "NPU_OP_CONV":
            why = _conv(f, False, bool(d.fields.get("weights_ifm2")), macs)
        elif name == "NPU_OP_DEPTHWISE":
            why = _conv(f, True, False, macs)
        elif name == "NPU_OP_POOL":
            why = _pool(f, d.fields["pooling_mode"])
        elif name == "NPU_OP_ELEMENTWISE":
            why = _elementwise(f, d.fields["elementwise_mode"]) or chain.elementwise(f, d.fields["elementwise_mode"])
        elif name == "NPU_OP_RESIZE":
            why = _resize(f)
        if name in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE"):
            chain.conv(f)
        elif name in ("NPU_OP_POOL", "NPU_OP_RESIZE"):
            chain.other()
        if why:
            return d.offset, name, why
    return None


class Refused(AssertionError):
    """The DUT stopped with cmd_parse_error at command offset *offset* (QREAD), operation *op*,
    running the stream *words* on a configuration with *macs* MACs; *mismatches*: the
    scoreboard's mismatches in that job (None: no scoreboard). Raised by the job helpers
    (tb/ethos_u85/testlib/netjob.py); ``judge`` decides whether it is the expected refusal."""

    def __init__(self, msg: str, *, words, macs: int, offset: int, op: str, status: int,
                 mismatches: "int | None"):
        super().__init__(msg)
        self.words, self.macs, self.offset, self.op = list(words), macs, offset, op
        self.status, self.mismatches = status, mismatches


def judge(e: Refused) -> str:
    """The reason of an expected refusal: the stand-in stopped at exactly the operation
    ``first_unsupported`` names (offset and op) with the scoreboard clean. Raise
    AssertionError (naming what differs) otherwise."""
    miss = first_unsupported(e.words, e.macs)
    if miss is None:
        raise AssertionError(f"{e} but the stand-in claims every operation of the stream "
                             f"(tb/ethos_u85/testlib/rtl_support.py): a bug, not an expected failure")
    off, op, why = miss
    if (off, op) != (e.offset, e.op):
        raise AssertionError(f"{e} but the first operation the stand-in does not claim is {op} at "
                             f"command offset 0x{off:x} ({why})")
    if e.mismatches is None:
        raise AssertionError(f"{e}: no scoreboard checked the job before it (reference_model=True)")
    if e.mismatches:
        raise AssertionError(f"{e}: at the expected operation, but with {e.mismatches} scoreboard "
                             f"mismatch(es) before it")
    return f"the RTL stand-in stopped with cmd_parse_error at {op} (command offset 0x{off:x}): {why}"
