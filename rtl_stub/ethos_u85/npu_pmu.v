// npu_pmu.v -- PMU of the Ethos-U85 stand-in: PMU and PMU_COUNTERS pages (TRM 3.3.4, 3.3.5).
//
// PMCR (cnt_en, mask_en, event_cnt_rst, cycle_cnt_rst), PMCNTENSET/CLR, PMOVSSET/CLR,
// PMINTSET/CLR, PMCCNTR (48-bit), PMCCNTR_CFG, PMCAXI_CHAN, PMCLUT, PMEVCNTR0..7,
// PMEVTYPER0..7. Offsets and masks from gen/npu_regs.vh.
//
// Counting rule (as the TLM, tlm/pmu.py): a counter advances when PMCR.cnt_en = 1, its
// PMCNTEN bit is set and counting is not masked by NPU_OP_PMU_MASK (the mask applies only
// when PMCR.mask_en = 1). Counter 0 counts the PMCLUT compound event when PCM_LUT_EN_0 = 1.
// PMCCNTR counts cycles; with PMCCNTR_CFG.START != no_event it is gated: closed after a
// PMCCNTR_CFG write, opened by a START event (counting that cycle), closed after a cycle
// with a STOP event. Overflow of PMEVCNTRn (32 bits) or PMCCNTR (48 bits) sets its PMOVS
// bit; a newly set bit of PMOVS & PMINTEN raises STATUS.pmu_irq_raised (irq_set pulse).
//
// Events (one occurrence per cycle at most: one SRAM and one EXT port):
//   cycle (17), npu_idle (32), npu_active (35);
//   AXI families of both groups, sum (128.., 384..) and port 0 (512.., 640..):
//   rd_trans_accepted, rd_trans_completed, rd_data_beat_received, rd_tran_req_stalled,
//   wr_trans_accepted, wr_data_beat_written, wr_tran_req_stalled, wr_data_beat_stalled,
//   enabled_cycles, rd_stall_limit, wr_stall_limit. PMEVTYPERn.D0 (PMCCNTR_CFG S0/E0)
//   removes port 0. PMCAXI_CHAN.BW_CH_SEL_EN restricts the two bandwidth events
//   (rd_data_beat_received, wr_data_beat_written) to channel CH_SEL.
//   Not counted (always 0): MAC/AO/WD activity (no kernel datapath yet), axi_latency_*,
//   ecc_*, ports 1..3 of a group.
`default_nettype none

module npu_pmu (
    input  wire          CLK,
    input  wire          rst_n,
    // register access (from npu_apb_regs)
    input  wire          we,
    input  wire [12:0]   addr,
    input  wire [31:0]   wdata,
    output logic [31:0]  rdata,
    // events
    input  wire          running,
    input  wire [15:0]   ev_sram,         // AXI family events of port SRAM0
    input  wire [15:0]   ev_ext,          // ... of port EXT0
    input  wire [3:0]    sram_rd_ch,      // channel of the read beat / written beat
    input  wire [3:0]    sram_wr_ch,
    input  wire [3:0]    ext_rd_ch,
    input  wire [3:0]    ext_wr_ch,
    // NPU_OP_PMU_MASK
    input  wire          mask_we,
    input  wire          mask_val,
    output wire          irq_set
);
`include "gen/npu_regs.vh"

    localparam [31:0] CNT_MASK = NPU_WMASK_PMCNTENSET;   // E0..E7, CC

    logic        cnt_en, mask_en, op_enable, cc_gate;
    logic [31:0] cnten, ovs, inten;
    logic [47:0] ccnt;
    logic [31:0] cc_cfg, axi_chan, lut;
    wire  [255:0] evcnt_f;               // PMEVCNTRn at [32n +: 32]
    wire  [255:0] evtype_f;              // PMEVTYPERn at [32n +: 32]
    // PMEVCNTRn / PMEVTYPERn decode: both arrays are 32-byte aligned
    wire        a_evcnt  = (addr[12:5] == NPU_REG_PMEVCNTR0[12:5]) && (addr[1:0] == 2'd0);
    wire        a_evtype = (addr[12:5] == NPU_REG_PMEVTYPER0[12:5]) && (addr[1:0] == 2'd0);
    wire [2:0]  a_n      = addr[4:2];

    // ---------------------------------------------------------------- events
    wire       bw_en  = axi_chan[NPU_F_PMCAXI_CHAN_BW_CH_SEL_EN];
    wire [3:0] ch_sel = axi_chan[NPU_F_PMCAXI_CHAN_CH_SEL +: 4];
    logic [15:0] evs, eve;
    always @(*) begin
        evs = ev_sram;
        eve = ev_ext;
        if (bw_en) begin
            evs[2] = ev_sram[2] && (sram_rd_ch == ch_sel);
            evs[7] = ev_sram[7] && (sram_wr_ch == ch_sel);
            eve[2] = ev_ext[2] && (ext_rd_ch == ch_sel);
            eve[7] = ev_ext[7] && (ext_wr_ch == ch_sel);
        end
    end

    function evbit;
        input [9:0]  e;
        input        dis;          // port disable D0 (the only port of a group)
        input        run;
        input [15:0] fs;           // SRAM family
        input [15:0] fe;           // EXT family
        begin
            if (e == NPU_EV_CYCLE) evbit = 1'b1;
            else if (e == NPU_EV_NPU_IDLE) evbit = !run;
            else if (e == NPU_EV_NPU_ACTIVE) evbit = run;
            // families: sum over SRAM ports, sum over EXT ports, SRAM0, EXT0
            else if (e[9:4] == NPU_EV_SRAM_RD_TRANS_ACCEPTED[9:4]
                  || e[9:4] == NPU_EV_SRAM0_RD_TRANS_ACCEPTED[9:4]) evbit = fs[e[3:0]] && !dis;
            else if (e[9:4] == NPU_EV_EXT_RD_TRANS_ACCEPTED[9:4]
                  || e[9:4] == NPU_EV_EXT0_RD_TRANS_ACCEPTED[9:4]) evbit = fe[e[3:0]] && !dis;
            else evbit = 1'b0;
        end
    endfunction

    logic [7:0] ev;                     // event of counter n this cycle
    integer i;
    always @(*) begin
        for (i = 0; i < 8; i = i + 1)
            ev[i] = evbit(evtype_f[i*32 +: 10], evtype_f[i*32+12], running, evs, eve);
    end
    wire lut_en = lut[NPU_F_PMCLUT_PCM_LUT_EN_0];
    wire lut_ev = lut[NPU_F_PMCLUT_PMC_LUT_0 + {28'd0, ev[3:0]}];
    wire [9:0] cc_start = cc_cfg[NPU_F_PMCCNTR_CFG_CYCLE_CNT_CFG_START +: 10];
    wire [9:0] cc_stop  = cc_cfg[NPU_F_PMCCNTR_CFG_CYCLE_CNT_CFG_STOP +: 10];
    wire start_ev = evbit(cc_start, cc_cfg[12], running, evs, eve);
    wire stop_ev  = evbit(cc_stop, cc_cfg[28], running, evs, eve);

    wire counting = cnt_en && !(mask_en && !op_enable);
    wire [7:0] inc = {8{counting}} & cnten[7:0] & {ev[7:1], lut_en ? lut_ev : ev[0]};
    wire cc_on   = counting && cnten[31];
    wire cc_open = cc_gate || (cc_start != NPU_EV_NO_EVENT && start_ev);
    wire cc_inc  = cc_on && cc_open;

    // ---------------------------------------------------------------- registers
    wire w_pmcr   = we && addr == NPU_REG_PMCR;
    wire w_ccfg   = we && addr == NPU_REG_PMCCNTR_CFG;
    logic [7:0] ev_ovf;                  // counter n wraps this cycle
    wire [31:0] ovs_ovf = {cc_inc && ccnt == 48'hFFFF_FFFF_FFFF, 23'd0, ev_ovf};
    logic [31:0] ovs_n, inten_n;
    always @(*) begin
        ovs_n = ovs | ovs_ovf;
        inten_n = inten;
        if (we && addr == NPU_REG_PMOVSSET) ovs_n = ovs_n | (wdata & CNT_MASK);
        if (we && addr == NPU_REG_PMOVSCLR) ovs_n = ovs_n & ~(wdata & CNT_MASK);
        if (we && addr == NPU_REG_PMINTSET) inten_n = inten | (wdata & CNT_MASK);
        if (we && addr == NPU_REG_PMINTCLR) inten_n = inten & ~(wdata & CNT_MASK);
    end
    assign irq_set = |((ovs_n & inten_n) & ~(ovs & inten));

    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) begin
            cnt_en <= 1'b0;
            mask_en <= 1'b0;
            op_enable <= 1'b1;
            cc_gate <= 1'b1;
            cnten <= 32'd0;
            ovs <= 32'd0;
            inten <= 32'd0;
            ccnt <= 48'd0;
            cc_cfg <= 32'd0;
            axi_chan <= 32'd0;
            lut <= 32'd0;
        end else if (we || mask_we || cc_on || ev_ovf != 8'd0) begin
            // otherwise ovs_n == ovs (no write, cc_inc implies cc_on, no ev_ovf),
            // inten_n == inten, and every other assignment needs we, mask_we or cc_on
            ovs <= ovs_n;
            inten <= inten_n;
            if (mask_we && mask_en) op_enable <= mask_val;
            // cycle counter
            if (we && addr == NPU_REG_PMCCNTR_LO) ccnt[31:0] <= wdata;
            else if (we && addr == NPU_REG_PMCCNTR_HI) ccnt[47:32] <= wdata[15:0] & NPU_WMASK_PMCCNTR_HI[15:0];
            else if (w_pmcr && wdata[NPU_F_PMCR_CYCLE_CNT_RST]) ccnt <= 48'd0;
            else if (cc_inc) ccnt <= ccnt + 48'd1;
            if (w_ccfg) cc_gate <= (wdata[NPU_F_PMCCNTR_CFG_CYCLE_CNT_CFG_START +: 10] == NPU_EV_NO_EVENT);
            else if (cc_on) cc_gate <= cc_open && !(cc_stop != NPU_EV_NO_EVENT && stop_ev);
            if (w_pmcr) begin
                cnt_en <= wdata[NPU_F_PMCR_CNT_EN];
                mask_en <= wdata[NPU_F_PMCR_MASK_EN];
            end
            if (we && addr == NPU_REG_PMCNTENSET) cnten <= cnten | (wdata & CNT_MASK);
            if (we && addr == NPU_REG_PMCNTENCLR) cnten <= cnten & ~(wdata & CNT_MASK);
            if (w_ccfg) cc_cfg <= wdata & NPU_WMASK_PMCCNTR_CFG;
            if (we && addr == NPU_REG_PMCAXI_CHAN) axi_chan <= wdata & NPU_WMASK_PMCAXI_CHAN;
            if (we && addr == NPU_REG_PMCLUT) lut <= wdata & NPU_WMASK_PMCLUT;
        end
    end

    // ---------------------------------------------------------------- read
    always @(*) begin
        rdata = 32'd0;
        case (addr)
            NPU_REG_PMCR:        rdata = (NPU_RST_PMCR & NPU_RMASK_PMCR)
                                       | ({31'd0, cnt_en} << NPU_F_PMCR_CNT_EN)
                                       | ({31'd0, mask_en} << NPU_F_PMCR_MASK_EN);
            NPU_REG_PMCNTENSET,
            NPU_REG_PMCNTENCLR:  rdata = cnten;
            NPU_REG_PMOVSSET,
            NPU_REG_PMOVSCLR:    rdata = ovs;
            NPU_REG_PMINTSET,
            NPU_REG_PMINTCLR:    rdata = inten;
            NPU_REG_PMCCNTR_LO:  rdata = ccnt[31:0];
            NPU_REG_PMCCNTR_HI:  rdata = {16'd0, ccnt[47:32]};
            NPU_REG_PMCCNTR_CFG: rdata = cc_cfg;
            NPU_REG_PMCAXI_CHAN: rdata = axi_chan;
            NPU_REG_PMCLUT:      rdata = lut;
            default: begin
                if (a_evcnt) rdata = evcnt_f[a_n*32 +: 32];
                else if (a_evtype) rdata = evtype_f[a_n*32 +: 32];
            end
        endcase
    end

    // ---------------------------------------------------------------- PMEVCNTRn, PMEVTYPERn
    genvar gn;
    generate
        for (gn = 0; gn < 8; gn = gn + 1) begin : g_cnt
            localparam [2:0] N = gn[2:0];
            logic [31:0] cnt, typ;
            always_ff @(posedge CLK or negedge rst_n) begin
                if (!rst_n) begin
                    cnt <= 32'd0;
                    typ <= 32'd0;
                end else if (we || inc[gn]) begin
                    // (w_pmcr implies we: without a write or an event nothing changes)
                    // a register write wins over counting
                    if (we && a_evcnt && a_n == N) cnt <= wdata;
                    else if (w_pmcr && wdata[NPU_F_PMCR_EVENT_CNT_RST]) cnt <= 32'd0;
                    else if (inc[gn]) cnt <= cnt + 32'd1;
                    if (we && a_evtype && a_n == N) typ <= wdata & NPU_WMASK_PMEVTYPER0;
                end
            end
            assign evcnt_f[gn*32 +: 32] = cnt;
            assign evtype_f[gn*32 +: 32] = typ;
            assign ev_ovf[gn] = inc[gn] && (cnt == 32'hFFFF_FFFF);
        end
    endgenerate
endmodule

`default_nettype wire
