// npu_conv_walk.v -- weight-stream walker of NPU_OP_CONV / NPU_OP_DEPTHWISE in the
// Ethos-U85 stand-in: follows the weight ordering of TRM 3.9.2 (with the digest's E-21
// corrections, as tlm/weights/ordering.py) and assembles the decoded weights into bricks for
// the MAC array (npu_conv_mac.v), plus the IFM patch ("group") records for the loader
// (npu_conv_ifm.v).
//
// Stream order, outermost first (one pass per spatial block, `start`):
//   oblk_z  OFM depth blocks of OFM_BLK_DEPTH channels
//   iblk_z  IFM blocks of ifm_block_depth channels, zig-zag: the direction reverses every
//           OFM block, starting where the previous one ended (depthwise: one)
//   subk_x, subk_y  sub-kernels of decomp_w x decomp_h undilated taps (8 >> dilation, or 4)
//   wblk_iz IFM channel steps of wblk_i inside the IFM block
//   ublk_z  OFM channel steps of wblk_o (= microblock depth) inside the OFM block
//   slots   part-kernel-first (or depthwise): stride phases (sy, sx), rows ky, serpentine
//           columns kx of the phase; depthwise: dw_pad_k padding slots after every wblk_k
//           taps; the taps padded to a multiple of wblk_k with padding slots (+ dw_pad_k for
//           depthwise). depth-first: rows ky, serpentine kx.
//   i       IFM channel groups of i_sz (8, 16 sparse, 1 depthwise) inside wblk_i: one brick
// A brick holds wblk_o x i_sz weights, [o][ii] at o*i_sz + ii. Decoder ws (of num_wd) codes
// the OFM channels with (o >> 2) % num_wd == ws, its j-th channel being
// o = (j >> 2)*4*num_wd + 4*ws + (j & 3); each decoder gives its share, wblk_o*i_sz/num_wd
// weights, of every brick (padding slots included: their weights are decoded and dropped).
//
// Bricks go to a 2-entry queue (the MAC array uses one while the next one fills). A group
// record is emitted when a brick starts a new IFM patch: conv a new (iblk_z, sub-kernel,
// wblk_iz) or a new OFM block; depthwise a new (sub-kernel, ublk_z) (its IFM channels are the
// OFM channels of the microblock). `fail`: a decoder stopped (error or end of stream) before
// it gave its share of a brick.
`default_nettype none

module npu_conv_walk #(
    parameter integer MACS = 256,
    parameter integer NWD = 1,               // weight decoders (num_wd of the configuration)
    parameter integer OW = 8                 // weights a decoder gives a cycle at most
) (
    input  wire               CLK,
    input  wire               rst_n,
    input  wire               start,         // begin a pass over the weight streams
    input  wire               halt,          // stop (abort, error): no further brick
    // operation parameters (stable during the operation)
    input  wire               dw,            // NPU_OP_DEPTHWISE
    input  wire               pk,            // part-kernel order (part_kernel_first or depthwise)
    input  wire               sparse,
    input  wire [1:0]         nwd_l,         // log2(num_wd) of this operation
    input  wire [16:0]        od,            // OFM depth
    input  wire [16:0]        ifd,           // IFM depth (conv), 1 (depthwise)
    input  wire [10:0]        blkd,          // OFM block depth
    input  wire [7:0]         ibd,           // ifm_block_depth: 16, 32, 64, 128
    input  wire [7:0]         wblk_i,        // 1, 8, 16, 32, 64, 128
    input  wire [3:0]         wblk_k,        // 1, 5, 10
    input  wire [2:0]         dw_pad_k,      // 0, 2, 6
    input  wire [8:0]         wblk_o,        // microblock depth, 4..MACS/8
    input  wire [3:0]         lwo,           // log2(wblk_o)
    input  wire [15:0]        khu,           // undilated kernel height
    input  wire [15:0]        kwu,
    input  wire [3:0]         dh,            // sub-kernel height: decomposition >> dilation_y
    input  wire [3:0]         dwd,           // sub-kernel width
    input  wire [1:0]         sty,           // stride_y (1..3) of the slot order (1: depth-first)
    input  wire [1:0]         stx,
    // decoders
    input  wire [NWD*OW*9-1:0] dec_w,
    input  wire [NWD*4-1:0]    dec_n,
    output logic [NWD*4-1:0]   dec_space,
    input  wire [NWD-1:0]      dec_stop,
    // brick queue head
    output logic              bq_valid,
    output logic [2*MACS*9-1:0] bq_w,
    output logic [BM-1:0]     bq_meta,
    input  wire               bq_pop,
    // IFM patch records (to the loader)
    output wire               gq_valid,
    output wire [GR-1:0]      gq_rec,
    input  wire               gq_ready,
    output wire               done,          // the pass is complete (last brick queued)
    output wire               fail,
    // the brick being filled (npu_conv_wi2.v): its first OFM and IFM channel, queued (pulse)
    output wire [16:0]        fb_oc,
    output wire [16:0]        fb_ic,
    output wire               pushed
);
    localparam integer BW = 2 * MACS;        // brick capacity (weights)
    // brick metadata: {c_base[16:0], oblk[16:0], dlen[10:0], u[8:0], ig[3:0], ty[2:0], tx[2:0],
    //                  half, grp_first, d_first, d_last, pad}
    localparam integer BM = 17 + 17 + 11 + 9 + 4 + 3 + 3 + 5;
    // group record: {subk_y[15:0], subk_x[15:0], sh[3:0], sw[3:0], c0[16:0], cn[8:0], half}
    localparam integer GR = 16 + 16 + 4 + 4 + 17 + 9 + 1;
    localparam integer LBW = $clog2(BW);

    // ================================================================ walker state
    logic        act, fin, failq;
    logic [16:0] oblk, iblk, ils;            // ils: ifm_loop_start
    logic        desc;                       // IFM blocks in descending order
    logic [15:0] sky, skx;                   // sub-kernel origin (undilated taps)
    logic [7:0]  wiz;
    logic [16:0] ublk;
    logic [1:0]  psy, psx;                   // stride phase
    logic [3:0]  pky, pkx;                   // row, column in the phase
    logic [3:0]  cm;                         // taps of the sub-kernel so far, mod wblk_k
    logic [1:0]  pad_kind;                   // 0 tap, 1 depthwise padding, 2 end padding
    logic [3:0]  pad_left;
    logic        pad_then_end;               // after this padding run the call ends
    logic [3:0]  ig;
    logic        half;                       // IB half of the current group
    logic        new_grp, new_d;             // the next brick starts a group / an OFM block

    // derived
    wire [16:0] oblk_dep_a = od - oblk;
    wire [16:0] oblk_dep = (oblk_dep_a > {6'd0, blkd}) ? {6'd0, blkd} : oblk_dep_a;
    wire [16:0] iblk_dep_a = ifd - iblk;
    wire [16:0] iblk_dep = dw ? 17'd1 : (iblk_dep_a > {9'd0, ibd}) ? {9'd0, ibd} : iblk_dep_a;
    wire [15:0] skh_a = khu - sky;
    wire [15:0] skw_a = kwu - skx;
    wire [3:0]  sh = (skh_a > {12'd0, dh}) ? dh : skh_a[3:0];     // sub-kernel size
    wire [3:0]  sw = (skw_a > {12'd0, dwd}) ? dwd : skw_a[3:0];
    wire [4:0]  i_sz = dw ? 5'd1 : sparse ? 5'd16 : 5'd8;
    wire [3:0]  n_ig = dw ? 4'd1 : sparse ? 4'(wblk_i >> 4) : 4'(wblk_i >> 3);
    // phases with taps: sy < min(stride_y, sh), sx < min(stride_x, sw)
    wire [3:0]  ny = ({2'd0, sty} < sh) ? {2'd0, sty} : sh;
    wire [3:0]  nx = ({2'd0, stx} < sw) ? {2'd0, stx} : sw;
    // rows / columns of a phase: (n + s - 1 - p) / s
    function [3:0] divs;
        input [3:0] n;
        input [1:0] s, p;
        logic [4:0] t;
        begin
            t = {1'b0, n} + {3'd0, s} - 5'd1 - {3'd0, p};
            case (s)
                2'd1: divs = t[3:0];
                2'd2: divs = t[4:1];
                default: divs = (t >= 5'd12) ? 4'd4 : (t >= 5'd9) ? 4'd3 : (t >= 5'd6) ? 4'd2 :
                                (t >= 5'd3) ? 4'd1 : 4'd0;
            endcase
        end
    endfunction
    wire [3:0]  skh = divs(sh, sty, psy);
    wire [3:0]  skw = divs(sw, stx, psx);
    wire [3:0]  xs = pky[0] ? skw - 4'd1 - pkx : pkx;             // serpentine
    wire [5:0]  ty_w = {4'd0, psy} + pky * {2'd0, sty};
    wire [5:0]  tx_w = {4'd0, psx} + xs * {2'd0, stx};
    // next tap of the slot iterator
    wire        nx_kx = (pkx + 4'd1 < skw);
    wire        nx_ky = (pky + 4'd1 < skh);
    wire        nx_px = ({2'd0, psx} + 4'd1 < nx);
    wire        nx_py = ({2'd0, psy} + 4'd1 < ny);
    wire        more_taps = nx_kx || nx_ky || nx_px || nx_py;
    wire [3:0]  cm1 = (cm + 4'd1 == wblk_k) ? 4'd0 : cm + 4'd1;    // after counting this tap
    wire [3:0]  rem = (cm1 == 4'd0) ? 4'd0 : wblk_k - cm1;         // end padding slots

    // ================================================================ bricks
    // two brick buffers (filled by the decoders) and the head brick the MAC array reads (a
    // register loaded when the MAC array takes the next brick: it changes once a brick).
    // The buffers are arrays written a weight by index (as one vector, each decoder lane's
    // variable part-select write is a full-width mask and mux in synthesis: Yosys' proc took
    // minutes); e0_v/e1_v show them as vectors for the head's load
    logic [8:0] e0 [0:BW-1];
    logic [8:0] e1 [0:BW-1];
    wire [BW*9-1:0] e0_v, e1_v;
    genvar gk;
    generate
        for (gk = 0; gk < BW; gk = gk + 1) begin : g_ev
            assign e0_v[gk*9 +: 9] = e0[gk];
            assign e1_v[gk*9 +: 9] = e1[gk];
        end
    endgenerate
    logic [BM-1:0] m0, m1;
    logic [1:0]  bq_cnt;                     // complete bricks in e0/e1 not yet at the head
    logic        bq_rp, bq_wp;
    logic [LBW:0] fcnt [0:NWD-1];
    wire [LBW:0] share = (LBW+1)'((({9'd0, wblk_o} << (dw ? 0 : sparse ? 4 : 3))) >> nwd_l);
    wire         filling = act && !fin && !failq && !halt && (bq_cnt != 2'd2);
    wire         load = (!bq_valid || bq_pop) && (bq_cnt != 2'd0);
    wire [4:0]   lisz = dw ? 5'd0 : sparse ? 5'd4 : 5'd3;

    // decoder space and the brick's completion
    logic [NWD-1:0] full_now, stuck;
    logic [LBW:0]   room;
    // loop indices are local to their blocks: an index shared with a clocked block would
    // wake this one (Icarus) every cycle
    always @(*) begin : dec_room
        integer d;
        for (d = 0; d < NWD; d = d + 1) begin
            room = share - fcnt[d];
            dec_space[d*4 +: 4] = (!filling || d >= (1 << nwd_l)) ? 4'd0 :
                                  (room > (LBW+1)'(OW)) ? 4'(OW) : room[3:0];
            full_now[d] = (d >= (1 << nwd_l)) || (fcnt[d] + (LBW+1)'(dec_n[d*4 +: 4]) >= share);
            stuck[d] = (d < (1 << nwd_l)) && dec_stop[d] && !full_now[d];
        end
    end
    wire complete = filling && (&full_now);
    assign fail = failq;

    // brick position of decoder d's k-th weight: o*i_sz + ii
    function [LBW-1:0] bpos;
        input [1:0] dd;
        input [LBW:0] k;
        logic [LBW:0] j, ii, o;
        begin
            j = k >> lisz;
            ii = k & (((LBW+1)'(1) << lisz) - 1'b1);
            o = (((j >> 2) << (2 + nwd_l)) | ((LBW+1)'(dd) << 2) | (j & 3));
            bpos = LBW'((o << lisz) | ii);
        end
    endfunction

    // ================================================================ metadata of the brick being filled
    wire [16:0] c0_conv = iblk + {9'd0, wiz};
    wire [16:0] c_base = dw ? oblk + ublk : c0_conv + ({13'd0, ig} << (sparse ? 4 : 3));
    wire [10:0] dlen = oblk_dep[10:0];
    wire [8:0]  u = 9'(ublk >> lwo);
    wire        is_pad = (pad_kind != 2'd0);
    wire [BM-1:0] meta = {c_base, oblk, dlen, u, (sparse ? ig << 1 : ig), ty_w[2:0], tx_w[2:0],
                          half, new_grp, new_d, last_of_d, is_pad};
    // the group record of a brick that starts a patch
    wire [16:0] g_c0 = dw ? oblk + ublk : c0_conv;
    wire [16:0] g_left = dw ? od - g_c0 : ifd - g_c0;
    wire [8:0]  g_cw = dw ? wblk_o : {1'b0, wblk_i};
    wire [8:0]  g_cn = (g_left > {8'd0, g_cw}) ? g_cw : g_left[8:0];
    assign gq_rec = {sky, skx, sh, sw, g_c0, g_cn, half};
    // a new group's record goes out with its first brick (the loader's FIFO has room)
    logic g_sent;
    assign gq_valid = act && !fin && !failq && !halt && new_grp && !g_sent;

    // ---- the advance: is the current brick the last of its call / OFM block / pass?
    wire last_ig   = (ig + 4'd1 >= n_ig);
    wire slot_last = is_pad ? (pad_left == 4'd1 && pad_then_end)
                            : (!more_taps && rem == 4'd0 && !(dw && cm1 == 4'd0 && dw_pad_k != 3'd0));
    wire call_last = last_ig && slot_last;
    wire last_ublk = (ublk + {8'd0, wblk_o} >= oblk_dep);
    wire last_wiz  = ({9'd0, wiz} + {9'd0, wblk_i} >= iblk_dep);
    wire last_suby = ({16'd0, sky} + {28'd0, dh} >= {16'd0, khu});
    wire last_subx = ({16'd0, skx} + {28'd0, dwd} >= {16'd0, kwu});
    wire [17:0] iblk_n = desc ? {1'b0, iblk} - {10'd0, ibd} : {1'b0, iblk} + {10'd0, ibd};
    wire last_iblk = dw || iblk_n[17] || (iblk_n[16:0] >= ifd);
    wire last_of_d = call_last && last_ublk && last_wiz && last_suby && last_subx && last_iblk;
    wire last_oblk = ({1'b0, oblk} + {7'd0, blkd} >= {1'b0, od});
    wire bq_push = complete && !(new_grp && !g_sent && !gq_ready);
    assign done = fin && (bq_cnt == 2'd0);
    assign fb_oc = oblk + ublk;
    assign fb_ic = c_base;
    assign pushed = bq_push;

    integer b;
    always_ff @(posedge CLK) begin : fill
        integer d, l;
        logic [LBW-1:0] p;
        // decoder weights into the brick being filled (the loops only run while filling;
        // one decoder (nwd_l 0): bpos(0, k) is k, taken without the function: simulation cost)
        if (filling)
            for (d = 0; d < NWD; d = d + 1)
                for (l = 0; l < OW; l = l + 1)
                    if (l < dec_n[d*4 +: 4]) begin
                        p = (nwd_l == 2'd0) ? LBW'(fcnt[d] + (LBW+1)'(l)) : bpos(2'(d), fcnt[d] + (LBW+1)'(l));
                        if (bq_wp) e1[p] <= dec_w[(d*OW + l)*9 +: 9];
                        else       e0[p] <= dec_w[(d*OW + l)*9 +: 9];
                    end
        if (bq_push) begin
            if (bq_wp) m1 <= meta;
            else m0 <= meta;
        end
        if (load) begin
            bq_w <= bq_rp ? e1_v : e0_v;
            bq_meta <= bq_rp ? m1 : m0;
        end
    end

    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) begin
            act <= 1'b0; fin <= 1'b0; failq <= 1'b0;
            oblk <= 17'd0; iblk <= 17'd0; ils <= 17'd0; desc <= 1'b0;
            sky <= 16'd0; skx <= 16'd0; wiz <= 8'd0; ublk <= 17'd0;
            psy <= 2'd0; psx <= 2'd0; pky <= 4'd0; pkx <= 4'd0; cm <= 4'd0;
            pad_kind <= 2'd0; pad_left <= 4'd0; pad_then_end <= 1'b0; ig <= 4'd0;
            half <= 1'b0; new_grp <= 1'b1; new_d <= 1'b1; g_sent <= 1'b0;
            bq_cnt <= 2'd0; bq_rp <= 1'b0; bq_wp <= 1'b0; bq_valid <= 1'b0;
            for (b = 0; b < NWD; b = b + 1) fcnt[b] <= {(LBW+1){1'b0}};
        end else if (start) begin
            act <= 1'b1; fin <= 1'b0; failq <= 1'b0;
            oblk <= 17'd0; iblk <= 17'd0; ils <= 17'd0; desc <= 1'b0;
            sky <= 16'd0; skx <= 16'd0; wiz <= 8'd0; ublk <= 17'd0;
            psy <= 2'd0; psx <= 2'd0; pky <= 4'd0; pkx <= 4'd0; cm <= 4'd0;
            pad_kind <= 2'd0; pad_left <= 4'd0; pad_then_end <= 1'b0; ig <= 4'd0;
            half <= 1'b0; new_grp <= 1'b1; new_d <= 1'b1; g_sent <= 1'b0;
            bq_cnt <= 2'd0; bq_rp <= 1'b0; bq_wp <= 1'b0; bq_valid <= 1'b0;
            for (b = 0; b < NWD; b = b + 1) fcnt[b] <= {(LBW+1){1'b0}};
        end else begin
            bq_cnt <= bq_cnt + {1'b0, bq_push} - {1'b0, load};
            if (load) begin
                bq_rp <= ~bq_rp;
                bq_valid <= 1'b1;
            end else if (bq_pop) begin
                bq_valid <= 1'b0;
            end
            if (gq_valid && gq_ready) g_sent <= 1'b1;
            if (filling && |stuck) failq <= 1'b1;
            // decoder fill counts
            if (bq_push || filling)
                for (b = 0; b < NWD; b = b + 1)
                    if (bq_push) fcnt[b] <= {(LBW+1){1'b0}};
                    else fcnt[b] <= fcnt[b] + (LBW+1)'(dec_n[b*4 +: 4]);
            if (bq_push) begin
                bq_wp <= ~bq_wp;
                new_grp <= 1'b0;
                new_d <= 1'b0;
                g_sent <= 1'b0;
                // ---------------- advance to the next brick
                if (!last_ig) begin
                    ig <= ig + 4'd1;
                end else begin
                    ig <= 4'd0;
                    if (is_pad && !(pad_left == 4'd1 && pad_then_end)) begin
                        // padding run continues, or a depthwise padding run ends: next tap
                        if (pad_left != 4'd1) pad_left <= pad_left - 4'd1;
                        else pad_kind <= 2'd0;
                    end else if (!is_pad && !slot_last) begin
                        // a tap: count it, then padding or the next tap
                        cm <= cm1;
                        if (dw && cm1 == 4'd0 && dw_pad_k != 3'd0) begin
                            pad_kind <= 2'd1;
                            pad_left <= {1'b0, dw_pad_k};
                            pad_then_end <= !more_taps;
                        end else if (!more_taps) begin
                            pad_kind <= 2'd2;
                            pad_left <= rem + (dw ? {1'b0, dw_pad_k} : 4'd0);
                            pad_then_end <= 1'b1;
                        end
                        if (more_taps) begin
                            if (nx_kx) pkx <= pkx + 4'd1;
                            else begin
                                pkx <= 4'd0;
                                if (nx_ky) pky <= pky + 4'd1;
                                else begin
                                    pky <= 4'd0;
                                    if (nx_px) psx <= psx + 2'd1;
                                    else begin
                                        psx <= 2'd0;
                                        psy <= psy + 2'd1;
                                    end
                                end
                            end
                        end
                    end else begin
                        // ---------------- the call ends: next call
                        psy <= 2'd0; psx <= 2'd0; pky <= 4'd0; pkx <= 4'd0; cm <= 4'd0;
                        pad_kind <= 2'd0; pad_then_end <= 1'b0;
                        if (!last_ublk) begin
                            ublk <= ublk + {8'd0, wblk_o};
                            if (dw) begin new_grp <= 1'b1; half <= ~half; end
                        end else begin
                            ublk <= 17'd0;
                            new_grp <= 1'b1;
                            half <= ~half;
                            if (!last_wiz) begin
                                wiz <= wiz + wblk_i;
                            end else begin
                                wiz <= 8'd0;
                                if (!last_suby) begin
                                    sky <= sky + {12'd0, dh};
                                end else begin
                                    sky <= 16'd0;
                                    if (!last_subx) begin
                                        skx <= skx + {12'd0, dwd};
                                    end else begin
                                        skx <= 16'd0;
                                        if (!last_iblk) begin
                                            iblk <= iblk_n[16:0];
                                        end else begin
                                            // OFM block done: zig-zag back from this IFM block
                                            ils <= iblk;
                                            desc <= ~desc;
                                            new_d <= 1'b1;
                                            if (!last_oblk) oblk <= oblk + {6'd0, blkd};
                                            else fin <= 1'b1;
                                        end
                                    end
                                end
                            end
                        end
                    end
                end
            end
        end
    end


    wire unused_ok = ^{ils, ty_w[5:3], tx_w[5:3], i_sz, pk};
endmodule

`default_nettype wire
