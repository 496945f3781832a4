// dtpu_out_fifo.v -- the output argument: a cut-through FIFO of DEPTH {TLAST, word}
// entries between the core's acc_fifo_write port and the AXI4-Stream initiator
// (contract ADAPTER_RULES "output stream").
//
// While `hold` is high (a run is active and has written a word), the newest entry is not
// offered: whether it ends the run's packet is only known when the run is done, and then
// `mark_last` sets its TLAST in place. `wr_last` sets TLAST at write time (software
// length mode boundaries).
`default_nettype none

module dtpu_out_fifo #(
    parameter integer DEPTH = 32
) (
    input  wire        clk,
    input  wire        reset,
    input  wire        wr_en,
    input  wire [63:0] wr_data,
    input  wire        wr_last,
    output wire        not_full,       // FULL_N
    output wire        empty,
    input  wire        hold,
    input  wire        mark_last,
    output wire [63:0] m_tdata,
    output wire        m_tvalid,
    input  wire        m_tready,
    output wire        m_tlast
);
    localparam integer PW = (DEPTH > 1) ? $clog2(DEPTH) : 1;
    localparam integer CW = $clog2(DEPTH + 1);
    localparam integer LASTI = DEPTH - 1;
    localparam [PW:0] LASTP = LASTI[PW:0];
    localparam [CW-1:0] DEPTH_C = DEPTH[CW-1:0];

    logic [63:0]    data [0:DEPTH-1];
    logic [DEPTH-1:0] lastf;
    logic [PW-1:0]  wptr, rptr;
    logic [CW-1:0]  count;

    wire [PW-1:0] wnext = ({1'b0, wptr} == LASTP) ? '0 : wptr + 1'b1;
    wire [PW-1:0] rnext = ({1'b0, rptr} == LASTP) ? '0 : rptr + 1'b1;
    wire [PW-1:0] newest = (wptr == '0) ? LASTP[PW-1:0] : wptr - 1'b1;

    assign not_full = (count < DEPTH_C);
    assign empty = (count == 0);
    assign m_tvalid = !reset && (count > (hold ? 1 : 0));
    assign m_tdata = data[rptr];
    assign m_tlast = lastf[rptr];
    wire push = wr_en && not_full;
    wire pop = m_tvalid && m_tready;

    always_ff @(posedge clk) begin
        if (push)
            data[wptr] <= wr_data;
    end

    always_ff @(posedge clk) begin
        if (reset) begin
            wptr <= '0;
            rptr <= '0;
            count <= '0;
            lastf <= '0;
        end else begin
            if (push) begin
                wptr <= wnext;
                lastf[wptr] <= wr_last;
            end
            if (mark_last && !empty)
                lastf[newest] <= 1'b1;
            if (pop)
                rptr <= rnext;
            count <= count + {{(CW-1){1'b0}}, push} - {{(CW-1){1'b0}}, pop};
        end
    end
endmodule
`default_nettype wire
