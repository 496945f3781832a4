// dtpu_arg_buf.v -- one input argument of the AXI4-Stream Accelerator Adapter: NBUF
// buffers of DEPTH 64-bit words, filled by an AXI4-Stream target, read by the core
// (contract ADAPTER_RULES "input packets", "reads by the core").
//
// * A packet (to TLAST) fills the buffer after the ready ones (ring order) from word 0;
//   beats past DEPTH are dropped (`overflow` pulse); at TLAST the buffer is ready with its
//   length. TREADY is low while every buffer is ready.
// * The core reads the head (oldest ready) buffer:
//   FIFO=0 (memory): a BRAM port with one cycle of latency; a word at or past the
//   packet's length, or with no ready buffer, reads 0 (`underrun` pulse);
//   FIFO=1: first-word-fall-through; `not_empty` (EMPTY_N) while unread words remain.
// * `release` drops the head buffer (UPDATE_IN_ARG, or the end of a continuous-mode run).
`default_nettype none

module dtpu_arg_buf #(
    parameter integer NBUF  = 2,
    parameter integer DEPTH = 1024,
    parameter integer FIFO  = 0
) (
    input  wire        clk,
    input  wire        reset,          // aresetn low or adapter soft reset
    // AXI4-Stream target
    input  wire [63:0] s_tdata,
    input  wire        s_tvalid,
    output wire        s_tready,
    input  wire        s_tlast,
    output logic       overflow,       // a beat was dropped
    // buffer state
    input  wire        release_head,
    output logic [3:0] nready,
    // memory read port
    input  wire        rd_ce,
    input  wire [31:0] rd_addr,
    output logic [63:0] rd_data,
    output logic       underrun,
    // FIFO read port
    output wire [63:0] f_dout,
    output wire        f_not_empty,
    input  wire        f_pop
);
    localparam integer LW = $clog2(DEPTH + 1);
    localparam integer BW = (NBUF > 1) ? $clog2(NBUF) : 1;
    localparam integer AW = $clog2(NBUF * DEPTH);
    localparam [LW-1:0] DEPTH_L = DEPTH[LW-1:0];
    localparam [BW:0]   NBUF_B = NBUF[BW:0];
    localparam [3:0]    NBUF_4 = NBUF[3:0];

    logic [63:0]      mem [0:NBUF*DEPTH-1];
    logic [NBUF*LW-1:0] len;
    logic [BW-1:0]    head;
    logic             filling;
    logic [LW-1:0]    wptr, rptr;

    // buffer being filled: head + nready, modulo NBUF
    wire [BW:0] fill_sum = {1'b0, head} + nready[BW:0];
    wire [BW-1:0] fill = (fill_sum >= NBUF_B) ? fill_sum[BW-1:0] - NBUF_B[BW-1:0] : fill_sum[BW-1:0];
    wire [BW:0] head_next_sum = {1'b0, head} + 1'b1;
    wire [BW-1:0] head_next = (head_next_sum >= NBUF_B) ? '0 : head_next_sum[BW-1:0];
    wire [LW-1:0] head_len = len[head*LW +: LW];
    // word addresses in mem (32-bit arithmetic, then the AW address bits)
    wire [31:0] wptr32 = {{(32-LW){1'b0}}, wptr};
    wire [31:0] rptr32 = {{(32-LW){1'b0}}, rptr};
    wire [31:0] hlen32 = {{(32-LW){1'b0}}, head_len};
    wire [31:0] fill32 = {{(32-BW){1'b0}}, fill};
    wire [31:0] head32 = {{(32-BW){1'b0}}, head};
    wire [31:0] wa32 = fill32 * DEPTH + wptr32;
    wire [31:0] ra32 = head32 * DEPTH + rd_addr;
    wire [31:0] fa32 = head32 * DEPTH + rptr32;
    wire [AW-1:0] wa = wa32[AW-1:0];
    wire [AW-1:0] ra = ra32[AW-1:0];
    wire [AW-1:0] fa = fa32[AW-1:0];
    wire unused_addr = ^{wa32[31:AW], ra32[31:AW], fa32[31:AW]};

    assign s_tready = !reset && (filling || nready < NBUF_4);
    wire beat = s_tvalid && s_tready;
    wire rel = release_head && (nready != 0);

    always_ff @(posedge clk) begin
        if (reset) begin
            head <= '0;
            nready <= '0;
            filling <= 1'b0;
            wptr <= '0;
            rptr <= '0;
            len <= '0;
            overflow <= 1'b0;
        end else begin
            overflow <= 1'b0;
            if (beat) begin
                if (wptr < DEPTH_L) begin
                    mem[wa] <= s_tdata;
                end else begin
                    overflow <= 1'b1;
                end
                if (s_tlast) begin
                    len[fill*LW +: LW] <= (wptr < DEPTH_L) ? wptr + 1'b1 : wptr;
                    wptr <= '0;
                    filling <= 1'b0;
                end else begin
                    if (wptr < DEPTH_L)
                        wptr <= wptr + 1'b1;
                    filling <= 1'b1;
                end
            end
            nready <= nready + {3'd0, beat && s_tlast} - {3'd0, rel};
            if (rel) begin
                head <= head_next;
                rptr <= '0;
            end else if (FIFO != 0 && f_pop && f_not_empty) begin
                rptr <= rptr + 1'b1;
            end
        end
    end

    // memory read port (FIFO=0)
    wire in_range = (nready != 0) && (rd_addr < hlen32);
    always_ff @(posedge clk) begin
        if (reset) begin
            rd_data <= '0;
            underrun <= 1'b0;
        end else begin
            underrun <= rd_ce && !in_range;
            if (rd_ce)
                rd_data <= in_range ? mem[ra] : 64'd0;
        end
    end

    // FIFO read port (FIFO=1)
    assign f_not_empty = (nready != 0) && (rptr < head_len);
    assign f_dout = mem[fa];
endmodule
`default_nettype wire
