// npu_conv_out.v -- output stage of NPU_OP_CONV / NPU_OP_DEPTHWISE in the Ethos-U85
// stand-in: write_accumulator (bias, rescale, activation) and write_ofm (TRM 3.6.5-3.6.7)
// for one OFM block of one spatial block, one 16-byte chunk a cycle: CH = 16 / es channels
// of es = 1, 2 or 4 bytes (OFM b8, b16, b32).
//
// On d_req (npu_conv_mac.v: the block's accumulators are complete) the stage walks the
// output pixels of the spatial block S that lie in the OFM (rows oy0.., columns ox0..) and,
// for each, the CH-channel-aligned chunks of the block's channels [oblk, oblk+len) below
// the OFM depth: the accumulators come from the AB (word ublk*NG + group, unit
// pixel_lane*wblk_o + channel_lane; up to 4 words a chunk), the per-channel bias, scale and
// shift from the scale/bias RAM (channel - oblk), then 16 npu_conv_rescale lanes (CH used),
// and the values truncated to es bytes go out as one 16-byte beat (NHCWB16, or NHWC when
// aligned) or two (an NHWC chunk across a 16-byte boundary) on wr_ofm with WSTRB on the
// chunk's bytes:
//   NHWC     BASE0 + oy*STRIDE_Y + ox*STRIDE_X + c*es
//   NHCWB16  BASE0 + oy*STRIDE_Y + (c/16)*STRIDE_C + (16*ox + c%16)*es
// after write_ofm's reverse and transpose (npu_ofm_addr.v, shared with the kernel unit).
// Bursts: the beats wait in a write queue of WQN entries; a run of queued beats at
// consecutive 16-byte addresses (a contiguous NHWC row, OFM_STRIDE_X = depth * es, or an
// NHCWB16 brick's x slices) goes as one INCR burst of up to 16 beats inside one max_beats
// window (npu_axi_room.vh), each beat with its own WSTRB. The run at the queue's head is
// issued once it cannot grow: 16 beats or the window full, a queued beat that does not
// follow, or the stage idle (no block in the walk: nothing more comes until the next d_req).
// Reverse W/H and transposes give runs of one beat where their addresses do not follow.
// When the OFM's channels are not ascending-contiguous in memory (a transpose that moves the
// channel axis, reverse C: `elem`) the chunk goes one lane a cycle (the `serial` mode) and
// every element is its own beat (a burst of its own unless the next element's line follows).
// Every lane goes through npu_act.v (activation(): zero point, clamps, LUT function;
// write_ofm's truncation), the kernel unit's implementation. LUT functions and a chained OFM
// take the chunk one lane a cycle (the `serial` mode): the LUT RAM has one read port (the
// line of lane li's entry; npu_dma.v, shared with the kernel unit, which is idle), and a
// chaining FIFO one write port (npu_kernel.v's, written at the element's index in
// (y, x, c) order, cf_idx = (oy*ofm_w + ox)*ofm_d + c: the TLM pushes the whole OFM in
// that order, the spatial and depth blocks here come in another; the CONV is the first
// operation of its chain, so the FIFO was empty). A chained OFM is not written to memory.
// OFM storage none: computed (COND_STATUS), not written. `dead`: no further write goes out
// (a read of the operation failed, or it ended early). COND_STATUS.result_flag is bit 0 of
// OFM element (ofm_h-1, ofm_w-1, ofm_d-1), the last in (y, x, c) order as in the TLM.
`default_nettype none

module npu_conv_out #(
    parameter integer MACS = 256,
    parameter integer ABW = 256,
    parameter integer SBN = 2048,            // scale/bias records (OFM channels)
    parameter integer NU = MACS / 8,
    parameter integer ABA = $clog2(ABW),
    parameter integer SBA = $clog2(SBN)
) (
    input  wire            CLK,
    input  wire            rst_n,
    input  wire            clear,
    input  wire            dead,
    // operation parameters
    input  wire [16:0]     od,
    input  wire [15:0]     oh_m1,
    input  wire [15:0]     ow_m1,
    input  wire [3:0]      lwo,
    input  wire [2:0]      mb_h,
    input  wire [2:0]      mb_w,
    input  wire [7:0]      ngx,
    input  wire [7:0]      ngy,
    input  wire            i48,
    input  wire            per_ch,
    input  wire [30:0]     g_scale,
    input  wire [5:0]      g_shift,
    input  wire [2:0]      rnd,
    input  wire [4:0]      dbl,
    input  wire [16:0]     o_zp,
    input  wire            clip,
    input  wire [16:0]     amin,
    input  wire [16:0]     amax,
    input  wire [39:0]     obase,            // BASEP[OFM_REGION] + OFM_BASE0
    input  wire [39:0]     o_sy,
    input  wire [39:0]     o_sx,
    input  wire [39:0]     o_sc,
    input  wire            o_nhcwb16,
    input  wire [1:0]      o_rev,            // activation_reverse
    input  wire [2:0]      o_tr,             // activation_transpose
    input  wire [10:0]     blk_h,            // OFM_BLK_HEIGHT/WIDTH/DEPTH (check_ofm_write)
    input  wire [10:0]     blk_w,
    input  wire [10:0]     blk_d,
    input  wire [2:0]      mb,               // ACC_FORMAT.microblock
    output wire            ofm_ok,           // check_ofm_write (npu_ofm_addr.v)
    output wire [15:0]     o_ymax,           // the OFM's largest memory y and x
    output wire [15:0]     o_xmax,
    input  wire            o_none,           // storage none
    input  wire [1:0]      o_lsz,            // log2(es): OFM precision b8, b16, b32
    input  wire [1:0]      o_mb,             // effective max_beats code of the OFM's port
    input  wire            o_sgn,            // OFM activation_type signed
    input  wire            o_chain,          // OFM storage chained (into FIFO cf_fifo)
    input  wire [4:0]      act_fn,           // ACTIVATION.activation_function
    input  wire [2:0]      table_i,          // ACTIVATION.table
    output wire            tab_ok,           // its table asserts (npu_act.v)
    // LUT RAM read port (npu_dma.v): 16-byte line, combinational
    output wire [6:0]      lut_raddr,
    input  wire [127:0]    lut_rdata,
    // chaining FIFO write port (npu_kernel.v): value cf_data at element index cf_idx
    output wire            cf_we,
    output wire [15:0]     cf_idx,
    output wire [31:0]     cf_data,
    // spatial block
    input  wire [15:0]     oy0,
    input  wire [15:0]     ox0,
    input  wire [7:0]      s_h,
    input  wire [7:0]      s_w,
    // OFM block from the MAC array
    input  wire            d_req,
    input  wire [16:0]     d_oblk,
    input  wire [10:0]     d_len,
    output wire            d_ack,
    output wire            busy,
    output wire            ab_busy,          // reading the AB (the write queue may still hold beats)
    // scale/bias RAM write port: {bias[47:0], scale[30:0], shift[5:0]} of OFM channel sb_waddr
    input  wire            sb_we,
    input  wire [SBA-1:0]  sb_waddr,
    input  wire [84:0]     sb_wdata,
    // accumulator buffer (registered reads: the data of ab_raddr come the next cycle when
    // ab_ren is 1, and stay)
    output logic [4*ABA-1:0] ab_raddr,
    output wire            ab_ren,
    input  wire [4*NU*48-1:0] ab_rdata,
    input  wire [3:0]      ab_rvalid,
    // OFM writes (wr_ofm), INCR bursts of wq_len + 1 beats
    output wire            wq_valid,
    output wire [39:0]     wq_addr,
    output wire [7:0]      wq_len,
    input  wire            wq_ready,
    output wire            wd_valid,
    output wire [127:0]    wd_data,
    output wire [15:0]     wd_strb,
    output wire            wd_last,
    input  wire            wd_ready,
    output logic           flag,
    output wire            flag_set          // the flag's element was computed
);
`include "gen/npu_isa.vh"
`include "npu_axi_room.vh"
    // ================================================================ scale/bias RAM
    logic [84:0] sb [0:SBN-1];
    always_ff @(posedge CLK) begin
        if (sb_we) sb[sb_waddr] <= sb_wdata;
    end

    // ================================================================ walk
    logic        act;
    logic [16:0] oblk, cend;                 // channels [oblk, cend)
    logic [7:0]  r, c;                       // pixel of S
    logic [14:0] k;                          // chunk: channels [k*CH, k*CH + CH)
    wire  [2:0]  lch = 3'd4 - {1'b0, o_lsz}; // log2(CH)
    wire  [16:0] dend = d_oblk + {6'd0, d_len};
    wire  [14:0] k0 = 15'(oblk >> lch);
    wire  [14:0] k1 = 15'((cend - 17'd1) >> lch);
    wire  [15:0] oy = oy0 + {8'd0, r};
    wire  [15:0] ox = ox0 + {8'd0, c};
    wire         pix_in = (oy <= oh_m1) && (ox <= ow_m1);
    wire         last_c = (c + 8'd1 >= s_w);
    wire         last_r = (r + 8'd1 >= s_h);
    wire         last_k = (k >= k1) || !pix_in;
    // chunk lanes j: channel k*CH + j in [c_lo, c_hi)
    wire  [16:0] cb = 17'({2'd0, k} << lch);
    wire  [16:0] cbe = cb + (17'd1 << lch);
    wire  [16:0] c_lo = (oblk > cb) ? oblk : cb;
    wire  [16:0] c_hi = (cend < cbe) ? cend : cbe;
    wire  [15:0] lmask;
    genvar gj;
    generate
        for (gj = 0; gj < 16; gj = gj + 1) begin : g_m
            assign lmask[gj] = (cb + 17'(gj) >= c_lo) && (cb + 17'(gj) < c_hi);
        end
    endgenerate
    // the pixel's group and lane
    wire  [7:0]  gy = 8'(r / {5'd0, mb_h});
    wire  [7:0]  gx = 8'(c / {5'd0, mb_w});
    wire  [2:0]  lr = 3'(r % {5'd0, mb_h});
    wire  [2:0]  lc = 3'(c % {5'd0, mb_w});
    wire  [15:0] g = {8'd0, gy} * {8'd0, ngx} + {8'd0, gx};
    wire  [4:0]  pl = 5'({2'd0, lr} * mb_w + {2'd0, lc});
    wire  [16:0] rel0 = c_lo - oblk;
    wire  [8:0]  u0 = 9'(rel0 >> lwo);
    wire  [15:0] ng = {8'd0, ngx} * {8'd0, ngy};
    integer q;
    always @(*) begin
        for (q = 0; q < 4; q = q + 1)
            ab_raddr[q*ABA +: ABA] = ABA'(({7'd0, u0} + 16'(q)) * ng + g);
    end

    // ---- stage 1: the chunk's accumulators and records
    logic        s1;
    logic [84:0] rec1 [0:15];
    logic [15:0] m1;
    wire  [39:0] a1;                         // address of lane 0, of lane li in elem mode
    logic [15:0] oy1, ox1;                   // the chunk's pixel (stage 1)
    logic        f1;                         // the chunk holds the flag element
    logic [3:0]  fl1;                        // its lane
    wire         f_pix = (oy == oh_m1) && (ox == ow_m1);
    wire  [16:0] od_m1 = od - 17'd1;
    wire         f_chk = f_pix && (od_m1 >= c_lo) && (od_m1 < c_hi);
    logic [16:0] cb1;                        // the chunk's channel base (stage 1)
    wire         elem;
    logic [3:0]  li;                         // serial mode: the lane of this cycle
    npu_ofm_addr #(.MACS(MACS)) u_addr (
        .rev(o_rev), .tr(o_tr), .nhcwb16(o_nhcwb16), .lsz(o_lsz), .base(obase), .sy(o_sy),
        .sx(o_sx), .sc(o_sc), .oh_m1(oh_m1), .ow_m1(ow_m1), .od_m1(od_m1[15:0]), .y(oy1), .x(ox1),
        .c(cb1[15:0] + (elem ? {12'd0, li} : 16'd0)), .perms_all(1'b1), .blk_h(blk_h),
        .blk_w(blk_w), .blk_d(blk_d), .mb(mb), .addr(a1), .elem(elem), .ymax(o_ymax),
        .xmax(o_xmax), .ok(ofm_ok));
    logic [4:0]  pl1;
    logic [8:0]  u01;
    logic [47:0] accs [0:15];
    logic [16:0] rl;
    logic [8:0]  uw;
    logic [10:0] unit;
    integer j;
    always @(*) begin
        rl = 17'd0; uw = 9'd0; unit = 11'd0;
        for (j = 0; j < 16; j = j + 1) begin
            rl = cb1 + 17'(j) - oblk;
            uw = 9'(rl >> lwo) - u01;
            unit = 11'(({6'd0, pl1} << lwo) | {1'b0, 10'(rl & ((17'd1 << lwo) - 17'd1))});
            accs[j] = ab_rvalid[uw[1:0]] ? ab_rdata[uw[1:0]*NU*48 + unit*48 +: 48] : 48'd0;
        end
    end

    // ---- stage 2: rescale, activation, truncation; into the write queue
    wire  [31:0] qt [0:15];                  // lane values after npu_act (truncated)
    logic [31:0] tl [0:15];                  // serial mode: the lanes' values as computed
    wire  [31:0] t [0:15];                   // the chunk's values
    wire  [10:0] lb [0:15];
    wire  [15:0] tab_l;
    logic        ser_rdy;                    // serial mode: every lane of the chunk done
    wire         lut_on = (act_fn != NPU_E_ACTIVATION_FUNCTION_LUT_NONE[4:0]);
    wire         serial = lut_on || o_chain || elem;
    genvar gl;
    generate
        for (gl = 0; gl < 16; gl = gl + 1) begin : g_lane
            wire [84:0] rc = rec1[gl];
            wire [31:0] rr;
            wire [31:0] unused_q;
            npu_conv_rescale u_rs (
                .acc(accs[gl]), .i48(i48), .per_ch(per_ch), .bias(rc[84:37]),
                .scale(per_ch ? rc[36:6] : g_scale), .shift(per_ch ? rc[5:0] : g_shift),
                .rnd(rnd), .dbl(dbl), .r(rr));
            npu_act u_act (
                .r(rr), .o_zp(o_zp), .clip(clip), .o_min(amin), .o_max(amax), .act_fn(act_fn),
                .table_i(table_i), .o_prec(o_lsz), .o_sgn(o_sgn), .lut_byte(lb[gl]),
                .lut_line(lut_rdata), .q(unused_q), .q_t(qt[gl]), .tab_ok(tab_l[gl]));
            assign t[gl] = lut_on ? tl[gl] : qt[gl];
        end
    endgenerate
    assign tab_ok = tab_l[0];
    wire [3:0]  li_last = 4'((5'd16 >> o_lsz) - 5'd1);
    wire        room1;                       // the write queue has room for an element
    wire        ser_step = s1 && serial && !ser_rdy && (!elem || room1);
    // (0 without a LUT function: the lanes ignore the line then, and a constant address keeps
    // the shared LUT read port quiet in simulation)
    assign lut_raddr = lut_on ? lb[li][10:4] : 7'd0;
    logic [15:0] i1;                         // element index of the chunk's lane 0
    assign cf_we = ser_step && o_chain && m1[li] && !dead;
    assign cf_idx = i1 + {12'd0, li};
    assign cf_data = qt[li];
    // write_ofm's truncation: lane j's low es bytes at bytes j*es; WSTRB on the lanes in m1
    logic [127:0] bytes;
    logic [15:0]  bm;
    integer b;
    always @(*) begin
        for (b = 0; b < 16; b = b + 1) begin
            case (o_lsz)
                2'd0: begin bytes[b*8 +: 8] = t[b][7:0]; bm[b] = m1[b]; end
                2'd1: begin bytes[b*8 +: 8] = t[b >> 1][(b & 1)*8 +: 8]; bm[b] = m1[b >> 1]; end
                default: begin bytes[b*8 +: 8] = t[b >> 2][(b & 3)*8 +: 8]; bm[b] = m1[b >> 2]; end
            endcase
        end
    end
`ifdef PLANT_CONV_BUG
    // test-only (tests/test_rtl_plant.py): the OFM's last element is written with bit 0
    // flipped; the regression must catch it
    wire [127:0] bytes_w = f1 ? bytes ^ ({120'd0, 8'h01} << {fl1 << o_lsz, 3'b000}) : bytes;
`else
    wire [127:0] bytes_w = bytes;
`endif
    wire [255:0] win  = {128'd0, bytes_w} << {a1[3:0], 3'b000};
    wire [31:0]  wm   = {16'd0, bm} << a1[3:0];
    wire         two  = (wm[31:16] != 16'd0);
    wire         one  = (wm[15:0] != 16'd0);
    // elem mode: lane li's element alone (element-aligned: within one 16-byte beat)
    wire [31:0]  e_v  = (o_lsz == 2'd0) ? {24'd0, qt[li][7:0]} : (o_lsz == 2'd1) ? {16'd0, qt[li][15:0]} : qt[li];
    wire [127:0] e_d  = {96'd0, e_v} << {a1[3:0], 3'b000};
    wire [15:0]  e_m  = ((16'd1 << (5'd1 << o_lsz)) - 16'd1) << a1[3:0];

    // ---- write queue: {addr, data, strb, follows the entry before, last of its burst}
    // WQN >= 18: a full queue always holds a run that cannot grow (16 beats or a break), so
    // the head is issued without the stage idling
    localparam integer WQN = 32;
    localparam integer QA = $clog2(WQN);
    logic [39:0]  qa [0:WQN-1];
    logic [127:0] qd [0:WQN-1];
    logic [15:0]  qs [0:WQN-1];
    logic [WQN-1:0] qf, ql;
    logic [QA:0]  q_wp, q_ap, q_dp;          // write, AW, W pointers (mod 2*WQN)
    logic [35:0]  q_last;                    // 16-byte line of the last entry written
    wire  [QA:0]  q_cnt = q_wp - q_dp;       // entries not yet W-sent
    wire          room2 = (q_cnt <= (QA+1)'(WQN - 2));
    assign        room1 = (q_cnt <= (QA+1)'(WQN - 1));
    wire          push = s1 && room2 && (!serial || ser_rdy);   // stage 1 moves on
    wire          wr_en = push && !o_none && !o_chain && !dead && !elem;
    wire          e_en = ser_step && elem && m1[li] && !o_none && !o_chain && !dead;
    wire [1:0]    npush = wr_en ? ({1'b0, one} + {1'b0, two}) : {1'b0, e_en};
    wire          adv = act && (!s1 || push);
    wire [QA-1:0] q_w0 = q_wp[QA-1:0];                       // the entries pushed
    wire [QA-1:0] q_w1 = q_w0 + QA'(one);
    // the run at the head q_ap: rk beats of consecutive lines (1..16, the entries queued)
    wire [QA:0]   q_av = q_wp - q_ap;        // entries not yet AW-sent
    wire [QA-1:0] q_h = q_ap[QA-1:0];
    wire [8:0]    rm = room(o_mb, qa[q_h][7:0]);
    wire [4:0]    rmax = (rm[8:4] > 5'd16) ? 5'd16 : rm[8:4];   // beats to the window's end
    logic [4:0]   rk;
    always @(*) begin : run
        integer i;
        logic go;
        rk = 5'd1;
        go = 1'b1;
        for (i = 1; i < 16; i = i + 1) begin
            go = go && ((QA+1)'(i) < q_av) && qf[QA'(q_h + QA'(i))];
            if (go) rk = 5'(i + 1);
        end
    end
    wire  [4:0]   rn = (rk > rmax) ? rmax : rk;
    wire          q_idle = !act && !s1;      // nothing more comes before the next d_req
    wire          q_close = (rk >= rmax) || ((QA+1)'(rk) < q_av) || q_idle;
    // once dead, queued bursts whose AW has not gone out are dropped (an AW's beats are sent)
    assign wq_valid = (q_av != '0) && q_close && !dead;
    assign wq_addr  = qa[q_h];
    assign wq_len   = {3'd0, rn - 5'd1};
    wire          aw_take = wq_valid && wq_ready;
    wire [QA-1:0] q_d = q_dp[QA-1:0];
    assign wd_valid = (q_dp != q_ap);
    assign wd_data  = qd[q_d];
    assign wd_strb  = qs[q_d];
    assign wd_last  = ql[q_d];
    assign d_ack = d_req && !act && !s1;
    assign ab_ren = adv;
    assign busy = act || s1 || (q_cnt != '0);
    assign ab_busy = act || s1;
    assign flag_set = push && f1;

    integer e;
    always_ff @(posedge CLK) begin
        if (adv) begin
            for (e = 0; e < 16; e = e + 1) rec1[e] <= sb[SBA'(cb + 17'(e))];
            cb1 <= cb;
            pl1 <= pl;
            u01 <= u0;
            m1 <= lmask & {16{pix_in}};
            oy1 <= oy;
            ox1 <= ox;
            f1 <= f_chk && pix_in;
            i1 <= 16'((({16'd0, oy} * ({16'd0, ow_m1} + 32'd1)) + {16'd0, ox}) * {15'd0, od} + {15'd0, cb});
            fl1 <= 4'(od_m1 - cb);
        end
        if (ser_step) tl[li] <= qt[li];
        if (e_en) begin
            qa[q_w0] <= {a1[39:4], 4'd0};
            qd[q_w0] <= e_d;
            qs[q_w0] <= e_m;
            qf[q_w0] <= (a1[39:4] == q_last + 36'd1);
            ql[q_w0] <= 1'b0;
        end
        if (wr_en && one) begin
            qa[q_w0] <= {a1[39:4], 4'd0};
            qd[q_w0] <= win[127:0];
            qs[q_w0] <= wm[15:0];
            qf[q_w0] <= (a1[39:4] == q_last + 36'd1);
            ql[q_w0] <= 1'b0;
        end
        if (wr_en && two) begin
            qa[q_w1] <= {a1[39:4] + 36'd1, 4'd0};
            qd[q_w1] <= win[255:128];
            qs[q_w1] <= wm[31:16];
            qf[q_w1] <= one || (a1[39:4] + 36'd1 == q_last + 36'd1);
            ql[q_w1] <= 1'b0;
        end
        if (e_en || (wr_en && one && !two)) q_last <= a1[39:4];
        else if (wr_en && two) q_last <= a1[39:4] + 36'd1;
        if (aw_take) ql[QA'(q_h + QA'(rn - 5'd1))] <= 1'b1;   // an entry already queued
    end

    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) begin
            act <= 1'b0; oblk <= 17'd0; cend <= 17'd0; r <= 8'd0; c <= 8'd0; k <= 15'd0; s1 <= 1'b0;
            q_wp <= '0; q_ap <= '0; q_dp <= '0; flag <= 1'b0; li <= 4'd0; ser_rdy <= 1'b0;
        end else begin
            if (clear) begin
                act <= 1'b0;
                s1 <= 1'b0;
                li <= 4'd0;
                ser_rdy <= 1'b0;
            end else begin
                if (push) begin
                    li <= 4'd0;
                    ser_rdy <= 1'b0;
                end else if (ser_step) begin
                    if (li == li_last) ser_rdy <= 1'b1;
                    else li <= li + 4'd1;
                end
                if (d_ack) begin
                    act <= 1'b1;
                    oblk <= d_oblk;
                    cend <= (dend < od) ? dend : od;
                    r <= 8'd0; c <= 8'd0; k <= 15'(d_oblk >> lch);
                end else if (adv) begin
                    s1 <= 1'b1;
                    if (!last_k) begin
                        k <= k + 15'd1;
                    end else begin
                        k <= k0;
                        if (!last_c) c <= c + 8'd1;
                        else begin
                            c <= 8'd0;
                            if (!last_r) r <= r + 8'd1;
                            else act <= 1'b0;
                        end
                    end
                end else if (push) begin
                    s1 <= 1'b0;
                end
                if (push && f1) flag <= t[fl1][0];
            end
            // queue pointers
            if (dead) q_wp <= q_ap;
            else q_wp <= q_wp + (QA+1)'(npush);
            if (aw_take) q_ap <= q_ap + (QA+1)'(rn);
            if (wd_valid && wd_ready) q_dp <= q_dp + 1'b1;
        end
    end

    wire unused_ok = ^{g[15:8], uw[8:2], tab_l[15:1], rm[3:0]};
endmodule

`default_nettype wire
