// npu_apb_regs.v -- APB5 completer and register file of the Ethos-U85 stand-in (TRM 3.1-3.4, 5.9).
//
// Offsets, reset words and write/read masks come from gen/npu_regs.vh (generated from
// tlm/registers.py). Access rules, checked in this order (TRM 3.1.1, 3.4; same order as the
// TLM):
//   1. PADDR[1:0] != 0                      -> PSLVERR, PRDATA 0
//   2. write with PSTRB != 4'b1111          -> PSLVERR
//   3. not (PPROT[0] >= CPL && PPROT[1] <= CSL) -> PSLVERR, PRDATA 0, no write effect
//   4. during a reset sequence: STATUS reads 0x00000008, other reads 0; a CMD write takes
//      only clock_q_enable/power_q_enable; a RESET write updates the pending privilege;
//      any other write -> PSLVERR
//   5. reserved offsets read 0 and ignore writes (no error)
//   6. in RUNNING, accesses the TRM calls UNPREDICTABLE (any access to QBASE, QCONFIG,
//      QSIZE, COND_STATUS, POWER_CTRL; a REGIONCFG write) -> PSLVERR, no effect
//   7. writes to ro registers are ignored; wo fields read 0
// Timing: a transfer is decoded and performed at the first PCLKEN-qualified edge at which
// PSEL is high (its setup phase); PRDATA and PSLVERR are registered; PREADY rises for the
// access phase, so a transfer has no wait state. While the clock Q-Channel is in
// Q_STOPPED (the clock would be gated) a transfer is held with PREADY low.
`default_nettype none

module npu_apb_regs #(
    parameter [31:0] CONFIG_WORD = 32'h20000118
) (
    input  wire          CLK,
    input  wire          nRESET,
    input  wire          core_rst_n,
    // APB5
    input  wire          PCLKEN,
    input  wire          PSEL,
    input  wire          PENABLE,
    input  wire [2:0]    PPROT,
    input  wire          PWRITE,
    input  wire [12:0]   PADDR,
    input  wire [31:0]   PWDATA,
    input  wire [3:0]    PSTRB,
    output wire          PREADY,
    output logic         PSLVERR,
    output logic [31:0]  PRDATA,
    input  wire          stall,              // clock Q-Channel stopped
    // CPM
    input  wire          reset_status,
    input  wire          soft_clear,
    input  wire          cpl,
    input  wire          csl,
    input  wire [1:0]    reset_word,
    input  wire [31:0]   cfg_sram_cap,
    input  wire [31:0]   cfg_ext_cap,
    input  wire [39:0]   cfg_sram_hash0,
    output wire          reset_wr,
    output wire          new_cpl,
    output wire          new_csl,
    output wire [1:0]    reset_wdata,
    output wire          cmd_wr,
    // core status
    input  wire [31:0]   status_core,
    input  wire          running,
    input  wire [31:0]   qread,
    input  wire          cond_flag,
    // CMD actions (pulses)
    output wire          cmd_start,
    output wire          cmd_clear_irq,
    output wire          cmd_stop_req,
    output wire [15:0]   cmd_clr_hist,
    output wire          q_written,
    // register values
    output wire          clock_q_enable,
    output wire          power_q_enable,
    output logic [39:0]  qbase,
    output logic [31:0]  qsize,
    output logic [1:0]   qconfig,
    output logic [15:0]  regioncfg,
    output wire  [31:0]  mem_attr,           // MEM_ATTR0..3, 8 bits each
    output logic [17:0]  axi_sram,
    output logic [17:0]  axi_ext,
    output wire  [319:0] basep,              // BASEP0..7, 40 bits each
    // PMU pages
    output wire          pmu_we,
    output wire [12:0]   pmu_addr,
    output wire [31:0]   pmu_wdata,
    input  wire [31:0]   pmu_rdata
);
`include "gen/npu_regs.vh"

    // ---------------------------------------------------------------- transfer
    logic pend;                                  // transfer performed, access phase pending
    wire  go = PCLKEN && PSEL && !pend && !stall;
    assign PREADY = pend;

    wire [10:0] widx = PADDR[12:2];
    wire unaligned = (PADDR[1:0] != 2'b00);
    wire subword   = PWRITE && (PSTRB != 4'b1111);
    wire permitted = (PPROT[0] || !cpl) && (!PPROT[1] || csl);
    wire defined   = NPU_MAP_DEFINED[widx];
    wire ro        = NPU_MAP_RO[widx];
    wire run_bad   = running && (NPU_MAP_STOPPED_RW[widx] || (PWRITE && NPU_MAP_STOPPED_W[widx]));
    wire is_pmu    = (PADDR >= NPU_PAGE_PMU) && (PADDR < NPU_PAGE_PMU + 13'h0080)
                  || (PADDR >= NPU_PAGE_PMU_COUNTERS) && (PADDR < NPU_PAGE_PMU_COUNTERS + 13'h0100);
    wire a_cmd     = (PADDR == NPU_REG_CMD);
    // BASEP0..7 (indexed): BASEPn_LO at NPU_REG_BASEP0_LO + 8n, BASEPn_HI 4 bytes above, the
    // same masks for every n (the layout of gen/npu_regs.vh; tests/test_rtl_lint.py checks it)
    wire       a_basep = (PADDR >= NPU_REG_BASEP0_LO) && (PADDR <= NPU_REG_BASEP7_HI);
    wire [3:0] bp_word = PADDR[5:2] - NPU_REG_BASEP0_LO[5:2];   // word in the 64-byte block
    wire [2:0] bp_n    = bp_word[3:1];
    wire       bp_hi   = bp_word[0];
    wire a_reset   = (PADDR == NPU_REG_RESET);

    // error and write enable of the transfer being performed
    wire basic_err = unaligned || subword || !permitted;
    wire in_reset_err = reset_status && PWRITE && !a_cmd && !a_reset;
    wire err = basic_err || in_reset_err || (!reset_status && defined && run_bad);
    wire wr  = go && PWRITE && !err && defined && !ro;        // a normal register write
    wire wr_rst_cmd = go && PWRITE && !basic_err && reset_status && a_cmd;

    // ---------------------------------------------------------------- CMD (nRESET domain:
    // its clock/power enables written during a reset sequence survive the sequence)
    logic [31:0] cmd_word;
    always_ff @(posedge CLK or negedge nRESET) begin
        if (!nRESET) begin
            cmd_word <= NPU_RST_CMD;
        end else if (soft_clear) begin
            cmd_word <= NPU_RST_CMD;
        end else if (wr_rst_cmd) begin
            cmd_word[NPU_F_CMD_CLOCK_Q_ENABLE] <= PWDATA[NPU_F_CMD_CLOCK_Q_ENABLE];
            cmd_word[NPU_F_CMD_POWER_Q_ENABLE] <= PWDATA[NPU_F_CMD_POWER_Q_ENABLE];
        end else if (wr && a_cmd && !reset_status) begin
            cmd_word <= PWDATA & NPU_WMASK_CMD;
        end
    end
    wire wr_cmd = wr && a_cmd && !reset_status;
    assign cmd_wr         = wr_cmd || wr_rst_cmd;
    assign cmd_start      = wr_cmd && PWDATA[NPU_F_CMD_TRANSITION_TO_RUNNING_STATE];
    assign cmd_clear_irq  = wr_cmd && PWDATA[NPU_F_CMD_CLEAR_IRQ];
    assign cmd_stop_req   = wr_cmd && PWDATA[NPU_F_CMD_STOP_REQUEST];
    assign cmd_clr_hist   = wr_cmd ? PWDATA[NPU_F_CMD_CLEAR_IRQ_HISTORY +: 16] : 16'd0;
    assign clock_q_enable = cmd_word[NPU_F_CMD_CLOCK_Q_ENABLE];
    assign power_q_enable = cmd_word[NPU_F_CMD_POWER_Q_ENABLE];

    // RESET: a permitted write starts a soft reset (or, during one, updates the privilege)
    assign reset_wr    = go && PWRITE && !basic_err && a_reset;
    assign new_cpl     = PPROT[0] & PWDATA[NPU_F_RESET_PENDING_CPL];                 // min()
    assign new_csl     = PWDATA[NPU_F_RESET_PENDING_CSL] | PPROT[1];                  // no raise
    assign reset_wdata = PWDATA[1:0] & NPU_WMASK_RESET[1:0];

    // ---------------------------------------------------------------- storage (core reset)
    logic [31:0]  mattr_f;                 // MEM_ATTR0..3, 8 bits each
    logic [319:0] bp_f;                    // BASEP0..7, 40 bits each
    logic [5:0]  power_ctrl;
    wire  [31:0] wd = PWDATA;
    always_ff @(posedge CLK or negedge core_rst_n) begin
        if (!core_rst_n) begin
            qbase <= 40'd0;
            qsize <= 32'd0;
            qconfig <= 2'd0;
            regioncfg <= 16'd0;
            power_ctrl <= 6'd0;
            axi_sram <= 18'd0;
            axi_ext <= 18'd0;
            mattr_f <= 32'd0;
            bp_f <= 320'd0;
        end else if (wr && !reset_status) begin
            case (PADDR)
                NPU_REG_QBASE_LO:    qbase[31:0]  <= wd & NPU_WMASK_QBASE_LO;
                NPU_REG_QBASE_HI:    qbase[39:32] <= wd[7:0] & NPU_WMASK_QBASE_HI[7:0];
                NPU_REG_QSIZE:       qsize <= wd & NPU_WMASK_QSIZE;
                NPU_REG_QCONFIG:     qconfig <= wd[1:0] & NPU_WMASK_QCONFIG[1:0];
                NPU_REG_REGIONCFG:   regioncfg <= wd[15:0] & NPU_WMASK_REGIONCFG[15:0];
                NPU_REG_POWER_CTRL:  power_ctrl <= wd[5:0] & NPU_WMASK_POWER_CTRL[5:0];
                NPU_REG_AXI_SRAM:    axi_sram <= wd[17:0] & NPU_WMASK_AXI_SRAM[17:0];
                NPU_REG_AXI_EXT:     axi_ext <= wd[17:0] & NPU_WMASK_AXI_EXT[17:0];
                NPU_REG_MEM_ATTR0:   mattr_f[0 +: 8] <= wd[7:0] & NPU_WMASK_MEM_ATTR0[7:0];
                NPU_REG_MEM_ATTR1:   mattr_f[8 +: 8] <= wd[7:0] & NPU_WMASK_MEM_ATTR1[7:0];
                NPU_REG_MEM_ATTR2:   mattr_f[16 +: 8] <= wd[7:0] & NPU_WMASK_MEM_ATTR2[7:0];
                NPU_REG_MEM_ATTR3:   mattr_f[24 +: 8] <= wd[7:0] & NPU_WMASK_MEM_ATTR3[7:0];
                default:
                    if (a_basep) begin
                        if (bp_hi) bp_f[40 * bp_n + 32 +: 8] <= wd[7:0] & NPU_WMASK_BASEP0_HI[7:0];
                        else       bp_f[40 * bp_n +: 32]     <= wd & NPU_WMASK_BASEP0_LO;
                    end
            endcase
        end
    end
    assign q_written = wr && !reset_status
                    && (PADDR == NPU_REG_QBASE_LO || PADDR == NPU_REG_QBASE_HI || PADDR == NPU_REG_QSIZE);
    assign mem_attr = mattr_f;
    assign basep = bp_f;

    // PMU pages: npu_pmu decodes the offset
    assign pmu_we    = wr && !reset_status && is_pmu;
    assign pmu_addr  = PADDR;
    assign pmu_wdata = PWDATA;

    // ---------------------------------------------------------------- read data
    logic [31:0] rv;                      // register value before the read mask
    logic [31:0] rmask;
    always @(*) begin
        rv = 32'd0;
        rmask = 32'hFFFF_FFFF;
        case (PADDR)
            NPU_REG_ID:             begin rv = NPU_RST_ID;           rmask = NPU_RMASK_ID; end
            NPU_REG_STATUS:         begin rv = status_core;          rmask = NPU_RMASK_STATUS; end
            NPU_REG_CMD:            begin rv = cmd_word;             rmask = NPU_RMASK_CMD; end
            NPU_REG_RESET:          begin rv = {30'd0, reset_word};  rmask = NPU_RMASK_RESET; end
            NPU_REG_QBASE_LO:       begin rv = qbase[31:0];          rmask = NPU_RMASK_QBASE_LO; end
            NPU_REG_QBASE_HI:       begin rv = {24'd0, qbase[39:32]}; rmask = NPU_RMASK_QBASE_HI; end
            NPU_REG_QREAD:          begin rv = qread;                rmask = NPU_RMASK_QREAD; end
            NPU_REG_QCONFIG:        begin rv = {30'd0, qconfig};     rmask = NPU_RMASK_QCONFIG; end
            NPU_REG_QSIZE:          begin rv = qsize;                rmask = NPU_RMASK_QSIZE; end
            NPU_REG_PROT:           begin rv = {30'd0, csl, cpl};    rmask = NPU_RMASK_PROT; end
            NPU_REG_CONFIG:         begin rv = CONFIG_WORD;          rmask = NPU_RMASK_CONFIG; end
            NPU_REG_COND_STATUS:    begin rv = {31'd0, cond_flag};   rmask = NPU_RMASK_COND_STATUS; end
            NPU_REG_POWER_CTRL:     begin rv = {26'd0, power_ctrl};  rmask = NPU_RMASK_POWER_CTRL; end
            NPU_REG_REGIONCFG:      begin rv = {16'd0, regioncfg};   rmask = NPU_RMASK_REGIONCFG; end
            NPU_REG_MEM_ATTR0:      begin rv = {24'd0, mattr_f[0 +: 8]};    rmask = NPU_RMASK_MEM_ATTR0; end
            NPU_REG_MEM_ATTR1:      begin rv = {24'd0, mattr_f[8 +: 8]};    rmask = NPU_RMASK_MEM_ATTR1; end
            NPU_REG_MEM_ATTR2:      begin rv = {24'd0, mattr_f[16 +: 8]};    rmask = NPU_RMASK_MEM_ATTR2; end
            NPU_REG_MEM_ATTR3:      begin rv = {24'd0, mattr_f[24 +: 8]};    rmask = NPU_RMASK_MEM_ATTR3; end
            NPU_REG_AXI_SRAM:       begin rv = {14'd0, axi_sram};    rmask = NPU_RMASK_AXI_SRAM; end
            NPU_REG_AXI_EXT:        begin rv = {14'd0, axi_ext};     rmask = NPU_RMASK_AXI_EXT; end
            NPU_REG_CFG_SRAM_CAP:   begin rv = cfg_sram_cap;         rmask = NPU_RMASK_CFG_SRAM_CAP; end
            NPU_REG_CFG_EXT_CAP:    begin rv = cfg_ext_cap;          rmask = NPU_RMASK_CFG_EXT_CAP; end
            NPU_REG_CFG_SRAM_HASH0_LO: begin rv = cfg_sram_hash0[31:0]; rmask = NPU_RMASK_CFG_SRAM_HASH0_LO; end
            NPU_REG_CFG_SRAM_HASH0_HI: begin rv = {24'd0, cfg_sram_hash0[39:32]}; rmask = NPU_RMASK_CFG_SRAM_HASH0_HI; end
            // CFG_SRAM_HASH1 and CFG_EXT_HASH0: this stand-in has one SRAM and one EXT port,
            // so the CFGSRAMHASH1 / CFGEXTHASH0 pins do not exist and the registers read 0.
            NPU_REG_PID4:           begin rv = NPU_RST_PID4;         rmask = NPU_RMASK_PID4; end
            NPU_REG_PID5:           begin rv = NPU_RST_PID5;         rmask = NPU_RMASK_PID5; end
            NPU_REG_PID6:           begin rv = NPU_RST_PID6;         rmask = NPU_RMASK_PID6; end
            NPU_REG_PID7:           begin rv = NPU_RST_PID7;         rmask = NPU_RMASK_PID7; end
            NPU_REG_PID0:           begin rv = NPU_RST_PID0;         rmask = NPU_RMASK_PID0; end
            NPU_REG_PID1:           begin rv = NPU_RST_PID1;         rmask = NPU_RMASK_PID1; end
            NPU_REG_PID2:           begin rv = NPU_RST_PID2;         rmask = NPU_RMASK_PID2; end
            NPU_REG_PID3:           begin rv = NPU_RST_PID3;         rmask = NPU_RMASK_PID3; end
            NPU_REG_CID0:           begin rv = NPU_RST_CID0;         rmask = NPU_RMASK_CID0; end
            NPU_REG_CID1:           begin rv = NPU_RST_CID1;         rmask = NPU_RMASK_CID1; end
            NPU_REG_CID2:           begin rv = NPU_RST_CID2;         rmask = NPU_RMASK_CID2; end
            NPU_REG_CID3:           begin rv = NPU_RST_CID3;         rmask = NPU_RMASK_CID3; end
            default: begin
                if (a_basep) begin
                    rv    = bp_hi ? {24'd0, bp_f[40 * bp_n + 32 +: 8]} : bp_f[40 * bp_n +: 32];
                    rmask = bp_hi ? NPU_RMASK_BASEP0_HI : NPU_RMASK_BASEP0_LO;
                end else begin
                    rv = is_pmu ? pmu_rdata : 32'd0;     // npu_pmu applies its read masks
                end
            end
        endcase
    end

    logic [31:0] rdata;
    always @(*) begin
        if (err || PWRITE) rdata = 32'd0;
        else if (reset_status) rdata = (PADDR == NPU_REG_STATUS) ? NPU_RST_STATUS : 32'd0;
        else rdata = rv & rmask;
    end

    always_ff @(posedge CLK or negedge nRESET) begin
        if (!nRESET) begin
            pend <= 1'b0;
            PRDATA <= 32'd0;
            PSLVERR <= 1'b0;
        end else if (go) begin
            pend <= 1'b1;
            PRDATA <= rdata;
            PSLVERR <= err;
        end else if (PCLKEN && PSEL && PENABLE && pend) begin
            pend <= 1'b0;                 // the transfer completes at this edge
        end
    end

    wire unused_ok = PPROT[2];            // PPROT[2] (data/instruction) is not used (TRM 5.9)
endmodule

`default_nettype wire
