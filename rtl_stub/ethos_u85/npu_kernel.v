// npu_kernel.v -- kernel-operation unit of the Ethos-U85 stand-in: NPU_OP_ELEMENTWISE and
// NPU_OP_POOL (TRM 3.6.4-3.6.7, 3.10.5, 3.10.6).
//
// What runs here (everything else is refused before it starts, see "Checks"):
//   ELEMENTWISE  every mode but div: mul, add, sub, min, max, lrelu, abs, clz, shr, shl,
//                lshr, cmp_eq/ne/ge/gt, and, or, xor, not, and_not; IFM/IFM2 b8 (signed or
//                unsigned), b16 (signed or unsigned), signed b32; IFM_SCALE / IFM2_SCALE input
//                scaling (scale_a/scale_b, every round_mode and dbl_rnd; b32 and unsigned b16
//                pass unscaled); OFM_SCALE (global scale_mode, every round_mode, dbl_rnd; the
//                b32 mul product shift-only; shifts without rescale); zero points; IFM/IFM2
//                broadcast in h, w, c and any combination; a scalar IFM or IFM2 (OP_SCALAR;
//                see "Scalar operand"); chaining (see "Chaining").
//   POOL         max, min, average (count of non-padding taps, built-in scale table of
//                gen/npu_kernel.vh), sum, reduce_sum; IFM b8 or signed b16/b32 (as the TRM
//                allows per mode); acc_format i32, and i48 for sum and reduce_sum; padding;
//                strides 1-4; kernels up to 256x256 for max/min, 8x8 for average (TRM
//                limit), any TRM-legal size for sum; OFM_SCALE global.
//   both         OFM b8, b16 or b32, signed or unsigned; NHWC and NHCWB16 for every tensor;
//                OFM reverse (POOL, RESIZE) and transposes (ELEMENTWISE HCW/CHW, POOL all);
//                tile2x2 / tile3x1 storage when every element the operation touches lies in
//                tile 0 (base 0); OFM storage none (computed, not written: COND_STATUS
//                only); activation clip_range b16 (ACTIVATION_MIN/MAX) or none, and every
//                LUT function (lut_u8_u8, lut_s8_s8, lut_s8_s16, lut_s8_s32, lut_s16_s16,
//                lut_s16_s32, lut_tanh, lut_sigmoid) on the 2048-byte LUT RAM of npu_dma.v
//                (ACTIVATION.table); truncation to the OFM type.
//
// Execution: the decoder issues the operation (start) after checking op_unsupported and
// op_unpredictable, and then waits until busy falls before it executes the next command,
// so the NPU_SET state (this module's copy of gen/npu_cmd_state.vh, written by the
// decoder) is stable for the whole operation. busy covers every read and every write
// response of the operation: a following operation or DMA sees the OFM in memory.
//
// Datapath (simple rather than fast, one element per cycle):
//   * a chunk is CH = 16 >> log2(largest element size in bytes among the tensors read from
//     or written to memory) consecutive channels: at most 16 bytes of every tensor;
//   * the request generator walks (oy, ox, chunk, ky, kx) - one "tap" per chunk for
//     elementwise; reduce_sum: (oy, ox, IFM depth chunk) - and reads each chunk as one or
//     two single-beat bursts: IFM on rd_ifm (ARID 1), IFM2 on rd_ifm_stream (ARID 5), exact
//     start address, so no burst crosses a 16-byte (hence max_beats, 4 KB) boundary.
//     Read addresses are kept incrementally (no multiplier): BASEP[region] + BASE0 + y*STRIDE_Y
//     + x*STRIDE_X (NHCWB16: 16*size*x) + c*size (NHCWB16: (c/16)*STRIDE_C + (c%16)*size);
//     OFM addresses come from npu_ofm_addr.v (write_ofm's reverse and transpose), shared
//     with the CONV output stage.
//     A tap in the padding is not read. A token per tap tells the compute side what
//     arrives;
//   * read beats wait in 4-beat queues (the generator reserves the space before it issues);
//   * the compute side folds the lanes of a pooling tap at once (max, min or sum into
//     48-bit accumulators starting at the identity of gen/npu_kernel.vh; reduce_sum: the
//     sum of the chunk's lanes into one), and computes the output elements one by one with
//     npu_kernel_alu (one multiplier and rounding shifter: pooling 1 cycle an element,
//     elementwise mul 2, the other modes 3: scale_a, scale_b, rescale + activation + LUT +
//     truncation); elementwise operands are read from the head of the beat queues, which
//     are popped after the chunk's last element;
//   * an output chunk is written as one or two single-beat bursts on wr_ofm (AWID 8) with
//     WSTRB on its bytes, while the next chunk is computed.
// COND_STATUS.result_flag is bit 0 of the last element computed (TRM write_ofm).
//
// Scalar operand: OP_SCALAR minus the operand's zero point (IFM_ZERO_POINT or
// IFM2_ZERO_POINT as int16/uint16 by the operand's type), as the TLM reads Vela's streams
// (tlm/ops/elementwise.py SCALAR_SUBTRACTS_ZERO_POINT).
//
// Chaining (TRM 3.6.4, tlm/ops/common.py): three chaining FIFOs of CHAIN_DEPTH 32-bit
// values (the truncated OFM values, sign- or zero-extended by the OFM type), and the chain
// state g_chain_length, g_num_ifm, g_fifo_valid. An ELEMENTWISE operation may read its IFM
// and/or IFM2 from a FIFO (activation_storage chained, region = FIFO) and write its OFM to
// one; the first operation of a chain empties the FIFOs. A POOL (and a CONV/DEPTHWISE, via
// the decoder's chain_open) cannot be appended to a chain. A CONV/DEPTHWISE (cv_start)
// starts one: with a chained OFM it opens a chain whose FIFO it fills through cv_we/cv_idx
// (npu_conv_out.v; the FIFOs' one write port, by element index). chain_open tells the
// decoder that a stop request waits for the end of the chain (tlm/device.py).
//
// Checks (combinational, for the command at the decoder's head):
//   op_unsupported   a configuration this unit does not implement: the decoder stops with
//                    cmd_parse_error and IRQ (QREAD at the operation), nothing is read or
//                    written. A missing feature (mode, precision, transposes, ...) is
//                    checked first; an implementation limit (tile 0 only, max/min kernel up
//                    to 256x256, a chaining FIFO holding more than CHAIN_DEPTH values) only
//                    if no TRM assert below fails.
//   op_unpredictable a failed TRM assert that depends on registers and the chain state only
//                    (the TLM's list, tlm/ops/{elementwise,pool,common}.py, arith.py,
//                    fmap.py): the command completes without effect (TLM policy
//                    on_unpredictable='continue'); the chain state does not change either.
// Asserts that depend on data are not checked (the TLM's UNPREDICTABLE there is any result
// here): the int16 range of a chained operand that is scaled, the LUT index range of
// lut_s16_* without clip_range b16.
//
// Errors: abort (bus error, soft reset) stops new bursts; bursts on the bus complete; the
// unit goes idle once every read beat and write response is back. A chunk computed from
// a read beat with an error response is not written. pause (warm reset, debug halt): no
// new bursts until it falls.
`default_nettype none

module npu_kernel #(
    parameter integer MACS = 256           // the microblock depth (reverse C asserts)
) (
    input  wire          CLK,
    input  wire          rst_n,
    // NPU_SET state write port (from npu_cmd_decode)
    input  wire          set_we,
    input  wire          set_kind,
    input  wire [9:0]    set_opc,
    input  wire [63:0]   set_raw,
    // the command at the decoder's head
    input  wire          op_pool,
    input  wire          op_ew,
    input  wire          op_resize,
    input  wire [5:0]    op_mode,         // pooling_mode [2:0] / elementwise_mode / resize_mode [1:0]
    output wire          op_unsupported,
    output wire          op_unpredictable,
    input  wire          start,
    output wire          busy,
    input  wire          abort,
    input  wire          pause,
    output wire          cond_flag,
    output wire          chain_open,      // g_chain_length != 0
    // routing state (APB registers)
    input  wire [319:0]  basep,
    input  wire [15:0]   regioncfg,
    input  wire [31:0]   mem_attr,
    // LUT RAM read port (npu_dma.v): 16-byte line, combinational
    output wire [6:0]    lut_raddr,
    input  wire [127:0]  lut_rdata,
    // CONV unit (npu_conv.v): an operation started (add_operation_to_chain: with a chained
    // OFM it opens a chain), and its chained OFM's writes into the FIFO of OFM_REGION
    input  wire          cv_start,
    input  wire          cv_we,
    input  wire [15:0]   cv_idx,
    input  wire [31:0]   cv_data,
    // IFM reads (rd_ifm)
    output wire          a_rq_valid,
    output wire          a_rq_ext,
    output wire [39:0]   a_rq_addr,
    output wire [3:0]    a_rq_cache,
    output wire [1:0]    a_rq_domain,
    input  wire          a_rq_ready,
    input  wire          a_rb_valid,
    input  wire [127:0]  a_rb_data,
    input  wire [1:0]    a_rb_resp,
    // IFM2 reads (rd_ifm_stream)
    output wire          b_rq_valid,
    output wire          b_rq_ext,
    output wire [39:0]   b_rq_addr,
    output wire [3:0]    b_rq_cache,
    output wire [1:0]    b_rq_domain,
    input  wire          b_rq_ready,
    input  wire          b_rb_valid,
    input  wire [127:0]  b_rb_data,
    input  wire [1:0]    b_rb_resp,
    // OFM writes (wr_ofm), one beat a burst
    output wire          wq_valid,
    output wire          wq_ext,
    output wire [39:0]   wq_addr,
    output wire [3:0]    wq_cache,
    output wire [1:0]    wq_domain,
    input  wire          wq_ready,
    output wire          wd_valid,
    output wire [127:0]  wd_data,
    output wire [15:0]   wd_strb,
    input  wire          wd_ready,
    input  wire          wb_valid         // B responses of AWID wr_ofm
);
`include "gen/npu_isa.vh"
`include "gen/npu_kernel.vh"
`include "gen/npu_cmd_state.vh"
`include "gen/npu_op_fields.vh"
`include "gen/npu_sizes.vh"

    // ================================================================ register fields
    // IFM
    wire [FW_npu_set_ifm_broadcast__broadcast_mode-1:0] i_bm    = f_npu_set_ifm_broadcast__broadcast_mode;
    // IFM2
    wire [FW_npu_set_ifm2_broadcast__broadcast_mode-1:0] j_bm    = f_npu_set_ifm2_broadcast__broadcast_mode;
    // OFM
    // kernel, padding, accumulator, activation, scales
    wire [FW_npu_set_kernel_stride__dilation_x-1:0] dil_x   = f_npu_set_kernel_stride__dilation_x;
    wire [FW_npu_set_kernel_stride__dilation_y-1:0] dil_y   = f_npu_set_kernel_stride__dilation_y;
    wire [FW_npu_set_ifm_scale__scale-1:0] is_scale = f_npu_set_ifm_scale__scale;
    wire [FW_npu_set_ifm_scale__shift-1:0] is_shift = f_npu_set_ifm_scale__shift;
    wire [FW_npu_set_ifm_scale__round_mode-1:0] is_rnd   = f_npu_set_ifm_scale__round_mode;
    wire [FW_npu_set_ifm_scale__dbl_rnd-1:0] is_dbl   = f_npu_set_ifm_scale__dbl_rnd;
    wire [FW_npu_set_ifm2_scale__scale-1:0] js_scale = f_npu_set_ifm2_scale__scale;
    wire [FW_npu_set_ifm2_scale__shift-1:0] js_shift = f_npu_set_ifm2_scale__shift;
    wire [FW_npu_set_ifm2_scale__round_mode-1:0] js_rnd   = f_npu_set_ifm2_scale__round_mode;
    wire [FW_npu_set_ifm2_scale__dbl_rnd-1:0] js_dbl   = f_npu_set_ifm2_scale__dbl_rnd;
    wire [FW_npu_set_op_scalar__scalar-1:0] scalar   = f_npu_set_op_scalar__scalar;

    // ================================================================ enum shorthands
    localparam [1:0] B8 = NPU_E_ACTIVATION_PRECISION_B8[1:0];
    localparam [1:0] B16 = NPU_E_ACTIVATION_PRECISION_B16[1:0];
    localparam [1:0] B32 = NPU_E_ACTIVATION_PRECISION_B32[1:0];
    localparam [1:0] B64 = NPU_E_ACTIVATION_PRECISION_B64[1:0];
    localparam [1:0] NHWC = NPU_E_ACTIVATION_FORMAT_NHWC[1:0];
    localparam [1:0] NHCWB16 = NPU_E_ACTIVATION_FORMAT_NHCWB16[1:0];
    localparam [1:0] ST_2X2 = NPU_E_ACTIVATION_STORAGE_TILE2X2[1:0];
    localparam [1:0] ST_3X1 = NPU_E_ACTIVATION_STORAGE_TILE3X1[1:0];
    localparam [1:0] ST_CHAINED = NPU_E_ACTIVATION_STORAGE_CHAINED[1:0];
    localparam [1:0] ST_NONE = NPU_E_ACTIVATION_STORAGE_NONE[1:0];
    localparam [3:0] BM_NONE = NPU_E_BROADCAST_MODE_NONE[3:0];
    localparam [3:0] BM_SCALAR = NPU_E_BROADCAST_MODE_SCALAR[3:0];
    localparam [2:0] P_MAX = NPU_E_POOLING_MODE_MAX[2:0];
    localparam [2:0] P_AVG = NPU_E_POOLING_MODE_AVERAGE[2:0];
    localparam [2:0] P_RSUM = NPU_E_POOLING_MODE_REDUCE_SUM[2:0];
    localparam [2:0] P_SUM = NPU_E_POOLING_MODE_SUM[2:0];
    localparam [2:0] P_MIN = NPU_E_POOLING_MODE_MIN[2:0];
    localparam [5:0] M_MUL = NPU_E_ELEMENTWISE_MODE_MUL[5:0], M_LRELU = NPU_E_ELEMENTWISE_MODE_LRELU[5:0],
                     M_ABS = NPU_E_ELEMENTWISE_MODE_ABS[5:0], M_CLZ = NPU_E_ELEMENTWISE_MODE_CLZ[5:0],
                     M_SHR = NPU_E_ELEMENTWISE_MODE_SHR[5:0], M_SHL = NPU_E_ELEMENTWISE_MODE_SHL[5:0],
                     M_LSHR = NPU_E_ELEMENTWISE_MODE_LSHR[5:0], M_DIV = NPU_E_ELEMENTWISE_MODE_DIV[5:0],
                     M_NOT = NPU_E_ELEMENTWISE_MODE_NOT[5:0];
    localparam [1:0] ACC_I32 = NPU_E_ACC_FORMAT_I32[1:0];
    localparam [1:0] UP_NONE = NPU_E_IFM_UPSCALE_MODE_NONE[1:0];
    localparam [1:0] UP_ZEROS = NPU_E_IFM_UPSCALE_MODE_ZEROS[1:0];
    localparam [2:0] TR_HWC = NPU_E_ACTIVATION_TRANSPOSE_HWC[2:0];
    localparam [2:0] TR_HCW = NPU_E_ACTIVATION_TRANSPOSE_HCW[2:0];
    localparam [2:0] TR_CHW = NPU_E_ACTIVATION_TRANSPOSE_CHW[2:0];
    localparam integer NF = NPU_NUM_CHAINING_FIFO;
    localparam integer CHAIN_DEPTH = NPU_CHAIN_DEPTH;   // values per chaining FIFO (a power of 2)
    localparam integer CAW = $clog2(CHAIN_DEPTH);

    // ================================================================ the operation
    // k_busy: the latched operation kind; else the command at the decoder's head (checks)
    // (RESIZE runs on the pooling path: k_pool, with k_rs)
    logic        k_busy;
    logic        k_pool;
    logic        k_rs;
    logic [5:0]  k_mode;
    wire         rs = k_busy ? k_rs : op_resize;
    wire         pl = k_busy ? k_pool : (op_pool || op_resize);
    wire         plp = pl && !rs;                                // NPU_OP_POOL
    wire         ew = k_busy ? !k_pool : op_ew;
    wire [5:0]   md = k_busy ? k_mode : op_mode;
    wire [2:0]   pmode = md[2:0];
    wire         reduce = plp && pmode == P_RSUM;
    wire         rs_bil = rs && md[1:0] == NPU_E_RESIZE_MODE_BILINEAR[1:0];
    wire         rs_near = rs && md[1:0] == NPU_E_RESIZE_MODE_NEAREST[1:0];
    wire         p_maxmin = pmode == P_MAX || pmode == P_MIN;
    wire         unary = md == M_LRELU || md == M_ABS || md == M_CLZ || md == M_NOT;
    wire         mulop = md == M_MUL;
    wire         sh_op = md == M_SHR || md == M_SHL || md == M_LSHR;

    // ================================================================ derived values
    // zero points as read_ifm / activation() type them (int16, or uint16 if unsigned)
    wire [16:0] i_zp17 = i_sgn ? {i_zp[15], i_zp} : {1'b0, i_zp};
    wire [16:0] j_zp17 = j_sgn ? {j_zp[15], j_zp} : {1'b0, j_zp};
    wire [16:0] o_zp17 = o_sgn ? {o_zp[15], o_zp} : {1'b0, o_zp};
    wire [16:0] o_min17 = o_sgn ? {act_min[15], act_min} : {1'b0, act_min};
    wire [16:0] o_max17 = o_sgn ? {act_max[15], act_max} : {1'b0, act_max};
    // scalar operands: OP_SCALAR - zero point (33 bits)
    wire [32:0] a_scl = {scalar[31], scalar} - {{16{i_zp17[16]}}, i_zp17};
    wire [32:0] b_scl = {scalar[31], scalar} - {{16{j_zp17[16]}}, j_zp17};
    function fits16;                   // int16 range: bits 32..15 all equal
        input [17:0] v;
        fits16 = (v == {18{1'b0}}) || (v == {18{1'b1}});
    endfunction
    // read_ifm's zero point asserts (tlm.arith.ifm_zero_point)
    function zp_ok;
        input [1:0]  prec;
        input        sgn;
        input [15:0] zp;
        begin
            if (zp == 16'd0) zp_ok = 1'b1;
            else if (sgn) zp_ok = (prec == B8) && (zp[15:7] == 9'h000 || zp[15:7] == 9'h1FF);
            else zp_ok = ((prec == B8) && zp[15:8] == 8'h00) || ((prec == B16) && zp == 16'h8000);
        end
    endfunction
    wire        i_zp_ok = zp_ok(i_prec, i_sgn, i_zp);
    wire        j_zp_ok = zp_ok(j_prec, j_sgn, j_zp);
    // activation()'s OFM zero point assert
    wire        o_zp_ok = o_sgn ? (o_zp[15:7] == 9'h000 || o_zp[15:7] == 9'h1FF)
                                : (o_zp[15:8] == 8'h00 || o_zp == 16'h8000);
    // scale_a / scale_b pass b32 and unsigned b16 operands unscaled (lrelu's scale_b: the IFM's, E-14)
    wire        pass_a = !(i_prec == B8 || (i_prec == B16 && i_sgn));
    wire        pass_b = (md == M_LRELU) ? pass_a : !(j_prec == B8 || (j_prec == B16 && j_sgn));

    wire        a_scalar = i_bm == BM_SCALAR;
    wire        b_scalar = j_bm == BM_SCALAR;
    wire        i_chain = ew && !a_scalar && i_stor == ST_CHAINED;
    wire        use_b = ew && !unary && !b_scalar;              // IFM2 read (memory or FIFO)
    wire        j_chain = use_b && j_stor == ST_CHAINED;
    wire        o_chain = o_stor == ST_CHAINED;
    wire        a_mem = pl || (!a_scalar && !i_chain);           // IFM read from memory
    wire        b_mem = use_b && !j_chain;
    wire        o_mem = o_stor != ST_NONE && !o_chain;
    // chunk: CH channels, at most 16 bytes of every tensor in memory
    wire [1:0]  lmax_ab = (a_mem && b_mem) ? ((i_prec > j_prec) ? i_prec : j_prec)
                        : a_mem ? i_prec : b_mem ? j_prec : 2'd0;
    wire [1:0]  lmax = (o_mem && o_prec > lmax_ab) ? o_prec : lmax_ab;
    // write_ofm transposes that move the channel axis out of the innermost place, and
    // reverse C (npu_ofm_addr.v elem): one element a chunk (CH = 1), each written on its own
    wire        o_elem;
    wire [4:0]  CH = (o_elem && o_mem) ? 5'd1 : 5'd16 >> lmax;
    wire        bc_a = !pl && i_bm[2];                           // IFM broadcast in c
    wire        bc_b = j_bm[2];
    // strides: stride_y/x = 2*msb + lsb + 1
    wire [2:0]  sy_v = {1'b0, sy_msb, sy_lsb} + 3'd1;
    wire [2:0]  sx_v = {1'b0, sx_msb, sx_lsb} + 3'd1;
    // derived IFM size (pooling): ifm_h = (ofm_h - 1)*stride_y + kernel_h - pad_t - pad_b
    wire [18:0] ohs = {3'd0, oh_m1} + (sy_lsb ? {3'd0, oh_m1} : 19'd0) + (sy_msb ? {2'd0, oh_m1, 1'b0} : 19'd0);
    wire [18:0] ows = {3'd0, ow_m1} + (sx_lsb ? {3'd0, ow_m1} : 19'd0) + (sx_msb ? {2'd0, ow_m1, 1'b0} : 19'd0);
    wire [20:0] yend = {2'd0, ohs} + {5'd0, kh_m1} + 21'd1 - {13'd0, pad_b};   // pad_t + ifm_h
    wire [20:0] xend = {2'd0, ows} + {5'd0, kw_m1} + 21'd1 - {13'd0, pad_r};   // pad_l + ifm_w
    wire [20:0] ifm_h = yend - {14'd0, pad_t};
    wire [20:0] ifm_w = xend - {14'd0, pad_l};
    wire        ifm_hw_ok = !ifm_h[20] && (ifm_h != 21'd0) && !ifm_w[20] && (ifm_w != 21'd0);
    wire [20:0] ifm_hm1 = reduce ? {5'd0, oh_m1} : ifm_h - 21'd1;
    wire [20:0] ifm_wm1 = reduce ? {5'd0, ow_m1} : ifm_w - 21'd1;
    wire [16:0] od = {1'b0, od_m1} + 17'd1;
    wire [16:0] id = {1'b0, id_m1} + 17'd1;
    wire [16:0] oh = {1'b0, oh_m1} + 17'd1;
    wire [16:0] ow = {1'b0, ow_m1} + 17'd1;
    // OFM elements (the values a chained operand pops / a chained OFM pushes)
    wire [33:0] n_hw = oh * ow;
    wire [50:0] n_el = n_hw * od;

    // ---- single tile: every accessed (y, x) lies in tile 0 (element_address_in_region)
    function tile0;
        input [1:0]  stor;
        input [15:0] w0m1, h0m1, h1m1;
        input [20:0] maxy, maxx;
        begin
            if (stor == ST_2X2)
                tile0 = (maxx <= {5'd0, w0m1}) && (maxy <= {5'd0, h0m1});
            else if (stor == ST_3X1)
                tile0 = (maxy <= {5'd0, h0m1}) && (maxy <= {5'd0, h1m1});
            else
                tile0 = 1'b1;
        end
    endfunction
    // TRM address asserts of element_address_in_region (size = 1 << prec bytes): NHWC needs
    // element-aligned base, stride_x and stride_y; NHCWB16 16-byte aligned base and
    // 16*size-aligned stride_c and stride_y; reserved formats are UNPREDICTABLE
    function addr_ok;
        input [1:0] fmt;
        input [1:0] prec;
        input [5:0] base, sx, sc, sy;   // low bits of BASE0, STRIDE_X, STRIDE_C, STRIDE_Y
        logic [5:0] em, bm;
        begin
            em = (prec == B8) ? 6'd0 : (prec == B16) ? 6'd1 : (prec == B32) ? 6'd3 : 6'd7;
            bm = {em[1:0], 4'hF};
            if (fmt == NHCWB16)
                addr_ok = (base[3:0] == 4'd0) && ((sc & bm) == 6'd0) && ((sy & bm) == 6'd0);
            else if (fmt == NHWC)
                addr_ok = ((base & em) == 6'd0) && ((sx & em) == 6'd0) && ((sy & em) == 6'd0);
            else
                addr_ok = 1'b0;
        end
    endfunction
    wire i_addr_ok = addr_ok(i_fmt, i_prec, i_base[5:0], i_sx[5:0], i_sc[5:0], i_sy[5:0]);
    wire j_addr_ok = addr_ok(j_fmt, j_prec, j_base[5:0], j_sx[5:0], j_sc[5:0], j_sy[5:0]);
    wire o_addr_ok = !o_mem || addr_ok(o_fmt, o_prec, o_base[5:0], o_sx[5:0], o_sc[5:0], o_sy[5:0]);

    wire [20:0] ew_i_maxy = i_bm[0] ? 21'd0 : {5'd0, oh_m1};
    wire [20:0] ew_i_maxx = i_bm[1] ? 21'd0 : {5'd0, ow_m1};
    wire [20:0] ew_j_maxy = j_bm[0] ? 21'd0 : {5'd0, oh_m1};
    wire [20:0] ew_j_maxx = j_bm[1] ? 21'd0 : {5'd0, ow_m1};
    // the OFM's largest memory y' and x' (after write_ofm's transpose: npu_ofm_addr.v)
    wire [15:0] o_my, o_mx;
    wire        o_wok;                          // check_ofm_write (npu_ofm_addr.v)
    wire        o_tile0 = tile0(o_stor, o_w0m1, o_h0m1, o_h1m1, {5'd0, o_my}, {5'd0, o_mx});
    wire        act_fn_valid = (act_fn <= 5'd11) && NPU_EMAP_ACTIVATION_FUNCTION[act_fn[3:0]];
    wire        o_scale_ok = (os_rnd <= NPU_E_ROUND_MODE_OFM_TRUNCATE_TO_LOWER[2:0]) && (os_dbl != 5'd31);
    // activation(): the table asserts of the LUT functions
    wire        lut_ok;                         // npu_act.v tab_ok
    wire        act_ok = act_fn_valid && lut_ok && o_zp_ok;

    // ================================================================ chain state
    logic [2:0]  ch_len;                        // g_chain_length
    logic [1:0]  ch_nifm;                       // g_num_ifm
    logic [NF-1:0] ch_valid;                    // g_fifo_valid
    logic [CAW:0] f_cnt [0:NF-1];
    logic [CAW-1:0] f_rp [0:NF-1];
    logic [CAW-1:0] f_wp [0:NF-1];
    wire         ch_open = ch_len != 3'd0;
    // a chained operand / OFM names its FIFO by its region
    wire         i_fifo_ok = (i_reg < 3'(NF)) && ch_open && ch_valid[i_reg[1:0]];
    wire         j_fifo_ok = (j_reg < 3'(NF)) && ch_open && ch_valid[j_reg[1:0]];
    wire [CAW:0] i_cnt = f_cnt[i_reg[1:0]];
    wire [CAW:0] j_cnt = f_cnt[j_reg[1:0]];
    wire [CAW:0] o_cnt = ch_open ? f_cnt[o_reg[1:0]] : {(CAW+1){1'b0}};
    wire [1:0]   n_ext = {1'b0, !a_scalar && !i_chain} + {1'b0, use_b && !j_chain};
    wire [2:0]   nifm_new = {1'b0, ch_open ? ch_nifm : 2'd0} + {1'b0, n_ext};
    wire         ch_unpred =
           (ch_len == 3'(NPU_MAX_CHAIN_LENGTH))
        || (i_chain && (!i_fifo_ok || {{(51-CAW-1){1'b0}}, i_cnt} < n_el))
        || (j_chain && (!j_fifo_ok || (i_chain && i_reg == j_reg) || {{(51-CAW-1){1'b0}}, j_cnt} < n_el))
        || (nifm_new > 3'd3)
        || (o_chain && o_reg >= 3'(NF));
    // values in the OFM's FIFO after the operation (its own pops first)
    wire [50:0]  o_after = {{(51-CAW-1){1'b0}}, o_cnt} + n_el
                         - ((i_chain && i_reg == o_reg) ? n_el : 51'd0)
                         - ((j_chain && j_reg == o_reg) ? n_el : 51'd0);
    wire         ch_full = o_chain && o_after > 51'(CHAIN_DEPTH);

    // ================================================================ checks: ELEMENTWISE
    wire ew_mode_valid = (op_mode <= 6'd42) && NPU_EMAP_ELEMENTWISE_MODE[op_mode];
    wire ew_tr_ok      = (o_tr == TR_HWC) || (o_tr == TR_HCW) || (o_tr == TR_CHW);
    // check_ofm_write of a memory OFM (reverse/transpose legality, block limits)
    wire wo_ok         = !o_mem || o_wok;
    // scale_a / scale_b are applied (to an operand of a scaled type)
    wire uses_sa = !(mulop || md == M_DIV);
    wire uses_sb = uses_sa && !(md == M_ABS || md == M_CLZ || md == M_NOT);
    wire sa_on = uses_sa && !pass_a;
    wire sb_on = uses_sb && !pass_b;
    // the operand scale_b sees: a for lrelu
    wire sb_scalar = (md == M_LRELU) ? a_scalar : b_scalar;
    wire [17:0] sb_hi = (md == M_LRELU) ? a_scl[32:15] : b_scl[32:15];
    // an unscaled scalar operand must fit int32 here (the TLM keeps 33 bits)
    wire a_scl_fits32 = a_scl[32] == a_scl[31];
    wire b_scl_fits32 = b_scl[32] == b_scl[31];
    wire ew_unsup =
           (ew_mode_valid && md == M_DIV)
        || (o_prec == B64)
        || (o_chain && o_prec == B32 && !o_sgn)
        || (a_scalar && pass_a && !a_scl_fits32)
        || (use_b && b_scalar && pass_b && !b_scl_fits32);
    // implementation limits (below a failed TRM assert in priority)
    wire ew_limit =
           (a_mem && !tile0(i_stor, i_w0m1, i_h0m1, i_h1m1, ew_i_maxy, ew_i_maxx))
        || (b_mem && !tile0(j_stor, j_w0m1, j_h0m1, j_h1m1, ew_j_maxy, ew_j_maxx))
        || (o_mem && !o_tile0)
        || ch_full;
    wire ew_unpred =
           (acc_fmt > 2'd1)
        || !ew_mode_valid
        || (!unary && i_prec != j_prec)                         // with an IFM2 only (E-14)
        || (i_prec == B64) || (i_prec == B32 && !i_sgn)
        || (o_rev != 2'd0) || !ew_tr_ok
        || (i_up != UP_NONE)
        || (a_scalar && i_stor != ST_NONE)
        || (!a_scalar && i_bm != BM_NONE && i_stor == ST_CHAINED)
        || (!unary && b_scalar && (a_scalar || j_stor != ST_NONE))
        || (use_b && j_bm != BM_NONE && j_stor == ST_CHAINED)
        || (!a_scalar && (i_stor == ST_NONE || (!i_chain && !i_addr_ok) || !i_zp_ok))
        || (use_b && (j_stor == ST_NONE || (!j_chain && !j_addr_ok) || !j_zp_ok))
        || (mulop && !(i_prec == B8 || i_sgn || (i_zp == 16'h8000 && j_zp == 16'h8000)))
        || (sa_on && (is_dbl == 5'd31 || (a_scalar && !fits16(a_scl[32:15]))))
        || (sb_on && (js_dbl == 5'd31 || (sb_scalar && !fits16(sb_hi))))
        || (!sh_op && o_smode != NPU_E_OFM_SCALE_MODE_GLOBAL[0])
        || (!(md == M_SHL || md == M_LSHR) && !o_scale_ok)
        || !act_ok
        || (o_chain && (o_tr != TR_HWC))
        || !wo_ok
        || !o_addr_ok
        || ch_unpred;

    // ================================================================ checks: POOL
    wire p_impl = p_maxmin || pmode == P_AVG || pmode == P_SUM || reduce;
    wire [16:0] kh = {1'b0, kh_m1} + 17'd1;
    wire [16:0] kw = {1'b0, kw_m1} + 17'd1;
    wire pool_unsup =
           !p_impl
        || (acc_in == NPU_E_ACC_INPUT_KEEP[1:0]) || (acc_in == NPU_E_ACC_INPUT_IFM2[1:0])
        || (i_up == NPU_E_IFM_UPSCALE_MODE_NEAREST[1:0] && !reduce)
        || (i_up == UP_ZEROS && !p_maxmin && !reduce)
        || (i_stor == ST_CHAINED)
        || (acc_out != NPU_E_ACC_OUTPUT_ENABLE[0])
        || (o_smode != NPU_E_OFM_SCALE_MODE_GLOBAL[0])
        || (o_prec == B64) || o_chain;
    wire pool_limit =
           (p_maxmin && (kh > 17'd256 || kw > 17'd256))
        || !tile0(i_stor, i_w0m1, i_h0m1, i_h1m1, ifm_hm1, ifm_wm1)
        || (o_mem && !o_tile0);
    wire pool_unpred =
           (acc_fmt > 2'd1)
        || dil_x || dil_y
        || ch_open                                   // cannot be appended to a chain
        || !ifm_hw_ok
        || !(i_prec == B8 || ((i_prec == B16 || i_prec == B32) && i_sgn))
        || (p_maxmin && (i_up == UP_ZEROS))
        || (pmode == P_AVG && (kh > 17'd8 || kw > 17'd8 || {10'd0, pad_t} >= kh || {9'd0, pad_b} >= kh
                               || {10'd0, pad_l} >= kw || {9'd0, pad_r} >= kw
                               || decomp != NPU_E_KERNEL_DECOMPOSITION_D8X8[0] || i_prec == B32))
        || (pmode == P_SUM && i_prec == B32)
        || (reduce && (kh != 17'd1 || kw != 17'd1 || sy_v != 3'd1 || sx_v != 3'd1 || i_up != UP_NONE
                       || w_order != NPU_E_WEIGHT_ORDER_DEPTH_FIRST[0] || i_zp != 16'd0 || od != 17'd1))
        || (pmode != P_SUM && !reduce && acc_fmt != ACC_I32)
        || (acc_in == 2'd3) || (i_up == 2'd3)
        || (i_stor == ST_NONE) || !i_addr_ok || !i_zp_ok
        || !o_scale_ok || !act_ok
        || !NPU_EMAP_ACTIVATION_TRANSPOSE[o_tr] || !wo_ok
        || !o_addr_ok;

    // ================================================================ checks: RESIZE
    // (the IFM size is KERNEL_HEIGHT/WIDTH; the sampling recurrence per axis: tlm/ops/resize.py)
    wire [11:0] ry_n = {1'b0, f_npu_set_resize_y_scale_n_m1__resize_y_scale_n_m1} + 12'd1;
    wire [11:0] rx_n = {1'b0, f_npu_set_resize_x_scale_n_m1__resize_x_scale_n_m1} + 12'd1;
    wire [FW_npu_set_resize_y_offset__resize_y_offset-1:0] ry_off = f_npu_set_resize_y_offset__resize_y_offset;        // signed
    wire [FW_npu_set_resize_x_offset__resize_x_offset-1:0] rx_off = f_npu_set_resize_x_offset__resize_x_offset;
    wire [FW_npu_set_resize_y_step__one_step_mod-1:0] ry_smod = f_npu_set_resize_y_step__one_step_mod;
    wire [FW_npu_set_resize_x_step__one_step_mod-1:0] rx_smod = f_npu_set_resize_x_step__one_step_mod;
    wire [FW_npu_set_resize_y_step__one_step_int-1:0] ry_sint = f_npu_set_resize_y_step__one_step_int;
    wire [FW_npu_set_resize_x_step__one_step_int-1:0] rx_sint = f_npu_set_resize_x_step__one_step_int;
    function off_ok;                    // -scale_n <= offset < scale_n
        input [11:0] off;
        input [11:0] n;
        off_ok = ($signed({off[11], off}) >= -$signed({1'b0, n})) && ($signed({off[11], off}) < $signed({1'b0, n}));
    endfunction
    wire rs_unsup =
           (o_prec == B64) || (i_stor == ST_CHAINED);
    wire rs_limit =
           !tile0(i_stor, i_w0m1, i_h0m1, i_h1m1, {5'd0, kh_m1}, {5'd0, kw_m1})
        || (o_mem && !o_tile0);
    wire rs_unpred =
           (acc_fmt > 2'd1)
        || (md[1:0] == 2'd3)
        || !off_ok(ry_off, ry_n) || !off_ok(rx_off, rx_n)
        || ({1'b0, ry_smod} >= ry_n) || ({1'b0, rx_smod} >= rx_n)
        || ch_open || o_chain || (o_tr != TR_HWC) || (i_up != UP_NONE)
        || (i_zp != 16'd0) || (j_zp != 16'd0)
        || !(i_prec == B8 || (i_prec == B16 && i_sgn))
        || (os_shift < 6'd16) || (o_smode != NPU_E_OFM_SCALE_MODE_GLOBAL[0]) || !o_scale_ok || !act_ok
        || (i_stor == ST_NONE) || !i_addr_ok
        || !wo_ok || !o_addr_ok;

    // priority: a feature this unit lacks, then a failed TRM assert (whose register checks
    // above assume the supported subset), then an implementation limit
    assign op_unsupported   = (op_pool && (pool_unsup || (!pool_unpred && pool_limit)))
                           || (op_ew && (ew_unsup || (!ew_unpred && ew_limit)))
                           || (op_resize && (rs_unsup || (!rs_unpred && rs_limit)));
    assign op_unpredictable = (op_pool && !pool_unsup && pool_unpred)
                           || (op_ew && !ew_unsup && ew_unpred)
                           || (op_resize && !rs_unsup && rs_unpred);
    assign chain_open = ch_open;

    // ================================================================ routing
    wire [39:0] ir_base, jr_base, or_base;
    wire        ir_ext, jr_ext, or_ext;
    wire [3:0]  ir_arc, jr_arc, or_awc, unused_ir_awc, unused_jr_awc, unused_or_arc;
    wire [1:0]  ir_dom, jr_dom, or_dom;
    npu_region_route u_ifm_route (
        .region(i_reg), .use_attr(1'b0), .attr_idx(2'd0), .basep(basep), .regioncfg(regioncfg),
        .mem_attr(mem_attr), .base(ir_base), .ext(ir_ext), .arcache(ir_arc),
        .awcache(unused_ir_awc), .domain(ir_dom));
    npu_region_route u_ifm2_route (
        .region(j_reg), .use_attr(1'b0), .attr_idx(2'd0), .basep(basep), .regioncfg(regioncfg),
        .mem_attr(mem_attr), .base(jr_base), .ext(jr_ext), .arcache(jr_arc),
        .awcache(unused_jr_awc), .domain(jr_dom));
    npu_region_route u_ofm_route (
        .region(o_reg), .use_attr(1'b0), .attr_idx(2'd0), .basep(basep), .regioncfg(regioncfg),
        .mem_attr(mem_attr), .base(or_base), .ext(or_ext), .arcache(unused_or_arc),
        .awcache(or_awc), .domain(or_dom));

    // ================================================================ operation state
    logic        a_ext, b_ext, o_ext;
    logic [3:0]  a_cache, b_cache, o_cache;
    logic [1:0]  a_dom, b_dom, o_dom;

    // per-tensor steps: NHWC x*STRIDE_X; NHCWB16 16*size*x
    wire [39:0] a_xs = (i_fmt == NHCWB16) ? (40'd16 << i_prec) : i_sx;
    wire [39:0] b_xs = (j_fmt == NHCWB16) ? (40'd16 << j_prec) : j_sx;
    // stride * step (pooling)
    wire [39:0] a_ys_row = k_pool ? i_sy + (sy_lsb ? i_sy : 40'd0) + (sy_msb ? {i_sy[38:0], 1'b0} : 40'd0)
                                  : (i_bm[0] ? 40'd0 : i_sy);
    wire [39:0] a_xs_col = k_pool ? a_xs + (sx_lsb ? a_xs : 40'd0) + (sx_msb ? {a_xs[38:0], 1'b0} : 40'd0)
                                  : (i_bm[1] ? 40'd0 : a_xs);
    wire [39:0] b_ys_row = j_bm[0] ? 40'd0 : j_sy;
    wire [39:0] b_xs_col = j_bm[1] ? 40'd0 : b_xs;
    // taps: the pooling kernel; reduce_sum 1; RESIZE bilinear the 2x2 samples, else 1
    wire [15:0] kh_e = rs ? {15'd0, rs_bil} : (k_pool && !reduce) ? kh_m1 : 16'd0;
    wire [15:0] kw_e = rs ? {15'd0, rs_bil} : (k_pool && !reduce) ? kw_m1 : 16'd0;
    // channels the chunk loop covers: the OFM depth, the IFM depth for reduce_sum
    wire [16:0] g_depth = reduce ? id : od;
    // channel term of an address: chunk start channel c0, brick term cb (NHCWB16)
    function [39:0] cterm;
        input [1:0]  fmt;
        input [1:0]  prec;
        input [15:0] c0;
        input [39:0] cb;
        begin
            if (fmt == NHCWB16) cterm = cb + ({36'd0, c0[3:0]} << prec);
            else cterm = {24'd0, c0} << prec;
        end
    endfunction

    // ================================================================ request generator
    localparam [3:0] G_IDLE = 4'd0, G_SETUP = 4'd1, G_TAP = 4'd2, G_A0 = 4'd3, G_A1 = 4'd4,
                     G_B0 = 4'd5, G_B1 = 4'd6, G_END = 4'd7, G_RSCHK = 4'd8;
    logic [3:0]  g;
    logic [6:0]  su_cnt;                       // padding setup counter
    logic [15:0] oy, ox, ky, kx;
    logic [16:0] c_rem;                        // channels from this chunk on
    logic [15:0] c0;                           // first channel of the chunk
    logic [20:0] wy_row, wy, wx_col, wx;       // window coordinates oy*stride_y + ky, ...
    // address terms (mod 2^40): row terms start at BASEP[region] + BASE0
    logic [39:0] ay_row, ay, ax_col, ax, ax_init, a_cb;     // IFM
    logic [39:0] by, bx, b_cb;                 // IFM2

    // ---- RESIZE sampling positions (TRM recurrence): integer part and fraction mod/scale_n
    // per axis; the x position restarts every row
    logic [23:0] ry_int, rx_int;               // signed
    logic [11:0] ry_mod, rx_mod;
    logic [16:0] rs_n;                         // check pass: position index
    logic        rs_bad;
    wire  [23:0] ry_int0 = ry_off[11] ? 24'hFF_FFFF : 24'd0;
    wire  [11:0] ry_mod0 = ry_off[11] ? ry_off + ry_n : ry_off;
    wire  [23:0] rx_int0 = rx_off[11] ? 24'hFF_FFFF : 24'd0;
    wire  [11:0] rx_mod0 = rx_off[11] ? rx_off + rx_n : rx_off;
    wire  [12:0] ry_msum = {1'b0, ry_mod} + {2'b0, ry_smod};
    wire  [12:0] rx_msum = {1'b0, rx_mod} + {2'b0, rx_smod};
    wire         ry_wrap = ry_msum >= {1'b0, ry_n};
    wire         rx_wrap = rx_msum >= {1'b0, rx_n};
    wire  [11:0] ry_mod_n = 12'(ry_msum - (ry_wrap ? {1'b0, ry_n} : 13'd0));
    wire  [11:0] rx_mod_n = 12'(rx_msum - (rx_wrap ? {1'b0, rx_n} : 13'd0));
    wire  [23:0] ry_int_n = ry_int + {20'd0, ry_sint} + {23'd0, ry_wrap};
    wire  [23:0] rx_int_n = rx_int + {20'd0, rx_sint} + {23'd0, rx_wrap};
    // iy0 = max(int, 0), iy1 = min(int + 1, ifm_height_m1)
    wire  [23:0] riy0 = ry_int[23] ? 24'd0 : ry_int;
    wire  [23:0] rix0 = rx_int[23] ? 24'd0 : rx_int;
    wire  [23:0] ry_p1 = ry_int + 24'd1;
    wire  [23:0] rx_p1 = rx_int + 24'd1;
    wire  [23:0] riy1 = (ry_p1 > {8'd0, kh_m1}) ? {8'd0, kh_m1} : ry_p1;
    wire  [23:0] rix1 = (rx_p1 > {8'd0, kw_m1}) ? {8'd0, kw_m1} : rx_p1;
    // the tap's sample: bilinear (ky, kx), nearest the closer one, replicate (iy0, ix0)
    wire         rs_ty = rs_bil ? ky[0] : (rs_near && !({ry_mod, 1'b0} < {1'b0, ry_n}));
    wire         rs_tx = rs_bil ? kx[0] : (rs_near && !({rx_mod, 1'b0} < {1'b0, rx_n}));
    wire  [15:0] rs_iy = 16'(rs_ty ? riy1 : riy0);
    wire  [15:0] rs_ix = 16'(rs_tx ? rix1 : rix0);
    wire  [11:0] rs_wy = ky[0] ? ry_mod : ry_n - ry_mod;
    wire  [11:0] rs_wx = kx[0] ? rx_mod : rx_n - rx_mod;
    wire  [23:0] rs_w = rs_bil ? rs_wy * rs_wx : 24'd1;
    wire  [39:0] rs_ya = {24'd0, rs_iy} * i_sy;          // (mod 2^40, as every address)
    wire  [39:0] rs_xa = {24'd0, rs_ix} * a_xs;
    wire  [39:0] rs_addr = ir_base + i_base + rs_ya + rs_xa
                         + cterm(i_fmt, i_prec, c0, a_cb);

    wire [4:0]  n_chunk = (c_rem >= {12'd0, CH}) ? CH : c_rem[4:0];
    wire        vy = reduce || rs || ((wy >= {14'd0, pad_t}) && (wy < yend));
    wire        vx = reduce || rs || ((wx >= {14'd0, pad_l}) && (wx < xend));
    wire        need_a = k_pool ? (vy && vx) : a_mem;
    wire        need_b = !k_pool && b_mem;
    wire [5:0]  a_nb = {1'b0, bc_a ? 5'd1 : n_chunk} << i_prec;     // bytes of the chunk
    wire [5:0]  b_nb = {1'b0, bc_b ? 5'd1 : n_chunk} << j_prec;
    wire [39:0] aaddr = k_rs ? rs_addr : ay + ax + (bc_a ? 40'd0 : cterm(i_fmt, i_prec, c0, a_cb));
    wire [39:0] baddr = by + bx + (bc_b ? 40'd0 : cterm(j_fmt, j_prec, c0, b_cb));
    wire [6:0]  a_end = {3'd0, aaddr[3:0]} + {1'b0, a_nb};
    wire [6:0]  b_end = {3'd0, baddr[3:0]} + {1'b0, b_nb};
    wire        a_two = a_end > 7'd16;
    wire        b_two = b_end > 7'd16;
    wire        last_tap = (ky == kh_e) && (kx == kw_e);
    wire        last_chunk = (c_rem <= {12'd0, CH});
    wire [16:0] c_next = {1'b0, c0} + {12'd0, CH};          // the next chunk's channel
    wire        brick_end = (c_next[3:0] == 4'd0);

    // token FIFO (generator -> compute), one entry per tap
    localparam integer TW = 42;
    logic [TW-1:0] tok [0:3];
    logic [1:0]    tok_wp, tok_rp;
    logic [2:0]    tok_cnt;
    // read beat queues, 4 beats each; *_res counts reserved slots (queued or on the way)
    logic [128:0]  aq [0:3];
    logic [128:0]  bq [0:3];
    logic [1:0]    aq_wp, aq_rp, bq_wp, bq_rp;
    logic [2:0]    a_res, b_res;
    logic [2:0]    a_fly, b_fly;               // beats requested, not yet received
    wire  [2:0]    a_take = !need_a ? 3'd0 : a_two ? 3'd2 : 3'd1;
    wire  [2:0]    b_take = !need_b ? 3'd0 : b_two ? 3'd2 : 3'd1;
    wire           tap_go = (g == G_TAP) && !abort && (tok_cnt != 3'd4)
                            && ({1'b0, a_res} + {1'b0, a_take} <= 4'd4)
                            && ({1'b0, b_res} + {1'b0, b_take} <= 4'd4);

    assign a_rq_valid  = (g == G_A0 || g == G_A1) && !abort && !pause;
    assign a_rq_addr   = (g == G_A1) ? {aaddr[39:4] + 36'd1, 4'd0} : aaddr;
    assign a_rq_ext    = a_ext;
    assign a_rq_cache  = a_cache;
    assign a_rq_domain = a_dom;
    assign b_rq_valid  = (g == G_B0 || g == G_B1) && !abort && !pause;
    assign b_rq_addr   = (g == G_B1) ? {baddr[39:4] + 36'd1, 4'd0} : baddr;
    assign b_rq_ext    = b_ext;
    assign b_rq_cache  = b_cache;
    assign b_rq_domain = b_dom;
    wire a_issue = a_rq_valid && a_rq_ready;
    wire b_issue = b_rq_valid && b_rq_ready;
    // a tap's token is pushed once its reads are issued (the loop registers, hence need_a,
    // aaddr, ..., do not change before that)
    wire tok_push = ((g == G_A0 && a_issue && !a_two) || (g == G_A1 && a_issue)) && !need_b
                 || ((g == G_B0 && b_issue && !b_two) || (g == G_B1 && b_issue))
                 || (g == G_TAP && tap_go && !need_a && !need_b);
    // last: the tap that completes the output chunk (reduce_sum: the last IFM chunk)
    wire tok_last = reduce ? last_chunk : last_tap;
    wire [TW-1:0] tok_in = {rs_w, need_a, aaddr[3:0], a_two, need_b, baddr[3:0], b_two, tok_last, n_chunk};
    wire gen_done = (oy == oh_m1) && (ox == ow_m1) && last_chunk && last_tap;

    // ================================================================ compute side
    localparam [1:0] C_WAIT = 2'd0, C_LANE = 2'd1, C_EMIT = 2'd2;
    logic [1:0]   c;
    logic [3:0]   lane;
    logic [1:0]   ph;                          // ALU phase of the lane
    logic [4:0]   n_cur;
    logic [63:0]  sa;                          // ALU phase results
    logic [31:0]  sb;
    logic [127:0] obuf;
    logic [47:0]  pacc [0:15];
    logic [6:0]   count;
    logic         dead;                        // a read of this operation failed
    logic         flag;
    // OFM walker
    logic [15:0]  ooy, oox, o_c0;
    logic [16:0]  o_crem;
    logic [39:0]  o_b;                         // BASEP[OFM_REGION] + OFM_BASE0
    // writer
    logic         w_full, w_beat;
    logic [1:0]   w;
    logic [39:0]  w_addr;
    logic [127:0] w_data;
    logic [4:0]   w_n;                         // bytes
    logic [5:0]   b_pend;

    wire [TW-1:0] tk = tok[tok_rp];
    wire          tk_need_a = tk[17];
    wire [3:0]    tk_a_off  = tk[16:13];
    wire          tk_a_two  = tk[12];
    wire          tk_need_b = tk[11];
    wire [3:0]    tk_b_off  = tk[10:7];
    wire          tk_b_two  = tk[6];
    wire          tk_last   = tk[5];
    wire [4:0]    tk_n      = tk[4:0];
    wire [23:0]   tk_w      = tk[41:18];       // RESIZE: the sample's weight
    logic [2:0]   a_cnt, b_cnt;                // beats in the queues
    wire          a_ok = !tk_need_a || (a_cnt >= (tk_a_two ? 3'd2 : 3'd1));
    wire          b_ok = !tk_need_b || (b_cnt >= (tk_b_two ? 3'd2 : 3'd1));
    wire          accept = (c == C_WAIT) && (tok_cnt != 3'd0) && a_ok && b_ok && !abort;
    wire          ew_mul = (k_mode == M_MUL);
    wire          lane_last = ({1'b0, lane} + 5'd1 == n_cur);
    wire          lane_done = (c == C_LANE) && ph == 2'd2 && !abort;
    // the token and its beats leave the queues once used: a pooling tap when folded, an
    // elementwise chunk after its last element
    wire          pop = (accept && k_pool) || (!k_pool && lane_done && lane_last);
    wire [1:0]    aq_rp1 = aq_rp + 2'd1;       // (a 2-bit index: wraps)
    wire [1:0]    bq_rp1 = bq_rp + 2'd1;
    wire [128:0]  a0 = aq[aq_rp];
    wire [128:0]  a1 = aq[aq_rp1];
    wire [128:0]  b0 = bq[bq_rp];
    wire [128:0]  b1 = bq[bq_rp1];
    wire [255:0]  a_pair = {a1[127:0], a0[127:0]};
    wire [255:0]  b_pair = {b1[127:0], b0[127:0]};
    wire [255:0]  a_win = a_pair >> {tk_a_off, 3'b000};
    wire          rd_err = (tk_need_a && (a0[128] || (tk_a_two && a1[128])))
                        || (tk_need_b && (b0[128] || (tk_b_two && b1[128])));

    // an element of 1, 2 or 4 bytes (prec), sign- or zero-extended, minus the zero point
    function [32:0] elem;
        input [31:0] raw;
        input [1:0]  prec;
        input        sgn;
        input [16:0] zp;
        logic [32:0] v;
        begin
            if (prec == B8) v = {{25{sgn & raw[7]}}, raw[7:0]};
            else if (prec == B16) v = {{17{sgn & raw[15]}}, raw[15:0]};
            else v = {raw[31], raw};
            elem = v - {{16{zp[16]}}, zp};
        end
    endfunction

    // pooling: the lanes of a tap, zero point subtracted, folded into the accumulators
    wire [47:0] ident = k_rs ? 48'd0 : (k_mode[2:0] == P_MAX) ? {{16{NPU_POOL_IDENTITY_MAX[31]}}, NPU_POOL_IDENTITY_MAX} :
                        (k_mode[2:0] == P_MIN) ? {{16{NPU_POOL_IDENTITY_MIN[31]}}, NPU_POOL_IDENTITY_MIN} :
                        (k_mode[2:0] == P_AVG) ? {{16{NPU_POOL_IDENTITY_AVERAGE[31]}}, NPU_POOL_IDENTITY_AVERAGE}
                                               : {{16{NPU_POOL_IDENTITY_SUM[31]}}, NPU_POOL_IDENTITY_SUM};
    wire        acc32 = (acc_fmt == ACC_I32);
    function [47:0] wrap_acc;           // accumulate(): wrap at 32 (i32) or 48 bits
        input [47:0] v;
        input        w32;
        wrap_acc = w32 ? {{16{v[31]}}, v[31:0]} : v;
    endfunction
    wire [47:0] fold [0:15];
    wire [47:0] rfold_l [0:15];
    wire [32:0] pv [0:15];
    genvar gl;
    generate
        for (gl = 0; gl < 16; gl = gl + 1) begin : g_fold
            wire [31:0] raw = (i_prec == B8) ? {24'd0, a_win[gl*8 +: 8]} :
                              (i_prec == B16) ? {16'd0, a_win[(gl%8)*16 +: 16]} : a_win[(gl%4)*32 +: 32];
            wire [32:0] v33 = elem(raw, i_prec, i_sgn, i_zp17);
            wire [47:0] v = {{15{v33[32]}}, v33};
            wire        gt = $signed(v) > $signed(pacc[gl]);
            wire        lt = $signed(v) < $signed(pacc[gl]);
            localparam [4:0] GL = gl;
            assign pv[gl] = (GL < tk_n) ? v33 : 33'd0;
            // RESIZE: the sample times its weight (b8 / b16 values)
            wire [41:0] wv = $signed(v33[16:0]) * $signed({1'b0, tk_w});
            assign rfold_l[gl] = pacc[gl] + {{6{wv[41]}}, wv};
            assign fold[gl] = (k_mode[2:0] == P_MAX) ? (gt ? v : pacc[gl]) :
                              (k_mode[2:0] == P_MIN) ? (lt ? v : pacc[gl]) :
                                                       wrap_acc(pacc[gl] + v, acc32);
        end
    endgenerate
    // reduce_sum: the chunk's lanes summed into accumulator 0
    logic [47:0] rsum;
    integer r;
    always @(*) begin
        rsum = 48'd0;
        for (r = 0; r < 16; r = r + 1) rsum = rsum + {{15{pv[r][32]}}, pv[r]};
    end
    wire [47:0] rfold = wrap_acc(pacc[0] + rsum, acc32);

    // elementwise operands of the current lane: the head beats of the queues (byte offset
    // + lane * size of the two-beat window; a broadcast channel reads the byte offset), a
    // chaining FIFO's head, or the scalar
    wire [4:0]   a_bi = {1'b0, tk_a_off} + (bc_a ? 5'd0 : ({1'b0, lane} << i_prec));
    wire [4:0]   b_bi = {1'b0, tk_b_off} + (bc_b ? 5'd0 : ({1'b0, lane} << j_prec));
    wire [255:0] a_sh = a_pair >> {a_bi, 3'b000};
    wire [255:0] b_sh = b_pair >> {b_bi, 3'b000};
    wire [31:0]  fa, fb;                       // FIFO heads of IFM / IFM2
    wire [32:0]  a_val = a_scalar ? a_scl
                       : i_chain ? {fa[31], fa} - {{16{i_zp17[16]}}, i_zp17}
                       : elem(a_sh[31:0], i_prec, i_sgn, i_zp17);
    wire [32:0]  b_val = b_scalar ? b_scl
                       : j_chain ? {fb[31], fb} - {{16{j_zp17[16]}}, j_zp17}
                       : elem(b_sh[31:0], j_prec, j_sgn, j_zp17);
    wire [6:0]   count_m1 = count - 7'd1;
    wire [31:0]  q_r, q, q_t;
    wire [63:0]  r64;
    wire [10:0]  lut_byte;
    npu_kernel_alu u_alu (
        .phase(ph), .is_pool(k_pool), .ew_op(k_mode), .a(a_val), .b(b_val),
        .pass_a(pass_a), .pass_b(pass_b), .prec(i_prec),
        .a_scale(is_scale), .a_shift(is_shift), .a_rnd(is_rnd), .a_dbl(is_dbl),
        .b_scale(js_scale), .b_shift(js_shift), .b_rnd(js_rnd), .b_dbl(js_dbl),
        .sa(sa), .sb(sb),
        .pool_acc(pacc[lane]), .avg(k_pool && !k_rs && k_mode[2:0] == P_AVG), .rs(k_rs),
        .count_m1(count_m1[5:0]),
        .o_scale(os_scale), .o_shift(os_shift), .o_rnd(os_rnd), .o_dbl(os_dbl), .r64(r64), .q(q_r));
    // activation() and write_ofm's truncation to the OFM type (q_t: the chaining FIFO's value)
    npu_act u_act (
        .r(q_r), .o_zp(o_zp17), .clip(clip_rg == NPU_E_ACTIVATION_CLIP_RANGE_B16[0]),
        .o_min(o_min17), .o_max(o_max17), .act_fn(act_fn), .table_i(act_tab),
        .o_prec(o_prec), .o_sgn(o_sgn), .lut_byte(lut_byte), .lut_line(lut_rdata),
        .q(q), .q_t(q_t), .tab_ok(lut_ok));
    assign lut_raddr = lut_byte[10:4];
    // the lane's bytes in the output chunk
    wire [6:0]   ob_pos = {lane, 3'b000} << o_prec;
    wire [127:0] ob_mask = ((o_prec == B8) ? 128'hFF : (o_prec == B16) ? 128'hFFFF : 128'hFFFF_FFFF) << ob_pos;
    wire [127:0] ob_val = {96'd0, q} << ob_pos;

    // the chunk's (first element's) address: write_ofm's reverse, transpose, element_address_in_region
    wire [39:0] oaddr;
    npu_ofm_addr #(.MACS(MACS)) u_oaddr (
        .rev(o_rev), .tr(o_tr), .nhcwb16(o_fmt == NHCWB16), .lsz(o_prec), .base(o_b), .sy(o_sy),
        .sx(o_sx), .sc(o_sc), .oh_m1(oh_m1), .ow_m1(ow_m1), .od_m1(od_m1), .y(ooy), .x(oox),
        .c(o_c0), .perms_all(!ew), .blk_h({4'd0, f_npu_set_ofm_blk_height_m1__height_m1} + 11'd1),
        .blk_w({4'd0, f_npu_set_ofm_blk_width_m1__width_m1} + 11'd1),
        .blk_d({1'b0, f_npu_set_ofm_blk_depth_m1__depth_m1} + 11'd1),
        .mb(f_npu_set_acc_format__microblock), .addr(oaddr), .elem(o_elem), .ymax(o_my),
        .xmax(o_mx), .ok(o_wok));
    wire        emit = (c == C_EMIT) && !w_full;
    wire        o_write = o_mem && !dead;
    wire [16:0] o_cnext = {1'b0, o_c0} + {12'd0, CH};

    // ================================================================ writer
    localparam [1:0] W_IDLE = 2'd0, W_AW = 2'd1, W_DATA = 2'd2;
    wire [255:0] w_win  = {128'd0, w_data} << {w_addr[3:0], 3'b000};
    wire [31:0]  w_mask = ((32'd1 << w_n) - 32'd1) << w_addr[3:0];
    wire         w_two  = (w_mask[31:16] != 16'd0);
    assign wq_valid  = (w == W_AW) && !abort && !pause;
    assign wq_ext    = o_ext;
    assign wq_addr   = w_beat ? {w_addr[39:4] + 36'd1, 4'd0} : w_addr;
    assign wq_cache  = o_cache;
    assign wq_domain = o_dom;
    assign wd_valid  = (w == W_DATA);
    assign wd_data   = w_beat ? w_win[255:128] : w_win[127:0];
    assign wd_strb   = w_beat ? w_mask[31:16] : w_mask[15:0];

    // ================================================================ chaining FIFOs
    // pops of the operands (one element a lane), pushes of the OFM values
    wire          f_pop_a = lane_done && !k_pool && i_chain;
    wire          f_pop_b = lane_done && !k_pool && j_chain;
    wire          f_push  = lane_done && !k_pool && o_chain;
    // the FIFOs' one write port: this unit's pushes, or the CONV unit's chained OFM (written
    // by element index: the CONV opens the chain, so the FIFO starts empty at entry 0)
    wire          fw_en   = f_push || cv_we;
    wire [CAW-1:0] fw_addr = cv_we ? cv_idx[CAW-1:0] : f_wp[o_reg[1:0]];
    wire [31:0]   fw_data = cv_we ? cv_data : q_t;
    wire [31:0]   f_head [0:NF-1];
    genvar gf;
    generate
        for (gf = 0; gf < NF; gf = gf + 1) begin : g_fifo
            logic [31:0] fmem [0:CHAIN_DEPTH-1];
            always_ff @(posedge CLK) begin
                if (fw_en && o_reg == 3'(gf)) fmem[fw_addr] <= fw_data;
            end
            assign f_head[gf] = fmem[f_rp[gf]];
        end
    endgenerate
    assign fa = (i_reg[1:0] == 2'd0) ? f_head[0] : (i_reg[1:0] == 2'd1) ? f_head[1] : f_head[2];
    assign fb = (j_reg[1:0] == 2'd0) ? f_head[0] : (j_reg[1:0] == 2'd1) ? f_head[1] : f_head[2];

    // ================================================================ sequencing
    wire all_quiet = (a_fly == 3'd0) && (b_fly == 3'd0) && (b_pend == 6'd0) && (w == W_IDLE);
    // done: everything issued, computed, written and answered; after an abort, whatever
    // was on the bus has come back (the tokens left are dropped)
    wire finished  = (g == G_END) && (abort || tok_cnt == 3'd0) && (c == C_WAIT) && !w_full
                     && all_quiet;
    assign busy = k_busy;
    assign cond_flag = flag;

    integer k;
    // g_fifo_valid after add_operation_to_chain
    wire [NF-1:0] v_new = (ch_open ? ch_valid : {NF{1'b0}})
                        | (o_chain ? NF'(1 << o_reg[1:0]) : {NF{1'b0}});
    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) begin
            k_busy <= 1'b0; k_pool <= 1'b0; k_rs <= 1'b0; k_mode <= 6'd0;
            ry_int <= 24'd0; rx_int <= 24'd0; ry_mod <= 12'd0; rx_mod <= 12'd0; rs_n <= 17'd0;
            rs_bad <= 1'b0;
            a_ext <= 1'b0; b_ext <= 1'b0; o_ext <= 1'b0;
            a_cache <= 4'd0; b_cache <= 4'd0; o_cache <= 4'd0;
            a_dom <= 2'd0; b_dom <= 2'd0; o_dom <= 2'd0;
            g <= G_IDLE; su_cnt <= 7'd0;
            oy <= 16'd0; ox <= 16'd0; ky <= 16'd0; kx <= 16'd0; c_rem <= 17'd0; c0 <= 16'd0;
            wy_row <= 21'd0; wy <= 21'd0; wx_col <= 21'd0; wx <= 21'd0;
            ay_row <= 40'd0; ay <= 40'd0; ax_col <= 40'd0; ax <= 40'd0; ax_init <= 40'd0; a_cb <= 40'd0;
            by <= 40'd0; bx <= 40'd0; b_cb <= 40'd0;
            tok_wp <= 2'd0; tok_rp <= 2'd0; tok_cnt <= 3'd0;
            aq_wp <= 2'd0; aq_rp <= 2'd0; bq_wp <= 2'd0; bq_rp <= 2'd0;
            a_cnt <= 3'd0; b_cnt <= 3'd0; a_res <= 3'd0; b_res <= 3'd0; a_fly <= 3'd0; b_fly <= 3'd0;
            c <= C_WAIT; lane <= 4'd0; ph <= 2'd0; n_cur <= 5'd0; count <= 7'd0; dead <= 1'b0;
            flag <= 1'b0; sa <= 64'd0; sb <= 32'd0; obuf <= 128'd0; w_data <= 128'd0;
            for (k = 0; k < 16; k = k + 1) pacc[k] <= 48'd0;
            ooy <= 16'd0; oox <= 16'd0; o_c0 <= 16'd0; o_crem <= 17'd0;
            o_b <= 40'd0;
            w <= W_IDLE; w_full <= 1'b0; w_beat <= 1'b0; w_addr <= 40'd0; w_n <= 5'd0;
            b_pend <= 6'd0;
            ch_len <= 3'd0; ch_nifm <= 2'd0; ch_valid <= {NF{1'b0}};
            for (k = 0; k < NF; k = k + 1) begin
                f_cnt[k] <= {(CAW+1){1'b0}}; f_rp[k] <= {CAW{1'b0}}; f_wp[k] <= {CAW{1'b0}};
            end
        end else begin
            // ---------------------------------------------------- start
            if (start && !k_busy) begin
                k_busy <= 1'b1;
                k_pool <= op_pool || op_resize;
                k_rs <= op_resize;
                k_mode <= op_mode;
                ry_int <= ry_int0; ry_mod <= ry_mod0; rx_int <= rx_int0; rx_mod <= rx_mod0;
                rs_n <= 17'd0; rs_bad <= 1'b0;
                a_ext <= ir_ext; a_cache <= ir_arc; a_dom <= ir_dom;
                b_ext <= jr_ext; b_cache <= jr_arc; b_dom <= jr_dom;
                o_ext <= or_ext; o_cache <= or_awc; o_dom <= or_dom;
                g <= G_SETUP; su_cnt <= 7'd0;
                oy <= 16'd0; ox <= 16'd0; ky <= 16'd0; kx <= 16'd0; c_rem <= g_depth; c0 <= 16'd0;
                wy_row <= 21'd0; wy <= 21'd0; wx_col <= 21'd0; wx <= 21'd0;
                ay_row <= ir_base + i_base; ax_col <= 40'd0; a_cb <= 40'd0;
                by <= jr_base + j_base; bx <= 40'd0; b_cb <= 40'd0;
                tok_wp <= 2'd0; tok_rp <= 2'd0; tok_cnt <= 3'd0;
                aq_wp <= 2'd0; aq_rp <= 2'd0; bq_wp <= 2'd0; bq_rp <= 2'd0;
                a_cnt <= 3'd0; b_cnt <= 3'd0; a_res <= 3'd0; b_res <= 3'd0;
                c <= C_WAIT; count <= 7'd0; dead <= 1'b0;
                for (k = 0; k < 16; k = k + 1)
                    pacc[k] <= op_resize ? 48'd0 : (op_mode[2:0] == P_MAX) ? {{16{NPU_POOL_IDENTITY_MAX[31]}}, NPU_POOL_IDENTITY_MAX} :
                               (op_mode[2:0] == P_MIN) ? {{16{NPU_POOL_IDENTITY_MIN[31]}}, NPU_POOL_IDENTITY_MIN} : 48'd0;
                ooy <= 16'd0; oox <= 16'd0; o_c0 <= 16'd0; o_crem <= od;
                o_b <= or_base + o_base;
                // chain state (add_operation_to_chain): a new chain empties the FIFOs
                if (!ch_open) begin
                    for (k = 0; k < NF; k = k + 1) begin
                        f_cnt[k] <= {(CAW+1){1'b0}}; f_rp[k] <= {CAW{1'b0}}; f_wp[k] <= {CAW{1'b0}};
                    end
                end
                ch_nifm <= nifm_new[1:0];
                ch_len <= o_chain ? ch_len + 3'd1 : 3'd0;
                ch_valid <= v_new;
            end else if (k_busy && finished) begin
                k_busy <= 1'b0;
                g <= G_IDLE;
            end else if (cv_start) begin
                // a CONV/DEPTHWISE (never inside an open chain): add_operation_to_chain with
                // one external IFM; a chained OFM opens a chain whose FIFO will hold the OFM
                for (k = 0; k < NF; k = k + 1) begin
                    f_rp[k] <= {CAW{1'b0}};
                    f_wp[k] <= (o_chain && o_reg[1:0] == 2'(k)) ? n_el[CAW-1:0] : {CAW{1'b0}};
                    f_cnt[k] <= (o_chain && o_reg[1:0] == 2'(k)) ? n_el[CAW:0] : {(CAW+1){1'b0}};
                end
                ch_nifm <= 2'd1;
                ch_len <= o_chain ? 3'd1 : 3'd0;
                ch_valid <= o_chain ? NF'(1 << o_reg[1:0]) : {NF{1'b0}};
            end

            // ---------------------------------------------------- request generator
            case (g)
                G_SETUP: begin
                    // pooling: start the IFM address terms at (-pad_top, -pad_left)
                    if (abort) begin
                        g <= G_END;
                    end else if (k_rs) begin
                        g <= G_RSCHK;
                    end else if (!k_pool || reduce || (su_cnt >= pad_t && su_cnt >= pad_l)) begin
                        ay <= ay_row;
                        ax <= ax_col;
                        ax_init <= ax_col;
                        g <= G_TAP;
                    end else begin
                        if (su_cnt < pad_t) ay_row <= ay_row - i_sy;
                        if (su_cnt < pad_l) ax_col <= ax_col - a_xs;
                        su_cnt <= su_cnt + 7'd1;
                    end
                end
                G_RSCHK: begin
                    // RESIZE: the position asserts over every row and column (iy0 <=
                    // ifm_height_m1, ix0 <= ifm_width_m1, the last column reads the last IFM
                    // column); a failure ends the operation without effect
                    if (abort) begin
                        g <= G_END;
                    end else if (rs_n > {1'b0, oh_m1} && rs_n > {1'b0, ow_m1}) begin
                        g <= rs_bad ? G_END : G_TAP;
                        ry_int <= ry_int0; ry_mod <= ry_mod0; rx_int <= rx_int0; rx_mod <= rx_mod0;
                    end else begin
                        if ((rs_n <= {1'b0, oh_m1} && riy0 > {8'd0, kh_m1})
                            || (rs_n <= {1'b0, ow_m1} && rix0 > {8'd0, kw_m1})
                            || (rs_n == {1'b0, ow_m1} && rix1 != {8'd0, kw_m1}))
                            rs_bad <= 1'b1;
                        ry_int <= ry_int_n; ry_mod <= ry_mod_n; rx_int <= rx_int_n; rx_mod <= rx_mod_n;
                        rs_n <= rs_n + 17'd1;
                    end
                end
                G_TAP: begin
                    if (abort) begin
                        g <= G_END;
                    end else if (tap_go) begin
                        if (need_a) g <= G_A0;
                        else if (need_b) g <= G_B0;
                    end
                end
                G_A0, G_A1: begin
                    if (abort) g <= G_END;
                    else if (a_issue) g <= (g == G_A0 && a_two) ? G_A1 : (need_b ? G_B0 : G_TAP);
                end
                G_B0, G_B1: begin
                    if (abort) g <= G_END;
                    else if (b_issue) g <= (g == G_B0 && b_two) ? G_B1 : G_TAP;
                end
                default: ;
            endcase
            // credits reserved when a tap is taken
            if (tap_go) begin
                a_res <= a_res + a_take - (pop && tk_need_a ? (tk_a_two ? 3'd2 : 3'd1) : 3'd0);
                b_res <= b_res + b_take - (pop && tk_need_b ? (tk_b_two ? 3'd2 : 3'd1) : 3'd0);
            end else if (pop) begin
                a_res <= a_res - (tk_need_a ? (tk_a_two ? 3'd2 : 3'd1) : 3'd0);
                b_res <= b_res - (tk_need_b ? (tk_b_two ? 3'd2 : 3'd1) : 3'd0);
            end
            a_fly <= a_fly + {2'd0, a_issue} - {2'd0, a_rb_valid && k_busy};
            b_fly <= b_fly + {2'd0, b_issue} - {2'd0, b_rb_valid && k_busy};

            // ---- advance the loops once a tap's token is pushed
            if (tok_push && !abort) begin
                if (g != G_TAP) g <= G_TAP;
                if (gen_done) begin
                    g <= G_END;
                end else if (kx != kw_e) begin
                    kx <= kx + 16'd1; wx <= wx + 21'd1; ax <= ax + a_xs;
                end else begin
                    kx <= 16'd0;
                    if (ky != kh_e) begin
                        ky <= ky + 16'd1; wy <= wy + 21'd1; ay <= ay + i_sy;
                        wx <= wx_col; ax <= ax_col;
                    end else begin
                        ky <= 16'd0;
                        if (!last_chunk) begin
                            c_rem <= c_rem - {12'd0, CH};
                            c0 <= c_next[15:0];
                            if (brick_end) begin
                                a_cb <= a_cb + i_sc; b_cb <= b_cb + j_sc;
                            end
                            wy <= wy_row; ay <= ay_row; wx <= wx_col; ax <= ax_col;
                        end else begin
                            c_rem <= g_depth; c0 <= 16'd0; a_cb <= 40'd0; b_cb <= 40'd0;
                            if (ox != ow_m1) begin
                                ox <= ox + 16'd1;
                                rx_int <= rx_int_n; rx_mod <= rx_mod_n;
                                wx_col <= wx_col + {18'd0, sx_v}; wx <= wx_col + {18'd0, sx_v};
                                ax_col <= ax_col + a_xs_col; ax <= ax_col + a_xs_col;
                                bx <= bx + b_xs_col;
                                wy <= wy_row; ay <= ay_row;
                            end else begin
                                ox <= 16'd0; wx_col <= 21'd0; wx <= 21'd0;
                                rx_int <= rx_int0; rx_mod <= rx_mod0;
                                ry_int <= ry_int_n; ry_mod <= ry_mod_n;
                                ax_col <= ax_init; ax <= ax_init; bx <= 40'd0;
                                oy <= oy + 16'd1;
                                wy_row <= wy_row + {18'd0, sy_v}; wy <= wy_row + {18'd0, sy_v};
                                ay_row <= ay_row + a_ys_row; ay <= ay_row + a_ys_row;
                                by <= by + b_ys_row;
                            end
                        end
                    end
                end
            end

            // ---------------------------------------------------- token FIFO
            if (tok_push && !abort) begin
                tok_wp <= tok_wp + 2'd1;
            end
            tok_cnt <= tok_cnt + {2'd0, tok_push && !abort} - {2'd0, pop};
            if (pop) tok_rp <= tok_rp + 2'd1;

            // ---------------------------------------------------- read beat queues
            if (a_rb_valid && k_busy) aq_wp <= aq_wp + 2'd1;
            if (b_rb_valid && k_busy) bq_wp <= bq_wp + 2'd1;
            a_cnt <= a_cnt + {2'd0, a_rb_valid && k_busy}
                     - ((pop && tk_need_a) ? (tk_a_two ? 3'd2 : 3'd1) : 3'd0);
            b_cnt <= b_cnt + {2'd0, b_rb_valid && k_busy}
                     - ((pop && tk_need_b) ? (tk_b_two ? 3'd2 : 3'd1) : 3'd0);
            if (pop && tk_need_a) aq_rp <= aq_rp + (tk_a_two ? 2'd2 : 2'd1);
            if (pop && tk_need_b) bq_rp <= bq_rp + (tk_b_two ? 2'd2 : 2'd1);
            if (pop && rd_err) dead <= 1'b1;

            // ---------------------------------------------------- chaining FIFOs
            // (the loop runs when it changes something, or overrides a cv_start above)
            if (k_busy && (f_push || f_pop_a || f_pop_b || cv_start))
                for (k = 0; k < NF; k = k + 1) begin
                    f_cnt[k] <= f_cnt[k] + {{CAW{1'b0}}, f_push && o_reg[1:0] == 2'(k)}
                                - {{CAW{1'b0}}, f_pop_a && i_reg[1:0] == 2'(k)}
                                - {{CAW{1'b0}}, f_pop_b && j_reg[1:0] == 2'(k)};
                    if (f_push && o_reg[1:0] == 2'(k)) f_wp[k] <= f_wp[k] + 1'b1;
                    if ((f_pop_a && i_reg[1:0] == 2'(k)) || (f_pop_b && j_reg[1:0] == 2'(k)))
                        f_rp[k] <= f_rp[k] + 1'b1;
                end

            // ---------------------------------------------------- compute
            case (c)
                C_WAIT: begin
                    if (accept) begin
                        if (k_pool) begin
                            if (tk_need_a) begin
                                if (reduce) pacc[0] <= rfold;
                                else if (k_rs) for (k = 0; k < 16; k = k + 1) pacc[k] <= rfold_l[k];
                                else for (k = 0; k < 16; k = k + 1) pacc[k] <= fold[k];
                                count <= count + 7'd1;
                            end
                            if (tk_last) begin
                                n_cur <= reduce ? 5'd1 : tk_n; lane <= 4'd0; ph <= 2'd2; c <= C_LANE;
                            end
                        end else begin
                            n_cur <= tk_n; lane <= 4'd0; ph <= 2'd0; c <= C_LANE;
                        end
                    end
                end
                C_LANE: begin
                    if (abort) begin
                        c <= C_WAIT;
                    end else if (ph == 2'd0) begin
                        sa <= r64;
                        ph <= ew_mul ? 2'd2 : 2'd1;
                    end else if (ph == 2'd1) begin
                        sb <= r64[31:0];
                        ph <= 2'd2;
                    end else begin
                        obuf <= (obuf & ~ob_mask) | (ob_val & ob_mask);
                        flag <= q[0];
                        lane <= lane + 4'd1;
                        ph <= k_pool ? 2'd2 : 2'd0;
                        if (lane_last) c <= C_EMIT;
                    end
                end
                default: begin   // C_EMIT
                    if (abort) begin
                        c <= C_WAIT;
                    end else if (emit) begin
                        c <= C_WAIT;
                        count <= 7'd0;
                        for (k = 0; k < 16; k = k + 1) pacc[k] <= ident;
                        // OFM walker: next chunk, then x, then y
                        if (o_crem > {12'd0, CH}) begin
                            o_crem <= o_crem - {12'd0, CH};
                            o_c0 <= o_cnext[15:0];
                        end else begin
                            o_crem <= od; o_c0 <= 16'd0;
                            if (oox != ow_m1) begin
                                oox <= oox + 16'd1;
                            end else begin
                                oox <= 16'd0;
                                ooy <= ooy + 16'd1;
                            end
                        end
                    end
                end
            endcase

            // ---------------------------------------------------- writer
            if (emit && o_write) begin
                w_full <= 1'b1;
                w_beat <= 1'b0;
                w_addr <= oaddr;
                w_data <= obuf;
                w_n <= n_cur << o_prec;
            end
            case (w)
                W_IDLE: begin
                    if (w_full && abort) w_full <= 1'b0;
                    else if (w_full) w <= W_AW;
                end
                W_AW: begin
                    if (abort) begin
                        w_full <= 1'b0;
                        w <= W_IDLE;
                    end else if (wq_ready) begin
                        w <= W_DATA;
                    end
                end
                default: begin   // W_DATA: the AW is on the bus, the beat must follow
                    if (wd_ready) begin
                        if (!w_beat && w_two && !abort) begin
                            w_beat <= 1'b1;
                            w <= W_AW;
                        end else begin
                            w_full <= 1'b0;
                            w <= W_IDLE;
                        end
                    end
                end
            endcase
            b_pend <= b_pend + {5'd0, wq_valid && wq_ready} - {5'd0, wb_valid};
        end
    end

    // queue storage (no reset)
    always_ff @(posedge CLK) begin
        if (tok_push && !abort) tok[tok_wp] <= tok_in;
        if (a_rb_valid && k_busy) aq[aq_wp] <= {a_rb_resp[1], a_rb_data};
        if (b_rb_valid && k_busy) bq[bq_wp] <= {b_rb_resp[1], b_rb_data};
    end

    wire unused_ok = ^{set_raw[15:0], cv_idx & ~16'(CHAIN_DEPTH - 1), a_end[6:5], b_end[6:5], a_rb_resp[0], b_rb_resp[0], a_win[255:128],
                       unused_ir_awc, unused_jr_awc, unused_or_arc, count_m1[6], lut_byte[3:0],
                       n_hw[33], n_el[50:34], c_next[16], o_cnext[16], a_sh[255:32], b_sh[255:32],
                       i_sx[39:6], i_sc[39:6], ifm_h[20], ifm_w[20], B32, ow, oh};
endmodule

`default_nettype wire
