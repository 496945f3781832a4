// npu_axi_wr.v -- write side of one AXI manager port of the Ethos-U85 stand-in (TRM 5.8).
//
// * AW channel: npu_axi_addr (round-robin over NC write clients, AW output register); the
//   client of every burst taken goes into the W-order queue (AXI4 has no WID: W bursts
//   follow AW order).
// * W beats are taken from the client at the head of the W-order queue into the W output
//   register, after its AW has been taken (never before).
// * Outstanding bursts (from AW issue to the B response) are limited to
//   min(max_out_m1 + 1, HW_MAX_OUT) by npu_axi_addr. BREADY is always 1.
// * ACLKEN: outputs change only at CLK edges where ACLKEN is 1; inputs are sampled then.
// * pmu_ev: offsets 4 wr_trans_accepted, 7 wr_data_beat_written, 8 wr_tran_req_stalled,
//   9 wr_data_beat_stalled, 15 wr_stall_limit of a pmu_event_t AXI family.
//   wbeat_id is the AWID of the burst a written beat belongs to (for BW_CH_SEL_EN).
`default_nettype none

module npu_axi_wr #(
    parameter integer NC = 1,           // write clients
    parameter integer HW_MAX_OUT = 16,  // hardware maximum of outstanding writes
    parameter integer WQ_DEPTH = 4      // AW bursts whose W data is not yet sent
) (
    input  wire              CLK,
    input  wire              rst_n,
    input  wire              aclken,
    input  wire [4:0]        max_out_m1,     // min(AXI_x.max_write, CFG_x_CAP.max_write)
    input  wire [2:0]        axprot,
    // client bursts
    input  wire [NC-1:0]     wq_valid,
    output wire [NC-1:0]     wq_ready,
    input  wire [NC*40-1:0]  wq_addr,
    input  wire [NC*8-1:0]   wq_len,
    input  wire [NC*6-1:0]   wq_id,
    input  wire [NC*4-1:0]   wq_cache,
    input  wire [NC*2-1:0]   wq_domain,
    // client write data
    input  wire [NC-1:0]     wd_valid,
    output logic [NC-1:0]    wd_ready,
    input  wire [NC*128-1:0] wd_data,
    input  wire [NC*16-1:0]  wd_strb,
    input  wire [NC-1:0]     wd_last,
    // write responses, to every client
    output wire              wb_valid,
    output wire [5:0]        wb_id,
    output wire [1:0]        wb_resp,
    // status
    output wire              idle,
    output wire [15:0]       pmu_ev,
    output wire [5:0]        wbeat_id,
    // AXI write channels
    output wire              AWVALID,
    output wire  [5:0]       AWID,
    output wire  [39:0]      AWADDR,
    output wire  [7:0]       AWLEN,
    output wire  [2:0]       AWSIZE,
    output wire  [1:0]       AWBURST,
    output wire  [3:0]       AWCACHE,
    output wire  [1:0]       AWDOMAIN,
    output wire  [2:0]       AWPROT,
    input  wire              AWREADY,
    output logic             WVALID,
    output logic [127:0]     WDATA,
    output logic [15:0]      WSTRB,
    output logic             WLAST,
    input  wire              WREADY,
    input  wire              BVALID,
    input  wire [5:0]        BID,
    input  wire [1:0]        BRESP,
    output wire              BREADY
);
    localparam integer CW = (NC > 1) ? $clog2(NC) : 1;
    localparam integer QW = $clog2(WQ_DEPTH);
    localparam [QW:0] QDEPTH = WQ_DEPTH[QW:0];

    assign AWSIZE  = 3'd4;
    assign AWBURST = 2'b01;
    assign BREADY  = 1'b1;

    wire        aw_hs  = AWVALID & AWREADY & aclken;
    wire        w_hs   = WVALID & WREADY & aclken;
    wire        b_hs   = BVALID & aclken;

    // ---------------------------------------------------------------- W-order queue
    logic [CW-1:0] wq_client [0:WQ_DEPTH-1];
    logic [5:0]    wq_awid [0:WQ_DEPTH-1];
    logic [QW-1:0] q_head, q_tail;
    logic [QW:0]   q_count;
    wire           q_full = (q_count == QDEPTH);
    wire           q_empty = (q_count == {(QW+1){1'b0}});
    wire [CW-1:0]  owner = wq_client[q_head];

    // ---------------------------------------------------------------- AW channel
    wire           take, under_limit, aw_quiet;
    wire [CW-1:0]  grant;
    npu_axi_addr #(.NC(NC), .HW_MAX_OUT(HW_MAX_OUT), .MW(5)) u_aw (
        .CLK(CLK), .rst_n(rst_n), .aclken(aclken), .max_out_m1(max_out_m1), .axprot(axprot),
        .block(q_full), .done(b_hs),
        .rq_valid(wq_valid), .rq_ready(wq_ready), .rq_addr(wq_addr), .rq_len(wq_len),
        .rq_id(wq_id), .rq_cache(wq_cache), .rq_domain(wq_domain),
        .take(take), .grant(grant), .under_limit(under_limit), .quiet(aw_quiet),
        .AxVALID(AWVALID), .AxID(AWID), .AxADDR(AWADDR), .AxLEN(AWLEN), .AxCACHE(AWCACHE),
        .AxDOMAIN(AWDOMAIN), .AxPROT(AWPROT), .AxREADY(AWREADY));

    // ---------------------------------------------------------------- W register
    wire w_free = !WVALID || (WREADY && aclken);
    wire w_take = aclken && w_free && !q_empty && wd_valid[owner];
    wire w_pop  = w_take && wd_last[owner];
    always @(*) begin
        wd_ready = {NC{1'b0}};
        if (w_take) wd_ready[owner] = 1'b1;
    end

    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) begin
            WVALID <= 1'b0;
            WDATA <= 128'd0;
            WSTRB <= 16'd0;
            WLAST <= 1'b0;
            q_head <= {QW{1'b0}};
            q_tail <= {QW{1'b0}};
            q_count <= {(QW+1){1'b0}};
        end else if (take || w_take || WVALID) begin
            // (w_hs implies WVALID, w_pop implies w_take)
            if (take) q_tail <= q_tail + {{(QW-1){1'b0}}, 1'b1};
            if (w_take) begin
                WVALID <= 1'b1;
                WDATA <= wd_data[owner*128 +: 128];
                WSTRB <= wd_strb[owner*16 +: 16];
                WLAST <= wd_last[owner];
            end else if (w_hs) begin
                WVALID <= 1'b0;
            end
            if (w_pop) q_head <= q_head + {{(QW-1){1'b0}}, 1'b1};
            q_count <= q_count + {{QW{1'b0}}, take} - {{QW{1'b0}}, w_pop};
        end
    end

    always_ff @(posedge CLK) begin
        if (take) begin
            wq_client[q_tail] <= grant;
            wq_awid[q_tail] <= wq_id[grant*6 +: 6];
        end
    end

    // AWID of the beat in the W register
    logic [5:0] w_id;
    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) w_id <= 6'd0;
        else if (w_take) w_id <= wq_awid[q_head];
    end
    assign wbeat_id = w_id;

    assign wb_valid = b_hs;
    assign wb_id    = BID;
    assign wb_resp  = BRESP;

    assign idle = aw_quiet && !WVALID && q_empty;

    logic [15:0] ev;
    always @(*) begin
        ev = 16'd0;
        ev[4]  = aw_hs;                                   // wr_trans_accepted
        ev[7]  = w_hs;                                    // wr_data_beat_written
        ev[8]  = AWVALID && !AWREADY && aclken;           // wr_tran_req_stalled
        ev[9]  = WVALID && !WREADY && aclken;             // wr_data_beat_stalled
        ev[12] = aclken;                                  // enabled_cycles
        ev[15] = (|wq_valid) && !under_limit && aclken;   // wr_stall_limit
    end
    assign pmu_ev = ev;
endmodule

`default_nettype wire
