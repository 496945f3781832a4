// npu_axi_rd.v -- read side of one AXI manager port of the Ethos-U85 stand-in (TRM 5.8).
//
// * AR channel: npu_axi_addr (round-robin over NC read clients, AR output register,
//   outstanding bursts from AR issue to the RLAST beat limited to
//   min(max_out_m1 + 1, HW_MAX_OUT)).
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
    output wire [NC-1:0]     rq_ready,
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
    output wire              ARVALID,
    output wire  [5:0]       ARID,
    output wire  [39:0]      ARADDR,
    output wire  [7:0]       ARLEN,
    output wire  [2:0]       ARSIZE,
    output wire  [1:0]       ARBURST,
    output wire  [3:0]       ARCACHE,
    output wire  [1:0]       ARDOMAIN,
    output wire  [2:0]       ARPROT,
    input  wire              ARREADY,
    input  wire              RVALID,
    input  wire [5:0]        RID,
    input  wire [127:0]      RDATA,
    input  wire [1:0]        RRESP,
    input  wire              RLAST,
    output wire              RREADY
);
    assign ARSIZE  = 3'd4;       // 16-byte beats
    assign ARBURST = 2'b01;      // INCR
    assign RREADY  = 1'b1;

    wire r_hs   = RVALID & aclken;               // RREADY is 1
    wire r_done = r_hs & RLAST;
    wire ar_hs  = ARVALID & ARREADY & aclken;
    wire under_limit, quiet;
    wire unused_take;
    wire [((NC > 1) ? $clog2(NC) : 1)-1:0] unused_grant;

    npu_axi_addr #(.NC(NC), .HW_MAX_OUT(HW_MAX_OUT), .MW(6)) u_ar (
        .CLK(CLK), .rst_n(rst_n), .aclken(aclken), .max_out_m1(max_out_m1), .axprot(axprot),
        .block(1'b0), .done(r_done),
        .rq_valid(rq_valid), .rq_ready(rq_ready), .rq_addr(rq_addr), .rq_len(rq_len),
        .rq_id(rq_id), .rq_cache(rq_cache), .rq_domain(rq_domain),
        .take(unused_take), .grant(unused_grant), .under_limit(under_limit), .quiet(quiet),
        .AxVALID(ARVALID), .AxID(ARID), .AxADDR(ARADDR), .AxLEN(ARLEN), .AxCACHE(ARCACHE),
        .AxDOMAIN(ARDOMAIN), .AxPROT(ARPROT), .AxREADY(ARREADY));

    // ---------------------------------------------------------------- read data
    assign rb_valid = r_hs;
    assign rb_id    = RID;
    assign rb_data  = RDATA;
    assign rb_resp  = RRESP;
    assign rb_last  = RLAST;

    assign idle = quiet;

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
