// npu_cmd_fetch.v -- command-stream fetch of the Ethos-U85 stand-in (TRM 3.3.1.5-8, 3.5.3).
//
// Reads the stream at QBASE + offset over AXI (channel rd_cmd, attributes of
// MEM_ATTR[QCONFIG.cmd_region0], chosen by the caller) in blocks that end at a 64-byte
// boundary: one INCR burst of 1..4 16-byte beats, which never crosses any max_beats
// boundary (64 bytes is the smallest). A block is fetched only if its first byte lies
// before QBASE + QSIZE, so reads go at most to the next 64-byte boundary past the end of
// the stream, within the 128 bytes the TRM allows (TRM 3.3.1.8).
//
// The beats go into a DEPTH-beat buffer; the decoder sees the next one or two 32-bit words
// (w0, w1) and pops one or two. A block is issued only when the buffer has room for all
// its beats, so read data is always accepted.
//
// restart (pulse) flushes the buffer and restarts fetching at restart_off: reads still in
// flight are waited for and their data dropped. An error beat (RRESP SLVERR/DECERR) stops
// the buffer from taking more data until the next restart: the words after it are never
// decoded (the error itself is recorded by the fault logic and stops the NPU).
`default_nettype none

module npu_cmd_fetch #(
    parameter integer DEPTH = 8                  // buffer size in 16-byte beats (>= 4)
) (
    input  wire          CLK,
    input  wire          rst_n,
    input  wire          restart,
    input  wire [31:0]   restart_off,
    input  wire          enable,                 // may issue new reads
    input  wire [39:0]   qbase,
    input  wire [31:0]   qsize,
    // read requests (the caller adds ARID, the port, AxCACHE and AxDOMAIN)
    output wire          rq_valid,
    output wire [39:0]   rq_addr,
    output wire [7:0]    rq_len,
    input  wire          rq_ready,
    // read data of this client (ARID matched by the caller)
    input  wire          rb_valid,
    input  wire [127:0]  rb_data,
    input  wire [1:0]    rb_resp,
    // words to the decoder
    output wire          w_have1,
    output wire          w_have2,
    output wire [31:0]   w0,
    output wire [31:0]   w1,
    input  wire          pop1,
    input  wire          pop2,
    output wire          idle                    // no read in flight, not flushing
);
    localparam integer BW = $clog2(DEPTH);       // beat index width
    localparam [BW:0] DEPTH_C = DEPTH[BW:0];
    localparam [BW-1:0] BONE = {{(BW-1){1'b0}}, 1'b1};

    logic [127:0] buf_data [0:DEPTH-1];
    logic [BW-1:0] hd, tl;                       // head (decoder side) and tail (fill side)
    logic [BW:0]   count;                        // beats stored
    logic [BW:0]   inflight;                     // beats requested, not yet received
    logic [1:0]    widx;                         // next word inside the head beat
    logic [6:0]    avail;                        // words stored and not yet popped
    logic [31:0]   fptr;                         // stream offset of the next block
    logic          flushing;
    logic [31:0]   pend_off;
    logic          first_beat;                   // the next beat stored starts the buffer
    logic [1:0]    first_sw;                     // its first valid word
    logic          poisoned;

    // ---------------------------------------------------------------- block request
    wire [39:0] qb = {qbase[39:2], 2'b00};
    wire [31:0] qsize_al = {qsize[31:2], 2'b00};
    wire [39:0] a = qb + {8'd0, fptr};
    wire [2:0]  beats = 3'd4 - {1'b0, a[5:4]};
    wire [BW:0] beats_w = {{(BW-2){1'b0}}, beats};
    wire        room = (count + inflight + beats_w) <= DEPTH_C;
    assign rq_valid = enable && !flushing && !poisoned && (fptr < qsize_al) && room;
    assign rq_addr  = a;
    assign rq_len   = {6'd0, 2'd3 - a[5:4]};
    wire        issue = rq_valid && rq_ready;
    wire [31:0] fptr_next = fptr + (32'd64 - {26'd0, a[5:0]});

    // ---------------------------------------------------------------- beats in
    wire store = rb_valid && !flushing && !poisoned && (rb_resp[1] == 1'b0);
    wire [1:0] sw = first_beat ? first_sw : 2'd0;

    // ---------------------------------------------------------------- words out
    wire [BW-1:0] hd1 = hd + BONE;
    wire [127:0]  hbeat = buf_data[hd];
    wire [127:0]  nbeat = buf_data[hd1];
    assign w0 = hbeat[widx*32 +: 32];
    wire [1:0]    widx1 = widx + 2'd1;
    assign w1 = (widx == 2'd3) ? nbeat[31:0] : hbeat[widx1*32 +: 32];
    assign w_have1 = !flushing && (avail >= 7'd1);
    assign w_have2 = !flushing && (avail >= 7'd2);
    wire       do1 = pop1 && w_have1;
    wire       do2 = pop2 && w_have2;
    wire [2:0] npop = do2 ? 3'd2 : (do1 ? 3'd1 : 3'd0);
    wire [2:0] wsum = {1'b0, widx} + npop;        // 0..5
    wire       pop_head = wsum[2];                // passed the end of the head beat

    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) begin
            hd <= {BW{1'b0}};
            tl <= {BW{1'b0}};
            count <= {(BW+1){1'b0}};
            inflight <= {(BW+1){1'b0}};
            widx <= 2'd0;
            avail <= 7'd0;
            fptr <= 32'd0;
            flushing <= 1'b0;
            pend_off <= 32'd0;
            first_beat <= 1'b1;
            first_sw <= 2'd0;
            poisoned <= 1'b0;
        end else if (issue || rb_valid || restart || flushing || store || pop_head
                     || npop != 3'd0) begin
            // (without any of these, every assignment below keeps its variable's value)
            inflight <= inflight + (issue ? beats_w : {(BW+1){1'b0}})
                        - {{BW{1'b0}}, rb_valid};
            if (restart) begin
                flushing <= 1'b1;
                pend_off <= restart_off;
            end else if (flushing && inflight == {(BW+1){1'b0}}) begin
                // every dropped read has returned: empty the buffer and go
                flushing <= 1'b0;
                poisoned <= 1'b0;
                hd <= {BW{1'b0}};
                tl <= {BW{1'b0}};
                count <= {(BW+1){1'b0}};
                widx <= 2'd0;
                avail <= 7'd0;
                fptr <= pend_off;
                first_beat <= 1'b1;
                first_sw <= qb[3:2] + pend_off[3:2];
            end else begin
                if (issue) fptr <= fptr_next;
                if (rb_valid && rb_resp[1] && !flushing) poisoned <= 1'b1;
                if (store) begin
                    tl <= tl + BONE;
                    first_beat <= 1'b0;
                end
                if (store && first_beat) widx <= sw;    // the buffer is empty here
                else if (npop != 3'd0) widx <= wsum[1:0];
                if (pop_head) hd <= hd1;
                count <= count + {{BW{1'b0}}, store} - {{BW{1'b0}}, pop_head};
                avail <= avail + (store ? {4'd0, 3'd4 - {1'b0, sw}} : 7'd0) - {4'd0, npop};
            end
        end
    end

    always_ff @(posedge CLK) begin
        if (store && !restart) buf_data[tl] <= rb_data;
    end

    assign idle = !flushing && (inflight == {(BW+1){1'b0}});

    wire unused_ok = ^{qbase[1:0], qsize[1:0], rb_resp[0], nbeat[127:32]};
endmodule

`default_nettype wire
