"""One NE16 job: its 24 job registers decoded (`JobConfig`) and checked (`JobConfig.problem`).

The decode reads fields through the register table (tlm/ne16/registers.py); derived values
(filter size, subtile widths, element sizes) are computed here once, so the engine and the
docs agree. `problem()` is the single list of programming the model refuses: a job with a
problem is *rejected* (no memory access, it completes at once, its end-of-job event is raised
and the reason is reported; see tlm/ne16/device.py). Each rule says where it comes from.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import registers as R

# Architecture constants (EXT: ne16_package.sv; the GAP9 simulator model uses the same)
TP_IN = 16              # bytes of input channels per Ki subtile (16 channels, 8 in MODE16)
TP_OUT = 32             # output channels per Ko subtile
TP_DW = 16              # channels per subtile in 3x3 depthwise mode
FILTER = 3              # output subtile is 3x3; 3x3 filters
FBUF = 5                # input window of a 3x3 subtile (seed: "counted from 5 pixels")
LINEAR_ROWS = 16        # 16-byte input rows per linear Ki subtile (x2 in MODE16)
LINEAR_KI_BYTES = 256   # input bytes per linear Ki subtile (512 in MODE16; EXT RTL)
OUT_WORD = 32           # bytes per streamer word (256-bit realigned bandwidth)
# Model budget (not architectural): a job walking more subtiles is rejected. A job whose
# tensors fit GAP9's 128 KiB L1 walks at most a few thousand (3x3: each Ki subtile reads
# >= 144 input bytes, each Ko subtile 288 weight bytes per Ki subtile); the model spends
# about 0.4-0.6 ms a subtile, so 8192 bound a hostile job (strides aliasing, huge counts)
# to a few seconds. (2**18 let a fuzzed trace run 24 s.)
MAX_SUBTILES = 1 << 13

# FILTER_MODE values (seed CONFIG0[6:5])
MODE_3X3, MODE_3X3_DW, MODE_1X1, MODE_RESERVED = 0, 1, 2, 3
WIDTH_BITS = {0: 8, 1: 16, 2: 32}          # NORM_BITS / QUANT_BITS encodings (3 reserved)


def _full(rem: int, full: int) -> int:
    """Size of the last subtile: the RTL treats a remainder of 0 as a full subtile (§9)."""
    return full if rem == 0 else rem


@dataclass(frozen=True)
class JobConfig:
    regs: tuple                     # the 24 job register words
    weights_ptr: int
    infeat_ptr: int
    outfeat_ptr: int
    scale_ptr: int
    scale_shift_ptr: int
    scale_bias_ptr: int
    in_d0: int
    in_d1: int
    in_d2: int
    out_d0: int
    out_d1: int
    out_d2: int
    w_d0: int
    w_d1: int
    w_d2: int
    rem_ko: int
    rem_ki: int
    rem_ho: int
    rem_wo: int
    rem_hi: int
    rem_wi: int
    nb_ko: int
    nb_ki: int
    nb_ho: int
    nb_wo: int
    pad_value: int
    pad_left: int
    pad_bottom: int
    pad_right: int
    pad_top: int
    weight_offset_word: int
    mask_left: int
    mask_bottom: int
    mask_right: int
    mask_top: int
    qw: int
    mode16: bool
    quant: bool                     # CONFIG0.STREAMOUT: 1 = normalization/quantization
    filter_mode: int
    linear: bool
    strided: bool
    rounding_bit: int
    norm_code: int
    streamin: bool
    weight_offs: bool               # CONFIG0[15]: stored and decoded, gates nothing (weight_offset)
    right_shift: int
    quant_code: int
    quant_rect: bool                # 1 = do not rectify (keep sign)
    norm_shift: bool
    norm_bias: bool

    @classmethod
    def from_regs(cls, regs) -> "JobConfig":
        regs = tuple(int(v) & 0xFFFFFFFF for v in regs)
        if len(regs) != R.N_JOB_REGS:
            raise ValueError(f"a job has {R.N_JOB_REGS} registers, got {len(regs)}")

        def g(reg: str, name: str) -> int:
            return R.get(regs, reg, name)

        def w(reg: str) -> int:
            return regs[R.by_name(reg).index]
        return cls(
            regs=regs,
            weights_ptr=w("WEIGHTS_PTR"), infeat_ptr=w("INFEAT_PTR"), outfeat_ptr=w("OUTFEAT_PTR"),
            scale_ptr=w("SCALE_PTR"), scale_shift_ptr=w("SCALE_SHIFT_PTR"),
            scale_bias_ptr=w("SCALE_BIAS_PTR"),
            in_d0=w("INFEAT_D0_STRIDE"), in_d1=w("INFEAT_D1_STRIDE"), in_d2=w("INFEAT_D2_STRIDE"),
            out_d0=w("OUTFEAT_D0_STRIDE"), out_d1=w("OUTFEAT_D1_STRIDE"),
            out_d2=w("OUTFEAT_D2_STRIDE"),
            w_d0=w("WEIGHTS_D0_STRIDE"), w_d1=w("WEIGHTS_D1_STRIDE"), w_d2=w("WEIGHTS_D2_STRIDE"),
            rem_ko=g("SUBTILE_REM0", "KO"), rem_ki=g("SUBTILE_REM0", "KI"),
            rem_ho=g("SUBTILE_REM1", "HO"), rem_wo=g("SUBTILE_REM1", "WO"),
            rem_hi=g("SUBTILE_REM2", "HI"), rem_wi=g("SUBTILE_REM2", "WI"),
            nb_ko=g("SUBTILE_NB0", "KO"), nb_ki=g("SUBTILE_NB0", "KI"),
            nb_ho=g("SUBTILE_NB1", "HO"), nb_wo=g("SUBTILE_NB1", "WO"),
            pad_value=g("PADDING", "VALUE"), pad_left=g("PADDING", "LEFT"),
            pad_bottom=g("PADDING", "BOTTOM"), pad_right=g("PADDING", "RIGHT"),
            pad_top=g("PADDING", "TOP"),
            weight_offset_word=w("WEIGHT_OFFSET"),
            mask_left=g("FILTER_MASK", "LEFT"), mask_bottom=g("FILTER_MASK", "BOTTOM"),
            mask_right=g("FILTER_MASK", "RIGHT"), mask_top=g("FILTER_MASK", "TOP"),
            qw=g("CONFIG0", "QWM1") + 1, mode16=bool(g("CONFIG0", "MODE16")),
            quant=bool(g("CONFIG0", "STREAMOUT")), filter_mode=g("CONFIG0", "FILTER_MODE"),
            linear=bool(g("CONFIG0", "LINEAR")), strided=bool(g("CONFIG0", "STRIDED_2X2")),
            rounding_bit=g("CONFIG0", "ROUNDING"), norm_code=g("CONFIG0", "NORM_BITS"),
            streamin=bool(g("CONFIG0", "STREAMIN")), weight_offs=bool(g("CONFIG0", "WEIGHT_OFFS")),
            right_shift=g("CONFIG0", "RIGHT_SHIFT"), quant_code=g("CONFIG0", "QUANT_BITS"),
            quant_rect=bool(g("CONFIG0", "QUANT_RECT")), norm_shift=bool(g("CONFIG0", "NORM_SHIFT")),
            norm_bias=bool(g("CONFIG0", "NORM_BIAS")),
        )

    # ---- derived ---------------------------------------------------------------------------
    @property
    def depthwise(self) -> bool:
        return self.filter_mode == MODE_3X3_DW and not self.linear

    @property
    def fs(self) -> int:
        """Filter size: 3 in the 3x3 modes, 1 in 1x1 (and linear)."""
        return 1 if (self.linear or self.filter_mode in (MODE_1X1, MODE_RESERVED)) else 3

    @property
    def tp_out(self) -> int:
        return TP_DW if self.depthwise else TP_OUT

    @property
    def win(self) -> int:
        """Input window of a full subtile: 5x5 (3x3 filters) or 3x3 (1x1)."""
        return FBUF if self.fs == 3 else FILTER

    @property
    def channels(self) -> int:
        """Input channels per 16-byte Ki slice: 16 (8-bit) or 8 (MODE16)."""
        return 8 if self.mode16 else 16

    @property
    def wd0(self) -> int:
        """Bytes of one weight bit-plane record of a tap (16 or 8 channels)."""
        return 1 if self.mode16 else 2

    @property
    def norm_bits(self) -> int:
        return WIDTH_BITS[self.norm_code]

    @property
    def quant_bits(self) -> int:
        return WIDTH_BITS[self.quant_code]

    @property
    def out_bits(self) -> int:
        return self.quant_bits

    @property
    def out_group(self) -> int:
        """Output channels written per word, the words of a pixel OUTFEAT_D0 apart.
        8-bit: the whole Ko subtile (D0 unused). 32-bit: 8 (a 32-byte word; EXT RTL/simulator).
        16-bit, which neither the open RTL nor the simulator implements: 8 channels when
        OUTFEAT_D0 is 16 (the GAP SDK kernels program 16 for 16-bit outputs: groups of 8
        channels, as for 32 bits), else 16 (a 32-byte word; pulp-nnx programs D0 = 32).
        Either way a pixel's int16 channels come out contiguous."""
        if self.out_bits == 8:
            return self.tp_out
        if self.out_bits == 16 and self.out_d0 == OUT_WORD // 2:
            return OUT_WORD // 2 // 2
        return OUT_WORD * 8 // self.out_bits

    @property
    def weight_offset(self) -> int:
        """The layer-wise offset the multipliers see: bits 7:0 with bit 31 as the sign (EXT
        RTL, digest §9). Applied whatever CONFIG0.WEIGHT_OFFS says: the open RTL never reads
        bit 15 (its WEIGHTOFFS phase always runs), the GAP9 simulator model leaves it "not
        implemented", and pulp-nnx's weights are encoded as w - offset whatever the mode, so
        its functional model's expectations need the offset added back. With the register at
        0 (the "symmetric" case) the seed's reading gives the same result."""
        v = self.weight_offset_word
        return (v & 0xFF) - (0x100 if v >> 31 else 0)

    def ko_lim(self, ko: int) -> int:
        return _full(self.rem_ko, self.tp_out) if ko == self.nb_ko - 1 else self.tp_out

    def ki_lim(self, ki: int) -> int:
        """Bytes (conv) or 16-channel groups (linear) of the Ki subtile `ki`."""
        full = TP_IN
        return _full(self.rem_ki, full) if ki == self.nb_ki - 1 else full

    def ho_lim(self, i: int) -> int:
        return _full(self.rem_ho, FILTER) if i == self.nb_ho - 1 else FILTER

    def wo_lim(self, j: int) -> int:
        return _full(self.rem_wo, FILTER) if j == self.nb_wo - 1 else FILTER

    def hi_lim(self, i: int) -> int:
        return _full(self.rem_hi, self.win) if i == self.nb_ho - 1 else self.win

    def wi_lim(self, j: int) -> int:
        return _full(self.rem_wi, self.win) if j == self.nb_wo - 1 else self.win

    @property
    def subtiles(self) -> int:
        """Output subtiles the job walks (Ko x Ho x Wo; x Ki for the Ki loop)."""
        if self.linear:
            return self.nb_ko * self.nb_ki
        if self.depthwise:
            return self.nb_ko * self.nb_ho * self.nb_wo
        return self.nb_ko * self.nb_ho * self.nb_wo * self.nb_ki

    # ---- programming the model refuses --------------------------------------------------------
    def problem(self) -> "str | None":
        """None if the job can run, else why it is rejected (one line)."""
        if self.filter_mode == MODE_RESERVED and not self.linear:
            return "CONFIG0.FILTER_MODE=0b11 is reserved (seed) unless CONFIG0.LINEAR is set"
        if self.linear and self.filter_mode == MODE_3X3_DW:
            return ("CONFIG0.LINEAR with FILTER_MODE 3x3 depthwise (EXT: the RTL would walk "
                    "depthwise 16-channel subtiles; the GAP9 simulator model asserts; program "
                    "FILTER_MODE 0b00, 0b10 or 0b11)")
        if self.norm_code == 3:
            return "CONFIG0.NORM_BITS=0b11 is reserved (seed)"
        if self.quant_code == 3:
            return "CONFIG0.QUANT_BITS=0b11 is reserved (seed)"
        counts = [("SUBTILE_NB0.KO", self.nb_ko), ("SUBTILE_NB0.KI", self.nb_ki)]
        if not self.linear:
            counts += [("SUBTILE_NB1.HO", self.nb_ho), ("SUBTILE_NB1.WO", self.nb_wo)]
        for name, v in counts:
            if v == 0:
                return f"{name} is 0: a job has at least one subtile in every dimension"
        rems = [("SUBTILE_REM0.KO", self.rem_ko, self.tp_out), ("SUBTILE_REM0.KI", self.rem_ki, TP_IN)]
        if not self.linear:
            rems += [("SUBTILE_REM1.HO", self.rem_ho, FILTER), ("SUBTILE_REM1.WO", self.rem_wo, FILTER),
                     ("SUBTILE_REM2.HI", self.rem_hi, FBUF), ("SUBTILE_REM2.WI", self.rem_wi, FBUF)]
        for name, v, full in rems:
            if v > full:
                return f"{name}={v} exceeds the subtile size {full}"
        if self.depthwise:
            if self.mode16:
                return "3x3 depthwise with MODE16 (EXT: not supported by the GAP9 simulator model)"
            if self.nb_ko != self.nb_ki or self.ko_lim(self.nb_ko - 1) != self.ki_lim(self.nb_ki - 1):
                return ("3x3 depthwise needs Ko == Ki (SUBTILE_NB0/REM0 KO and KI describe "
                        "different channel counts)")
        if self.mode16 and not self.linear and self.ki_lim(self.nb_ki - 1) % 2:
            return "MODE16 with an odd Ki byte count (SUBTILE_REM0.KI): 16-bit inputs are 2 bytes"
        if self.streamin and self.quant_bits != 32:
            return ("CONFIG0.STREAMIN needs QUANT_BITS=32 (streamin reads 32-bit accumulators "
                    "from the output buffer; EXT GAP9 simulator model)")
        if self.subtiles > MAX_SUBTILES:
            return (f"the job walks {self.subtiles} subtiles, more than the model's budget of "
                    f"{MAX_SUBTILES}")
        return None
