"""Where the BMKernel 1880 guide is silent or ambiguous: the one table of this model's choices.

Code comments refer to the ids (e.g. "choice C-SHIFT"); docs/devices/bm1880.md lists the
table (generated from it, checked by tests/bm1880/test_bm1880_docs.py).
"""
from __future__ import annotations

from .checks import MAX_GMEM_DATA
from .chip import CTRL_NAMES, ENGINE_NAMES
from .descriptors import MAX_CMDBUF
from .schedule import MAX_HAZARD_TABLE


def _pow2(v: int) -> str:
    return f"2^{v.bit_length() - 1}"

# (id, topic, the choice, why / what the guide says)
CHOICES: tuple[tuple[str, str, str, str], ...] = (
    ("C-CHIP", "chip parameters",
     "the values of the chip parameter table (tlm/bm1880/chip.py CHIP_PARAMS); lmem_size is per slice",
     "the guide names the parameters (4.6) but gives no values"),
    ("C-CMD", "command buffer bytes",
     "the model's own versioned format: 6-byte cmd_hdr_t (engine_id, version, kind, SYNC flag, "
     "stream, CRC-8, len) and the call's fields; dependencies are engine-15 records",
     "3.3 documents only engine_id and len; the instruction bytes are not published"),
    ("C-ENGINE", "engine ids",
     ", ".join(f"{n} {i}" for i, n in ENGINE_NAMES.items()) + " (TPU, GDMA: EXT ENGINE_BD / ENGINE_GDMA; "
     "CTRL carries dependency records)",
     "3.3 gives no numbers"),
    ("C-CTRL", "ctrl_t values", "CTRL_NULL 0, " + ", ".join(f"{n} {v}" for v, n in CTRL_NAMES.items()) + " (EXT)",
     "the guide names the flags only"),
    ("C-SHIFT", "right shifts",
     "arithmetic shift of the 32-bit intermediate (rounds toward minus infinity), then saturation",
     "the guide says '>>' before saturation and states no rounding"),
    ("C-WRAP", "32-bit intermediates",
     "two's-complement int32: an intermediate that overflows wraps modulo 2^32 before the shift",
     "ch.4: inputs are converted to 32 bits; overflow is not described"),
    ("C-SHIFT-RANGE", "shift widths", "rshift_width and lshift_width must be 0..31 (else an argument error); "
     "matrix_mac's lshift_width is used only with CTRL_RA and is otherwise ignored, as 4.46 says",
     "no range given; a 32-bit shift by 32 or more is undefined in C"),
    ("C-SIGN", "result format",
     "the result tensor's fmt must equal the signedness rule (unsigned iff all inputs unsigned); "
     "a 16-bit value's two planes must have the same fmt, which is the value's signedness",
     "ch.4 general rule; 4.29 shows both planes carry the signedness"),
    ("C-CONST-SIGN", "constants and the signedness rule",
     "a constant counts as an input: signed iff b_is_signed. Signed: b is -128..127 (-32768..32767 for "
     "add_const). Unsigned: the s8 (s16) field's byte read unsigned, so b may be given as the value 0..255 "
     "(0..65535) or as the field's s8 (s16) value, -1 meaning 255; anything else is an argument error",
     "the constant replaces tensor b (4.20, 4.22, 4.24, 4.28); the structures declare 's8 b' ('s16 b') even "
     "when b_is_signed is false"),
    ("C-MINCONST", "min_const / max_const signedness", "b_is_signed must equal a's signedness",
     "'similar to bmk1880_tpu_min', which requires a and b of the same signedness"),
    ("C-LOGIC", "logic ops with mixed signedness",
     "the general rule applies: inputs sign/zero-extended to 32 bits, AND/OR/XOR, saturated to the "
     "result format (same-signedness inputs give the plain bytewise result)",
     "4.30-4.35 give no exception to the general rule"),
    ("C-ARITH", "arith_shift",
     "a negative bits value shifts left; a bits datum outside [-16, 16] found at run time is a "
     "data fault (FAULT_DATA), nothing written",
     "4.29 gives the range, not the meaning of negative values nor what happens outside it"),
    ("C-LUT", "lut table and index",
     "table shape (1, npu_num, 16, 16) as the guide says; the index is the idx byte read unsigned "
     "(0..255); ofmap fmt must equal table fmt (the byte is copied); the entry is read from table "
     "channel c_t as 4.39 writes it, wherever the table's base is (channel c_t is in slice "
     "(base slice + c_t) mod npu_num)",
     "the EXT header describes (1, npu_num, 1, table_n) instead; the guide is followed"),
    ("C-COPY", "copies and formats",
     "GDMA moves bytes (fmt not compared); tpu_copy / copy_with_stride need the same shape and fmt",
     "DMA 'basic data must be 8-bit'; a TPU copy saturating between formats would not be a copy"),
    ("C-TP", "CTRL_TP on load / store / copy_gmem",
     "the gmem side is the N/C-transposed tensor (C, N, H, W) (or the (col, row) matrix) at its "
     "default strides (or the given stride for *_stride); copy_gmem transposes src then copies "
     "in row-major order into dst",
     "4.12, 4.14: 'indicating N/C-transposition' without the index formula"),
    ("C-MATRIX", "matrices in lmem",
     "W = eu_num, C' = ceil(C / eu_num); padding positions are never read or written; "
     "shape_t2 sets n = c = 1",
     "2.3 only requires C'.W >= C"),
    ("C-16BIT-MATRIX", "16-bit matrices (res, bias of matrix_mac)",
     "rows 0..R-1 of the (2R, C) matrix are the low bytes, rows R..2R-1 the high bytes",
     "'low 8-bit parts located at lower addresses' (4.1, 4.46)"),
    ("C-PLANES", "16-bit values as two tensor_lmem structures",
     "x_high and x_low may be anywhere in lmem (either may be the lower address); the two planes of a "
     "result must not overlap (C-INPLACE); 'low 8-bit parts located at lower addresses' is applied where "
     "one structure holds both planes (C-BIAS, C-16BIT-MATRIX)",
     "4.1 states the address order for the stored value and allows 'one or two' structures; the calls "
     "with x_high / x_low name each plane's structure"),
    ("C-BIAS", "conv / depthwise / winograd bias",
     "n = 0 of the (2, C, 1, 1) tensor is the low byte, n = 1 the high byte",
     "4.1: low part at the lower address"),
    ("C-CONV", "convolution",
     "cross-correlation (no kernel flip); dilation inserts dilation-1 zeros (the text says stride); "
     "H_out = (1 + (H-1)(ins_h+1) + ins_last_h + pad_top + pad_bottom - ((Kh-1)dilation_h+1)) / stride_h + 1, "
     "ofmap must have exactly that shape",
     "4.41 gives no output-size formula; its dilation sentence names stride_h (erratum)"),
    ("C-WINOGRAD", "winograd",
     "bit-identical to bmk1880_tpu_conv with stride 1, dilation 1, no insertion; weight "
     "(C_in, C_out, 3, 3) at its default strides",
     "4.42 does not say whether the Winograd transform is exact"),
    ("C-DEPTHWISE", "depthwise", "weight (1, C, Kh, Kw) at default strides; ifmap and ofmap aligned",
     "4.43 does not give the weight shape; 'similar to conv' for the rest"),
    ("C-MAXPOOL-PAD", "max pooling padding", "padding never wins: it reads as the format's minimum (-128 or 0)",
     "4.44 does not state the padding value"),
    ("C-MM2", "matrix_mac_2",
     "res[0,i,0,j] = sat(sum_k left[0,i,0,k] . right[k, j/16, 0, j%16]) over k < 256, 32-bit wrap, no shift",
     "4.47 gives shapes only"),
    ("C-LRN", "lrn_shift step", "lrn_step must be >= 0; a step >= C gives all zeros", "4.18's formulas"),
    ("C-ALLOC", "tl_alloc / tl_alloc_bank",
     "one LIFO stack of per-slice offsets; CTRL_AL starts at a multiple of eu_num; the size is "
     "N x S_N of the default strides; failures return None with ctx.last_error; alloc_bank places the "
     "tensor at max(stack top, bank start) and it must end inside that bank",
     "4.9, 4.10: a stack, NULL on failure; banks are not described further"),
    ("C-PREALLOC", "tl_prealloc", "la may be any lmem address; None (ctx.last_error) if the tensor leaves its slice "
     "(2.3's caution) or la is outside lmem; no memory is reserved",
     "4.7: NULL on failure"),
    ("C-RESET", "bmk1880_reset", "empties the buffer, the stack and the mode; tensors from tl_alloc / "
     "tl_alloc_bank and ops from before the reset become stale (using them is an error)",
     "3.4: back to the state right after register"),
    ("C-SCHED", "ordering",
     "every command of one engine runs in buffer order; serial commands wait for everything earlier; "
     "a parallel group or a streams region waits for everything before it and everything after it "
     "waits for it; in a streams region a stream is serial; dependencies add edges",
     "3.5-3.10; create/destroy_streams acting as barriers is a choice"),
    ("C-STREAM", "streams", "create_streams selects stream 0; nr_streams 1..255; parallel_enable inside "
     "streams and nesting are argument errors",
     "3.7-3.9 do not say"),
    ("C-HAZARD", "unordered conflicting commands",
     "two commands that may run in parallel (no order between them) and touch the same byte, one of "
     "them writing, make the buffer fault (FAULT_HAZARD) before anything runs",
     "3 lets DMA and TPU overlap 'as long as their lmem address ranges don't overlap'; otherwise the "
     "result would depend on timing"),
    ("C-INPLACE", "operands overlapping inside one command",
     "a command reads all its inputs before it writes (in-place ops are fine); two elements of one "
     "written operand at the same address, or a 16-bit result whose high and low planes overlap, is an "
     "argument error",
     "not stated"),
    ("C-ENTER", "samples' bmk1880_enter / bmk1880_exit and ctx-less calls",
     "enter/exit bracket a current context (checked); every call takes ctx as in chapters 3-4, and "
     "between bmk1880_enter and bmk1880_exit a call may leave ctx out, as the appendix writes them "
     "(bmk1880_acquire_cmdbuf(), bmk1880_reset(), bmk1880_tl_prealloc(0, s, FMT_I8)); the samples' "
     "tl_load/tl_store are gdma_load/gdma_store. Arguments that do not fit a call's parameters are one "
     "BmkError",
     "the appendix uses an older ctx-less API"),
    ("C-LIMIT", "model budgets",
     "an lmem operand holds at most Size_total data (strides of 0 cannot make it larger); a gmem-only "
     f"operand (gdma_copy_gmem) at most {_pow2(MAX_GMEM_DATA)}; larger ones are argument errors. A command "
     f"buffer holds at most {_pow2(MAX_CMDBUF)} bytes, and in one parallel group or streams region the "
     f"commands of at least one engine touch at most {_pow2(MAX_HAZARD_TABLE)} bytes (the hazard check's table); "
     "beyond, the buffer faults with FAULT_LIMIT before anything runs",
     "bounds the model's memory and work on hostile buffers; the guide has no limit"),
    ("C-GMEM", "gmem", "40-bit byte addresses (EXT GADDR_INVALID); unwritten bytes read 0; accesses are "
     "bus transactions (a bus error stops the buffer with FAULT_BUS)",
     "the guide does not size gmem"),
)
IDS = {c[0] for c in CHOICES}
assert len(IDS) == len(CHOICES)
