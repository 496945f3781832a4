// npu_conv_wi2.v -- the weights of a matrix multiply (NPU_OP_CONV with weights_ifm2, TRM
// 3.10.2 and 4.1) in the Ethos-U85 stand-in: IFM2 elements read over AXI (channel
// rd_ifm_stream) in place of a weight decoder's output.
//
// The weight of OFM channel oc and IFM channel ic is IFM2 element (y=0, x=oc, c=ic) minus
// the IFM2 zero point (TRM 4.1 and Vela: IFM2 holds B as [1, ofm_depth, ifm_depth], the
// operation computes A . B^T; tlm/ethos_u85/ops/conv.py follows the same reading, see its
// module doc). The 1x1 kernel, depth-first and non-sparse weight order (the TRM asserts)
// make a brick of the walker (npu_conv_walk.v, one decoder share: num_wd taken as 1) wblk_o
// OFM channels x 8 IFM channels, brick position o*8 + ii; this unit gives it one OFM
// channel ("row", 8 weights) a cycle, row o for OFM channel fb_oc + o, IFM channels
// fb_ic .. fb_ic+7 (the brick the walker is filling). A row outside the operand (oc >= OFM
// depth or ic >= IFM depth) is zeros and is not read; channels >= IFM depth are zero.
//
// A row of b8 elements is contiguous (NHWC: base + oc*stride_x + ic; NHCWB16: base + 16*oc +
// (ic/16)*stride_c + ic%16, ic a multiple of 8): one single-beat read at its exact address,
// and a second at the next 16-byte boundary when the row crosses it. Up to TAGS rows are
// in flight; their beats wait in a FIFO. The rows of a brick are read once the walker
// starts filling it (from then it takes a row every cycle until the brick is full) and the
// next brick's after the walker has queued this one (`pushed`).
// halt (abort, error): no new reads; busy until every beat is back. pause: no new reads.
`default_nettype none

module npu_conv_wi2 #(
    parameter integer OW = 8                 // weights a cycle (the walker's decoder width)
) (
    input  wire               CLK,
    input  wire               rst_n,
    input  wire               start,         // a pass over the bricks begins
    input  wire               halt,
    input  wire               pause,         // warm reset / debug halt: no new reads
    // operation parameters (stable during the operation)
    input  wire [16:0]        od,            // OFM depth
    input  wire [16:0]        ifd,           // IFM depth
    input  wire [8:0]         wblk_o,        // OFM channels of a brick
    input  wire [39:0]        base,          // region base + IFM2_BASE0
    input  wire [39:0]        sx,            // IFM2_STRIDE_X
    input  wire [39:0]        sc,            // IFM2_STRIDE_C
    input  wire               nhcwb16,
    input  wire               sgn,
    input  wire [15:0]        zp,            // IFM2_ZERO_POINT (b8 range: checked by npu_conv)
    // the walker's brick being filled
    input  wire [16:0]        fb_oc,
    input  wire [16:0]        fb_ic,
    input  wire               pushed,        // the walker queued the brick
    input  wire [3:0]         space,         // weights the walker takes now (dec_space)
    output logic [OW*9-1:0]   out_w,
    output wire [3:0]         out_n,
    // reads (rd_ifm_stream), single beats
    output wire               rq_valid,
    output wire [39:0]        rq_addr,
    input  wire               rq_ready,
    input  wire               rb_valid,
    input  wire [127:0]       rb_data,
    input  wire [1:0]         rb_resp,
    output wire               busy,
    output logic              err            // a read returned an error response
);
    localparam integer TAGS = 4;             // rows in flight
    localparam integer NB = 2 * TAGS;        // beat FIFO entries
    localparam [1:0] S_IDLE = 2'd0, S_RUN = 2'd1, S_WAITP = 2'd2;

    logic [1:0]  st;
    logic [8:0]  ri, rd;                     // rows issued, delivered in this brick
    logic        hb;                         // the row's second beat is next
    logic [5:0]  ob;                         // beats requested, not yet back
    // row tags: {beats (0..2), byte offset of the row in its first beat, elements}
    logic [1:0]  t_nb [0:TAGS-1];
    logic [3:0]  t_off [0:TAGS-1];
    logic [3:0]  t_n [0:TAGS-1];
    logic [$clog2(TAGS):0] t_cnt;
    logic [$clog2(TAGS)-1:0] t_rp, t_wp;
    logic [127:0] bf [0:NB-1];
    logic [$clog2(NB):0] b_cnt;
    logic [$clog2(NB)-1:0] b_rp, b_wp;

    // ---- the next row to read
    wire [16:0] oc = fb_oc + {8'd0, ri};
    wire        r_in = (oc < od) && (fb_ic < ifd);
    wire [16:0] left = ifd - fb_ic;
    wire [3:0]  r_n = (left > 17'd8) ? 4'd8 : left[3:0];
    wire [39:0] r_addr = nhcwb16 ? base + {19'd0, oc, 4'd0} + 40'(fb_ic[16:4] * sc) + {36'd0, fb_ic[3:0]}
                                 : base + 40'(oc * sx) + {23'd0, fb_ic};
    wire [4:0]  r_end = {1'b0, r_addr[3:0]} + {1'b0, r_n};
    wire [1:0]  r_nb = !r_in ? 2'd0 : (r_end > 5'd16) ? 2'd2 : 2'd1;
    wire        issuing = (st == S_RUN) && !halt && !pause && (ri < wblk_o) && (t_cnt < ($clog2(TAGS)+1)'(TAGS) || hb);
    assign rq_valid = issuing && (r_nb != 2'd0);
    assign rq_addr = hb ? {r_addr[39:4] + 36'd1, 4'd0} : r_addr;
    wire        rq_go = rq_valid && rq_ready;
    // a row's tag is pushed with its first beat (or alone, a row that is not read)
    wire        t_push = issuing && !hb && (r_nb == 2'd0 || rq_ready);
    wire        row_next = issuing && (r_nb == 2'd0 || (rq_ready && (hb || r_nb == 2'd1)));

    // ---- the row at the head: its beats are in
    wire [1:0]  h_nb = t_nb[t_rp];
    wire        h_ready = (t_cnt != 0) && (b_cnt >= ($clog2(NB)+1)'(h_nb));
    wire [$clog2(NB)-1:0] b_rp1 = b_rp + 1'b1;
    wire [255:0] h_data = {(h_nb == 2'd2) ? bf[b_rp1] : 128'd0, bf[b_rp]} >> {t_off[t_rp], 3'd0};
    wire        deliver = (st != S_IDLE) && h_ready && (space != 4'd0) && !halt;
    assign out_n = deliver ? 4'(OW) : 4'd0;
    integer l;
    // (raw - zero point) in 9 bits: zero points in the b8 type's range (npu_conv checks) are
    // their low 9 bits, and every difference lies in -255..255
    always @(*) begin
        for (l = 0; l < OW; l = l + 1)
            out_w[l*9 +: 9] = (h_nb == 2'd0 || l >= t_n[t_rp]) ? 9'd0
                            : 9'({sgn & h_data[l*8 + 7], h_data[l*8 +: 8]} - zp[8:0]);
    end
    wire last = deliver && (rd + 9'd1 == wblk_o);
    wire b_in = rb_valid && !halt && (ob != 6'd0);
    wire b_pop = deliver && (h_nb != 2'd0);

    always_ff @(posedge CLK) begin
        if (b_in) bf[b_wp] <= rb_data;
        if (t_push) begin
            t_nb[t_wp] <= r_nb;
            t_off[t_wp] <= r_addr[3:0];
            t_n[t_wp] <= r_n;
        end
    end
    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) begin
            st <= S_IDLE; ri <= 9'd0; rd <= 9'd0; hb <= 1'b0; ob <= 6'd0; err <= 1'b0;
            t_cnt <= '0; t_rp <= '0; t_wp <= '0; b_cnt <= '0; b_rp <= '0; b_wp <= '0;
        end else begin
            ob <= ob + {5'd0, rq_go} - {5'd0, rb_valid && ob != 6'd0};
            if (rb_valid && ob != 6'd0 && rb_resp[1]) err <= 1'b1;
            if (start || halt) begin
                st <= S_IDLE; ri <= 9'd0; rd <= 9'd0; hb <= 1'b0;
                t_cnt <= '0; t_rp <= '0; t_wp <= '0; b_cnt <= '0; b_rp <= '0; b_wp <= '0;
                if (start) err <= 1'b0;
            end else begin
                if (rq_go) hb <= !hb && (r_nb == 2'd2);
                if (row_next) ri <= ri + 9'd1;
                if (t_push) t_wp <= t_wp + 1'b1;
                if (deliver) t_rp <= t_rp + 1'b1;
                t_cnt <= t_cnt + {{$clog2(TAGS){1'b0}}, t_push} - {{$clog2(TAGS){1'b0}}, deliver};
                if (b_in) b_wp <= b_wp + 1'b1;
                if (b_pop) b_rp <= b_rp + $clog2(NB)'(h_nb);
                b_cnt <= b_cnt + {{$clog2(NB){1'b0}}, b_in} - (b_pop ? ($clog2(NB)+1)'(h_nb) : '0);
                if (deliver) rd <= rd + 9'd1;
                case (st)
                    S_IDLE: if (space != 4'd0) st <= S_RUN;
                    S_RUN: if (last) begin
                        st <= pushed ? S_IDLE : S_WAITP;
                        ri <= 9'd0; rd <= 9'd0;
                    end
                    default: if (pushed) st <= S_IDLE;
                endcase
            end
        end
    end
    assign busy = (ob != 6'd0);
    wire unused_ok = ^{rb_resp[0], h_data[255:OW*8], zp[15:9]};
endmodule

`default_nettype wire
