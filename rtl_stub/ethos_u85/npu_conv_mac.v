// npu_conv_mac.v -- MAC array and accumulator buffer of NPU_OP_CONV / NPU_OP_DEPTHWISE in
// the Ethos-U85 stand-in (TRM 3.10.2-3: acc += read_ifm(iy, ix, ic) * read_weight(oc, ky, kx, ic),
// accumulate() wrapping at 32/48 bits).
//
// NU = MACS/8 dot-product units of 8 multipliers (16 x 9 bits: IFM value minus zero point,
// -255..383 for 8-bit IFMs, int16 for signed b16 ones (16x8: zero point 0); weight
// -255..255) each, so MACS multiplies a cycle. For a brick of wblk_o OFM channels x 8
// IFM channels (npu_conv_walk.v) the units form P = NU/wblk_o pixel lanes (the microblock,
// mb_h x mb_w output pixels) x wblk_o channel lanes: unit u = p*wblk_o + o adds
// sum_ii IFM[pixel p][c + ii] * W[o][ii] to its accumulator. A brick is applied to every
// microblock ("group") of the spatial block S, one group a cycle (sparse bricks, 16 IFM
// channels: two cycles); depthwise bricks (one weight per channel) use one multiplier of each
// unit: unit (p, o) adds IFM[p][channel o] * W[o].
//
// Two stages: A walks the groups of the head brick and addresses the IFM buffer (npu_conv_ifm.v,
// registered reads); B, one cycle later, multiplies and updates the accumulators with the
// brick's weights (copied from the head when A starts the brick). The tap (ty, tx) of the
// brick, relative to its sub-kernel, of output pixel (r, c) of S is patch position
// (r*stride_y + ty*dilation_y, c*stride_x + tx*dilation_x); a padding position reads 0, and
// so does an IFM channel >= IFM depth (its weights are the stream's padding).
// Accumulators (48 bits; 32-bit results are taken from their low bits at the output: the
// wrap of every accumulate() is the wrap of the sum) live in the accumulator buffer AB:
// word ublk*NG + group holds the NU accumulators of one microblock group and one wblk_o
// channel step of the OFM block; a valid bit per word starts each OFM block at 0.
// After the last brick of an OFM block, d_req asks the output stage (npu_conv_out.v) to
// drain the block; the next block's first brick waits until it is done. The output stage
// reads 4 AB words a cycle (registered: the data of ab_raddr come one cycle later).
`default_nettype none

module npu_conv_mac #(
    parameter integer MACS = 256,
    parameter integer RP = 16,
    parameter integer ABW = 256,             // AB words
    parameter integer AW = 11,               // IB word address width (half as MSB)
    parameter integer BM = 69,               // brick metadata width (npu_conv_walk.v)
    parameter integer NU = MACS / 8,         // (derived: dot-product units)
    parameter integer ABA = $clog2(ABW)      // (derived: AB address width)
) (
    input  wire               CLK,
    input  wire               rst_n,
    input  wire               clear,         // operation or spatial-block start: no group in use
    input  wire               halt,
    // operation parameters
    input  wire               dw,
    input  wire               sparse,
    input  wire [3:0]         lwo,           // log2(wblk_o)
    input  wire [2:0]         mb_h,          // 1, 2, 4
    input  wire [2:0]         mb_w,
    input  wire [1:0]         lmbw,          // log2(mb_w)
    input  wire [1:0]         lcg,           // log2(IB words per position)
    input  wire [1:0]         sty,
    input  wire [1:0]         stx,
    input  wire [1:0]         dil_y,
    input  wire [1:0]         dil_x,
    input  wire [16:0]        ifd,           // IFM depth (conv)
    input  wire [7:0]         ngx,           // groups of S across, down
    input  wire [7:0]         ngy,
    // bricks
    input  wire               bq_valid,
    input  wire [2*MACS*9-1:0] bq_w,
    input  wire [BM-1:0]      bq_meta,
    output wire               bq_pop,
    // IFM buffer (registered reads)
    output logic [RP*AW-1:0]  rd_addr,
    output wire               rd_en,
    input  wire [RP*256-1:0]  rd_data,
    input  wire [RP-1:0]      pv_data,
    input  wire [1:0]         loaded,
    output logic [1:0]        rel,
    input  wire [15:0]        pw_h0,
    input  wire [15:0]        pw_h1,
    // output stage
    output logic              d_req,         // an OFM block is accumulated
    output logic [16:0]       d_oblk,
    output logic [10:0]       d_len,
    input  wire               d_ack,         // the output stage took it
    input  wire               out_busy,
    input  wire [4*ABA-1:0]   ab_raddr,
    input  wire               ab_ren,
    output logic [4*NU*48-1:0] ab_rdata,
    output logic [3:0]        ab_rvalid,
    output wire               busy
);
    // ================================================================ brick metadata (head)
    wire [16:0] m_cbase = bq_meta[BM-1 -: 17];
    wire [16:0] m_oblk  = bq_meta[BM-18 -: 17];
    wire [10:0] m_dlen  = bq_meta[BM-35 -: 11];
    wire [8:0]  m_u     = bq_meta[BM-46 -: 9];
    wire [3:0]  m_ig    = bq_meta[BM-55 -: 4];
    wire [2:0]  m_ty    = bq_meta[BM-59 -: 3];
    wire [2:0]  m_tx    = bq_meta[BM-62 -: 3];
    wire        m_half  = bq_meta[4];
    wire        m_grp   = bq_meta[3];
    wire        m_dfirst = bq_meta[2];
    wire        m_dlast = bq_meta[1];
    wire        m_pad   = bq_meta[0];

    // ================================================================ stage A
    logic        run;                        // walking the groups of the head brick
    logic [7:0]  gy, gx;
    logic        hsub;                       // sparse: second 8 channels
    logic [ABA-1:0] aw;                      // AB word of the current group
    logic        cur_valid, cur_half;        // a group is in use, its half
    logic [ABW-1:0] abv;                     // AB word written in this OFM block
    wire [15:0]  pwh = m_half ? pw_h1 : pw_h0;
    // stage B
    logic        vb, hb, lastb, dlb;
    logic [ABA-1:0] awb;
    logic [3:0]  ig8b;
    logic [16:0] c8b;
    logic [2*MACS*9-1:0] wb;                 // the weights of stage B's brick
    logic [16:0] d_oblk_b;
    logic [10:0] d_len_b;

    // the head brick may start: its group loaded; an OFM block's first brick waits until the
    // output stage has read the previous block out of the AB (and stage B is done with it)
    wire need_grp = m_grp || !cur_valid;
    wire can_go = bq_valid && !run && !halt && (!need_grp || loaded[m_half])
                  && !(m_dfirst && (out_busy || d_req || vb));
    wire last_g = (gx + 8'd1 >= ngx) && (gy + 8'd1 >= ngy) && (!sparse || hsub);
    wire a_go = run && !halt;                // stage A works on a group this cycle
    assign bq_pop = (can_go && m_pad) || (a_go && last_g);
    assign rd_en = a_go;
    assign busy = run || bq_valid || vb;

    // ---- IB addresses of the current group: port q serves pixel p = q (conv), or
    // q >> (lwo - 4) with word q mod (wblk_o/16) (depthwise, wblk_o >= 16), or q (depthwise,
    // wblk_o < 16)
    wire        dw_wide = dw && (lwo >= 4'd4);
    integer q;
    logic [4:0]  pq, wq;
    logic [2:0]  lr, lc;
    logic [15:0] prow, pcol;
    logic [31:0] pos;
    always @(*) begin
        pq = 5'd0; wq = 5'd0; lr = 3'd0; lc = 3'd0; prow = 16'd0; pcol = 16'd0; pos = 32'd0;
        for (q = 0; q < RP; q = q + 1) begin
            pq = dw_wide ? 5'(q >> (lwo - 4'd4)) : 5'(q);
            wq = dw_wide ? 5'(q & ((1 << (lwo - 4'd4)) - 1)) : 5'd0;
            lr = 3'(pq >> lmbw);
            lc = 3'(pq & ((5'd1 << lmbw) - 5'd1));
            prow = 16'(({8'd0, gy} * mb_h + {13'd0, lr}) * sty) + 16'(m_ty * dil_y);
            pcol = 16'(({8'd0, gx} * mb_w + {13'd0, lc}) * stx) + 16'(m_tx * dil_x);
            pos = {16'd0, prow} * {16'd0, pwh} + {16'd0, pcol};
            rd_addr[q*AW +: AW] = {m_half, (AW-1)'((pos << lcg) + (dw ? {27'd0, wq}
                                                                     : {28'd0, (m_ig + {3'd0, hsub}) >> 1}))};
        end
    end

    // ================================================================ stage B: the units
    logic [7:0] chok;                               // channel < IFM depth
    integer c;
    always @(*) begin
        for (c = 0; c < 8; c = c + 1) chok[c] = dw || (c8b + 17'(c) < ifd);
    end
    // The units compute in the AB's clocked block, from stage B's registers (their values at
    // the clock edge), only in the cycles stage B writes (vb): nothing is evaluated while the
    // array is idle, and no wide net is rebuilt per unit (simulation cost; same logic).
    logic [NU*48-1:0] ab [0:ABW-1];
    always_ff @(posedge CLK) begin : ab_rw
        integer r, u, k;
        logic [4*NU*48-1:0] abr;
        logic [3:0]         abrv;
        logic [NU*48-1:0]   old, nxt;
        logic [127:0] cm;                       // chok as 16-bit lane masks
        logic [4:0]   p;                        // (pixel lane, channel lane) of unit u for
        logic [8:0]   o;                        // wblk_o = 1 << lwo
        logic [71:0]  wv;                       // the unit's 8 weights
        logic [255:0] word;
        logic [127:0] iv;                       // 8 IFM values of its pixel (16 bits each),
                                                // 0 on a padding position or channel >= depth
        logic [15:0]  dv;                       // depthwise: the IFM value of channel o
        logic         pvok;
        logic signed [27:0] sum;                // (28 bits hold every sum exactly)
        if (vb) begin
            // (an invalid AB word accumulates from 0)
            old = abv[awb] ? ab[awb] : (NU*48)'(0);
            for (k = 0; k < 8; k = k + 1) cm[k*16 +: 16] = {16{chok[k]}};
            for (u = 0; u < NU; u = u + 1) begin
                p = 5'(u >> lwo);
                o = 9'(u & ((1 << lwo) - 1));
                if (dw) wv = {63'd0, wb[o*9 +: 9]};
                else if (sparse) wv = wb[(({o, 4'd0} + (hb ? 13'd8 : 13'd0)) * 9) +: 72];
                else wv = wb[({o, 3'd0} * 9) +: 72];
                if (dw) begin
                    // wide depthwise: the unit's read port is (u / 16) mod RP
                    word = dw_wide ? rd_data[((u / 16) % RP) * 256 +: 256] : rd_data[p * 256 +: 256];
                    pvok = dw_wide ? pv_data[(u / 16) % RP] : pv_data[4'(p)];
                    dv = !pvok ? 16'd0 : dw_wide ? word[(u & 15) * 16 +: 16] : word[o[3:0] * 16 +: 16];
                    sum = 28'($signed(dv)) * 28'($signed(wv[8:0]));
                end else begin
                    // the 8 IFM values of pixel p, once for its wblk_o units (o == 0 first)
                    if (o == 9'd0) iv = !pv_data[4'(p)] ? 128'd0
                                      : (ig8b[0] ? rd_data[p * 256 + 128 +: 128] : rd_data[p * 256 +: 128]) & cm;
                    sum = 28'($signed(iv[15:0]))    * 28'($signed(wv[8:0]))
                        + 28'($signed(iv[31:16]))   * 28'($signed(wv[17:9]))
                        + 28'($signed(iv[47:32]))   * 28'($signed(wv[26:18]))
                        + 28'($signed(iv[63:48]))   * 28'($signed(wv[35:27]))
                        + 28'($signed(iv[79:64]))   * 28'($signed(wv[44:36]))
                        + 28'($signed(iv[95:80]))   * 28'($signed(wv[53:45]))
                        + 28'($signed(iv[111:96]))  * 28'($signed(wv[62:54]))
                        + 28'($signed(iv[127:112])) * 28'($signed(wv[71:63]));
                end
                nxt[u*48 +: 48] = old[u*48 +: 48] + {{20{sum[27]}}, sum};
            end
            ab[awb] <= nxt;
        end
        // output-stage reads, registered (one vector update a cycle)
        if (ab_ren) begin
            for (r = 0; r < 4; r = r + 1) begin
                abr[r*NU*48 +: NU*48] = ab[ab_raddr[r*ABA +: ABA]];
                abrv[r] = abv[ab_raddr[r*ABA +: ABA]];
            end
            ab_rdata <= abr;
            ab_rvalid <= abrv;
        end
    end

    // ================================================================ sequencing
    wire [ABA-1:0] ng_mul = ABA'({8'd0, ngx} * {8'd0, ngy} * {7'd0, m_u});
    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) begin
            run <= 1'b0; gy <= 8'd0; gx <= 8'd0; hsub <= 1'b0; aw <= '0;
            cur_valid <= 1'b0; cur_half <= 1'b0; abv <= '0; rel <= 2'b00;
            d_req <= 1'b0; d_oblk <= 17'd0; d_len <= 11'd0;
            vb <= 1'b0; hb <= 1'b0; lastb <= 1'b0; dlb <= 1'b0; awb <= '0; ig8b <= 4'd0; c8b <= 17'd0;
            d_oblk_b <= 17'd0; d_len_b <= 11'd0;
        end else begin
            rel <= 2'b00;
            if (d_ack) d_req <= 1'b0;
            // ---- stage B: accumulate; the OFM block is complete after its last group
            if (vb) abv[awb] <= 1'b1;
            if (vb && lastb && dlb) begin
                d_req <= 1'b1; d_oblk <= d_oblk_b; d_len <= d_len_b;
            end
            vb <= a_go;
            hb <= hsub;
            awb <= aw;
            ig8b <= m_ig + {3'd0, hsub};
            c8b <= m_cbase + (hsub ? 17'd8 : 17'd0);
            lastb <= last_g;
            dlb <= m_dlast;
            d_oblk_b <= m_oblk;
            d_len_b <= m_dlen;
            if (a_go && gx == 8'd0 && gy == 8'd0 && !hsub) wb <= bq_w;
            // ---- stage A
            if (clear) begin
                cur_valid <= 1'b0;
                run <= 1'b0;
            end else if (halt) begin
                run <= 1'b0;
            end else if (can_go) begin
                if (need_grp && cur_valid && cur_half != m_half) rel[cur_half] <= 1'b1;
                cur_valid <= 1'b1;
                cur_half <= m_half;
                if (m_dfirst) abv <= '0;
                if (m_pad) begin
                    if (m_dlast) begin
                        d_req <= 1'b1; d_oblk <= m_oblk; d_len <= m_dlen;
                    end
                end else begin
                    run <= 1'b1;
                    gy <= 8'd0; gx <= 8'd0; hsub <= 1'b0;
                    aw <= ng_mul;
                end
            end else if (run) begin
                if (sparse && !hsub) begin
                    hsub <= 1'b1;
                end else begin
                    hsub <= 1'b0;
                    if (last_g) begin
                        run <= 1'b0;
                    end else begin
                        aw <= aw + 1'b1;
                        if (gx + 8'd1 < ngx) gx <= gx + 8'd1;
                        else begin gx <= 8'd0; gy <= gy + 8'd1; end
                    end
                end
            end
        end
    end

    wire unused_ok = ^{mb_w, lmbw, ig8b[3:1]};
endmodule

`default_nettype wire
