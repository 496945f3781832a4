// npu_axi_addr.v -- address channel (AR or AW) of one AXI manager port side of the
// Ethos-U85 stand-in (TRM 5.8), shared by npu_axi_rd and npu_axi_wr.
//
// * NC clients present bursts that are already legal (split at the max_beats boundary by
//   the client, 16-byte beats, INCR); a round-robin arbiter picks one and loads it into
//   the address output register (AxVALID ... AxPROT), AxPROT from PROT.
// * Outstanding bursts (from address issue to `done`: the RLAST beat or the B response) are
//   limited to min(max_out_m1 + 1, HW_MAX_OUT) (TRM 2.3.3, 3.3.1.18-21); `block` holds
//   issue for a side-specific reason (the write side's W-order queue is full).
// * ACLKEN: the register changes only at CLK edges where ACLKEN is 1.
`default_nettype none

module npu_axi_addr #(
    parameter integer NC = 2,           // clients
    parameter integer HW_MAX_OUT = 12,  // hardware maximum of outstanding bursts
    parameter integer MW = 6            // width of max_out_m1
) (
    input  wire              CLK,
    input  wire              rst_n,
    input  wire              aclken,
    input  wire [MW-1:0]     max_out_m1,     // min(AXI_x.max_y, CFG_x_CAP.max_y)
    input  wire [2:0]        axprot,
    input  wire              block,
    input  wire              done,           // a burst completed at this edge
    // client requests (client k in bits [k*W +: W])
    input  wire [NC-1:0]     rq_valid,
    output logic [NC-1:0]    rq_ready,
    input  wire [NC*40-1:0]  rq_addr,
    input  wire [NC*8-1:0]   rq_len,
    input  wire [NC*6-1:0]   rq_id,
    input  wire [NC*4-1:0]   rq_cache,
    input  wire [NC*2-1:0]   rq_domain,
    // the burst taken at this edge, and by whom
    output wire              take,
    output logic [((NC > 1) ? $clog2(NC) : 1)-1:0] grant,
    output wire              under_limit,
    output wire              quiet,          // nothing in the register or outstanding
    // AXI address channel
    output logic             AxVALID,
    output logic [5:0]       AxID,
    output logic [39:0]      AxADDR,
    output logic [7:0]       AxLEN,
    output logic [3:0]       AxCACHE,
    output logic [1:0]       AxDOMAIN,
    output logic [2:0]       AxPROT,
    input  wire              AxREADY
);
    localparam integer CW = (NC > 1) ? $clog2(NC) : 1;
    localparam integer NCM1 = NC - 1;
    localparam [CW-1:0] LAST = NCM1[CW-1:0];
    localparam [CW-1:0] ONE = {{(CW-1){1'b0}}, 1'b1};
    localparam integer OW = MW + 1;     // outstanding counter: up to 2^MW
    localparam [OW-1:0] HW_LIMIT = HW_MAX_OUT[OW-1:0];
    localparam [OW-1:0] OW_ONE = {{(OW-1){1'b0}}, 1'b1};

    logic [OW-1:0] outstanding;
    wire  [OW-1:0] limit_cfg = {1'b0, max_out_m1} + OW_ONE;
    wire  [OW-1:0] limit = (limit_cfg > HW_LIMIT) ? HW_LIMIT : limit_cfg;
    // the register can take a new burst at this edge
    wire           free = !AxVALID || (AxREADY && aclken);
    assign under_limit = outstanding < limit;

    // ---------------------------------------------------------------- round-robin arbiter
    logic [CW-1:0] rr;          // client with the highest priority
    logic [CW-1:0] idx;
    logic          any;
    integer i;
    always @(*) begin
        grant = rr;
        any = 1'b0;
        idx = rr;
        for (i = 0; i < NC; i = i + 1) begin
            if (!any && rq_valid[idx]) begin
                grant = idx;
                any = 1'b1;
            end
            idx = (idx == LAST) ? {CW{1'b0}} : idx + ONE;
        end
    end
    assign take = any && aclken && free && under_limit && !block;
    always @(*) begin
        rq_ready = {NC{1'b0}};
        if (take) rq_ready[grant] = 1'b1;
    end

    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) begin
            AxVALID <= 1'b0;
            AxID <= 6'd0;
            AxADDR <= 40'd0;
            AxLEN <= 8'd0;
            AxCACHE <= 4'd0;
            AxDOMAIN <= 2'd0;
            AxPROT <= 3'd0;
            rr <= {CW{1'b0}};
            outstanding <= {OW{1'b0}};
        end else if (take || AxVALID || done) begin
            if (take) begin
                AxVALID <= 1'b1;
                AxID <= rq_id[grant*6 +: 6];
                AxADDR <= rq_addr[grant*40 +: 40];
                AxLEN <= rq_len[grant*8 +: 8];
                AxCACHE <= rq_cache[grant*4 +: 4];
                AxDOMAIN <= rq_domain[grant*2 +: 2];
                AxPROT <= axprot;
                rr <= (grant == LAST) ? {CW{1'b0}} : grant + ONE;
            end else if (AxVALID && AxREADY && aclken) begin
                AxVALID <= 1'b0;
            end
            // a burst counts as outstanding from the moment it enters the register
            outstanding <= outstanding + {{(OW-1){1'b0}}, take} - {{(OW-1){1'b0}}, done};
        end
    end

    assign quiet = !AxVALID && (outstanding == {OW{1'b0}});
endmodule

`default_nettype wire
