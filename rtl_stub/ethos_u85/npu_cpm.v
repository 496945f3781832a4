// npu_cpm.v -- Clock and Power Module of the Ethos-U85 stand-in (TRM 2.2, 2.3.5, 3.1.1-3.1.4,
// 3.3.1.4, 5.1-5.7): reset sequencing, the current privilege/security level (PROT),
// configuration-pin sampling, the power-control mask, the clock and power Q-Channels,
// the warm-reset halt and the debug halt.
//
// Reset sequence (STATUS.reset_status = 1 throughout):
// * hard reset (nRESET low): everything is reset. After nRESET rises the core reset is
//   released at the next CLK edge (synchronous de-assertion); in the first cycle CPL/CSL
//   are taken from PORPL/PORSL. The CFG* pins are sampled during the sequence, which lasts
//   RESET_CYCLES cycles (it stands for the internal RAM clear).
// * soft reset (a permitted RESET write): the DMA and the command fetch stop issuing and
//   every outstanding AXI transaction completes (DRAIN); then the core is reset for one
//   cycle and the sequence runs. At its end CPL = min(PPROT[0], pending_CPL) and
//   CSL = pending_CSL | PPROT[1] of the last RESET write (TRM 3.3.1.4, 2.2; a requester
//   cannot raise the security level). Power control stays masked (power kept on) until
//   the next CMD write.
// Q-Channels (policy of the digest D13.3, also used by the TLM):
// * clock: accept when STOPPED, not in reset, CMD.clock_q_enable = 1, no APB transfer
//   and no PWAKEUP; CLKQACTIVE = !that || PWAKEUP.
// * power: accept when STOPPED, not in reset, CMD.power_q_enable = 1, power not masked by a
//   RESET write and no IRQ pending; PWRQACTIVE = !that.
// Warm reset (WRSTQREQ) and debug halt (DBGHALTREQ with DBGEN, and SPIDEN when the NPU is
// Secure) pause the NPU: no new commands or AXI bursts; WRSTQACK rises (DBGHALTACK pulses)
// once no AXI transaction is outstanding. DBGRESTARTREQ (pulse) ends a debug halt after
// DBGHALTREQ has fallen.
`default_nettype none

module npu_cpm #(
    parameter integer RESET_CYCLES = 8
) (
    input  wire         CLK,
    input  wire         nRESET,
    input  wire         PORPL,
    input  wire         PORSL,
    input  wire         DBGEN,
    input  wire         SPIDEN,
    input  wire [31:0]  CFGSRAMCAP,
    input  wire [31:0]  CFGEXTCAP,
    input  wire [39:0]  CFGSRAMHASH0,
    // from the APB register file
    input  wire         reset_wr,         // permitted RESET write (any time)
    input  wire         new_cpl,
    input  wire         new_csl,
    input  wire [1:0]   reset_wdata,      // RESET register read-back
    input  wire         cmd_wr,           // a CMD write (ends the power mask)
    input  wire         clock_q_enable,
    input  wire         power_q_enable,
    input  wire         apb_busy,         // PSEL
    input  wire         PWAKEUP,
    // from the core
    input  wire         running,
    input  wire         irq,
    input  wire         axi_quiet,        // no AXI transaction pending or outstanding
    // outputs
    output wire         core_rst_n,
    output wire         soft_clear,       // one cycle: a soft reset starts (RESET write)
    output wire         reset_status,
    output wire         soft_halt,        // abort issuing (soft reset drain)
    output wire         pause,            // warm-reset or debug halt
    output logic        cpl,
    output logic        csl,
    output logic [1:0]  reset_word,
    output logic [31:0] cfg_sram_cap,
    output logic [31:0] cfg_ext_cap,
    output logic [39:0] cfg_sram_hash0,
    output logic        pwr_masked,
    output wire         clk_stopped,      // clock Q-Channel in Q_STOPPED
    // Q-Channels, warm reset, debug
    input  wire         CLKQREQn,
    output wire         CLKQACCEPTn,
    output wire         CLKQDENY,
    output wire         CLKQACTIVE,
    input  wire         PWRQREQn,
    output wire         PWRQACCEPTn,
    output wire         PWRQDENY,
    output wire         PWRQACTIVE,
    input  wire         WRSTQREQ,
    output logic        WRSTQACK,
    input  wire         DBGHALTREQ,
    input  wire         DBGRESTARTREQ,
    output logic        DBGHALTACK
);
    localparam [1:0] C_SEQ = 2'd0, C_IDLE = 2'd1, C_DRAIN = 2'd2, C_PULSE = 2'd3;
    localparam integer CNTW = (RESET_CYCLES > 1) ? $clog2(RESET_CYCLES) + 1 : 2;
    localparam integer RCM1 = RESET_CYCLES - 1;
    localparam [CNTW-1:0] CNT_LAST = RCM1[CNTW-1:0];

    logic [1:0]      st;
    logic [CNTW-1:0] cnt;
    logic            hard;             // the running sequence follows a hard reset
    logic            core_q;           // core reset released
    logic            pend_cpl, pend_csl;
    logic            pend_taken;       // a RESET write was taken in this sequence

    always_ff @(posedge CLK or negedge nRESET) begin
        if (!nRESET) begin
            st <= C_SEQ;
            cnt <= {CNTW{1'b0}};
            hard <= 1'b1;
            core_q <= 1'b0;
            cpl <= 1'b0;
            csl <= 1'b0;
            pend_cpl <= 1'b0;
            pend_csl <= 1'b0;
            pend_taken <= 1'b0;
            reset_word <= 2'd0;
            cfg_sram_cap <= 32'd0;
            cfg_ext_cap <= 32'd0;
            cfg_sram_hash0 <= 40'd0;
            pwr_masked <= 1'b0;
        end else begin
            if (reset_wr) begin
                pend_cpl <= new_cpl;
                pend_csl <= new_csl;
                pend_taken <= 1'b1;
                reset_word <= reset_wdata;
                pwr_masked <= 1'b1;
            end else if (cmd_wr) begin
                pwr_masked <= 1'b0;
            end
            case (st)
                C_SEQ: begin
                    core_q <= 1'b1;
                    if (hard && cnt == {CNTW{1'b0}}) begin
                        cpl <= PORPL;
                        csl <= PORSL;
                    end
                    cfg_sram_cap <= CFGSRAMCAP;
                    cfg_ext_cap <= CFGEXTCAP;
                    cfg_sram_hash0 <= CFGSRAMHASH0;
                    if (cnt == CNT_LAST) begin
                        st <= C_IDLE;
                        pend_taken <= 1'b0;
                        // a soft sequence always follows a RESET write; after nRESET, only
                        // a RESET write taken inside the sequence changes PROT (TRM 3.1.1 c)
                        if (!hard || pend_taken || reset_wr) begin
                            cpl <= reset_wr ? new_cpl : pend_cpl;
                            csl <= reset_wr ? new_csl : pend_csl;
                        end
                    end else begin
                        cnt <= cnt + {{(CNTW-1){1'b0}}, 1'b1};
                    end
                end
                C_IDLE: begin
                    if (reset_wr) st <= C_DRAIN;
                end
                C_DRAIN: begin
                    if (axi_quiet) begin
                        st <= C_PULSE;
                        core_q <= 1'b0;
                    end
                end
                default: begin   // C_PULSE: the core is in reset for this cycle
                    st <= C_SEQ;
                    cnt <= {CNTW{1'b0}};
                    hard <= 1'b0;
                    core_q <= 1'b1;
                end
            endcase
        end
    end

    assign core_rst_n   = nRESET & core_q;
    assign reset_status = (st != C_IDLE);
    assign soft_clear   = reset_wr && (st == C_IDLE);
    assign soft_halt    = (st == C_DRAIN) || (st == C_PULSE);

    // ---------------------------------------------------------------- Q-Channels
    wire clk_idle = !running && !reset_status && clock_q_enable && !apb_busy && !PWAKEUP;
    wire pwr_idle = !running && !reset_status && power_q_enable && !pwr_masked && !irq;
    wire unused_pwr_stopped;
    npu_qchan u_clkq (.CLK(CLK), .nRESET(nRESET), .qreqn(CLKQREQn), .idle(clk_idle),
                      .qacceptn(CLKQACCEPTn), .qdeny(CLKQDENY), .stopped(clk_stopped));
    npu_qchan u_pwrq (.CLK(CLK), .nRESET(nRESET), .qreqn(PWRQREQn), .idle(pwr_idle),
                      .qacceptn(PWRQACCEPTn), .qdeny(PWRQDENY), .stopped(unused_pwr_stopped));
    assign CLKQACTIVE = !clk_idle || PWAKEUP;
    assign PWRQACTIVE = !pwr_idle;

    // ---------------------------------------------------------------- warm reset, debug halt
    logic w1, w2, h1, h2, dbg_halted, dbg_acked;
    wire  dbg_req = h2 && DBGEN && (csl || SPIDEN);
    always_ff @(posedge CLK or negedge nRESET) begin
        if (!nRESET) begin
            w1 <= 1'b0; w2 <= 1'b0; h1 <= 1'b0; h2 <= 1'b0;
            WRSTQACK <= 1'b0;
            dbg_halted <= 1'b0;
            dbg_acked <= 1'b0;
            DBGHALTACK <= 1'b0;
        end else if (WRSTQREQ || w1 || w2 || DBGHALTREQ || h1 || h2 || dbg_halted
                     || WRSTQACK || DBGHALTACK) begin
            // (otherwise the synchronisers, WRSTQACK and DBGHALTACK are 0 and stay 0;
            // dbg_req needs h2, the rest dbg_halted)
            w1 <= WRSTQREQ; w2 <= w1;
            h1 <= DBGHALTREQ; h2 <= h1;
            WRSTQACK <= w2 && axi_quiet;
            DBGHALTACK <= 1'b0;
            if (dbg_req) begin
                dbg_halted <= 1'b1;
            end else if (dbg_halted && DBGRESTARTREQ) begin
                dbg_halted <= 1'b0;
                dbg_acked <= 1'b0;
            end
            if (dbg_halted && !dbg_acked && axi_quiet) begin
                DBGHALTACK <= 1'b1;
                dbg_acked <= 1'b1;
            end
        end
    end
    assign pause = w2 || dbg_halted;
endmodule

`default_nettype wire
