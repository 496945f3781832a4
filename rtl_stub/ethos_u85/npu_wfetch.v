// npu_wfetch.v -- weight-stream and scale/bias-stream fetch of NPU_OP_CONV and
// NPU_OP_DEPTHWISE (TRM 2.3.4 weight decoder, 3.7 scale and bias stream, 3.9 weight
// stream) in the Ethos-U85 stand-in, for npu_conv.v.
//
// A pass (`start`) reads either the n_w weight streams (channel rd_weights, region
// WEIGHT_REGION; stream k from base[k] for len[k] bytes: WEIGHT_BASE/LENGTH, WEIGHT1..3) or
// the scale/bias stream (`scale`: rd_scale_bias, SCALE_REGION, stream 4) from its beginning.
// Every byte of each stream is read (the TLM reads the whole WEIGHT_LENGTH): bursts go out
// round-robin over the streams that have bytes left and room in their beat FIFO (FD beats
// each, space reserved at issue since RREADY is always 1); a beat goes to the FIFO of the
// stream its burst belongs to (ARID order: one ID per pass, so beats return in issue order).
// The consumer of stream k (a weight decoder, the scale/bias loader) pops beats (q_pop); a
// consumer that is done sets q_drop and its beats are discarded as they arrive.
// Bursts: INCR, 16-byte beats, exact start address (a stream base is 16-byte aligned: the
// TRM's rule, checked by npu_conv.v), never across the max_beats window of the port group
// (npu_axi_room.vh), so never across 4 KB; AxCACHE/AxDOMAIN/port from the region's MEM_ATTR.
// A beat with an error response is passed on marked (q_err): the bus fault stops the NPU
// (npu_cmd_decode) and npu_conv discards the data.
// abort (bus error, soft reset): no new bursts, the ones on the bus complete (busy until the
// last beat is back); pause (warm reset, debug halt): no new bursts.
`default_nettype none

module npu_wfetch #(
    parameter integer FD = 8                 // beats per stream FIFO (a power of 2)
) (
    input  wire          CLK,
    input  wire          rst_n,
    input  wire          start,              // begin a pass (every stream from its start)
    input  wire          scale,              // the pass reads the scale/bias stream
    input  wire [2:0]    n_w,                // weight streams of a weight pass (1..4)
    input  wire [159:0]  w_base,             // stream k at [40k+39:40k] (region offsets)
    input  wire [127:0]  w_len,              // stream k at [32k+31:32k] (bytes)
    input  wire [2:0]    w_region,
    input  wire [39:0]   s_base,
    input  wire [31:0]   s_len,
    input  wire [2:0]    s_region,
    input  wire          abort,
    input  wire          pause,
    output wire          busy,               // bursts to issue or beats outstanding
    // routing state (APB registers)
    input  wire [319:0]  basep,
    input  wire [15:0]   regioncfg,
    input  wire [31:0]   mem_attr,
    input  wire [1:0]    sram_mb,
    input  wire [1:0]    ext_mb,
    // read bursts
    output wire          rq_valid,
    output wire          rq_ext,
    output wire [39:0]   rq_addr,
    output wire [7:0]    rq_len,
    output wire          rq_scale,           // ARID rd_scale_bias (else rd_weights)
    output wire [3:0]    rq_cache,
    output wire [1:0]    rq_domain,
    input  wire          rq_ready,
    input  wire          rb_valid,           // a beat of rd_weights or rd_scale_bias
    input  wire [127:0]  rb_data,
    input  wire [1:0]    rb_resp,
    // beats to the consumers: weight stream k = 0..3, scale/bias stream 4
    output wire [4:0]    q_valid,
    output wire [639:0]  q_data,             // stream k at [128k+127:128k]
    output wire [4:0]    q_err,
    input  wire [4:0]    q_pop,
    input  wire [4:0]    q_drop
);
`include "npu_axi_room.vh"
    localparam integer LFD = $clog2(FD);

    logic        active, scale_q;
    logic [2:0]  nw_q;
    logic [31:0] off [0:4];                  // bytes of stream k requested
    logic [LFD:0] res [0:4];                 // FIFO slots of stream k reserved (queued or on the bus)
    logic [2:0]  rr;                         // round-robin pointer
    logic [11:0] pend;                       // beats requested, not yet received

    // ---------------------------------------------------------------- stream k
    logic [39:0] base_k [0:4];
    logic [31:0] len_k [0:4];
    logic [4:0]  want;
    always @(*) begin : streams
        integer k;
        for (k = 0; k < 4; k = k + 1) begin
            base_k[k] = w_base[40*k +: 40];
            len_k[k]  = w_len[32*k +: 32];
        end
        base_k[4] = s_base;
        len_k[4]  = s_len;
        for (k = 0; k < 5; k = k + 1)
            want[k] = active && (scale_q ? (k == 4) : (k < nw_q)) && (off[k] != len_k[k]);
    end

    // ---------------------------------------------------------------- routing
    wire [39:0] r_base;
    wire        r_ext;
    wire [3:0]  r_arc, unused_awc;
    wire [1:0]  r_dom;
    npu_region_route u_route (
        .region(scale_q ? s_region : w_region), .use_attr(1'b0), .attr_idx(2'd0), .basep(basep),
        .regioncfg(regioncfg), .mem_attr(mem_attr), .base(r_base), .ext(r_ext), .arcache(r_arc),
        .awcache(unused_awc), .domain(r_dom));

    // ---------------------------------------------------------------- next burst
    // the stream after rr (round robin) that has bytes left and a free FIFO slot; its burst
    // is limited to the free slots, the stream's bytes and the max_beats window
    logic [2:0]  sel;
    logic        found;
    logic [2:0]  cand;
    always @(*) begin : pick
        integer k;
        sel = 3'd0; found = 1'b0; cand = 3'd0;
        for (k = 1; k <= 5; k = k + 1) begin
            cand = ({1'b0, rr} + 4'(k) >= 4'd5) ? 3'({1'b0, rr} + 4'(k) - 4'd5) : rr + 3'(k);
            if (!found && want[cand] && res[cand] != (LFD+1)'(FD)) begin
                sel = cand;
                found = 1'b1;
            end
        end
    end
    wire [39:0] addr  = r_base + base_k[sel] + {8'd0, off[sel]};
    wire [31:0] left  = len_k[sel] - off[sel];
    wire [8:0]  rm    = room(r_ext ? ext_mb : sram_mb, addr[7:0]);
    wire [LFD:0] free = (LFD+1)'(FD) - res[sel];
    wire [13:0] fbytes = {{(13-LFD-4){1'b0}}, free, 4'd0} - {10'd0, addr[3:0]};   // bytes the free slots hold
    logic [13:0] nb;
    always @(*) begin
        nb = {5'd0, rm};
        if ({18'd0, nb} > left) nb = left[13:0];
        if (nb > fbytes) nb = fbytes;
    end
    wire [14:0] bsum  = {11'd0, addr[3:0]} + {1'b0, nb} + 15'd15;
    wire [10:0] beats = bsum[14:4];
    assign rq_valid  = found && !abort && !pause;
    assign rq_ext    = r_ext;
    assign rq_addr   = addr;
    assign rq_len    = beats[7:0] - 8'd1;
    assign rq_scale  = scale_q;
    assign rq_cache  = r_arc;
    assign rq_domain = r_dom;
    wire issue = rq_valid && rq_ready;

    // ---------------------------------------------------------------- burst tags, FIFOs
    // tag FIFO: the stream of each burst on the bus, and its beats
    logic [2:0]  tg_s [0:63];
    logic [8:0]  tg_n [0:63];
    logic [5:0]  tg_wp, tg_rp;
    logic [8:0]  tg_got;                     // beats of the head burst received
    wire  [2:0]  rs = tg_s[tg_rp];
    // beat FIFOs
    logic [128:0] fq [0:4][0:FD-1];
    logic [LFD-1:0] fwp [0:4];
    logic [LFD-1:0] frp [0:4];
    logic [LFD:0] fcnt [0:4];
    wire  beat = rb_valid && (pend != 12'd0);
    genvar gs;
    generate
        for (gs = 0; gs < 5; gs = gs + 1) begin : g_q
            wire [128:0] head = fq[gs][frp[gs]];
            assign q_valid[gs] = (fcnt[gs] != {(LFD+1){1'b0}});
            assign q_data[128*gs +: 128] = head[127:0];
            assign q_err[gs] = head[128];
        end
    endgenerate

    always_ff @(posedge CLK) begin
        if (st_in[rs]) fq[rs][fwp[rs]] <= {rb_resp[1], rb_data};
    end

    logic [4:0] st_in, st_out, flush;        // beat stored / popped, FIFO flushed
    always @(*) begin : fifo_io
        integer k;
        for (k = 0; k < 5; k = k + 1) begin
            st_in[k]  = beat && rs == 3'(k) && !q_drop[k];
            st_out[k] = q_pop[k] && q_valid[k] && !q_drop[k];
            flush[k]  = q_drop[k] && (fcnt[k] != {(LFD+1){1'b0}});
        end
    end
    integer s;
    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) begin
            active <= 1'b0; scale_q <= 1'b0; nw_q <= 3'd0; rr <= 3'd0; pend <= 12'd0;
            tg_wp <= 6'd0; tg_rp <= 6'd0; tg_got <= 9'd0;
            for (s = 0; s < 5; s = s + 1) begin
                off[s] <= 32'd0; res[s] <= {(LFD+1){1'b0}};
                fwp[s] <= {LFD{1'b0}}; frp[s] <= {LFD{1'b0}}; fcnt[s] <= {(LFD+1){1'b0}};
            end
        end else begin
            pend <= pend + (issue ? {1'b0, beats} : 12'd0) - {11'd0, beat};
            if (start) begin
                active <= 1'b1;
                scale_q <= scale;
                nw_q <= n_w;
                rr <= 3'd4;
                for (s = 0; s < 5; s = s + 1) off[s] <= 32'd0;
            end else if (abort) begin
                active <= 1'b0;
            end else if (issue) begin
                off[sel] <= off[sel] + {18'd0, nb};
                rr <= sel;
            end
            if (active && !start && want == 5'd0) active <= 1'b0;
            // tags
            if (issue) begin
                tg_s[tg_wp] <= sel;
                tg_n[tg_wp] <= beats[8:0];
                tg_wp <= tg_wp + 6'd1;
            end
            if (beat) begin
                if (tg_got + 9'd1 == tg_n[tg_rp]) begin
                    tg_got <= 9'd0;
                    tg_rp <= tg_rp + 6'd1;
                end else begin
                    tg_got <= tg_got + 9'd1;
                end
            end
            // FIFOs and reservations (a dropping consumer's beats are discarded on arrival
            // and its queued ones flushed)
            // (nothing moves without a start, an issue, a beat, a pop or a flush)
            if (start || issue || beat || |st_out || |flush)
            for (s = 0; s < 5; s = s + 1) begin
                if (start) begin
                    fwp[s] <= {LFD{1'b0}}; frp[s] <= {LFD{1'b0}}; fcnt[s] <= {(LFD+1){1'b0}};
                    res[s] <= {(LFD+1){1'b0}};
                end else begin
                    fwp[s] <= fwp[s] + LFD'(st_in[s]);
                    frp[s] <= flush[s] ? fwp[s] : frp[s] + LFD'(st_out[s]);
                    fcnt[s] <= flush[s] ? {(LFD+1){1'b0}}
                                        : fcnt[s] + (LFD+1)'(st_in[s]) - (LFD+1)'(st_out[s]);
                    res[s] <= res[s] + ((issue && sel == 3'(s)) ? beats[LFD:0] : {(LFD+1){1'b0}})
                                     - (LFD+1)'(st_out[s])
                                     - (LFD+1)'(beat && rs == 3'(s) && q_drop[s])
                                     - (flush[s] ? fcnt[s] : {(LFD+1){1'b0}});
                end
            end
        end
    end
    assign busy = active || (pend != 12'd0);

    wire unused_ok = ^{unused_awc, bsum[3:0], beats[10:9], left[31:14], rb_resp[0]};
endmodule

`default_nettype wire
