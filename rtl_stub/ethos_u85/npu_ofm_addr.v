// npu_ofm_addr.v -- write_ofm's address part (TRM 3.6.5 write_ofm: reverse, then transpose,
// then element_address_in_region in tile 0) and its coordinate-independent asserts, the
// one implementation both OFM writers use: npu_conv_out.v (CONV/DEPTHWISE) and npu_kernel.v
// (ELEMENTWISE, POOL, RESIZE). Combinational. Reference: tlm/ethos_u85/fmap.py
// (write_ofm_address_ref, ofm_coordinates, check_ofm_write).
//
//   reverse    H: y = ofm_h-1-y; W: x = ofm_w-1-x; C: c = ofm_d-1-c (digest E-05: the
//              TRM's stray `break` before the C flip is ignored, as in the TLM)
//   transpose  memory (y', x', c') of HWC (y, x, c), WHC (x, y, c), HCW (y, c, x),
//              CWH (c, x, y), CHW (c, y, x), WCH (x, c, y); reserved 4, 5 map as HWC (the
//              units reject them)
//   address    base + y'*STRIDE_Y + (NHWC: x'*STRIDE_X + c'*es;
//              NHCWB16: 16*es*x' + (c'/16)*STRIDE_C + (c'%16)*es)
// `elem`: the OFM's channels are not ascending-contiguous in memory (a transpose that moves
// the channel axis, or reverse C): the writers then write one element a burst.
// `ok`: check_ofm_write for a memory OFM (the units apply it when the storage is a tile
// layout; the chained and none cases are theirs).
`default_nettype none

module npu_ofm_addr #(
    parameter integer MACS = 256
) (
    input  wire [1:0]  rev,          // OFM_PRECISION.activation_reverse
    input  wire [2:0]  tr,           // OFM_PRECISION.activation_transpose
    input  wire        nhcwb16,      // OFM_PRECISION.activation_format
    input  wire [1:0]  lsz,          // log2 of the element size
    input  wire [39:0] base,         // BASEP[OFM_REGION] + OFM_BASE0
    input  wire [39:0] sy,
    input  wire [39:0] sx,
    input  wire [39:0] sc,
    input  wire [15:0] oh_m1,
    input  wire [15:0] ow_m1,
    input  wire [15:0] od_m1,
    input  wire [15:0] y,            // OFM coordinates (before reverse and transpose)
    input  wire [15:0] x,
    input  wire [15:0] c,
    // check_ofm_write
    input  wire        perms_all,    // allowed_perms_all (else rtrans: ELEMENTWISE)
    input  wire [10:0] blk_h,        // OFM_BLK_HEIGHT/WIDTH/DEPTH (not minus 1)
    input  wire [10:0] blk_w,
    input  wire [10:0] blk_d,
    input  wire [2:0]  mb,           // ACC_FORMAT.microblock (reverse C)
    output wire [39:0] addr,
    output wire        elem,
    output wire [15:0] ymax,         // the largest memory y' and x' (tile checks)
    output wire [15:0] xmax,
    output wire        ok
);
`include "gen/npu_isa.vh"
`include "gen/npu_kernel.vh"
`include "gen/npu_conv.vh"
    localparam [2:0] HWC = NPU_E_ACTIVATION_TRANSPOSE_HWC[2:0];
    localparam [2:0] WHC = NPU_E_ACTIVATION_TRANSPOSE_WHC[2:0];
    localparam [2:0] HCW = NPU_E_ACTIVATION_TRANSPOSE_HCW[2:0];
    localparam [2:0] CWH = NPU_E_ACTIVATION_TRANSPOSE_CWH[2:0];
    localparam [2:0] CHW = NPU_E_ACTIVATION_TRANSPOSE_CHW[2:0];
    localparam [2:0] WCH = NPU_E_ACTIVATION_TRANSPOSE_WCH[2:0];
    localparam [1:0] RV_H = NPU_E_ACTIVATION_REVERSE_H[1:0];
    localparam [1:0] RV_W = NPU_E_ACTIVATION_REVERSE_W[1:0];
    localparam [1:0] RV_C = NPU_E_ACTIVATION_REVERSE_C[1:0];
    localparam integer LOG_MACS = $clog2(MACS);

    // memory (y', x', c') of (a, b, d) = (y, x, c)
    function [47:0] perm;
        input [2:0]  t;
        input [15:0] a, b, d;
        begin
            case (t)
                WHC:     perm = {b, a, d};
                HCW:     perm = {a, d, b};
                CWH:     perm = {d, b, a};
                CHW:     perm = {d, a, b};
                WCH:     perm = {b, d, a};
                default: perm = {a, b, d};
            endcase
        end
    endfunction

    wire [15:0] yr = (rev == RV_H) ? oh_m1 - y : y;
    wire [15:0] xr = (rev == RV_W) ? ow_m1 - x : x;
    wire [15:0] cr = (rev == RV_C) ? od_m1 - c : c;
    wire [47:0] m = perm(tr, yr, xr, cr);
    wire [15:0] my = m[47:32], mx = m[31:16], mc = m[15:0];
    wire [39:0] a_y = 40'(my * sy);
    wire [39:0] a_xc = nhcwb16 ? ({20'd0, mx, 4'd0} << lsz) + 40'({4'd0, mc[15:4]} * sc) + ({36'd0, mc[3:0]} << lsz)
                               : 40'(mx * sx) + ({24'd0, mc} << lsz);
    assign addr = base + a_y + a_xc;
    wire [47:0] mm = perm(tr, oh_m1, ow_m1, od_m1);
    assign ymax = mm[47:32];
    assign xmax = mm[31:16];
    wire   unused_ok = ^mm[15:0];

    wire   t_c = (tr == HCW) || (tr == CWH) || (tr == CHW) || (tr == WCH);   // the channel axis moves
    assign elem = t_c || (rev == RV_C);

    // check_ofm_write (precision b64, chained and none storage: the units')
    // reverse C: with ofm_d not a multiple of max(16, microblock depth), NHWC and
    // OFM_BLK_DEPTH <= 16; a reserved microblock fails microblock_depth()
    wire        mb_ok = (mb <= NPU_E_MICROBLOCK_U4X4[2:0]);
    wire [3:0]  lmbd = 4'(LOG_MACS) - {1'b0, mb_ok ? NPU_MB_LDIV[3*mb +: 3] : 3'd0};
    wire [3:0]  lmd = (lmbd < 4'd4) ? 4'd4 : lmbd;
    wire [16:0] od = {1'b0, od_m1} + 17'd1;
    wire        rc_ok = mb_ok && (((od & ((17'd1 << lmd) - 17'd1)) == 17'd0) || (!nhcwb16 && blk_d <= 11'd16));
    wire        rev_ok = (rev == 2'd0) || (tr == HWC && perms_all && (rev != RV_C || rc_ok));
    wire        b16_ok = !(nhcwb16 && ((tr == HCW || tr == CHW) && blk_w[3:0] != 4'd0))
                      && !(nhcwb16 && ((tr == CWH || tr == WCH) && blk_h[3:0] != 4'd0));
    wire        perm_ok = perms_all || tr == HWC || tr == HCW || tr == CHW;
    // block limits (the 7-bit OFM_BLK_HEIGHT/WIDTH fields bound the height and width ones)
    wire        lim_ok =
           !(tr == WHC && (blk_w > 11'(NPU_MAX_BLOCK_HEIGHT) || blk_h > 11'(NPU_MAX_BLOCK_WIDTH)))
        && !(tr == HCW && (blk_d > 11'(NPU_MAX_BLOCK_WIDTH) || blk_w > 11'(NPU_MAX_BLOCK_DEPTH)))
        && !(tr == CWH && (blk_d > 11'(NPU_MAX_BLOCK_HEIGHT) || blk_h > 11'(NPU_MAX_BLOCK_DEPTH)))
        && !(tr == CHW && (blk_d > 11'(NPU_MAX_BLOCK_HEIGHT) || blk_h > 11'(NPU_MAX_BLOCK_WIDTH)
                           || blk_w > 11'(NPU_MAX_BLOCK_DEPTH)))
        && !(tr == WCH && (blk_w > 11'(NPU_MAX_BLOCK_HEIGHT) || blk_d > 11'(NPU_MAX_BLOCK_WIDTH)
                           || blk_h > 11'(NPU_MAX_BLOCK_DEPTH)));
    assign ok = rev_ok && b16_ok && perm_ok && lim_ok;
endmodule

`default_nettype wire
