// npu_axi_rd.v -- read side of one AXI manager port of the Ethos-U85 stand-in (TRM 5.8).
//
// * NC read clients present bursts that are already legal (split at the max_beats
//   boundary by the client, ARSIZE = 16 bytes, INCR); a round-robin arbiter picks one.
// * The burst goes into the AR output register. Outstanding bursts (from AR issue to the
//   RLAST beat) are limited to min(max_out_m1 + 1, HW_MAX_OUT) (TRM 2.3.3, 3.3.1.18-21).
// * RREADY is always 1: a client issues a burst only when it can take all its beats.
//   Read beats are broadcast to every client with their RID; a client keeps the beats of
//   its own ID (ARID = {2'b00, channel code}, TRM pmu_axi_channel_t, so an error beat also
//   names its channel).
// * ACLKEN (TRM 5.8): outputs change only at CLK edges where ACLKEN is 1 and inputs are
//   sampled only then.
// * pmu_ev: the per-port AXI PMU events of this side, indexed by the offset inside a
//   16-event family of pmu_event_t (0 rd_trans_accepted, 1 rd_trans_completed,
//   2 rd_data_beat_received, 3 rd_tran_req_stalled, 14 rd_stall_limit).
`default_nettype none

module npu_axi_rd #(
    parameter integer NC = 2,           // read clients
    parameter integer HW_MAX_OUT = 12   // hardware maximum of outstanding reads
) (
    input  wire              CLK,
    input  wire              rst_n,
    input  wire              aclken,
    input  wire [5:0]        max_out_m1,     // min(AXI_x.max_read, CFG_x_CAP.max_read)
    input  wire [2:0]        axprot,
    // client requests (client k in bits [k*W +: W])
    input  wire [NC-1:0]     rq_valid,
    output logic [NC-1:0]    rq_ready,
    input  wire [NC*40-1:0]  rq_addr,
    input  wire [NC*8-1:0]   rq_len,
    input  wire [NC*6-1:0]   rq_id,
    input  wire [NC*4-1:0]   rq_cache,
    input  wire [NC*2-1:0]   rq_domain,
    // read data, to every client
    output wire              rb_valid,
    output wire [5:0]        rb_id,
    output wire [127:0]      rb_data,
    output wire [1:0]        rb_resp,
    output wire              rb_last,
    // status
    output wire              idle,           // no burst pending or outstanding
    output wire [15:0]       pmu_ev,
    // AXI read channels
    output logic             ARVALID,
    output logic [5:0]       ARID,
    output logic [39:0]      ARADDR,
    output logic [7:0]       ARLEN,
    output wire  [2:0]       ARSIZE,
    output wire  [1:0]       ARBURST,
    output logic [3:0]       ARCACHE,
    output logic [1:0]       ARDOMAIN,
    output logic [2:0]       ARPROT,
    input  wire              ARREADY,
    input  wire              RVALID,
    input  wire [5:0]        RID,
    input  wire [127:0]      RDATA,
    input  wire [1:0]        RRESP,
    input  wire              RLAST,
    output wire              RREADY
);
    localparam integer CW = (NC > 1) ? $clog2(NC) : 1;
    localparam integer NCM1 = NC - 1;
    localparam [CW-1:0] LAST = NCM1[CW-1:0];
    localparam [CW-1:0] ONE = {{(CW-1){1'b0}}, 1'b1};

    assign ARSIZE  = 3'd4;       // 16-byte beats
    assign ARBURST = 2'b01;      // INCR
    assign RREADY  = 1'b1;

    // ---------------------------------------------------------------- outstanding limit
    localparam [6:0] HW_LIMIT = HW_MAX_OUT[6:0];
    logic [6:0] outstanding;
    wire  [6:0] limit_cfg = {1'b0, max_out_m1} + 7'd1;
    wire  [6:0] limit = (limit_cfg > HW_LIMIT) ? HW_LIMIT : limit_cfg;
    wire        r_hs   = RVALID & aclken;               // RREADY is 1
    wire        r_done = r_hs & RLAST;
    wire        ar_hs  = ARVALID & ARREADY & aclken;
    // the AR register can take a new burst at this edge
    wire        ar_free = !ARVALID || (ARREADY && aclken);
    wire        under_limit = outstanding < limit;
    wire        can_issue = aclken && ar_free && under_limit;

    // ---------------------------------------------------------------- round-robin arbiter
    logic [CW-1:0] rr;          // client with the highest priority
    logic [CW-1:0] grant, idx;
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
    wire take = any && can_issue;
    always @(*) begin
        rq_ready = {NC{1'b0}};
        if (take) rq_ready[grant] = 1'b1;
    end

    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) begin
            ARVALID <= 1'b0;
            ARID <= 6'd0;
            ARADDR <= 40'd0;
            ARLEN <= 8'd0;
            ARCACHE <= 4'd0;
            ARDOMAIN <= 2'd0;
            ARPROT <= 3'd0;
            rr <= {CW{1'b0}};
            outstanding <= 7'd0;
        end else begin
            if (take) begin
                ARVALID <= 1'b1;
                ARID <= rq_id[grant*6 +: 6];
                ARADDR <= rq_addr[grant*40 +: 40];
                ARLEN <= rq_len[grant*8 +: 8];
                ARCACHE <= rq_cache[grant*4 +: 4];
                ARDOMAIN <= rq_domain[grant*2 +: 2];
                ARPROT <= axprot;
                rr <= (grant == LAST) ? {CW{1'b0}} : grant + ONE;
            end else if (ar_hs) begin
                ARVALID <= 1'b0;
            end
            // a burst counts as outstanding from the moment it enters the AR register
            outstanding <= outstanding + {6'd0, take} - {6'd0, r_done};
        end
    end

    // ---------------------------------------------------------------- read data
    assign rb_valid = r_hs;
    assign rb_id    = RID;
    assign rb_data  = RDATA;
    assign rb_resp  = RRESP;
    assign rb_last  = RLAST;

    assign idle = !ARVALID && (outstanding == 7'd0);

    // ---------------------------------------------------------------- PMU events
    logic [15:0] ev;
    always @(*) begin
        ev = 16'd0;
        ev[0]  = ar_hs;                                   // rd_trans_accepted
        ev[1]  = r_done;                                  // rd_trans_completed
        ev[2]  = r_hs;                                    // rd_data_beat_received
        ev[3]  = ARVALID && !ARREADY && aclken;           // rd_tran_req_stalled
        ev[12] = aclken;                                  // enabled_cycles
        ev[14] = (|rq_valid) && !under_limit && aclken;   // rd_stall_limit
    end
    assign pmu_ev = ev;
endmodule

`default_nettype wire
