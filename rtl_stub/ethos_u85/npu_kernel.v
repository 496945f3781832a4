// npu_kernel.v -- kernel-operation unit of the Ethos-U85 stand-in: NPU_OP_ELEMENTWISE and
// NPU_OP_POOL on 8-bit feature maps (TRM 3.6.5-3.6.7, 3.10.5, 3.10.6).
//
// What runs here (everything else is refused before it starts, see "Checks"):
//   ELEMENTWISE  mul, add, sub, min, max; int8/uint8 IFM, IFM2 and OFM (signedness free per
//                tensor); IFM_SCALE / IFM2_SCALE input scaling (scale_a/scale_b, every
//                round_mode and dbl_rnd); OFM_SCALE (global scale_mode, every round_mode,
//                dbl_rnd); zero points; IFM/IFM2 broadcast in h, w, c and any combination;
//                a scalar IFM or IFM2 (OP_SCALAR; see "Scalar operand").
//   POOL         max, min, average (count of non-padding taps, built-in scale table of
//                gen/npu_kernel.vh), sum; acc_format i32 (sum: i32 only); padding; strides
//                1-4; kernels up to 256x256 for max/min, 8x8 for average (TRM limit), any
//                TRM-legal size for sum; OFM_SCALE global.
//   both         NHWC and NHCWB16 for every tensor; tile2x2 / tile3x1 storage when every
//                element the operation touches lies in tile 0 (base 0); OFM storage none
//                (computed, not written: COND_STATUS only); activation lut_none with
//                clip_range b16 (ACTIVATION_MIN/MAX) or none; truncation to the OFM type.
//
// Execution: the decoder issues the operation (start) after checking op_unsupported and
// op_unpredictable, and then waits until busy falls before it executes the next command,
// so the NPU_SET state (this module's copy of gen/npu_cmd_state.vh, written by the
// decoder) is stable for the whole operation. busy covers every read and every write
// response of the operation: a following operation or DMA sees the OFM in memory.
//
// Datapath (simple rather than fast, one element per cycle):
//   * the request generator walks (oy, ox, 16-channel chunk, ky, kx) - one "tap" per
//     chunk for elementwise - and reads each chunk of up to 16 bytes as one or two
//     single-beat bursts: IFM on rd_ifm (ARID 1), IFM2 on rd_ifm_stream (ARID 5), exact
//     start address, so no burst crosses a 16-byte (hence max_beats, 4 KB) boundary.
//     Addresses are kept incrementally (no multiplier): BASEP[region] + BASE0 + y*STRIDE_Y
//     + x*STRIDE_X (NHCWB16: 16*x) + c (NHCWB16: (c/16)*STRIDE_C). A tap in the padding is
//     not read. A token per tap tells the compute side what arrives;
//   * read beats wait in 4-beat queues (the generator reserves the space before it issues);
//   * the compute side folds the 16 lanes of a pooling tap at once (max, min or sum into
//     32-bit accumulators starting at the identity of gen/npu_kernel.vh), and computes the
//     output elements one by one with npu_kernel_alu (one multiplier and rounding shifter:
//     pooling 1 cycle an element, elementwise mul 2, add/sub/min/max 3: scale_a, scale_b,
//     rescale + activation + truncation); elementwise operands are read from the head of
//     the beat queues, which are popped after the chunk's last element;
//   * an output chunk is written as one or two single-beat bursts on wr_ofm (AWID 8) with
//     WSTRB on its bytes, while the next chunk is computed.
// COND_STATUS.result_flag is bit 0 of the last element computed (TRM write_ofm).
//
// Scalar operand: OP_SCALAR minus the operand's zero point (IFM_ZERO_POINT or
// IFM2_ZERO_POINT as int16/uint16 by the operand's type), as the TLM reads Vela's streams
// (tlm/ops/elementwise.py SCALAR_SUBTRACTS_ZERO_POINT).
//
// Checks (combinational, for the command at the decoder's head):
//   op_unsupported   a configuration this unit does not implement: the decoder stops with
//                    cmd_parse_error and IRQ (QREAD at the operation), nothing is read or
//                    written. A missing feature (precision, mode, chaining, LUT, ...) is
//                    checked first; an implementation limit (tile 0 only, max/min kernel up
//                    to 256x256) only if no TRM assert below fails.
//   op_unpredictable a failed TRM assert that depends on registers only (the TLM's list,
//                    tlm/ops/{elementwise,pool,common}.py, arith.py, fmap.py): the command
//                    completes without effect (TLM policy on_unpredictable='continue').
//
// Errors: abort (bus error, soft reset) stops new bursts; bursts on the bus complete; the
// unit goes idle once every read beat and write response is back. A chunk computed from
// a read beat with an error response is not written. pause (warm reset, debug halt): no
// new bursts until it falls.
`default_nettype none

module npu_kernel (
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
    input  wire [5:0]    op_mode,         // pooling_mode [2:0] / elementwise_mode
    output wire          op_unsupported,
    output wire          op_unpredictable,
    input  wire          start,
    output wire          busy,
    input  wire          abort,
    input  wire          pause,
    output wire          cond_flag,
    // routing state (APB registers)
    input  wire [319:0]  basep,
    input  wire [15:0]   regioncfg,
    input  wire [31:0]   mem_attr,
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

    // ================================================================ register fields
    // IFM
    wire        i_sgn   = f_npu_set_ifm_precision__activation_type;
    wire [1:0]  i_prec  = f_npu_set_ifm_precision__activation_precision;
    wire [1:0]  i_fmt   = f_npu_set_ifm_precision__activation_format;
    wire [1:0]  i_stor  = f_npu_set_ifm_precision__activation_storage;
    wire [2:0]  i_reg   = f_npu_set_ifm_region__region;
    wire [39:0] i_base  = f_npu_set_ifm_base0__addr;
    wire [39:0] i_sx    = f_npu_set_ifm_stride_x__addr;
    wire [39:0] i_sy    = f_npu_set_ifm_stride_y__addr;
    wire [39:0] i_sc    = f_npu_set_ifm_stride_c__addr;
    wire [15:0] i_w0m1  = f_npu_set_ifm_width0_m1__width_m1;
    wire [15:0] i_h0m1  = f_npu_set_ifm_height0_m1__height_m1;
    wire [15:0] i_h1m1  = f_npu_set_ifm_height1_m1__height_m1;
    wire [15:0] i_zp    = f_npu_set_ifm_zero_point__zero_point;
    wire [3:0]  i_bm    = f_npu_set_ifm_broadcast__broadcast_mode;
    wire [1:0]  i_up    = f_npu_set_ifm_upscale__mode;
    // IFM2
    wire        j_sgn   = f_npu_set_ifm2_precision__activation_type;
    wire [1:0]  j_prec  = f_npu_set_ifm2_precision__activation_precision;
    wire [1:0]  j_fmt   = f_npu_set_ifm2_precision__activation_format;
    wire [1:0]  j_stor  = f_npu_set_ifm2_precision__activation_storage;
    wire [2:0]  j_reg   = f_npu_set_ifm2_region__region;
    wire [39:0] j_base  = f_npu_set_ifm2_base0__addr;
    wire [39:0] j_sx    = f_npu_set_ifm2_stride_x__addr;
    wire [39:0] j_sy    = f_npu_set_ifm2_stride_y__addr;
    wire [39:0] j_sc    = f_npu_set_ifm2_stride_c__addr;
    wire [15:0] j_w0m1  = f_npu_set_ifm2_width0_m1__width_m1;
    wire [15:0] j_h0m1  = f_npu_set_ifm2_height0_m1__height_m1;
    wire [15:0] j_h1m1  = f_npu_set_ifm2_height1_m1__height_m1;
    wire [15:0] j_zp    = f_npu_set_ifm2_zero_point__zero_point;
    wire [3:0]  j_bm    = f_npu_set_ifm2_broadcast__broadcast_mode;
    // OFM
    wire        o_sgn   = f_npu_set_ofm_precision__activation_type;
    wire [1:0]  o_prec  = f_npu_set_ofm_precision__activation_precision;
    wire [1:0]  o_fmt   = f_npu_set_ofm_precision__activation_format;
    wire        o_smode = f_npu_set_ofm_precision__scale_mode;
    wire [1:0]  o_rev   = f_npu_set_ofm_precision__activation_reverse;
    wire [2:0]  o_tr    = f_npu_set_ofm_precision__activation_transpose;
    wire [1:0]  o_stor  = f_npu_set_ofm_precision__activation_storage;
    wire [2:0]  o_reg   = f_npu_set_ofm_region__region;
    wire [39:0] o_base  = f_npu_set_ofm_base0__addr;
    wire [39:0] o_sx    = f_npu_set_ofm_stride_x__addr;
    wire [39:0] o_sy    = f_npu_set_ofm_stride_y__addr;
    wire [39:0] o_sc    = f_npu_set_ofm_stride_c__addr;
    wire [15:0] o_w0m1  = f_npu_set_ofm_width0_m1__width_m1;
    wire [15:0] o_h0m1  = f_npu_set_ofm_height0_m1__height_m1;
    wire [15:0] o_h1m1  = f_npu_set_ofm_height1_m1__height_m1;
    wire [15:0] o_zp    = f_npu_set_ofm_zero_point__zero_point;
    wire [15:0] oh_m1   = f_npu_set_ofm_height_m1__height_m1;
    wire [15:0] ow_m1   = f_npu_set_ofm_width_m1__width_m1;
    wire [15:0] od_m1   = f_npu_set_ofm_depth_m1__depth_m1;
    // kernel, padding, accumulator, activation, scales
    wire [15:0] kh_m1   = f_npu_set_kernel_height_m1__height_m1;
    wire [15:0] kw_m1   = f_npu_set_kernel_width_m1__width_m1;
    wire        sy_lsb  = f_npu_set_kernel_stride__stride_y_lsb;
    wire        sy_msb  = f_npu_set_kernel_stride__stride_y_msb;
    wire        sx_lsb  = f_npu_set_kernel_stride__stride_x_lsb;
    wire        sx_msb  = f_npu_set_kernel_stride__stride_x_msb;
    wire        dil_x   = f_npu_set_kernel_stride__dilation_x;
    wire        dil_y   = f_npu_set_kernel_stride__dilation_y;
    wire        decomp  = f_npu_set_kernel_stride__decomposition;
    wire [6:0]  pad_t   = f_npu_set_ifm_pad_top__pad;
    wire [6:0]  pad_l   = f_npu_set_ifm_pad_left__pad;
    wire [7:0]  pad_b   = f_npu_set_ifm_pad_bottom__pad;
    wire [7:0]  pad_r   = f_npu_set_ifm_pad_right__pad;
    wire [1:0]  acc_fmt = f_npu_set_acc_format__acc_format;
    wire [1:0]  acc_in  = f_npu_set_acc_format__acc_input;
    wire        acc_out = f_npu_set_acc_format__acc_output;
    wire [4:0]  act_fn  = f_npu_set_activation__activation_function;
    wire        clip_rg = f_npu_set_activation__activation_clip_range;
    wire [15:0] act_min = f_npu_set_activation_min__clip_boundary;
    wire [15:0] act_max = f_npu_set_activation_max__clip_boundary;
    wire [30:0] os_scale = f_npu_set_ofm_scale__scale;
    wire [5:0]  os_shift = f_npu_set_ofm_scale__shift;
    wire [2:0]  os_rnd   = f_npu_set_ofm_scale__round_mode;
    wire [4:0]  os_dbl   = f_npu_set_ofm_scale__dbl_rnd;
    wire [30:0] is_scale = f_npu_set_ifm_scale__scale;
    wire [5:0]  is_shift = f_npu_set_ifm_scale__shift;
    wire        is_rnd   = f_npu_set_ifm_scale__round_mode;
    wire [4:0]  is_dbl   = f_npu_set_ifm_scale__dbl_rnd;
    wire [30:0] js_scale = f_npu_set_ifm2_scale__scale;
    wire [5:0]  js_shift = f_npu_set_ifm2_scale__shift;
    wire        js_rnd   = f_npu_set_ifm2_scale__round_mode;
    wire [4:0]  js_dbl   = f_npu_set_ifm2_scale__dbl_rnd;
    wire [31:0] scalar   = f_npu_set_op_scalar__scalar;

    // ================================================================ enum shorthands
    localparam [1:0] B8 = NPU_E_ACTIVATION_PRECISION_B8[1:0];
    localparam [1:0] B16 = NPU_E_ACTIVATION_PRECISION_B16[1:0];
    localparam [1:0] B32 = NPU_E_ACTIVATION_PRECISION_B32[1:0];
    localparam [1:0] B64 = NPU_E_ACTIVATION_PRECISION_B64[1:0];
    localparam [1:0] NHCWB16 = NPU_E_ACTIVATION_FORMAT_NHCWB16[1:0];
    localparam [1:0] ST_2X2 = NPU_E_ACTIVATION_STORAGE_TILE2X2[1:0];
    localparam [1:0] ST_3X1 = NPU_E_ACTIVATION_STORAGE_TILE3X1[1:0];
    localparam [1:0] ST_CHAINED = NPU_E_ACTIVATION_STORAGE_CHAINED[1:0];
    localparam [1:0] ST_NONE = NPU_E_ACTIVATION_STORAGE_NONE[1:0];
    localparam [3:0] BM_SCALAR = NPU_E_BROADCAST_MODE_SCALAR[3:0];
    localparam [2:0] P_MAX = NPU_E_POOLING_MODE_MAX[2:0];
    localparam [2:0] P_AVG = NPU_E_POOLING_MODE_AVERAGE[2:0];
    localparam [2:0] P_SUM = NPU_E_POOLING_MODE_SUM[2:0];
    localparam [2:0] P_MIN = NPU_E_POOLING_MODE_MIN[2:0];
    localparam [1:0] ACC_I32 = NPU_E_ACC_FORMAT_I32[1:0];
    localparam [1:0] UP_NONE = NPU_E_IFM_UPSCALE_MODE_NONE[1:0];
    localparam [1:0] UP_ZEROS = NPU_E_IFM_UPSCALE_MODE_ZEROS[1:0];
    localparam [2:0] TR_HWC = NPU_E_ACTIVATION_TRANSPOSE_HWC[2:0];
    localparam [2:0] TR_HCW = NPU_E_ACTIVATION_TRANSPOSE_HCW[2:0];
    localparam [2:0] TR_CHW = NPU_E_ACTIVATION_TRANSPOSE_CHW[2:0];
    localparam [4:0] LUT_NONE = NPU_E_ACTIVATION_FUNCTION_LUT_NONE[4:0];

    // ================================================================ derived values
    wire        sign_ext_i = i_sgn;
    // zero points as read_ifm / activation() type them (int16, or uint16 if unsigned)
    wire [16:0] i_zp17 = i_sgn ? {i_zp[15], i_zp} : {1'b0, i_zp};
    wire [16:0] j_zp17 = j_sgn ? {j_zp[15], j_zp} : {1'b0, j_zp};
    wire [16:0] o_zp17 = o_sgn ? {o_zp[15], o_zp} : {1'b0, o_zp};
    wire [16:0] o_min17 = o_sgn ? {act_min[15], act_min} : {1'b0, act_min};
    wire [16:0] o_max17 = o_sgn ? {act_max[15], act_max} : {1'b0, act_max};
    // scalar operands: OP_SCALAR - zero point (33 bits)
    wire [32:0] a_scl = {scalar[31], scalar} - {{16{i_zp17[16]}}, i_zp17};
    wire [32:0] b_scl = {scalar[31], scalar} - {{16{j_zp17[16]}}, j_zp17};
    wire        a_scl_fits16 = (a_scl[32:15] == {18{1'b0}}) || (a_scl[32:15] == {18{1'b1}});
    wire        b_scl_fits16 = (b_scl[32:15] == {18{1'b0}}) || (b_scl[32:15] == {18{1'b1}});
    // the 8-bit zero-point asserts of read_ifm and activation()
    wire        i_zp_ok = i_sgn ? (i_zp[15:7] == 9'h000 || i_zp[15:7] == 9'h1FF) : (i_zp[15:8] == 8'h00);
    wire        j_zp_ok = j_sgn ? (j_zp[15:7] == 9'h000 || j_zp[15:7] == 9'h1FF) : (j_zp[15:8] == 8'h00);
    wire        o_zp_ok = o_sgn ? (o_zp[15:7] == 9'h000 || o_zp[15:7] == 9'h1FF)
                                : (o_zp[15:8] == 8'h00 || o_zp == 16'h8000);

    wire        a_scalar = (i_bm == BM_SCALAR);
    wire        b_scalar = (j_bm == BM_SCALAR);
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
    wire [20:0] ifm_hm1 = ifm_h - 21'd1;
    wire [20:0] ifm_wm1 = ifm_w - 21'd1;

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
    // TRM address asserts of element_address_in_region for 8-bit elements: NHCWB16 needs
    // 16-byte aligned base, stride_c and stride_y; reserved formats are UNPREDICTABLE
    function addr_ok;
        input [1:0] fmt;
        input [3:0] base, sc, sy;       // low bits of BASE0, STRIDE_C, STRIDE_Y
        begin
            if (fmt == NHCWB16)
                addr_ok = (base == 4'd0) && (sc == 4'd0) && (sy == 4'd0);
            else
                addr_ok = (fmt == NPU_E_ACTIVATION_FORMAT_NHWC[1:0]);
        end
    endfunction

    wire [20:0] ew_i_maxy = i_bm[0] ? 21'd0 : {5'd0, oh_m1};
    wire [20:0] ew_i_maxx = i_bm[1] ? 21'd0 : {5'd0, ow_m1};
    wire [20:0] ew_j_maxy = j_bm[0] ? 21'd0 : {5'd0, oh_m1};
    wire [20:0] ew_j_maxx = j_bm[1] ? 21'd0 : {5'd0, ow_m1};
    wire        o_tile0 = tile0(o_stor, o_w0m1, o_h0m1, o_h1m1, {5'd0, oh_m1}, {5'd0, ow_m1});
    wire        o_addr_ok = (o_stor == ST_NONE) || addr_ok(o_fmt, o_base[3:0], o_sc[3:0], o_sy[3:0]);
    wire        act_fn_valid = (act_fn <= 5'd11) && NPU_EMAP_ACTIVATION_FUNCTION[act_fn[3:0]];
    wire        o_scale_ok = (os_rnd <= NPU_E_ROUND_MODE_OFM_TRUNCATE_TO_LOWER[2:0]) && (os_dbl != 5'd31);

    // ================================================================ checks: ELEMENTWISE
    wire ew_mode_valid = (op_mode <= 6'd42) && NPU_EMAP_ELEMENTWISE_MODE[op_mode];
    wire ew_mode_impl  = (op_mode <= {3'd0, NPU_E_ELEMENTWISE_MODE_MAX[2:0]});
    wire ew_scaled     = (op_mode != {3'd0, NPU_E_ELEMENTWISE_MODE_MUL[2:0]});
    wire ew_tr_ok      = (o_tr == TR_HWC) || (o_tr == TR_HCW) || (o_tr == TR_CHW);
    wire ew_unsup =
           (ew_mode_valid && !ew_mode_impl)
        || (i_prec == B16) || (i_prec == B32 && i_sgn)
        || (!a_scalar && i_stor == ST_CHAINED) || (!b_scalar && j_stor == ST_CHAINED)
        || (o_stor == ST_CHAINED)
        || (o_tr == TR_HCW) || (o_tr == TR_CHW)
        || (o_prec != B8)
        || (act_fn_valid && act_fn != LUT_NONE);
    // implementation limits (below a failed TRM assert in priority)
    wire ew_limit =
           (!a_scalar && !tile0(i_stor, i_w0m1, i_h0m1, i_h1m1, ew_i_maxy, ew_i_maxx))
        || (!b_scalar && !tile0(j_stor, j_w0m1, j_h0m1, j_h1m1, ew_j_maxy, ew_j_maxx))
        || !o_tile0;
    wire ew_unpred =
           (acc_fmt > 2'd1)
        || !ew_mode_valid
        || (i_prec != j_prec)
        || (i_prec == B64) || (i_prec == B32 && !i_sgn)
        || (o_rev != 2'd0) || !ew_tr_ok
        || (i_up != UP_NONE)
        || (a_scalar && i_stor != ST_NONE)
        || (b_scalar && (a_scalar || j_stor != ST_NONE))
        || (!a_scalar && (i_stor == ST_NONE || !addr_ok(i_fmt, i_base[3:0], i_sc[3:0], i_sy[3:0]) || !i_zp_ok))
        || (!b_scalar && (j_stor == ST_NONE || !addr_ok(j_fmt, j_base[3:0], j_sc[3:0], j_sy[3:0]) || !j_zp_ok))
        || (ew_scaled && (is_dbl == 5'd31 || js_dbl == 5'd31
                          || (a_scalar && !a_scl_fits16) || (b_scalar && !b_scl_fits16)))
        || (o_smode != NPU_E_OFM_SCALE_MODE_GLOBAL[0]) || !o_scale_ok
        || !o_zp_ok || !act_fn_valid
        || !o_addr_ok;

    // ================================================================ checks: POOL
    wire [2:0]  pmode = op_mode[2:0];
    wire p_maxmin = (pmode == P_MAX) || (pmode == P_MIN);
    wire p_avg    = (pmode == P_AVG);
    wire p_impl   = p_maxmin || p_avg || (pmode == P_SUM);
    wire [16:0] kh = {1'b0, kh_m1} + 17'd1;
    wire [16:0] kw = {1'b0, kw_m1} + 17'd1;
    wire pool_unsup =
           !p_impl
        || ((i_prec == B16 || i_prec == B32) && i_sgn)
        || (pmode == P_SUM && acc_fmt != ACC_I32)
        || (acc_in == NPU_E_ACC_INPUT_KEEP[1:0]) || (acc_in == NPU_E_ACC_INPUT_IFM2[1:0])
        || (i_up == NPU_E_IFM_UPSCALE_MODE_NEAREST[1:0]) || (!p_maxmin && i_up == UP_ZEROS)
        || (i_stor == ST_CHAINED)
        || (acc_out != NPU_E_ACC_OUTPUT_ENABLE[0])
        || (o_smode != NPU_E_OFM_SCALE_MODE_GLOBAL[0])
        || (o_prec != B8) || (o_stor == ST_CHAINED)
        || (o_rev != 2'd0) || (NPU_EMAP_ACTIVATION_TRANSPOSE[o_tr] && o_tr != TR_HWC)
        || (act_fn_valid && act_fn != LUT_NONE);
    wire pool_limit =
           (p_maxmin && (kh > 17'd256 || kw > 17'd256))
        || !tile0(i_stor, i_w0m1, i_h0m1, i_h1m1, ifm_hm1, ifm_wm1)
        || !o_tile0;
    wire pool_unpred =
           (acc_fmt > 2'd1)
        || dil_x || dil_y
        || !ifm_hw_ok
        || (i_prec == B64) || ((i_prec == B16 || i_prec == B32) && !i_sgn)
        || (p_maxmin && i_up == UP_ZEROS)
        || (p_avg && (kh > 17'd8 || kw > 17'd8 || {10'd0, pad_t} >= kh || {9'd0, pad_b} >= kh
                      || {10'd0, pad_l} >= kw || {9'd0, pad_r} >= kw
                      || decomp != NPU_E_KERNEL_DECOMPOSITION_D8X8[0]))
        || (pmode != P_SUM && acc_fmt != ACC_I32)
        || (acc_in == 2'd3) || (i_up == 2'd3)
        || (i_stor == ST_NONE) || !addr_ok(i_fmt, i_base[3:0], i_sc[3:0], i_sy[3:0]) || !i_zp_ok
        || !o_scale_ok || !o_zp_ok || !act_fn_valid
        || !NPU_EMAP_ACTIVATION_TRANSPOSE[o_tr]
        || !o_addr_ok;

    // priority: a feature this unit lacks, then a failed TRM assert (whose register checks
    // above assume the supported 8-bit subset), then an implementation limit
    assign op_unsupported   = (op_pool && (pool_unsup || (!pool_unpred && pool_limit)))
                           || (op_ew && (ew_unsup || (!ew_unpred && ew_limit)));
    assign op_unpredictable = (op_pool && !pool_unsup && pool_unpred)
                           || (op_ew && !ew_unsup && ew_unpred);

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
    logic        k_busy;          // an operation is in progress
    logic        k_pool;          // 1 POOL, 0 ELEMENTWISE
    logic [2:0]  k_mode;          // pooling_mode / elementwise_mode[2:0]
    logic        a_ext, b_ext, o_ext;
    logic [3:0]  a_cache, b_cache, o_cache;
    logic [1:0]  a_dom, b_dom, o_dom;

    // per-tensor steps (8-bit elements): NHWC x*STRIDE_X + c; NHCWB16 16*x + (c/16)*STRIDE_C
    wire [39:0] a_xs = (i_fmt == NHCWB16) ? 40'd16 : i_sx;
    wire [39:0] a_cs = (i_fmt == NHCWB16) ? i_sc : 40'd16;
    wire [39:0] b_xs = (j_fmt == NHCWB16) ? 40'd16 : j_sx;
    wire [39:0] b_cs = (j_fmt == NHCWB16) ? j_sc : 40'd16;
    wire [39:0] o_xs = (o_fmt == NHCWB16) ? 40'd16 : o_sx;
    wire [39:0] o_cs = (o_fmt == NHCWB16) ? o_sc : 40'd16;
    // stride * step (pooling)
    wire [39:0] a_ys_row = k_pool ? i_sy + (sy_lsb ? i_sy : 40'd0) + (sy_msb ? {i_sy[38:0], 1'b0} : 40'd0)
                                  : (i_bm[0] ? 40'd0 : i_sy);
    wire [39:0] a_xs_col = k_pool ? a_xs + (sx_lsb ? a_xs : 40'd0) + (sx_msb ? {a_xs[38:0], 1'b0} : 40'd0)
                                  : (i_bm[1] ? 40'd0 : a_xs);
    wire [39:0] a_cs_e = (!k_pool && i_bm[2]) ? 40'd0 : a_cs;
    wire [39:0] b_ys_row = j_bm[0] ? 40'd0 : j_sy;
    wire [39:0] b_xs_col = j_bm[1] ? 40'd0 : b_xs;
    wire [39:0] b_cs_e = j_bm[2] ? 40'd0 : b_cs;
    wire [15:0] kh_e = k_pool ? kh_m1 : 16'd0;
    wire [15:0] kw_e = k_pool ? kw_m1 : 16'd0;
    wire [16:0] od = {1'b0, od_m1} + 17'd1;

    // ================================================================ request generator
    localparam [2:0] G_IDLE = 3'd0, G_SETUP = 3'd1, G_TAP = 3'd2, G_A0 = 3'd3, G_A1 = 3'd4,
                     G_B0 = 3'd5, G_B1 = 3'd6, G_END = 3'd7;
    logic [2:0]  g;
    logic [6:0]  su_cnt;                       // padding setup counter
    logic [15:0] oy, ox, ky, kx;
    logic [16:0] c_rem;                        // channels from this chunk on
    logic [20:0] wy_row, wy, wx_col, wx;       // window coordinates oy*stride_y + ky, ...
    // address terms (mod 2^40): row terms start at BASEP[region] + BASE0
    logic [39:0] ay_row, ay, ax_col, ax, ax_init, act;     // IFM
    logic [39:0] by, bx, bct;                  // IFM2

    wire [4:0]  n_chunk = (c_rem >= 17'd16) ? 5'd16 : c_rem[4:0];
    wire        vy = (wy >= {14'd0, pad_t}) && (wy < yend);
    wire        vx = (wx >= {14'd0, pad_l}) && (wx < xend);
    wire        need_a = k_pool ? (vy && vx) : !a_scalar;
    wire        need_b = !k_pool && !b_scalar;
    wire [4:0]  a_n = (!k_pool && i_bm[2]) ? 5'd1 : n_chunk;
    wire [4:0]  b_n = j_bm[2] ? 5'd1 : n_chunk;
    wire [39:0] aaddr = ay + ax + act;
    wire [39:0] baddr = by + bx + bct;
    wire [5:0]  a_end = {2'd0, aaddr[3:0]} + {1'b0, a_n};
    wire [5:0]  b_end = {2'd0, baddr[3:0]} + {1'b0, b_n};
    wire        a_two = a_end > 6'd16;
    wire        b_two = b_end > 6'd16;
    wire        last_tap = (ky == kh_e) && (kx == kw_e);
    wire        last_chunk = (c_rem <= 17'd16);

    // token FIFO (generator -> compute), one entry per tap
    localparam integer TW = 18;
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
    wire [TW-1:0] tok_in = {need_a, aaddr[3:0], a_two, need_b, baddr[3:0], b_two, last_tap, n_chunk};
    wire gen_done = (oy == oh_m1) && (ox == ow_m1) && last_chunk && last_tap;

    // ================================================================ compute side
    localparam [1:0] C_WAIT = 2'd0, C_LANE = 2'd1, C_EMIT = 2'd2;
    logic [1:0]   c;
    logic [3:0]   lane;
    logic [1:0]   ph;                          // ALU phase of the lane
    logic [4:0]   n_cur;
    logic [31:0]  sa, sb;                      // ALU phase results
    logic [127:0] obuf;
    logic [31:0]  pacc [0:15];
    logic [6:0]   count;
    logic         dead;                        // a read of this operation failed
    logic         flag;
    // OFM walker
    logic [15:0]  ooy, oox;
    logic [16:0]  o_crem;
    logic [39:0]  oay, oax, oct;
    // writer
    logic         w_full, w_beat;
    logic [1:0]   w;
    logic [39:0]  w_addr;
    logic [127:0] w_data;
    logic [4:0]   w_n;
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
    logic [2:0]   a_cnt, b_cnt;                // beats in the queues
    wire          a_ok = !tk_need_a || (a_cnt >= (tk_a_two ? 3'd2 : 3'd1));
    wire          b_ok = !tk_need_b || (b_cnt >= (tk_b_two ? 3'd2 : 3'd1));
    wire          accept = (c == C_WAIT) && (tok_cnt != 3'd0) && a_ok && b_ok && !abort;
    wire          ew_mul = (k_mode == NPU_E_ELEMENTWISE_MODE_MUL[2:0]);
    wire          lane_last = ({1'b0, lane} + 5'd1 == n_cur);
    // the token and its beats leave the queues once used: a pooling tap when folded, an
    // elementwise chunk after its last element
    wire          pop = (accept && k_pool)
                     || (c == C_LANE && !k_pool && ph == 2'd2 && lane_last && !abort);
    wire [1:0]    aq_rp1 = aq_rp + 2'd1;       // (a 2-bit index: wraps)
    wire [1:0]    bq_rp1 = bq_rp + 2'd1;
    wire [128:0]  a0 = aq[aq_rp];
    wire [128:0]  a1 = aq[aq_rp1];
    wire [128:0]  b0 = bq[bq_rp];
    wire [128:0]  b1 = bq[bq_rp1];
    wire [255:0]  a_win = {a1[127:0], a0[127:0]} >> {tk_a_off, 3'b000};
    wire          rd_err = (tk_need_a && (a0[128] || (tk_a_two && a1[128])))
                        || (tk_need_b && (b0[128] || (tk_b_two && b1[128])));

    // pooling: the 16 lanes of a tap, zero point subtracted, folded into the accumulators
    wire [31:0] ident = (k_mode == P_MAX) ? NPU_POOL_IDENTITY_MAX :
                        (k_mode == P_MIN) ? NPU_POOL_IDENTITY_MIN :
                        (k_mode == P_AVG) ? NPU_POOL_IDENTITY_AVERAGE : NPU_POOL_IDENTITY_SUM;
    wire [31:0] fold [0:15];
    genvar gl;
    generate
        for (gl = 0; gl < 16; gl = gl + 1) begin : g_fold
            // an 8-bit value minus an 8-bit zero point (the asserts hold): 10 bits signed
            wire [9:0]  v10 = {{2{sign_ext_i & a_win[gl*8+7]}}, a_win[gl*8 +: 8]} - i_zp17[9:0];
            wire [31:0] v = {{22{v10[9]}}, v10};
            wire        gt = $signed(v) > $signed(pacc[gl]);
            wire        lt = $signed(v) < $signed(pacc[gl]);
            assign fold[gl] = (k_mode == P_MAX) ? (gt ? v : pacc[gl]) :
                              (k_mode == P_MIN) ? (lt ? v : pacc[gl]) :
                                                  pacc[gl] + v;
        end
    endgenerate

    // elementwise operands of the current lane, from the head beats of the queues (byte
    // offset + lane of the two-beat window; a broadcast channel reads byte offset)
    wire [4:0]  a_bi = {1'b0, tk_a_off} + (i_bm[2] ? 5'd0 : {1'b0, lane});
    wire [4:0]  b_bi = {1'b0, tk_b_off} + (j_bm[2] ? 5'd0 : {1'b0, lane});
    wire [255:0] a_pair = {a1[127:0], a0[127:0]};
    wire [255:0] b_pair = {b1[127:0], b0[127:0]};
    wire [7:0]  a_byte = a_pair[{a_bi, 3'b000} +: 8];
    wire [7:0]  b_byte = b_pair[{b_bi, 3'b000} +: 8];
    wire [32:0] a_val = a_scalar ? a_scl
                      : {{25{i_sgn & a_byte[7]}}, a_byte} - {{16{i_zp17[16]}}, i_zp17};
    wire [32:0] b_val = b_scalar ? b_scl
                      : {{25{j_sgn & b_byte[7]}}, b_byte} - {{16{j_zp17[16]}}, j_zp17};
    wire [6:0]  count_m1 = count - 7'd1;
    wire [7:0]  q;
    wire [31:0] r32;
    npu_kernel_alu u_alu (
        .phase(ph), .is_pool(k_pool), .ew_op(k_mode), .a(a_val), .b(b_val), .a_wide(a_scalar),
        .a_scale(is_scale), .a_shift(is_shift), .a_rnd(is_rnd), .a_dbl(is_dbl),
        .b_scale(js_scale), .b_shift(js_shift), .b_rnd(js_rnd), .b_dbl(js_dbl),
        .sa(sa), .sb(sb),
        .pool_acc(pacc[lane]), .avg(k_pool && k_mode == P_AVG), .count_m1(count_m1[5:0]),
        .o_scale(os_scale), .o_shift(os_shift), .o_rnd(os_rnd), .o_dbl(os_dbl),
        .o_zp(o_zp17), .clip(clip_rg == NPU_E_ACTIVATION_CLIP_RANGE_B16[0]),
        .o_min(o_min17), .o_max(o_max17), .r32(r32), .q(q));

    wire [39:0] oaddr = oay + oax + oct;
    wire        emit = (c == C_EMIT) && !w_full;
    wire        o_write = (o_stor != ST_NONE) && !dead;

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

    // ================================================================ sequencing
    wire all_quiet = (a_fly == 3'd0) && (b_fly == 3'd0) && (b_pend == 6'd0) && (w == W_IDLE);
    // done: everything issued, computed, written and answered; after an abort, whatever
    // was on the bus has come back (the tokens left are dropped)
    wire finished  = (g == G_END) && (abort || tok_cnt == 3'd0) && (c == C_WAIT) && !w_full
                     && all_quiet;
    assign busy = k_busy;
    assign cond_flag = flag;

    integer k;
    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) begin
            k_busy <= 1'b0; k_pool <= 1'b0; k_mode <= 3'd0;
            a_ext <= 1'b0; b_ext <= 1'b0; o_ext <= 1'b0;
            a_cache <= 4'd0; b_cache <= 4'd0; o_cache <= 4'd0;
            a_dom <= 2'd0; b_dom <= 2'd0; o_dom <= 2'd0;
            g <= G_IDLE; su_cnt <= 7'd0;
            oy <= 16'd0; ox <= 16'd0; ky <= 16'd0; kx <= 16'd0; c_rem <= 17'd0;
            wy_row <= 21'd0; wy <= 21'd0; wx_col <= 21'd0; wx <= 21'd0;
            ay_row <= 40'd0; ay <= 40'd0; ax_col <= 40'd0; ax <= 40'd0; ax_init <= 40'd0; act <= 40'd0;
            by <= 40'd0; bx <= 40'd0; bct <= 40'd0;
            tok_wp <= 2'd0; tok_rp <= 2'd0; tok_cnt <= 3'd0;
            aq_wp <= 2'd0; aq_rp <= 2'd0; bq_wp <= 2'd0; bq_rp <= 2'd0;
            a_cnt <= 3'd0; b_cnt <= 3'd0; a_res <= 3'd0; b_res <= 3'd0; a_fly <= 3'd0; b_fly <= 3'd0;
            c <= C_WAIT; lane <= 4'd0; ph <= 2'd0; n_cur <= 5'd0; count <= 7'd0; dead <= 1'b0;
            flag <= 1'b0; sa <= 32'd0; sb <= 32'd0; obuf <= 128'd0; w_data <= 128'd0;
            for (k = 0; k < 16; k = k + 1) pacc[k] <= 32'd0;
            ooy <= 16'd0; oox <= 16'd0; o_crem <= 17'd0; oay <= 40'd0; oax <= 40'd0; oct <= 40'd0;
            w <= W_IDLE; w_full <= 1'b0; w_beat <= 1'b0; w_addr <= 40'd0; w_n <= 5'd0;
            b_pend <= 6'd0;
        end else begin
            // ---------------------------------------------------- start
            if (start && !k_busy) begin
                k_busy <= 1'b1;
                k_pool <= op_pool;
                k_mode <= op_mode[2:0];
                a_ext <= ir_ext; a_cache <= ir_arc; a_dom <= ir_dom;
                b_ext <= jr_ext; b_cache <= jr_arc; b_dom <= jr_dom;
                o_ext <= or_ext; o_cache <= or_awc; o_dom <= or_dom;
                g <= G_SETUP; su_cnt <= 7'd0;
                oy <= 16'd0; ox <= 16'd0; ky <= 16'd0; kx <= 16'd0; c_rem <= od;
                wy_row <= 21'd0; wy <= 21'd0; wx_col <= 21'd0; wx <= 21'd0;
                ay_row <= ir_base + i_base; ax_col <= 40'd0; act <= 40'd0;
                by <= jr_base + j_base; bx <= 40'd0; bct <= 40'd0;
                tok_wp <= 2'd0; tok_rp <= 2'd0; tok_cnt <= 3'd0;
                aq_wp <= 2'd0; aq_rp <= 2'd0; bq_wp <= 2'd0; bq_rp <= 2'd0;
                a_cnt <= 3'd0; b_cnt <= 3'd0; a_res <= 3'd0; b_res <= 3'd0;
                c <= C_WAIT; count <= 7'd0; dead <= 1'b0;
                for (k = 0; k < 16; k = k + 1)
                    pacc[k] <= (op_mode[2:0] == P_MAX) ? NPU_POOL_IDENTITY_MAX :
                               (op_mode[2:0] == P_MIN) ? NPU_POOL_IDENTITY_MIN : 32'd0;
                ooy <= 16'd0; oox <= 16'd0; o_crem <= od; oay <= or_base + o_base; oax <= 40'd0;
                oct <= 40'd0;
            end else if (k_busy && finished) begin
                k_busy <= 1'b0;
                g <= G_IDLE;
            end

            // ---------------------------------------------------- request generator
            case (g)
                G_SETUP: begin
                    // pooling: start the IFM address terms at (-pad_top, -pad_left)
                    if (abort) begin
                        g <= G_END;
                    end else if (!k_pool || (su_cnt >= pad_t && su_cnt >= pad_l)) begin
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
                            c_rem <= c_rem - 17'd16;
                            act <= act + a_cs_e; bct <= bct + b_cs_e;
                            wy <= wy_row; ay <= ay_row; wx <= wx_col; ax <= ax_col;
                        end else begin
                            c_rem <= od; act <= 40'd0; bct <= 40'd0;
                            if (ox != ow_m1) begin
                                ox <= ox + 16'd1;
                                wx_col <= wx_col + {18'd0, sx_v}; wx <= wx_col + {18'd0, sx_v};
                                ax_col <= ax_col + a_xs_col; ax <= ax_col + a_xs_col;
                                bx <= bx + b_xs_col;
                                wy <= wy_row; ay <= ay_row;
                            end else begin
                                ox <= 16'd0; wx_col <= 21'd0; wx <= 21'd0;
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

            // ---------------------------------------------------- compute
            case (c)
                C_WAIT: begin
                    if (accept) begin
                        if (k_pool) begin
                            if (tk_need_a) begin
                                for (k = 0; k < 16; k = k + 1) pacc[k] <= fold[k];
                                count <= count + 7'd1;
                            end
                            if (tk_last) begin
                                n_cur <= tk_n; lane <= 4'd0; ph <= 2'd2; c <= C_LANE;
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
                        sa <= r32;
                        ph <= ew_mul ? 2'd2 : 2'd1;
                    end else if (ph == 2'd1) begin
                        sb <= r32;
                        ph <= 2'd2;
                    end else begin
                        obuf[{lane, 3'b000} +: 8] <= q;
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
                        if (o_crem > 17'd16) begin
                            o_crem <= o_crem - 17'd16; oct <= oct + o_cs;
                        end else begin
                            o_crem <= od; oct <= 40'd0;
                            if (oox != ow_m1) begin
                                oox <= oox + 16'd1; oax <= oax + o_xs;
                            end else begin
                                oox <= 16'd0; oax <= 40'd0;
                                ooy <= ooy + 16'd1; oay <= oay + o_sy;
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
                w_n <= n_cur;
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

    wire unused_ok = ^{set_raw[15:0], a_end[5], b_end[5], a_rb_resp[0], b_rb_resp[0], a_win[255:128],
                       unused_ir_awc, unused_jr_awc, unused_or_arc, ooy,
                       count_m1[6]};
endmodule

`default_nettype wire
