// npu_conv_ifm.v -- IFM patch loader and IFM buffer of NPU_OP_CONV / NPU_OP_DEPTHWISE in the
// Ethos-U85 stand-in (TRM 3.6.5 read_ifm, element_address_in_region; 8-bit and 16-bit IFMs).
//
// For each group record of the walker (npu_conv_walk.v) the loader fills one half of the
// IFM buffer (IB) with the patch the MAC array needs for the spatial block S
// (rows oy0.., SH x SW output pixels): input rows iy0 + py, py < PH, columns ix0 + px,
// px < PW, with
//   iy0 = oy0*stride_y - pad_top + subk_y*dilation_y,  PH = (SH-1)*stride_y + (sh-1)*dilation_y + 1
// (likewise x), channels c0 .. c0+cn-1 of the record (cn <= 16*cg). Position (py, px) is
// IB word pos*cg + w, w < cg, pos = py*PW + px; lane l of word w is channel c0 + 16w + l,
// stored zero point subtracted (read_ifm) as a 16-bit value. A position outside the derived
// IFM (padding) is not read: its valid bit (pv) is 0 and the MAC array reads 0 there.
//
// Elements of es = 1 or 2 bytes (es16: signed b16, zero point 0 by the TRM's assert).
// Reads (channel rd_ifm): NHWC: the position's cn*es bytes from BASE0 + iy*STRIDE_Y +
// ix*STRIDE_X + c0*es as INCR bursts, each inside one max_beats window (npu_axi_room.vh);
// where a patch row is contiguous (NHWC: the position's bytes gby = cn*es a power of two
// >= 16, IFM_STRIDE_X = gby, the position 16-byte aligned; NHCWB16: the position reads the
// whole 16*es-byte x slice of one brick) one burst reads a run of up to 16 beats: the next k
// positions of the row that are inside the IFM and the window, the following k - 1
// positions then walked without a read (one position a cycle either way);
// NHCWB16: one single-beat burst per 16 bytes of a 16-channel brick (8 channels of a b16
// one), BASE0 + iy*STRIDE_Y + (c/16)*STRIDE_C + 16*es*ix. Only tile 0 is addressed
// (npu_conv.v refuses the rest). A token per burst (up to TOKN on the bus) tells the receive
// side where its beats go: a beat whose byte 0 is byte jb of channel c0's data holds
// channels c0 + jb/es + m, m < 16/es, and lane (jb/es + m) mod 16 of word (jb/es + m) / 16
// (beat n of a run token: position n >> lg(gby/16) of the run, jb = 16 * (n mod gby/16))
// takes element m when 0 <= jb/es + m < cn: at most one word per lane, so every lane of the
// IB is a one-write-port memory.
// loaded[h]: half h holds its whole patch (every beat back); the MAC array releases it
// (rel[h]) after the group's last brick. err: a read of this operation had an error response.
`default_nettype none

module npu_conv_ifm #(
    parameter integer IBH = 1024,            // IB words (16 channels) per half
    parameter integer RP = 16,               // IB read ports
    parameter integer GR = 67                // group record width (npu_conv_walk.v)
) (
    input  wire            CLK,
    input  wire            rst_n,
    input  wire            clear,            // operation start: empty both halves
    input  wire            halt,             // no new bursts
    input  wire            pause,
    // operation parameters
    input  wire [39:0]     base,             // BASEP[IFM_REGION] + IFM_BASE0
    input  wire [39:0]     sy_b,             // IFM_STRIDE_Y
    input  wire [39:0]     sx_b,             // IFM_STRIDE_X
    input  wire [39:0]     sc_b,             // IFM_STRIDE_C
    input  wire            nhcwb16,
    input  wire            sgn,
    input  wire            es16,             // 16-bit elements
    input  wire [15:0]     zp,
    input  wire [16:0]     ifm_h,            // derived IFM size
    input  wire [16:0]     ifm_w,
    input  wire [1:0]      dil_y,            // 1 or 2
    input  wire [1:0]      dil_x,
    input  wire [1:0]      sty,              // 1..3
    input  wire [1:0]      stx,
    input  wire [6:0]      pad_t,
    input  wire [6:0]      pad_l,
    input  wire [1:0]      lcg,              // log2(IB words per position)
    input  wire [1:0]      sram_mb,
    input  wire [1:0]      ext_mb,
    input  wire            ext,              // IFM region on the EXT port group
    // spatial block
    input  wire [15:0]     oy0,
    input  wire [15:0]     ox0,
    input  wire [7:0]      s_h,              // SH, SW (pixels)
    input  wire [7:0]      s_w,
    // group records
    input  wire            gq_valid,
    input  wire [GR-1:0]   gq_rec,
    output wire            gq_ready,
    output wire [7:0]      pw_out,           // PW of the group being read (to the MAC array)
    // reads
    output wire            rq_valid,
    output wire [39:0]     rq_addr,
    output wire [7:0]      rq_len,
    input  wire            rq_ready,
    input  wire            rb_valid,
    input  wire [127:0]    rb_data,
    input  wire [1:0]      rb_resp,
    // IB read ports (word address with the half as its MSB), registered: the data of an
    // address come the next cycle, with the valid bit of its position
    input  wire [RP*AW-1:0] rd_addr,
    input  wire            rd_en,
    output logic [RP*256-1:0] rd_data,
    output logic [RP-1:0]  pv_data,
    output wire [1:0]      loaded,
    input  wire [1:0]      rel,
    output wire [15:0]     pw_h0,            // PW of each half's patch
    output wire [15:0]     pw_h1,
    output wire            busy,             // bursts to issue or beats outstanding
    output logic           err
);
`include "npu_axi_room.vh"
    localparam integer AW = $clog2(2 * IBH);
    localparam integer TOKN = 32;

    // ================================================================ group issue
    logic        gact;                       // a group is being issued
    logic        ghalf;
    logic [15:0] gph, gpw;                   // patch size
    logic [15:0] py, px;
    logic [AW-2:0] pos;                      // py*PW + px
    logic [16:0] gc0;
    logic [8:0]  gcn;
    logic signed [17:0] iy, ix;
    logic [39:0] ra, ca, ca0;                // row / column address terms (ca0: column 0)
    logic [39:0] cterm;                      // NHWC: c0; NHCWB16: (c0/16)*STRIDE_C
    logic [8:0]  seg;                        // bytes of the position already requested (NHWC)
    logic [4:0]  brick;                      // NHCWB16: bricks of the position requested
    logic [4:0]  cov;                        // positions still covered by the issued run
    logic [1:0]  loaded_q, issued;           // half h: patch complete / all bursts issued
    logic [15:0] pwh [0:1];
    logic [5:0]  tcnt [0:1];                 // tokens of half h not yet completed

    wire [15:0] r_sky = gq_rec[GR-1 -: 16];
    wire [15:0] r_skx = gq_rec[GR-17 -: 16];
    wire [3:0]  r_sh  = gq_rec[GR-33 -: 4];
    wire [3:0]  r_sw  = gq_rec[GR-37 -: 4];
    wire [16:0] r_c0  = gq_rec[GR-41 -: 17];
    wire [8:0]  r_cn  = gq_rec[GR-58 -: 9];
    wire        r_half = gq_rec[0];
    // patch geometry of the record
    wire [15:0] r_ph = {8'd0, s_h - 8'd1} * {14'd0, sty} + {12'd0, r_sh - 4'd1} * {14'd0, dil_y} + 16'd1;
    wire [15:0] r_pw = {8'd0, s_w - 8'd1} * {14'd0, stx} + {12'd0, r_sw - 4'd1} * {14'd0, dil_x} + 16'd1;
    wire signed [17:0] r_iy0 = $signed({2'b00, 16'(oy0 * sty)}) - $signed({11'd0, pad_t})
                             + $signed({2'b00, 16'(r_sky * dil_y)});
    wire signed [17:0] r_ix0 = $signed({2'b00, 16'(ox0 * stx)}) - $signed({11'd0, pad_l})
                             + $signed({2'b00, 16'(r_skx * dil_x)});
    wire        half_free = !loaded_q[r_half] && !(gact && ghalf == r_half) && (tcnt[r_half] == 6'd0);
    assign gq_ready = !gact && half_free && !halt;
    wire        g_take = gq_valid && gq_ready;
    assign pw_out = gpw[7:0];

    // ---- the current position
    wire        inb = (iy >= 18'sd0) && (iy < $signed({1'b0, ifm_h})) && (ix >= 18'sd0) && (ix < $signed({1'b0, ifm_w}));
    wire [39:0] paddr = ra + ca + cterm + {31'd0, seg};
    // NHCWB16 beats: 16-byte parts c0/16 .. (c0+cn-1)/16 of bricks (b16: c0/8 .. (c0+cn-1)/8)
    wire [9:0]  nbsum = {6'd0, gc0[3:0]} + {1'b0, gcn} - 10'd1;
    wire [4:0]  b0 = es16 ? {4'd0, gc0[3]} : 5'd0;             // first part
    wire [5:0]  lastp = es16 ? nbsum[8:3] : {1'b0, nbsum[8:4]};   // last part
    wire [4:0]  nbrick = lastp[4:0] + 5'd1 - b0;
    wire [4:0]  bpart = brick + b0;
    wire [39:0] haddr = ra + ca + cterm + (sc_b * {35'd0, es16 ? bpart >> 1 : bpart})
                      + ((es16 && bpart[0]) ? 40'd16 : 40'd0);
    // NHWC: the next burst of the position: min(bytes left, window room), <= 16 beats
    wire [8:0]  gby = es16 ? {gcn[7:0], 1'b0} : gcn;            // the position's bytes
    wire [8:0]  nleft = gby - seg;
    wire [8:0]  rm = room(ext ? ext_mb : sram_mb, nhcwb16 ? haddr[7:0] : paddr[7:0]);
    logic [8:0] nb;
    always @(*) begin
        nb = nleft;
        if (nb > rm) nb = rm;
        if (nb > 9'd256 - {5'd0, paddr[3:0]}) nb = 9'd256 - {5'd0, paddr[3:0]};
    end
    wire [9:0]  bsum = {6'd0, paddr[3:0]} + {1'b0, nb} + 10'd15;
    // a run (contiguous patch row): lg = log2(bytes a position), lbpp = log2(beats a position)
    logic [3:0] lgw;
    always @(*) begin
        case (gby)
            9'd16:   lgw = 4'd4;
            9'd32:   lgw = 4'd5;
            9'd64:   lgw = 4'd6;
            9'd128:  lgw = 4'd7;
            9'd256:  lgw = 4'd8;
            default: lgw = 4'd0;         // not a run
        endcase
    end
    wire [3:0]  lg = nhcwb16 ? (es16 ? 4'd5 : 4'd4) : lgw;
    wire [2:0]  lbpp = 3'(lg - 4'd4);
    wire        run_ok = nhcwb16 ? (brick == 5'd0 && (es16 ? (b0 == 5'd0 && nbrick == 5'd2) : nbrick == 5'd1)
                                    && rm >= (es16 ? 9'd32 : 9'd16))
                                 : ((lgw != 4'd0) && (sx_b == {31'd0, gby}) && (paddr[3:0] == 4'd0)
                                    && (seg == 9'd0) && (rm >= gby));
    wire [17:0] row_left = {2'd0, gpw - px};                        // positions to the patch row's end
    wire signed [17:0] in_left = $signed({1'b0, ifm_w}) - ix;      // to the IFM's right edge (> 0: inb)
    logic [4:0] rk;                                                  // positions of the run, 1..16
    always @(*) begin
        rk = 5'(rm >> lg);                                         // inside the window (<= 16 beats)
        if (5'(5'd16 >> lbpp) < rk) rk = 5'(5'd16 >> lbpp);
        if (row_left < {13'd0, rk}) rk = row_left[4:0];
        if (in_left < $signed({13'd0, rk})) rk = in_left[4:0];
    end
    wire [5:0]  rbeats = 6'({1'b0, rk} << lbpp);
    wire [5:0]  beats = run_ok ? rbeats : bsum[9:4];
    wire        tok_full;
    wire        covered = gact && (cov != 5'd0);                   // inside a run already read
    wire        need_rd = gact && inb && !covered;
    assign rq_valid = need_rd && !tok_full && !halt && !pause;
    assign rq_addr  = nhcwb16 ? haddr : paddr;
    assign rq_len   = (nhcwb16 && !run_ok) ? 8'd0 : {2'd0, beats} - 8'd1;
    wire        issue = rq_valid && rq_ready;
    // the position is done: out of bounds (one cycle), or its last burst issued
    wire        pos_last_burst = run_ok || (nhcwb16 ? (brick + 5'd1 >= nbrick) : (seg + nb >= gby));
    wire        pos_done = gact && !halt && (!inb || covered || (issue && pos_last_burst));
    wire        last_pos = (py + 16'd1 >= gph) && (px + 16'd1 >= gpw);
    // token of a burst: {half, word address of the (first) position, byte jb of its first beat,
    // beats, cn, ts}; ts = lbpp for a run (beat n: position n >> ts, beat n mod 2^ts of it),
    // 5 otherwise (every beat in the one position)
    wire [9:0]  c0b = es16 ? {5'd0, gc0[3:0], 1'b0} : {6'd0, gc0[3:0]};   // c0's byte in its brick
    wire signed [9:0] j0 = nhcwb16 ? $signed({1'b0, bpart, 4'd0}) - $signed(c0b)
                                   : $signed({1'b0, seg}) - $signed({6'd0, paddr[3:0]});
    wire [AW-2:0] wpos = pos << lcg;
    localparam integer TW = 1 + (AW - 1) + 10 + 6 + 9 + 3;
    wire signed [17:0] xb16 = es16 ? 18'sd32 : 18'sd16;          // NHCWB16: bytes per x

    // ================================================================ tokens
    logic [TW-1:0] tok [0:TOKN-1];
    logic [4:0]    t_wp, t_rp;
    logic [5:0]    t_cnt;
    assign tok_full = (t_cnt == 6'(TOKN));
    wire [TW-1:0]  th = tok[t_rp];
    wire           t_half = th[TW-1];
    wire [AW-2:0]  t_pos  = th[TW-2 -: AW-1];
    wire signed [9:0] t_j0 = th[27 -: 10];
    wire [5:0]     t_nb   = th[17 -: 6];
    wire [8:0]     t_cn   = th[11:3];
    wire [2:0]     t_ts   = th[2:0];
    logic [5:0]    t_got;                    // beats of the head token received
    wire           beat = rb_valid && (t_cnt != 6'd0);
    wire [5:0]     t_q    = t_got >> t_ts;                       // position of the run
    wire [5:0]     t_bip  = t_got & ~(6'h3f << t_ts);             // beat inside that position
    wire [AW-2:0]  t_wq   = (AW-1)'(t_q) << lcg;                 // its first IB word, from t_pos
    wire signed [9:0] jb = t_j0 + $signed({t_bip, 4'd0});      // byte of byte 0 of this beat
    wire signed [9:0] jc = es16 ? (jb >>> 1) : jb;              // its channel
    wire [3:0]     rot = jc[3:0];
    wire           t_done = beat && (t_got + 6'd1 == t_nb);

    // ================================================================ IFM buffer
    wire [16:0] zp17 = sgn ? {zp[15], zp} : {1'b0, zp};
    logic [255:0] ib [0:2*IBH-1];
    logic         pv [0:2*IBH-1];
    // lane l of the IB receives byte (l - rot) mod 16 of the beat: channel j = jb + that byte,
    // IB word j / 16 of the position, written when 0 <= j < cn
    logic [15:0]  ok;
    logic [5:0]   wl [0:15];
    logic [15:0]  vl [0:15];
    always @(*) begin : lanes
        integer l;
        logic [3:0]  src;                    // element m of the beat
        logic signed [9:0] j;
        logic [15:0] raw;
        for (l = 0; l < 16; l = l + 1) begin
            src = 4'(l) - rot;
            j = jc + $signed({6'd0, src});
            ok[l] = beat && (j >= 10'sd0) && (j < $signed({1'b0, t_cn})) && !(es16 && src[3]);
            wl[l] = j[9:4];
            raw = es16 ? rb_data[src[2:0]*16 +: 16] : {{8{sgn & rb_data[src*8 + 7]}}, rb_data[src*8 +: 8]};
            vl[l] = raw - zp17[15:0];    // 8-bit: fits 10 bits; b16: zero point 0
        end
    end
    always_ff @(posedge CLK) begin : ib_rw
        integer l, q;
        logic [RP*256-1:0] rd;
        logic [RP-1:0]     pvr;
        logic [AW-1:0]     a;
        if (|ok)
            for (l = 0; l < 16; l = l + 1)
                if (ok[l]) ib[{t_half, t_pos + t_wq + (AW-1)'(wl[l])}][l*16 +: 16] <= vl[l];
        if (pos_done) pv[{ghalf, pos}] <= inb;
        if (rd_en) begin
            for (q = 0; q < RP; q = q + 1) begin
                a = rd_addr[q*AW +: AW];
                rd[q*256 +: 256] = ib[a];
                pvr[q] = pv[{a[AW-1], (AW-1)'(a[AW-2:0] >> lcg)}];
            end
            rd_data <= rd;
            pv_data <= pvr;
        end
    end

    assign loaded = loaded_q;
    assign pw_h0 = pwh[0];
    assign pw_h1 = pwh[1];
    assign busy = gact || (t_cnt != 6'd0);

    // ================================================================ sequential
    integer h;
    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) begin
            gact <= 1'b0; ghalf <= 1'b0; gph <= 16'd0; gpw <= 16'd0; py <= 16'd0; px <= 16'd0;
            pos <= '0; gc0 <= 17'd0; gcn <= 9'd0; iy <= 18'sd0; ix <= 18'sd0;
            ra <= 40'd0; ca <= 40'd0; ca0 <= 40'd0; cterm <= 40'd0; seg <= 9'd0; brick <= 5'd0;
            cov <= 5'd0;
            loaded_q <= 2'b00; issued <= 2'b00; err <= 1'b0;
            t_wp <= 5'd0; t_rp <= 5'd0; t_cnt <= 6'd0; t_got <= 6'd0;
            for (h = 0; h < 2; h = h + 1) begin pwh[h] <= 16'd0; tcnt[h] <= 6'd0; end
        end else begin
            if (clear) begin
                loaded_q <= 2'b00;
                issued <= 2'b00;
                err <= 1'b0;
            end
            // ---- releases and completions
            if (|rel || |issued)
            for (h = 0; h < 2; h = h + 1) begin
                if (rel[h]) begin
                    loaded_q[h] <= 1'b0;
                    issued[h] <= 1'b0;
                end
                if (issued[h] && tcnt[h] == 6'd0 && !rel[h] && !clear) begin
                    loaded_q[h] <= 1'b1;
                    issued[h] <= 1'b0;
                end
            end
            if (beat && rb_resp[1]) err <= 1'b1;
            // ---- take a group
            if (g_take) begin
                gact <= 1'b1;
                ghalf <= r_half;
                gph <= r_ph; gpw <= r_pw;
                pwh[r_half] <= r_pw;
                py <= 16'd0; px <= 16'd0; pos <= '0;
                gc0 <= r_c0; gcn <= r_cn;
                iy <= r_iy0; ix <= r_ix0;
                ra <= base + 40'($signed(r_iy0) * $signed({1'b0, sy_b}));
                ca <= nhcwb16 ? 40'($signed(r_ix0) * xb16) : 40'($signed(r_ix0) * $signed({1'b0, sx_b}));
                ca0 <= nhcwb16 ? 40'($signed(r_ix0) * xb16) : 40'($signed(r_ix0) * $signed({1'b0, sx_b}));
                cterm <= nhcwb16 ? 40'(sc_b * {23'd0, r_c0 >> 4}) : (es16 ? {22'd0, r_c0, 1'b0} : {23'd0, r_c0});
                seg <= 9'd0; brick <= 5'd0; cov <= 5'd0;
            end else if (halt && gact) begin
                gact <= 1'b0;
                cov <= 5'd0;
            end else if (gact) begin
                if (covered) cov <= cov - 5'd1;
                else if (issue && run_ok) cov <= rk - 5'd1;
                if (issue && !pos_last_burst) begin
                    if (nhcwb16) brick <= brick + 5'd1;
                    else seg <= seg + nb;
                end
                if (pos_done) begin
                    seg <= 9'd0; brick <= 5'd0;
                    if (last_pos) begin
                        gact <= 1'b0;
                        issued[ghalf] <= 1'b1;
                    end else if (px + 16'd1 < gpw) begin
                        px <= px + 16'd1; ix <= ix + 18'sd1;
                        ca <= ca + (nhcwb16 ? 40'(xb16) : sx_b);
                        pos <= pos + 1'b1;
                    end else begin
                        px <= 16'd0; py <= py + 16'd1;
                        ix <= ix - $signed({2'b00, gpw}) + 18'sd1; iy <= iy + 18'sd1;
                        ca <= ca0;
                        ra <= ra + sy_b;
                        pos <= pos + 1'b1;
                    end
                end
            end
            // ---- tokens
            if (issue) begin
                tok[t_wp] <= {ghalf, wpos, j0, (nhcwb16 && !run_ok) ? 6'd1 : beats, gcn, run_ok ? lbpp : 3'd5};
                t_wp <= t_wp + 5'd1;
            end
            if (t_done) t_rp <= t_rp + 5'd1;
            t_cnt <= t_cnt + {5'd0, issue} - {5'd0, t_done};
            if (beat) t_got <= t_done ? 6'd0 : t_got + 6'd1;
            if (issue || t_done)
            for (h = 0; h < 2; h = h + 1)
                tcnt[h] <= tcnt[h] + ((issue && ghalf == h[0]) ? 6'd1 : 6'd0)
                                   - ((t_done && t_half == h[0]) ? 6'd1 : 6'd0);
        end
    end

    wire unused_ok = ^{rb_resp[0], bsum[3:0], zp17[16], gc0[16:4], nbsum[9], nbsum[2:0], gcn[8], lastp[5]};
endmodule

`default_nettype wire
