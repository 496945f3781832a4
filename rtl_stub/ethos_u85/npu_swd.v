// npu_swd.v -- one standard weight decoder (SWD) of the Ethos-U85 stand-in: decodes one
// weight stream (TRM 3.9.3-3.9.10) into signed weights -255..255, in stream order.
//
// Stream syntax (gen/npu_conv.vh has the symbol widths and codes, from the TRM tables):
//   slice    zdiv(3)  [7: end of stream]  slicelen_m1(15) wdiv(3) wtrunc(1) newpal(1)
//            [newpal: dirofs(5) palsize(5) palbits(3) palette[palette_size](palette_bits)]
//            chunks until one has neither weights nor zero runs to code
//   chunk    wunary0(12) zunary(12|8) wunary1(popcount(wunary0)) wremain[prev](wremain_bits)
//            zremain[prev](zdiv)        (remainders belong to the previous chunk's symbols)
// Readings (the TLM's, tlm/weights/codec.py; digest errata): E-19 the zero-run parse and
// its remainder reads are bounded by z_cnt = slicelen + newpal; E-22 one chunk loop per
// slice. A weight index > 511 or a value outside -255..255 is an error (TRM 3.9.6, 3.9.1).
//
// Structure:
//   * bit buffer: up to BBW bits of the stream, LSB first; 16-byte beats come in while at
//     least 128 bits are free; only len_bytes bytes of the stream are used;
//   * parser: a slice header in one cycle, one palette entry a cycle, one chunk a cycle
//     (every symbol of a chunk at once); final indices (quotient << wdiv + remainder) are
//     mapped through the slice's palette / direct offset (TRM 3.9.6) into values and pushed,
//     with the zero runs, into two FIFOs (vf: values, rf: zero runs). An alternating-mode
//     slice with newpal starts with a "ghost" value entry that carries its leading run, so
//     that every value of an alternating slice is followed by exactly one run;
//   * expander: up to min(OW, out_space) weights a cycle from the FIFOs: pending zeros of a
//     run, then values each followed by its run's zeros (alternating mode).
// Errors (reserved zdiv/wdiv, first slice without newpal, mode change without newpal,
// quotient > 31, index > 511, value outside -255..255, stream truncated) stop the parser;
// whatever was decoded before drains, then `stop_err` is raised. The end of the stream (EOS
// symbol, or no bit left before a slice) likewise gives `stop_end`. The consumer turns
// either into an error only when it needs a weight the decoder cannot give (the TLM decodes
// up to the slice that completes the weights it needs: tlm.weights.decode_swd(count)).
`default_nettype none

module npu_swd #(
    parameter integer OW = 8               // weights a cycle at most (<= 15)
) (
    input  wire            CLK,
    input  wire            rst_n,
    input  wire            start,          // restart at the first bit of a stream
    input  wire [31:0]     len_bytes,      // WEIGHT[n]_LENGTH (sampled at start)
    input  wire            in_valid,       // next 16 bytes of the stream
    input  wire [127:0]    in_data,
    output wire            in_ready,
    input  wire [3:0]      out_space,      // weights the consumer takes this cycle at most
    output logic [OW*9-1:0] out_w,         // weight k at [9k+8:9k], signed
    output logic [3:0]     out_n,          // weights given this cycle
    output wire            stop_err,       // no further weight: decode error
    output wire            stop_end,       // no further weight: end of the stream
    output wire            busy            // parser or expander active
);
`include "gen/npu_conv.vh"
    localparam integer BBW = 320;          // bit buffer
    localparam integer VFN = 64, RFN = 32; // FIFO depths (entries)
    localparam [2:0] P_IDLE = 3'd0, P_HDR = 3'd1, P_PAL = 3'd2, P_CHUNK = 3'd3, P_END = 3'd4,
                     P_ERR = 3'd5;

    // ================================================================ bit buffer
    logic [BBW-1:0] bb;
    logic [8:0]     bcnt;                  // valid bits in bb
    logic [31:0]    len_q, rx;             // stream bytes, bytes taken in
    wire            exhausted = (rx >= len_q);
    wire [31:0]     left = len_q - rx;
    wire [7:0]      in_bits = (left >= 32'd16) ? 8'd128 : {left[4:0], 3'b000};
    assign in_ready = (ps != P_IDLE) && !exhausted && (bcnt <= 9'(BBW - 128));
    wire            take_in = in_valid && in_ready;

    // ================================================================ parser state
    logic [2:0]  ps;
    logic        first_slice, prev_alt;
    logic [2:0]  zdiv, wdiv;
    logic        wtrunc, newpal;
    logic [15:0] w_cnt;                    // slicelen, 1..32768
    logic [8:0]  pal [0:31];
    logic [5:0]  psize;                    // 0 or 2..32
    logic [3:0]  pbits;                    // 2..9
    logic [4:0]  dirofs;
    logic [5:0]  pal_i;
    logic [15:0] nw;                       // weight symbols of the slice so far
    logic [16:0] nz;                       // zero runs of the slice so far
    logic [5:0]  wq;                       // quotient carried across chunks
    logic [23:0] zq;                       // zero-run quotient carried across chunks
    logic        prev_w, prev_z;           // the previous chunk coded weights / runs
    logic [9:0]  pw [0:11];                // previous chunk's weight indices (no remainder)
    logic [3:0]  pwn;
    logic [23:0] pz [0:11];                // previous chunk's runs (no remainder)
    logic [3:0]  pzn;

    wire        alt   = (zdiv < SWD_ZDIV_NO_ZRUN[2:0]) && (zdiv != 3'd4) && (zdiv != 3'd5);
    wire        unc   = (wdiv == SWD_WDIV_UNCOMPRESSED[2:0]);
    // uncompressed_bits = palette_size > 0 ? ceil(log2(palette_size)) : palette_bits
    logic [3:0] ub;
    always @(*) begin
        if (psize == 6'd0)       ub = pbits;
        else if (psize <= 6'd2)  ub = 4'd1;
        else if (psize <= 6'd4)  ub = 4'd2;
        else if (psize <= 6'd8)  ub = 4'd3;
        else if (psize <= 6'd16) ub = 4'd4;
        else                     ub = 4'd5;
    end
    wire [3:0]  wrb       = unc ? ub : {1'b0, wdiv};          // wremain_bits
    wire [3:0]  per_chunk = (ub <= 4'd5) ? 4'd12 : 4'd8;      // uncompressed indices a chunk
    wire [16:0] z_cnt     = alt ? ({1'b0, w_cnt} + {16'd0, newpal}) : 17'd0;
    wire [3:0]  zl        = (zdiv < 3'd3) ? 4'd12 : 4'd8;     // zunary bits

    // ================================================================ FIFOs
    // vf entry: {ghost, alt, value[8:0]}; rf entry: run length
    logic [10:0] vf [0:VFN-1];
    logic [23:0] rf [0:RFN-1];
    logic [5:0]  vf_rp, vf_wp;
    logic [6:0]  vf_cnt;
    logic [4:0]  rf_rp, rf_wp;
    logic [5:0]  rf_cnt;
    wire         vf_room12 = (vf_cnt <= 7'(VFN - 12));
    wire         rf_room12 = (rf_cnt <= 6'(RFN - 12));

    // ================================================================ header
    wire [2:0]  h_zdiv   = bb[SWD_H_ZDIV +: SWD_HW_ZDIV];
    wire [14:0] h_slm1   = bb[SWD_H_SLICELEN_M1 +: SWD_HW_SLICELEN_M1];
    wire [2:0]  h_wdiv   = bb[SWD_H_WDIV +: SWD_HW_WDIV];
    wire        h_wtrunc = bb[SWD_H_WTRUNC];
    wire        h_newpal = bb[SWD_H_NEWPAL];
    wire [4:0]  h_dirofs = bb[SWD_H_DIROFS +: SWD_HW_DIROFS];
    wire [4:0]  h_palsz  = bb[SWD_H_PALSIZE +: SWD_HW_PALSIZE];
    wire [2:0]  h_palbt  = bb[SWD_H_PALBITS +: SWD_HW_PALBITS];
    wire        h_alt    = (h_zdiv < SWD_ZDIV_NO_ZRUN[2:0]) && (h_zdiv != 3'd4) && (h_zdiv != 3'd5);
    wire [8:0]  h_need   = h_newpal ? 9'(SWD_HDR_PAL_BITS) : 9'(SWD_HDR_BITS);
    wire        h_eos    = (h_zdiv == SWD_ZDIV_EOS[2:0]);
    wire        h_bad    = (h_zdiv == 3'd4) || (h_zdiv == 3'd5) || (h_wdiv == 3'd6)
                        || (!h_newpal && (first_slice || prev_alt != h_alt));

    // ================================================================ chunk
    wire signed [17:0] bal = $signed({2'b00, nw}) - $signed({1'b0, nz});
    wire        w_en = (nw < w_cnt) && (!alt || bal < 18'sd8);
    wire        z_en = alt && (bal >= 18'sd0) && (nz < z_cnt);
    wire        use_w0 = w_en && !unc;
    wire [11:0] w0 = bb[11:0];
    wire [8:0]  o1 = use_w0 ? 9'd12 : 9'd0;
    wire [BBW-1:0] bb_o1 = bb >> o1;
    wire [11:0] zu = bb_o1[11:0] & ((zl == 4'd12) ? 12'hFFF : 12'h0FF);
    logic [3:0] pop;
    integer pi;
    always @(*) begin
        pop = 4'd0;
        for (pi = 0; pi < 12; pi = pi + 1) pop = pop + {3'd0, w0[pi]};
    end
    wire [8:0]  o2 = o1 + (z_en ? {5'd0, zl} : 9'd0);
    wire [BBW-1:0] bb_o2 = bb >> o2;
    wire [11:0] w1 = bb_o2[11:0];
    wire [8:0]  o3 = o2 + (use_w0 ? {5'd0, pop} : 9'd0);
    wire [3:0]  nwr = prev_w ? pwn : 4'd0;
    wire [3:0]  nzr = prev_z ? pzn : 4'd0;
    wire [7:0]  wr_bits = nwr * wrb;
    wire [7:0]  zr_bits = nzr * {1'b0, zdiv};
    wire [8:0]  o4 = o3 + {1'b0, wr_bits};
    wire [8:0]  c_need = o4 + {1'b0, zr_bits};
    wire [BBW-1:0] bb_o3 = bb >> o3;
    wire [BBW-1:0] bb_o4 = bb >> o4;

    // weight symbols ending in this chunk (indices without remainder)
    logic [9:0]  nwv [0:11];
    logic [3:0]  nwn;
    logic [5:0]  wq_n;
    logic        q_bad;
    logic [5:0]  q, c;
    logic [3:0]  rank;
    logic [15:0] cnt;
    always @(*) begin : wsplit
        integer i;
        for (i = 0; i < 12; i = i + 1) nwv[i] = 10'd0;
        nwn = 4'd0; q_bad = 1'b0; q = wq; rank = 4'd0; cnt = nw; wq_n = wq; c = 6'd0;
        if (w_en && unc) begin
            nwn = ({12'd0, per_chunk} > w_cnt - nw) ? w_cnt[3:0] - nw[3:0] : per_chunk;
        end else if (w_en) begin
            for (i = 0; i < 12; i = i + 1) begin
                c = 6'd0;
                if (w0[i]) begin
                    c = 6'd1 + {5'd0, w1[rank]};
                    rank = rank + 4'd1;
                end
                if (cnt < w_cnt) begin
                    if (wtrunc) begin
                        nwv[nwn] = {4'd0, c} << wdiv;
                        nwn = nwn + 4'd1;
                        cnt = cnt + 16'd1;
                    end else begin
                        q = q + c;
                        if (c < 6'd2) begin
                            if (q > 6'd31) q_bad = 1'b1;
                            nwv[nwn] = {5'd0, q[4:0]} << wdiv;
                            nwn = nwn + 4'd1;
                            cnt = cnt + 16'd1;
                            q = 6'd0;
                        end
                    end
                end
            end
            wq_n = (cnt >= w_cnt) ? 6'd0 : q;
            if (!wtrunc && cnt < w_cnt && q > 6'd31) q_bad = 1'b1;
        end
    end
    // zero runs ending in this chunk (quotients << zdiv, without remainder)
    logic [23:0] nzv [0:11];
    logic [3:0]  nzn;
    logic [23:0] zq_n, zc;
    logic [16:0] zcnt;
    always @(*) begin : zsplit
        integer i;
        for (i = 0; i < 12; i = i + 1) nzv[i] = 24'd0;
        nzn = 4'd0; zc = zq; zcnt = nz;
        if (z_en) begin
            for (i = 0; i < 12; i = i + 1) begin
                if (i < zl) begin
                    if (zu[i]) begin
                        zc = zc + 24'd1;
                    end else begin
                        if (zcnt < z_cnt) begin
                            nzv[nzn] = zc << zdiv;
                            nzn = nzn + 4'd1;
                            zcnt = zcnt + 17'd1;
                        end
                        zc = 24'd0;
                    end
                end
            end
        end
        zq_n = zc;
    end
    // the previous chunk's symbols with their remainders; values through the palette
    logic [10:0] fv [0:11];               // vf entries
    logic        fv_bad;
    logic [9:0]  idx;
    logic [9:0]  tmp;
    logic [23:0] fz [0:11];
    always @(*) begin : i_cnt
        integer i;
        fv_bad = 1'b0;
        for (i = 0; i < 12; i = i + 1) begin
            idx = pw[i] + (10'((bb_o3 >> (i * wrb)) & ((BBW)'(1) << wrb) - 1'b1));
            if (idx < {4'd0, psize}) tmp = {1'b0, pal[idx[4:0]]};
            else tmp = idx - {4'd0, psize} + {5'd0, dirofs};
            fv[i] = {1'b0, alt, tmp[0] ? 9'd0 - {1'b0, tmp[8:1]} : {1'b0, tmp[8:1]}};
            if (i < nwr && (idx > 10'd511 || tmp[9])) fv_bad = 1'b1;
            fz[i] = pz[i] + (24'((bb_o4 >> (i * {1'b0, zdiv})) & ((BBW)'(1) << zdiv) - 1'b1));
        end
    end
    wire c_ready = (bcnt >= c_need) && vf_room12 && rf_room12;
    wire c_trunc = (bcnt < c_need) && exhausted;
    wire c_last  = !w_en && !z_en;

    // ================================================================ expander
    logic [23:0] zpend;                    // zeros left of the current run
    logic [6:0]  e_vf;                     // vf entries used this cycle
    logic [5:0]  e_rf;                     // rf entries used this cycle
    logic [23:0] e_zpend;
    logic [3:0]  n, room;
    logic        stop;
    logic [10:0] e;
    logic [23:0] r, zz;
    always @(*) begin : expand
        integer k;
        out_w = {(OW*9){1'b0}};
        n = 4'd0; e_vf = 7'd0; e_rf = 6'd0; e_zpend = zpend; stop = 1'b0;
        e = 11'd0; r = 24'd0; zz = 24'd0;
        room = (out_space > 4'(OW)) ? 4'(OW) : out_space;
        // zeros of the pending run first
        if (zpend >= {20'd0, room}) begin
            n = room;
            e_zpend = zpend - {20'd0, room};
            stop = 1'b1;
        end else begin
            n = zpend[3:0];
            e_zpend = 24'd0;
        end
        for (k = 0; k < OW; k = k + 1) begin
            if (!stop && n < room && 7'(k) < vf_cnt) begin
                e = vf[6'(vf_rp + 6'(k))];
                if (e[9] && e_rf >= rf_cnt) begin
                    stop = 1'b1;                       // its run is not decoded yet
                end else begin
                    if (!e[10]) begin
                        out_w[n*9 +: 9] = e[8:0];      // n < room <= OW
                        n = n + 4'd1;
                    end
                    e_vf = e_vf + 7'd1;
                    if (e[9]) begin
                        r = rf[5'(rf_rp + 5'(e_rf))];
                        e_rf = e_rf + 6'd1;
                        zz = ({20'd0, room - n} < r) ? {20'd0, room - n} : r;
                        n = n + zz[3:0];             // zero slots: out_w is 0 there
                        if (zz < r) begin
                            e_zpend = r - zz;
                            stop = 1'b1;
                        end
                    end
                end
            end
        end
        out_n = n;
    end
    // nothing more can come out once the parser has stopped: FIFOs empty, or the next value
    // waits for a zero run the parser will not decode (an error cut the slice short)
    wire [10:0] vf_head = vf[vf_rp];
    wire drained = (zpend == 24'd0) && ((vf_cnt == 7'd0) || (vf_head[9] && rf_cnt == 6'd0));
    assign stop_err = (ps == P_ERR) && drained;
    assign stop_end = (ps == P_END) && drained;
    assign busy = (ps != P_IDLE) && !stop_err && !stop_end;

    // ================================================================ sequential
    logic [8:0]   used;                    // bits consumed by the parser this cycle
    logic [3:0]   push_v, push_z;          // entries pushed this cycle
    logic         push_ghost;
    always @(*) begin
        used = 9'd0; push_v = 4'd0; push_z = 4'd0; push_ghost = 1'b0;
        case (ps)
            P_HDR: if (bcnt >= 9'(SWD_HW_ZDIV) && !h_eos && bcnt >= h_need && !h_bad && !vf_cnt[6]) begin
                       used = h_need;
                       push_ghost = h_alt && h_newpal;
                   end
            P_PAL: if (bcnt >= {5'd0, pbits}) used = {5'd0, pbits};
            P_CHUNK: if (c_ready && !q_bad && !fv_bad) begin
                         used = c_need;
                         push_v = nwr;
                         push_z = nzr;
                     end
            default: ;
        endcase
    end

    wire [BBW-1:0] bb_sh = bb >> used;
    wire [8:0]     bcnt_sh = bcnt - used;
    wire [BBW-1:0] bb_in = {{(BBW-128){1'b0}}, in_data} << bcnt_sh;

    always_ff @(posedge CLK or negedge rst_n) begin : seq
        integer k;
        if (!rst_n) begin
            bb <= {BBW{1'b0}}; bcnt <= 9'd0; len_q <= 32'd0; rx <= 32'd0;
            ps <= P_IDLE; first_slice <= 1'b1; prev_alt <= 1'b0;
            zdiv <= 3'd0; wdiv <= 3'd0; wtrunc <= 1'b0; newpal <= 1'b0; w_cnt <= 16'd0;
            psize <= 6'd0; pbits <= 4'd2; dirofs <= 5'd0; pal_i <= 6'd0;
            nw <= 16'd0; nz <= 17'd0; wq <= 6'd0; zq <= 24'd0; prev_w <= 1'b0; prev_z <= 1'b0;
            pwn <= 4'd0; pzn <= 4'd0;
            vf_rp <= 6'd0; vf_wp <= 6'd0; vf_cnt <= 7'd0;
            rf_rp <= 5'd0; rf_wp <= 5'd0; rf_cnt <= 6'd0;
            zpend <= 24'd0;
        end else if (start) begin
            bb <= {BBW{1'b0}}; bcnt <= 9'd0; len_q <= len_bytes; rx <= 32'd0;
            ps <= P_HDR; first_slice <= 1'b1; prev_alt <= 1'b0;
            psize <= 6'd0; pbits <= 4'd2; dirofs <= 5'd0;
            vf_rp <= 6'd0; vf_wp <= 6'd0; vf_cnt <= 7'd0;
            rf_rp <= 5'd0; rf_wp <= 5'd0; rf_cnt <= 6'd0;
            zpend <= 24'd0;
        end else begin
            // ---- bit buffer
            bb <= take_in ? (bb_sh | bb_in) : bb_sh;
            bcnt <= bcnt_sh + (take_in ? {1'b0, in_bits} : 9'd0);
            if (take_in) rx <= rx + 32'd16;

            // ---- parser
            case (ps)
                P_HDR: begin
                    if (bcnt >= 9'(SWD_HW_ZDIV) && h_eos) begin
                        ps <= P_END;
                    end else if (bcnt < 9'(SWD_HW_ZDIV) || bcnt < h_need) begin
                        if (exhausted && !take_in) ps <= (bcnt < 9'(SWD_HW_ZDIV)) ? P_END : P_ERR;
                    end else if (h_bad) begin
                        ps <= P_ERR;
                    end else if (!vf_cnt[6]) begin
                        first_slice <= 1'b0;
                        prev_alt <= h_alt;
                        zdiv <= h_zdiv; wdiv <= h_wdiv; wtrunc <= h_wtrunc; newpal <= h_newpal;
                        w_cnt <= {1'b0, h_slm1} + 16'd1;
                        nw <= 16'd0; nz <= 17'd0; wq <= 6'd0; zq <= 24'd0;
                        prev_w <= 1'b0; prev_z <= 1'b0; pwn <= 4'd0; pzn <= 4'd0;
                        if (h_newpal) begin
                            dirofs <= h_dirofs;
                            psize <= (h_palsz == 5'd0) ? 6'd0 : {1'b0, h_palsz} + 6'd1;
                            pbits <= {1'b0, h_palbt} + 4'd2;
                            pal_i <= 6'd0;
                            ps <= (h_palsz == 5'd0) ? P_CHUNK : P_PAL;
                        end else begin
                            ps <= P_CHUNK;
                        end
                    end
                end
                P_PAL: begin
                    if (bcnt >= {5'd0, pbits}) begin
                        pal[pal_i[4:0]] <= 9'(bb[8:0] & ((9'd1 << pbits) - 9'd1));
                        pal_i <= pal_i + 6'd1;
                        if (pal_i + 6'd1 == psize) ps <= P_CHUNK;
                    end else if (exhausted && !take_in) begin
                        ps <= P_ERR;
                    end
                end
                P_CHUNK: begin
                    if (c_ready && (q_bad || fv_bad)) begin
                        ps <= P_ERR;
                    end else if (c_ready) begin
                        nw <= nw + {12'd0, nwn};
                        nz <= nz + {13'd0, nzn};
                        wq <= wq_n;
                        zq <= zq_n;
                        prev_w <= w_en;
                        prev_z <= z_en;
                        pwn <= nwn;
                        pzn <= nzn;
                        for (k = 0; k < 12; k = k + 1) begin
                            pw[k] <= nwv[k];
                            pz[k] <= nzv[k];
                        end
                        if (c_last) ps <= P_HDR;
                    end else if (c_trunc && !take_in) begin
                        ps <= P_ERR;
                    end
                end
                default: ;
            endcase

            // ---- FIFOs: pushes (parser) and pops (expander)
            if (push_ghost) vf[vf_wp] <= {1'b1, 1'b1, 9'd0};
            if (push_v != 4'd0 || push_z != 4'd0)
                for (k = 0; k < 12; k = k + 1) begin
                    if (k < push_v) vf[6'(vf_wp + 6'(k))] <= fv[k];
                    if (k < push_z) rf[5'(rf_wp + 5'(k))] <= fz[k];
                end
            vf_wp <= vf_wp + {2'd0, push_v} + {5'd0, push_ghost};
            rf_wp <= rf_wp + {1'b0, push_z};
            vf_cnt <= vf_cnt + {3'd0, push_v} + {6'd0, push_ghost} - e_vf;
            rf_cnt <= rf_cnt + {2'd0, push_z} - e_rf;
            vf_rp <= vf_rp + e_vf[5:0];
            rf_rp <= rf_rp + e_rf[4:0];
            zpend <= e_zpend;
        end
    end

    wire unused_ok = ^{pal_i, bb_o1[BBW-1:12], bb_o2[BBW-1:12], q_bad, rank, vf_head[10], vf_head[8:0]};
endmodule

`default_nettype wire
