// npu_conv.v -- NPU_OP_CONV and NPU_OP_DEPTHWISE in the Ethos-U85 stand-in (TRM 2.3.4, 3.7,
// 3.9, 3.10.2, 3.10.3): checks, sequencing and the datapath's blocks.
//
//   npu_wfetch      weight streams (rd_weights) and the scale/bias stream (rd_scale_bias)
//   npu_swd x num_wd, npu_fwd   weight decoders
//   npu_conv_walk   the weight order (TRM 3.9.2): bricks for the MAC array, IFM patch records
//   npu_conv_ifm    IFM patches (rd_ifm) into the IFM buffer
//   npu_conv_mac    MACS multipliers a cycle, 48-bit accumulators in the accumulator buffer
//   npu_conv_out    bias, rescale, activation, OFM writes (wr_ofm; addresses, reverse and
//                   transposes: npu_ofm_addr.v, shared with npu_kernel); the scale/bias RAM
//
// Execution of one operation (the decoder waits until busy falls, so the NPU_SET state read
// here is stable):
//   1. per_channel scale_mode: the scale/bias stream is read once (align_up(OFM depth,
//      channels_in_set) records, TRM 3.7) into the scale/bias RAM; a record with a reserved
//      bit set makes the operation complete without further effect (the TLM's UNPREDICTABLE,
//      ScaleBiasError), before anything is written.
//   2. The OFM is cut into spatial blocks S of SH x SW pixels (OFM_BLK_HEIGHT/WIDTH rounded
//      up to the microblock, halved until the block's accumulators fit the AB and its largest
//      IFM patch one half of the IFM buffer). For each S: the weight streams are read and
//      decoded from their start (every byte of every stream, as the TLM reads them), the walker
//      assembles bricks, the loader reads the IFM patches, the MAC array accumulates, and
//      after each OFM depth block the output stage writes its part of the OFM.
//   3. The operation completes when every write has its B response.
// A weight stream that ends or fails to decode before the weights the operation needs
// (tlm.weights: WeightStreamError, UNPREDICTABLE in the TLM, which then writes nothing) ends
// the operation at that point without further effect: OFM blocks written before stay.
// abort (bus error, soft reset): nothing new goes out, bursts on the bus complete, busy
// until then; a read with an error response stops further OFM writes at once. pause: no new
// bursts.
//
// Checks (combinational, for the command at the decoder's head), as npu_kernel.v:
//   op_unsupported   a feature this unit lacks (see rtl_stub/README.md), or an
//                    implementation limit (tile 0 only, IFM buffer / AB / scale RAM sizes,
//                    OFM_BLK_DEPTH not a multiple of 8 with several depth blocks, weight
//                    stream bases not 16-byte aligned): cmd_parse_error.
//   op_unpredictable a failed register-only TRM assert of the TLM's path (tlm/ops/conv.py,
//                    common.py, fmap.py, arith.py, weights/ordering.py): no effect.
`default_nettype none

module npu_conv #(
    parameter integer MACS = 256,
    parameter [1:0]   NUM_WD_LOG2 = 2'd0       // CONFIG.num_wd
) (
    input  wire          CLK,
    input  wire          rst_n,
    // NPU_SET state write port (from npu_cmd_decode)
    input  wire          set_we,
    input  wire          set_kind,
    input  wire [9:0]    set_opc,
    input  wire [63:0]   set_raw,
    // the command at the decoder's head
    input  wire          op_dw,              // NPU_OP_DEPTHWISE (else NPU_OP_CONV)
    input  wire          op_wi2,             // NPU_OP_CONV weights_ifm2
    output wire          op_unsupported,
    output wire          op_unpredictable,
    input  wire          start,
    output wire          busy,
    input  wire          abort,
    input  wire          pause,
    output wire          cond_flag,
    output wire          cond_set,           // COND_STATUS.result_flag computed (pulse)
    // routing state (APB registers)
    input  wire [319:0]  basep,
    input  wire [15:0]   regioncfg,
    input  wire [31:0]   mem_attr,
    input  wire [1:0]    sram_mb,
    input  wire [1:0]    ext_mb,
    // LUT RAM read port (npu_dma.v; the kernel unit's otherwise)
    output wire [6:0]    lut_raddr,
    input  wire [127:0]  lut_rdata,
    // chaining FIFO write port (npu_kernel.v: the FIFO of OFM_REGION)
    output wire          cf_we,
    output wire [15:0]   cf_idx,
    output wire [31:0]   cf_data,
    // IFM reads (rd_ifm)
    output wire          a_rq_valid,
    output wire          a_rq_ext,
    output wire [39:0]   a_rq_addr,
    output wire [7:0]    a_rq_len,
    output wire [3:0]    a_rq_cache,
    output wire [1:0]    a_rq_domain,
    input  wire          a_rq_ready,
    input  wire          a_rb_valid,
    input  wire [127:0]  a_rb_data,
    input  wire [1:0]    a_rb_resp,
    // weight / scale-bias reads (rd_weights, rd_scale_bias)
    output wire          w_rq_valid,
    output wire          w_rq_ext,
    output wire [39:0]   w_rq_addr,
    output wire [7:0]    w_rq_len,
    output wire          w_rq_scale,
    output wire [3:0]    w_rq_cache,
    output wire [1:0]    w_rq_domain,
    input  wire          w_rq_ready,
    input  wire          w_rb_valid,
    input  wire [127:0]  w_rb_data,
    input  wire [1:0]    w_rb_resp,
    // IFM2 reads of a matrix multiply (rd_ifm_stream), single beats
    output wire          b_rq_valid,
    output wire          b_rq_ext,
    output wire [39:0]   b_rq_addr,
    output wire [3:0]    b_rq_cache,
    output wire [1:0]    b_rq_domain,
    input  wire          b_rq_ready,
    input  wire          b_rb_valid,
    input  wire [127:0]  b_rb_data,
    input  wire [1:0]    b_rb_resp,
    // OFM writes (wr_ofm), INCR bursts of wq_len + 1 beats (npu_conv_out.v)
    output wire          wq_valid,
    output wire          wq_ext,
    output wire [39:0]   wq_addr,
    output wire [7:0]    wq_len,
    output wire [3:0]    wq_cache,
    output wire [1:0]    wq_domain,
    input  wire          wq_ready,
    output wire          wd_valid,
    output wire [127:0]  wd_data,
    output wire [15:0]   wd_strb,
    output wire          wd_last,
    input  wire          wd_ready,
    input  wire          wb_valid            // B responses of AWID wr_ofm
);
`include "gen/npu_isa.vh"
`include "gen/npu_conv.vh"
`include "gen/npu_cmd_state.vh"
`include "gen/npu_op_fields.vh"
`include "gen/npu_sizes.vh"

    localparam integer LOG_MACS = $clog2(MACS);
    localparam integer NU = MACS / 8;
    localparam integer NWD = 1 << NUM_WD_LOG2;
    localparam integer OW = 8;
    localparam integer RP = 16;
    localparam integer ABW = NPU_AB_WORDS;               // AB words of NU accumulators
    localparam integer IBH = (MACS < 128) ? NPU_IB_HALF_MIN : NPU_IB_HALF_PER_MAC * MACS;   // IB words (16 values) a half
    localparam integer AW = $clog2(2 * IBH);
    localparam integer SBN = NPU_SB_RECORDS;             // scale/bias records
    localparam integer CHAIN_DEPTH = NPU_CHAIN_DEPTH;    // values per chaining FIFO (npu_kernel.v)
    localparam integer DW_MAX_LWO = 6;                   // depthwise: wblk_o <= 64
    localparam [2:0] DW8_PAD = (MACS == 128) ? 3'(NPU_DW8_PAD_K_128) : (MACS == 512) ? 3'(NPU_DW8_PAD_K_512) :
                               (MACS == 1024) ? 3'(NPU_DW8_PAD_K_1024) : (MACS == 2048) ? 3'(NPU_DW8_PAD_K_2048) :
                               3'(NPU_DW8_PAD_K_256);
    localparam [2:0] DW16_PAD = (MACS == 128) ? 3'(NPU_DW16_PAD_K_128) : (MACS == 512) ? 3'(NPU_DW16_PAD_K_512) :
                                (MACS == 1024) ? 3'(NPU_DW16_PAD_K_1024) : (MACS == 2048) ? 3'(NPU_DW16_PAD_K_2048) :
                                3'(NPU_DW16_PAD_K_256);

    // ================================================================ register fields
    wire [FW_npu_set_ofm_blk_height_m1__height_m1-1:0] blkh_m1 = f_npu_set_ofm_blk_height_m1__height_m1;
    wire [FW_npu_set_ofm_blk_width_m1__width_m1-1:0] blkw_m1 = f_npu_set_ofm_blk_width_m1__width_m1;
    wire [FW_npu_set_ofm_blk_depth_m1__depth_m1-1:0] blkd_m1 = f_npu_set_ofm_blk_depth_m1__depth_m1;
    wire [FW_npu_set_kernel_stride__dilation_x-1:0] dil_xb  = f_npu_set_kernel_stride__dilation_x;
    wire [FW_npu_set_kernel_stride__dilation_y-1:0] dil_yb  = f_npu_set_kernel_stride__dilation_y;
    wire [FW_npu_set_acc_format__microblock-1:0] mb      = f_npu_set_acc_format__microblock;
    wire [FW_npu_set_weight_format__weight_format-1:0] wfmt     = f_npu_set_weight_format__weight_format;
    wire [FW_npu_set_weight_format__weight_sparsity-1:0] wsparse  = f_npu_set_weight_format__weight_sparsity;
    wire [FW_npu_set_weight_region__region-1:0] w_reg    = f_npu_set_weight_region__region;
    wire [FW_npu_set_scale_region__region-1:0] s_reg    = f_npu_set_scale_region__region;
    wire [FW_npu_set_scale_base__addr-1:0] s_base   = f_npu_set_scale_base__addr;
    wire [FW_npu_set_scale_length__length-1:0] s_len    = f_npu_set_scale_length__length;
    wire [4*FW_npu_set_weight_base__addr-1:0] w_bases = {f_npu_set_weight3_base__addr, f_npu_set_weight2_base__addr,
                            f_npu_set_weight1_base__addr, f_npu_set_weight_base__addr};
    wire [4*FW_npu_set_weight_length__length-1:0] w_lens  = {f_npu_set_weight3_length__length, f_npu_set_weight2_length__length,
                            f_npu_set_weight1_length__length, f_npu_set_weight_length__length};

    // ================================================================ enum shorthands
    localparam [1:0] B8 = NPU_E_ACTIVATION_PRECISION_B8[1:0];
    localparam [1:0] B16 = NPU_E_ACTIVATION_PRECISION_B16[1:0];
    localparam [1:0] B32 = NPU_E_ACTIVATION_PRECISION_B32[1:0];
    localparam [1:0] NHWC = NPU_E_ACTIVATION_FORMAT_NHWC[1:0];
    localparam [1:0] NHCWB16 = NPU_E_ACTIVATION_FORMAT_NHCWB16[1:0];
    localparam [1:0] ST_2X2 = NPU_E_ACTIVATION_STORAGE_TILE2X2[1:0];
    localparam [1:0] ST_3X1 = NPU_E_ACTIVATION_STORAGE_TILE3X1[1:0];
    localparam [1:0] ST_CHAINED = NPU_E_ACTIVATION_STORAGE_CHAINED[1:0];
    localparam [1:0] ST_NONE = NPU_E_ACTIVATION_STORAGE_NONE[1:0];

    // ================================================================ control state
    localparam [3:0] T_IDLE = 4'd0, T_SETUP = 4'd1, T_SB = 4'd2, T_SBWAIT = 4'd3, T_PASS = 4'd4,
                     T_RUN = 4'd5, T_NEXT = 4'd6, T_DRAIN = 4'd7;
    logic [3:0]  t;
    logic        dw_q;                       // the operation is DEPTHWISE
    logic        wi2_q;                      // the operation is a matrix multiply (weights_ifm2)

    // ================================================================ derived values
    wire [1:0]  sty_v = {sy_msb, sy_lsb} + 2'd1;          // stride (1..3; 4 wraps to 0)
    wire [1:0]  stx_v = {sx_msb, sx_lsb} + 2'd1;
    wire        stride4 = (sy_msb && sy_lsb) || (sx_msb && sx_lsb);
    wire [1:0]  dily = dil_yb ? 2'd2 : 2'd1;
    wire [1:0]  dilx = dil_xb ? 2'd2 : 2'd1;
    wire [16:0] kh = {1'b0, kh_m1} + 17'd1;                // dilated extents
    wire [16:0] kw = {1'b0, kw_m1} + 17'd1;
    wire [15:0] khu = 16'((kh + {16'd0, dil_yb}) >> dil_yb);   // undilated kernel
    wire [15:0] kwu = 16'((kw + {16'd0, dil_xb}) >> dil_xb);
    wire [16:0] od = {1'b0, od_m1} + 17'd1;
    wire [16:0] ifd_c = {1'b0, id_m1} + 17'd1;
    wire [10:0] blkd = {1'b0, blkd_m1} + 11'd1;
    // derived IFM size: (ofm - 1)*stride + dilated kernel - padding
    wire [19:0] ohs = {4'd0, oh_m1} * {18'd0, sy_msb, sy_lsb} + {4'd0, oh_m1};
    wire [19:0] ows = {4'd0, ow_m1} * {18'd0, sx_msb, sx_lsb} + {4'd0, ow_m1};
    wire [20:0] ifm_h21 = {1'b0, ohs} + {4'd0, kh} - {14'd0, pad_t} - {13'd0, pad_b};
    wire [20:0] ifm_w21 = {1'b0, ows} + {4'd0, kw} - {14'd0, pad_l} - {13'd0, pad_r};
    wire        ifm_hw_ok = !ifm_h21[20] && (ifm_h21 != 21'd0) && !ifm_w21[20] && (ifm_w21 != 21'd0);
    // microblock, weight blocking (TRM 3.9.2)
    wire        mb_ok = (mb <= NPU_E_MICROBLOCK_U4X4[2:0]);
    wire [2:0]  mb_ldiv = mb_ok ? NPU_MB_LDIV[3*mb +: 3] : 3'd3;
    wire [2:0]  mb_h = mb_ok ? NPU_MB_H[3*mb +: 3] : 3'd1;
    wire [2:0]  mb_w = mb_ok ? NPU_MB_W[3*mb +: 3] : 3'd1;
    wire [1:0]  lmbw = (mb_w == 3'd4) ? 2'd2 : (mb_w == 3'd2) ? 2'd1 : 2'd0;
    wire [3:0]  lwo = 4'(LOG_MACS) - {1'b0, mb_ldiv};     // log2(microblock depth)
    wire [8:0]  wblk_o = 9'd1 << lwo;
    wire        ifm16 = (i_prec == B16);
    wire        mb_i16only = (lwo == 4'd4) && (mb <= NPU_E_MICROBLOCK_U1X2[2:0]);
    // the operation: the command at the decoder's head until it starts, then the latched one
    wire        is_dw = (t == T_IDLE) ? op_dw : dw_q;
    wire        is_wi2 = (t == T_IDLE) ? (op_wi2 && !op_dw) : wi2_q;
    // weight decoders of the order: FWD one; a matrix multiply's weights (npu_conv_wi2.v) one
    wire [1:0]  nwd_l = (wfmt == NPU_E_WEIGHT_FORMAT_FWD[0] || is_wi2) ? 2'd0 : NUM_WD_LOG2;
    wire        pk = is_dw || (w_order == NPU_E_WEIGHT_ORDER_PART_KERNEL_FIRST[0]);
    wire [7:0]  ibd = pk ? 8'd16 : (!wsparse && mb_i16only) ? 8'd32 : (!wsparse || ifm16) ? 8'd64 : 8'd128;
    wire [3:0]  wblk_k = pk ? ((!ifm16 && !wsparse && !is_dw) ? 4'd5 : 4'd10) : 4'd1;
    wire [7:0]  wblk_i = is_dw ? 8'd1 : (pk && ifm16 && !wsparse) ? 8'd8 : ibd;
    wire [3:0]  dcmp = decomp ? 4'd4 : 4'd8;
    wire [3:0]  dh = dcmp >> dil_yb;
    wire [3:0]  dwd = dcmp >> dil_xb;
    // IB words (16 channels) a patch position: ceil(channels / 16)
    wire [8:0]  cw = is_dw ? wblk_o : {1'b0, wblk_i};
    wire [1:0]  lcg = (cw > 9'd64) ? 2'd3 : (cw > 9'd32) ? 2'd2 : (cw > 9'd16) ? 2'd1 : 2'd0;
    wire [16:0] dmax = (od < {6'd0, blkd}) ? od : {6'd0, blkd};
    wire [8:0]  ublks = 9'((dmax + {8'd0, wblk_o} - 17'd1) >> lwo);   // wblk_o steps of a depth block
    wire [3:0]  subh = (khu < {12'd0, dh}) ? khu[3:0] : dh;         // largest sub-kernel
    wire [3:0]  subw = (kwu < {12'd0, dwd}) ? kwu[3:0] : dwd;
    // scale/bias bytes: align_up(depth, channels_in_set) * 10, channels_in_set = align_up(mbd, 16)
    wire [3:0]  lcis = (lwo < 4'd4) ? 4'd4 : lwo;
    wire [16:0] cmask = (17'd1 << lcis) - 17'd1;
    wire [16:0] d_al = (od + cmask) & ~cmask;
    wire [20:0] sb_need = {1'b0, d_al, 3'd0} + {3'd0, d_al, 1'b0};
    wire        per_ch = (o_smode == NPU_E_OFM_SCALE_MODE_PER_CHANNEL[0]);

    // zero points and clip bounds as read_ifm / activation() type them
    wire [16:0] o_zp17 = o_sgn ? {o_zp[15], o_zp} : {1'b0, o_zp};
    wire [16:0] o_min17 = o_sgn ? {act_min[15], act_min} : {1'b0, act_min};
    wire [16:0] o_max17 = o_sgn ? {act_max[15], act_max} : {1'b0, act_max};
    // read_ifm: b8 zero points in the type's range, signed b16 only 0 (unsigned b16 fails earlier)
    wire        wi2 = !op_dw && op_wi2;     // the command at the decoder's head
    wire        j_zp_ok = j_sgn ? (j_zp[15:7] == 9'h000 || j_zp[15:7] == 9'h1FF) : (j_zp[15:8] == 8'h00);
    wire        i_zp_ok = ifm16 ? (i_zp == 16'd0)
                        : i_sgn ? (i_zp[15:7] == 9'h000 || i_zp[15:7] == 9'h1FF) : (i_zp[15:8] == 8'h00);
    wire        o_zp_ok = o_sgn ? (o_zp[15:7] == 9'h000 || o_zp[15:7] == 9'h1FF)
                                : (o_zp[15:8] == 8'h00 || o_zp == 16'h8000);
    // element_address_in_region asserts (element size 1 << prec bytes): NHWC needs an
    // element-aligned base, stride_x and stride_y; NHCWB16 a 16-byte aligned base and
    // 16*size-aligned stride_c and stride_y
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
    function tile0;
        input [1:0]  stor;
        input [15:0] w0m1, h0m1, h1m1;
        input [20:0] maxy, maxx;
        begin
            if (stor == ST_2X2) tile0 = (maxx <= {5'd0, w0m1}) && (maxy <= {5'd0, h0m1});
            else if (stor == ST_3X1) tile0 = (maxy <= {5'd0, h0m1}) && (maxy <= {5'd0, h1m1});
            else tile0 = 1'b1;
        end
    endfunction
    wire        act_tab_ok;                   // npu_act.v: ACTIVATION.table asserts
    wire        act_fn_valid = (act_fn <= 5'd11) && NPU_EMAP_ACTIVATION_FUNCTION[act_fn[3:0]];

    // ================================================================ checks
    wire c_unsup =
           (wi2 && i_prec != B8)                                // a 16x16-bit matrix multiply
        || (i_up == NPU_E_IFM_UPSCALE_MODE_NEAREST[1:0]) || (i_up == NPU_E_IFM_UPSCALE_MODE_ZEROS[1:0])
        || (acc_in == NPU_E_ACC_INPUT_KEEP[1:0]) || (acc_in == NPU_E_ACC_INPUT_IFM2[1:0])
        || (acc_out != NPU_E_ACC_OUTPUT_ENABLE[0])
        || (o_prec == NPU_E_ACTIVATION_PRECISION_B64[1:0]);
    // add_operation_to_chain (TRM 3.6.4, the TLM's order: before the other asserts): a
    // CONV/DEPTHWISE opens a chain (the decoder refuses it inside an open one), so its FIFOs
    // are empty and a chained IFM reads a FIFO that is not valid; a chained OFM names FIFO 0..2
    wire o_chain = (o_stor == ST_CHAINED);
    wire o_mem = (o_stor != ST_NONE) && !o_chain;             // the OFM goes to memory
    wire ofm_ok;                                              // check_ofm_write (npu_ofm_addr.v)
    wire [15:0] o_ymax, o_xmax;                               // the OFM's largest memory y, x
    wire rev_c = (o_rev == NPU_E_ACTIVATION_REVERSE_C[1:0]);
    wire c_unpred =
           (i_stor == ST_CHAINED) || (o_chain && o_reg > 3'd2) || (wi2 && j_stor == ST_CHAINED)
        || (acc_fmt > 2'd1)
        || !ifm_hw_ok
        || (kh * kw > 34'd4096) || (kh > 17'd64 && kw > 17'd64)
        || !(i_prec == B8 || (i_prec == B16 && i_sgn))
        || (op_dw && (wfmt == NPU_E_WEIGHT_FORMAT_FWD[0] || wsparse))
        // weights_ifm2's asserts (acc_input ifm2 is refused above), then read_ifm2
        || (wi2 && (kh != 17'd1 || kw != 17'd1 || oh_m1 != 16'd0 || pad_t != 7'd0 || pad_l != 7'd0
                    || dil_xb || dil_yb || sy_lsb || sy_msb || sx_lsb || sx_msb || j_prec != i_prec
                    || wsparse || w_order != NPU_E_WEIGHT_ORDER_DEPTH_FIRST[0]))
        || (wi2 && (j_stor == ST_NONE || !addr_ok(j_fmt, j_prec, j_base[5:0], j_sx[5:0], j_sc[5:0], j_sy[5:0])
                    || !j_zp_ok))
        // WeightOrder.check (the weight streams': not for a matrix multiply)
        || (!wi2 && ((mb > NPU_E_MICROBLOCK_U4X4[2:0]) || stride4
                     || (lwo < 4'd2 + {2'd0, nwd_l})
                     || (!op_dw && mb_i16only && !(ifm16 && kh == 17'd1 && kw == 17'd1))))
        // read_ifm
        || (i_up == 2'd3)
        || (i_stor == ST_NONE) || !addr_ok(i_fmt, i_prec, i_base[5:0], i_sx[5:0], i_sc[5:0], i_sy[5:0]) || !i_zp_ok
        // scale_bias()
        || (per_ch && (s_base[3:0] != 4'd0 || s_len[3:0] != 4'd0 || {1'b0, s_len} < sb_need))
        || (per_ch && rev_c && od > 17'd16 && (od & cmask) != 17'd0)   // TRM 3.7.2, reverse C
        // rescale, activation, write_ofm
        || (os_rnd > NPU_E_ROUND_MODE_OFM_TRUNCATE_TO_LOWER[2:0]) || (os_dbl == 5'd31)
        || !o_zp_ok || !act_fn_valid || !act_tab_ok
        || (o_stor != ST_NONE && !NPU_EMAP_ACTIVATION_TRANSPOSE[o_tr])
        || (o_chain && (o_rev != 2'd0 || o_tr != 3'd0))
        || (o_mem && !ofm_ok)
        || (o_mem && !addr_ok(o_fmt, o_prec, o_base[5:0], o_sx[5:0], o_sc[5:0], o_sy[5:0]));
    // implementation limits (checked with the smallest spatial block)
    wire [20:0] ifm_hm1 = ifm_h21 - 21'd1;
    wire [20:0] ifm_wm1 = ifm_w21 - 21'd1;
    function [31:0] patch_words;         // IB words of a patch for an h x w pixel block
        input [7:0] h, w;
        begin
            patch_words = (({24'd0, h - 8'd1} * {30'd0, sty_v} + {28'd0, subh - 4'd1} * {30'd0, dily} + 32'd1)
                         * ({24'd0, w - 8'd1} * {30'd0, stx_v} + {28'd0, subw - 4'd1} * {30'd0, dilx} + 32'd1)) << lcg;
        end
    endfunction
    wire [31:0] ib_min = patch_words({5'd0, mb_h}, {5'd0, mb_w});
    logic       wb_ok;
    always @(*) begin : wk_sel
        integer wk;
        wb_ok = 1'b1;
        for (wk = 0; wk < 4; wk = wk + 1)
            if (wk < (1 << nwd_l) && w_bases[40*wk +: 4] != 4'd0) wb_ok = 1'b0;
    end
    wire c_limit =
           !tile0(i_stor, i_w0m1, i_h0m1, i_h1m1, ifm_hm1, ifm_wm1)
        || (o_stor != ST_NONE && !tile0(o_stor, o_w0m1, o_h0m1, o_h1m1, {5'd0, o_ymax}, {5'd0, o_xmax}))
        || (wi2 && j_stor != ST_NONE && !tile0(j_stor, j_w0m1, j_h0m1, j_h1m1, 21'd0, {4'd0, od} - 21'd1))
        || (wi2 && (mb > NPU_E_MICROBLOCK_U4X4[2:0] || lwo < 4'd2))   // the walker's bricks
        || (!wi2 && wfmt == NPU_E_WEIGHT_FORMAT_FWD[0] && NUM_WD_LOG2 != 2'd0)
        || (op_dw && lwo > 4'(DW_MAX_LWO))
        || (od > {6'd0, blkd} && blkd[2:0] != 3'd0)
        || ({23'd0, ublks} > 32'(ABW))
        || (ib_min > 32'(IBH))
        || (per_ch && od > 17'(SBN))
        || (o_chain && {16'd0, oh_m1 + 16'd1} * {16'd0, ow_m1 + 16'd1} * {15'd0, od} > 49'(CHAIN_DEPTH))
        || (!wi2 && !wb_ok);
    assign op_unsupported   = c_unsup || (!c_unpred && c_limit);
    assign op_unpredictable = !c_unsup && c_unpred;

    // ================================================================ routes
    wire [39:0] ir_base, or_base, jr_base;
    wire        ir_ext, or_ext;
    wire [3:0]  ir_arc, or_awc, unused_ir_awc, unused_or_arc, unused_jr_awc;
    wire [1:0]  ir_dom, or_dom;
    npu_region_route u_ifm2_route (
        .region(j_reg), .use_attr(1'b0), .attr_idx(2'd0), .basep(basep), .regioncfg(regioncfg),
        .mem_attr(mem_attr), .base(jr_base), .ext(b_rq_ext), .arcache(b_rq_cache),
        .awcache(unused_jr_awc), .domain(b_rq_domain));
    npu_region_route u_ifm_route (
        .region(i_reg), .use_attr(1'b0), .attr_idx(2'd0), .basep(basep), .regioncfg(regioncfg),
        .mem_attr(mem_attr), .base(ir_base), .ext(ir_ext), .arcache(ir_arc),
        .awcache(unused_ir_awc), .domain(ir_dom));
    npu_region_route u_ofm_route (
        .region(o_reg), .use_attr(1'b0), .attr_idx(2'd0), .basep(basep), .regioncfg(regioncfg),
        .mem_attr(mem_attr), .base(or_base), .ext(or_ext), .arcache(unused_or_arc),
        .awcache(or_awc), .domain(or_dom));

    // ================================================================ sequencing
    logic [7:0]  s_h, s_w;                   // spatial block (pixels)
    logic [15:0] oy0, ox0;
    logic        sb_bad, halted, failed;
    logic [5:0]  b_pend;
    wire         halt = abort || halted;

    // spatial block: fits the AB and one half of the IFM buffer
    wire [7:0]  ngx = s_w >> lmbw;
    wire [7:0]  ngy = 8'(s_h / {5'd0, mb_h});
    wire [31:0] ab_need = {23'd0, ublks} * {24'd0, ngx} * {24'd0, ngy};
    wire [31:0] ib_need = patch_words(s_h, s_w);
    wire        s_fits = (ab_need <= 32'(ABW)) && (ib_need <= 32'(IBH));
    function [7:0] rup;                      // round n up to a multiple of m (1, 2, 4)
        input [7:0] n;
        input [2:0] m;
        begin
            rup = (n + {5'd0, m} - 8'd1) & ~({5'd0, m} - 8'd1);
        end
    endfunction
    wire [7:0]  mh0 = (oh_m1 > {9'd0, blkh_m1}) ? {1'b0, blkh_m1} : oh_m1[7:0];
    wire [7:0]  mw0 = (ow_m1 > {9'd0, blkw_m1}) ? {1'b0, blkw_m1} : ow_m1[7:0];
    wire [7:0]  bh0 = rup(mh0 + 8'd1, mb_h);
    wire [7:0]  bw0 = rup(mw0 + 8'd1, mb_w);

    // ---- scale/bias loader: records from the scale/bias stream
    wire [4:0]   q_valid, q_err;
    wire [639:0] q_data;
    logic [4:0]  q_pop, q_drop;
    logic [255:0] sbuf;
    logic [5:0]  sbytes;                     // bytes in sbuf
    logic [16:0] srec;                       // records parsed
    wire  [16:0] srecs = 17'(sb_need / 21'd10);
    wire  [79:0] rec = sbuf[79:0];
    wire         rec_go = (t == T_SBWAIT) && (sbytes >= 6'd10) && (srec < srecs);
    wire  [79:0] rsv = (acc_fmt == NPU_E_ACC_FORMAT_I48[1:0]) ? SB_I48_RESERVED : SB_I32_RESERVED;
    wire         sb_take = (t == T_SBWAIT) && q_valid[4] && (sbytes <= 6'd16) && !rec_go;
    wire  [47:0] r_bias = (acc_fmt == NPU_E_ACC_FORMAT_I48[1:0])
                          ? rec[SB_I48_BIAS +: 48]
                          : {{16{rec[SB_I32_BIAS + 31]}}, rec[SB_I32_BIAS +: 32]};
    wire  [30:0] r_scale = (acc_fmt == NPU_E_ACC_FORMAT_I48[1:0])
                          ? {16'd0, rec[SB_I48_SCALE +: 15]} : rec[SB_I32_SCALE +: 31];
    wire  [5:0]  r_shift = rec[SB_I32_SHIFT +: 6];
    // the record's channel: reverse C takes the sets (channels_in_set records) in reverse order
    wire  [16:0] s_ch = rev_c ? ((d_al - (17'd1 << lcis) - (srec & ~cmask)) | (srec & cmask)) : srec;
    wire         sb_we = rec_go && (s_ch < od) && (s_ch < 17'(SBN));

    // ---- weight fetch, decoders
    logic        f_start, f_scale;
    wire         f_busy;
    npu_wfetch u_fetch (
        .CLK(CLK), .rst_n(rst_n), .start(f_start), .scale(f_scale),
        .n_w(3'd1 << nwd_l), .w_base(w_bases), .w_len(w_lens), .w_region(w_reg),
        .s_base(s_base), .s_len({11'd0, sb_need}), .s_region(s_reg),
        .abort(halt), .pause(pause), .busy(f_busy),
        .basep(basep), .regioncfg(regioncfg), .mem_attr(mem_attr), .sram_mb(sram_mb), .ext_mb(ext_mb),
        .rq_valid(w_rq_valid), .rq_ext(w_rq_ext), .rq_addr(w_rq_addr), .rq_len(w_rq_len),
        .rq_scale(w_rq_scale), .rq_cache(w_rq_cache), .rq_domain(w_rq_domain), .rq_ready(w_rq_ready),
        .rb_valid(w_rb_valid), .rb_data(w_rb_data), .rb_resp(w_rb_resp),
        .q_valid(q_valid), .q_data(q_data), .q_err(q_err), .q_pop(q_pop), .q_drop(q_drop));

    logic        d_start;
    wire         fwd = (wfmt == NPU_E_WEIGHT_FORMAT_FWD[0]);
    wire [NWD*OW*9-1:0] dec_w;
    wire [NWD*4-1:0]    dec_n, dec_space;
    wire [NWD-1:0]      dec_stop, dec_ready;
    wire [OW*9-1:0] fwd_w;
    wire [3:0]   fwd_n;
    wire         fwd_ready, fwd_err, fwd_end, unused_fwd_busy;
    npu_fwd #(.OW(OW)) u_fwd (
        .CLK(CLK), .rst_n(rst_n), .start(d_start && fwd), .len_bytes(w_lens[31:0]),
        .in_valid(q_valid[0] && fwd), .in_data(q_data[127:0]), .in_ready(fwd_ready),
        .out_space((fwd && !wi2_q) ? dec_space[3:0] : 4'd0), .out_w(fwd_w), .out_n(fwd_n),
        .stop_err(fwd_err), .stop_end(fwd_end), .busy(unused_fwd_busy));
    genvar gd;
    generate
        for (gd = 0; gd < NWD; gd = gd + 1) begin : g_dec
            wire [OW*9-1:0] sw;
            wire [3:0]      sn;
            wire            s_rdy, s_err, s_end, unused_busy;
            wire            used = !fwd || gd != 0;
            npu_swd #(.OW(OW)) u_swd (
                .CLK(CLK), .rst_n(rst_n), .start(d_start && used), .len_bytes(w_lens[32*gd +: 32]),
                .in_valid(q_valid[gd] && used), .in_data(q_data[128*gd +: 128]), .in_ready(s_rdy),
                .out_space((used && !wi2_q) ? dec_space[4*gd +: 4] : 4'd0), .out_w(sw), .out_n(sn),
                .stop_err(s_err), .stop_end(s_end), .busy(unused_busy));
            if (gd == 0) begin : g_d0
                assign dec_w[0 +: OW*9] = fwd ? fwd_w : sw;
                assign dec_n[3:0] = fwd ? fwd_n : sn;
                assign dec_stop[0] = fwd ? (fwd_err || fwd_end) : (s_err || s_end);
                assign dec_ready[0] = fwd ? fwd_ready : s_rdy;
            end else begin : g_dn
                assign dec_w[gd*OW*9 +: OW*9] = sw;
                assign dec_n[4*gd +: 4] = sn;
                assign dec_stop[gd] = s_err || s_end;
                assign dec_ready[gd] = s_rdy;
            end
        end
    endgenerate

    // ---- a matrix multiply's weights: IFM2 elements (one decoder's share of every brick)
    logic        w_start;
    wire [16:0]  fb_oc, fb_ic;
    wire         fb_pushed, m_busy, m_err;
    wire [OW*9-1:0] m_w;
    wire [3:0]   m_n;
    npu_conv_wi2 #(.OW(OW)) u_wi2 (
        .CLK(CLK), .rst_n(rst_n), .start(w_start && wi2_q), .halt(halt || failed), .pause(pause),
        .od(od), .ifd(ifd_c), .wblk_o(wblk_o), .base(jr_base + j_base), .sx(j_sx), .sc(j_sc),
        .nhcwb16(j_fmt == NHCWB16), .sgn(j_sgn), .zp(j_zp),
        .fb_oc(fb_oc), .fb_ic(fb_ic), .pushed(fb_pushed), .space(wi2_q ? dec_space[3:0] : 4'd0),
        .out_w(m_w), .out_n(m_n),
        .rq_valid(b_rq_valid), .rq_addr(b_rq_addr), .rq_ready(b_rq_ready),
        .rb_valid(b_rb_valid), .rb_data(b_rb_data), .rb_resp(b_rb_resp), .busy(m_busy), .err(m_err));
    wire [NWD*OW*9-1:0] wk_w = wi2_q ? (NWD*OW*9)'(m_w) : dec_w;
    wire [NWD*4-1:0]    wk_n = wi2_q ? (NWD*4)'(m_n) : dec_n;
    wire [NWD-1:0]      wk_stop = wi2_q ? {NWD{1'b0}} : dec_stop;

    // ---- walker
    wire         bq_valid, bq_pop, gq_valid, gq_ready, w_done, w_fail;
    wire [2*MACS*9-1:0] bq_w;
    wire [68:0]  bq_meta;
    wire [66:0]  gq_rec;
    npu_conv_walk #(.MACS(MACS), .NWD(NWD), .OW(OW)) u_walk (
        .CLK(CLK), .rst_n(rst_n), .start(w_start), .halt(halt || failed),
        .dw(dw_q), .pk(pk), .sparse(wsparse), .nwd_l(nwd_l), .od(od), .ifd(dw_q ? 17'd1 : ifd_c),
        .blkd(blkd), .ibd(ibd), .wblk_i(wblk_i), .wblk_k(wblk_k),
        .dw_pad_k(dw_q ? (ifm16 ? DW16_PAD : DW8_PAD) : 3'd0),
        .wblk_o(wblk_o), .lwo(lwo), .khu(khu), .kwu(kwu), .dh(dh), .dwd(dwd),
        .sty(pk ? sty_v : 2'd1), .stx(pk ? stx_v : 2'd1),
        .dec_w(wk_w), .dec_n(wk_n), .dec_space(dec_space), .dec_stop(wk_stop),
        .bq_valid(bq_valid), .bq_w(bq_w), .bq_meta(bq_meta), .bq_pop(bq_pop),
        .gq_valid(gq_valid), .gq_rec(gq_rec), .gq_ready(gq_ready), .done(w_done), .fail(w_fail),
        .fb_oc(fb_oc), .fb_ic(fb_ic), .pushed(fb_pushed));

    // ---- IFM loader and buffer
    logic        pass_clear;
    wire [RP*AW-1:0]  ib_raddr;
    wire         ib_ren;
    wire [RP*256-1:0] ib_rdata;
    wire [RP-1:0]     pv_data;
    wire [1:0]   ib_loaded, ib_rel;
    wire [15:0]  pw_h0, pw_h1;
    wire [7:0]   unused_pw;
    wire         ifm_busy, ifm_err;
    wire [20:0]  ifm_h = ifm_h21, ifm_w = ifm_w21;
    npu_conv_ifm #(.IBH(IBH), .RP(RP), .GR(67)) u_ifm (
        .CLK(CLK), .rst_n(rst_n), .clear(pass_clear), .halt(halt || failed), .pause(pause),
        .base(ir_base + i_base), .sy_b(i_sy), .sx_b(i_sx), .sc_b(i_sc), .nhcwb16(i_fmt == NHCWB16),
        .sgn(i_sgn), .es16(ifm16), .zp(i_zp), .ifm_h(ifm_h[16:0]), .ifm_w(ifm_w[16:0]), .dil_y(dily), .dil_x(dilx),
        .sty(sty_v), .stx(stx_v), .pad_t(pad_t), .pad_l(pad_l), .lcg(lcg), .sram_mb(sram_mb),
        .ext_mb(ext_mb), .ext(ir_ext), .oy0(oy0), .ox0(ox0), .s_h(s_h), .s_w(s_w),
        .gq_valid(gq_valid), .gq_rec(gq_rec), .gq_ready(gq_ready), .pw_out(unused_pw),
        .rq_valid(a_rq_valid), .rq_addr(a_rq_addr), .rq_len(a_rq_len), .rq_ready(a_rq_ready),
        .rb_valid(a_rb_valid && busy), .rb_data(a_rb_data), .rb_resp(a_rb_resp),
        .rd_addr(ib_raddr), .rd_en(ib_ren), .rd_data(ib_rdata), .pv_data(pv_data),
        .loaded(ib_loaded), .rel(ib_rel), .pw_h0(pw_h0), .pw_h1(pw_h1), .busy(ifm_busy), .err(ifm_err));
    assign a_rq_ext = ir_ext;
    assign a_rq_cache = ir_arc;
    assign a_rq_domain = ir_dom;

    // ---- MAC array and accumulators
    localparam integer ABA = $clog2(ABW);
    wire         d_req, d_ack, out_busy, out_ab_busy, mac_busy;
    wire [16:0]  d_oblk;
    wire [10:0]  d_len;
    wire [4*ABA-1:0]  ab_raddr;
    wire         ab_ren;
    wire [4*NU*48-1:0] ab_rdata;
    wire [3:0]   ab_rvalid;
    npu_conv_mac #(.MACS(MACS), .RP(RP), .ABW(ABW), .AW(AW), .BM(69)) u_mac (
        .CLK(CLK), .rst_n(rst_n), .clear(pass_clear), .halt(halt || failed),
        .dw(dw_q), .sparse(wsparse), .lwo(lwo), .mb_h(mb_h), .mb_w(mb_w), .lmbw(lmbw), .lcg(lcg),
        .sty(sty_v), .stx(stx_v), .dil_y(dily), .dil_x(dilx), .ifd(ifd_c), .ngx(ngx), .ngy(ngy),
        .bq_valid(bq_valid), .bq_w(bq_w), .bq_meta(bq_meta), .bq_pop(bq_pop),
        .rd_addr(ib_raddr), .rd_en(ib_ren), .rd_data(ib_rdata), .pv_data(pv_data),
        .loaded(ib_loaded), .rel(ib_rel), .pw_h0(pw_h0), .pw_h1(pw_h1),
        .d_req(d_req), .d_oblk(d_oblk), .d_len(d_len), .d_ack(d_ack), .out_busy(out_ab_busy),
        .ab_raddr(ab_raddr), .ab_ren(ab_ren), .ab_rdata(ab_rdata), .ab_rvalid(ab_rvalid), .busy(mac_busy));

    // ---- output stage
    wire dead = halt || ifm_err || m_err || (|(q_err & q_valid));
    npu_conv_out #(.MACS(MACS), .ABW(ABW), .SBN(SBN)) u_out (
        .CLK(CLK), .rst_n(rst_n), .clear(pass_clear && t == T_SETUP), .dead(dead || failed),
        .od(od), .oh_m1(oh_m1), .ow_m1(ow_m1), .lwo(lwo), .mb_h(mb_h), .mb_w(mb_w), .ngx(ngx), .ngy(ngy),
        .i48(acc_fmt == NPU_E_ACC_FORMAT_I48[1:0]), .per_ch(per_ch), .g_scale(os_scale),
        .g_shift(os_shift), .rnd(os_rnd), .dbl(os_dbl), .o_zp(o_zp17),
        .clip(clip_rg == NPU_E_ACTIVATION_CLIP_RANGE_B16[0]), .amin(o_min17), .amax(o_max17),
        .obase(or_base + o_base), .o_sy(o_sy), .o_sx(o_sx), .o_sc(o_sc), .o_nhcwb16(o_fmt == NHCWB16),
        .o_rev(o_rev), .o_tr(o_tr), .blk_h({4'd0, blkh_m1} + 11'd1), .blk_w({4'd0, blkw_m1} + 11'd1),
        .blk_d(blkd), .mb(mb), .ofm_ok(ofm_ok), .o_ymax(o_ymax), .o_xmax(o_xmax),
        .o_none(o_stor == ST_NONE), .o_lsz(o_prec), .o_mb(or_ext ? ext_mb : sram_mb), .o_sgn(o_sgn), .o_chain(o_chain),
        .act_fn(act_fn), .table_i(act_tab), .tab_ok(act_tab_ok), .lut_raddr(lut_raddr),
        .lut_rdata(lut_rdata), .cf_we(cf_we), .cf_idx(cf_idx), .cf_data(cf_data), .oy0(oy0), .ox0(ox0), .s_h(s_h), .s_w(s_w),
        .d_req(d_req), .d_oblk(d_oblk), .d_len(d_len), .d_ack(d_ack), .busy(out_busy), .ab_busy(out_ab_busy),
        .sb_we(sb_we), .sb_waddr(s_ch[10:0]), .sb_wdata({r_bias, r_scale, r_shift}),
        .ab_raddr(ab_raddr), .ab_ren(ab_ren), .ab_rdata(ab_rdata), .ab_rvalid(ab_rvalid),
        .wq_valid(wq_valid), .wq_addr(wq_addr), .wq_len(wq_len), .wq_ready(wq_ready),
        .wd_valid(wd_valid), .wd_data(wd_data), .wd_strb(wd_strb), .wd_last(wd_last), .wd_ready(wd_ready), .flag(cond_flag), .flag_set(cond_set));
    assign wq_ext = or_ext;
    assign wq_cache = or_awc;
    assign wq_domain = or_dom;

    // ---- beat consumers
    wire [3:0] dec_ready4 = 4'(dec_ready);     // the decoders there are, zero-extended
    wire [3:0] dec_stop4 = 4'(dec_stop);
    always @(*) begin : ab_sel
        integer wk;
        q_pop = 5'd0;
        q_drop = 5'd0;
        for (wk = 0; wk < 4; wk = wk + 1) begin
            q_pop[wk] = (wk < NWD) ? dec_ready4[wk] : 1'b0;
            // a decoder that has stopped, or a pass that needs no more weights, drops its beats
            q_drop[wk] = (wk >= NWD) || (dec_stop4[wk] && wk < NWD) || w_done || failed || halt;
        end
        if (fwd) q_pop[0] = fwd_ready;
        q_pop[4] = sb_take;
        q_drop[4] = (t != T_SBWAIT) || sb_bad;
    end

    // ================================================================ control FSM
    // a pass ends once the output stage has read its last block out of the AB; its write
    // queue drains into the next pass (T_DRAIN waits for it)
    wire pass_done = w_done && !bq_valid && !mac_busy && !d_req && !out_ab_busy;
    wire last_s = ({8'd0, s_h} + oy0 > oh_m1) && ({8'd0, s_w} + ox0 > ow_m1);
    wire all_quiet = !f_busy && !ifm_busy && !m_busy && !out_busy && (b_pend == 6'd0);
    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) begin
            t <= T_IDLE; dw_q <= 1'b0; wi2_q <= 1'b0; s_h <= 8'd0; s_w <= 8'd0; oy0 <= 16'd0; ox0 <= 16'd0;
            sb_bad <= 1'b0; halted <= 1'b0; failed <= 1'b0; b_pend <= 6'd0;
            f_start <= 1'b0; f_scale <= 1'b0; d_start <= 1'b0; w_start <= 1'b0; pass_clear <= 1'b0;
            sbuf <= 256'd0; sbytes <= 6'd0; srec <= 17'd0;
        end else begin
            f_start <= 1'b0; d_start <= 1'b0; w_start <= 1'b0; pass_clear <= 1'b0;
            b_pend <= b_pend + {5'd0, wq_valid && wq_ready} - {5'd0, wb_valid};
            if (abort && t != T_IDLE) halted <= 1'b1;
            if (w_fail) failed <= 1'b1;
            case (t)
                T_IDLE: begin
                    if (start) begin
                        t <= T_SETUP;
                        dw_q <= op_dw;
                        wi2_q <= wi2;
                        s_h <= bh0; s_w <= bw0;
                        oy0 <= 16'd0; ox0 <= 16'd0;
                        sb_bad <= 1'b0; halted <= abort; failed <= 1'b0;
                        pass_clear <= 1'b1;
                    end
                end
                T_SETUP: begin
                    // halve the spatial block until it fits
                    if (halt) t <= T_DRAIN;
                    else if (!s_fits) begin
                        if (s_h > {5'd0, mb_h} && (s_h >= s_w || s_w == {5'd0, mb_w})) s_h <= rup(s_h >> 1, mb_h);
                        else s_w <= rup(s_w >> 1, mb_w);
                    end else if (per_ch) begin
                        t <= T_SB;
                    end else begin
                        t <= T_PASS;
                    end
                end
                T_SB: begin
                    if (halt) t <= T_DRAIN;
                    else if (!f_busy) begin
                        f_start <= 1'b1; f_scale <= 1'b1;
                        sbytes <= 6'd0; srec <= 17'd0;
                        t <= T_SBWAIT;
                    end
                end
                T_SBWAIT: begin
                    if (rec_go) begin
                        sbuf <= sbuf >> 80;
                        sbytes <= sbytes - 6'd10;
                        srec <= srec + 17'd1;
                        if ((rec & rsv) != 80'd0) sb_bad <= 1'b1;
                    end else if (sb_take) begin
                        sbuf <= sbuf | ({128'd0, q_data[639:512]} << {sbytes, 3'b000});
                        sbytes <= sbytes + 6'd16;
                    end
                    if (halt) t <= T_DRAIN;
                    else if (sb_bad || (srec == srecs && !rec_go)) t <= sb_bad ? T_DRAIN : T_PASS;
                end
                T_PASS: begin
                    if (halt || failed) t <= T_DRAIN;
                    else if (!f_busy && !ifm_busy) begin
                        f_start <= !wi2_q; f_scale <= 1'b0;   // a matrix multiply reads no stream
                        d_start <= !wi2_q;
                        w_start <= 1'b1;
                        pass_clear <= 1'b1;
                        t <= T_RUN;
                    end
                end
                T_RUN: begin
                    if (halt || failed) t <= T_DRAIN;
                    else if (pass_done && !w_start) t <= T_NEXT;
                end
                T_NEXT: begin
                    if (last_s) begin
                        t <= T_DRAIN;
                    end else begin
                        if ({8'd0, s_w} + ox0 <= ow_m1) ox0 <= ox0 + {8'd0, s_w};
                        else begin ox0 <= 16'd0; oy0 <= oy0 + {8'd0, s_h}; end
                        t <= T_PASS;
                    end
                end
                default: begin   // T_DRAIN: every burst back, every write answered
                    if (all_quiet) begin
                        t <= T_IDLE;
                        halted <= 1'b0;
                    end
                end
            endcase
        end
    end
    assign busy = (t != T_IDLE) || f_busy || ifm_busy || m_busy || (b_pend != 6'd0);

    wire unused_ok = ^{set_raw[15:0], unused_ir_awc, unused_or_arc, unused_jr_awc, j_sy[39:6], unused_pw, unused_fwd_busy,
                       i_h1m1, ifm_h[20:17], ifm_w[20:17], q_err[3:0], dec_ready, ifm_hm1, ifm_wm1,
                       q_data[511:128]};
endmodule

`default_nettype wire
