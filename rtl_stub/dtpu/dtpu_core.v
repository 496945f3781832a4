// dtpu_core.v -- "Cogitantium, the dumb tensor processing unit": top level of the
// accelerator core, with the ports and parameters of the thesis (App. B).
//
// Open stand-in written from the thesis' description (seed 002, §4.4 and App. B) and the
// project contract (tlm/dtpu/contract.py, gen/dtpu_contract.vh); the thesis' own RTL
// below the top level is not published. Differences from App. B, all documented in
// docs/devices/dtpu.md:
//   * defaults ROWS = COLUMNS = 8 (the deployed overlay; App. B says 3), SIZE_WMEMORY 8192
//     (the interface's MEM_SIZE; App. B's 8196 is a typo);
//   * PRECISIONS selects the PE types built (bit i: contract.PRECISIONS[i]: int8, int16,
//     int32, int64); floating-point PEs are not built;
//   * one added output, err_code, carries the run's CORE_ERRORS code to the adapter;
//   * infifo_is_empty and outfifo_is_full are active low, as the thesis' interface
//     attributes say (EMPTY_N, FULL_N); the FIFO read is first-word-fall-through;
//   * DATA_WIDTH_MAC, MAX_BOARD_DSP and the data widths are kept for the interface: the
//     widths must stay 64 (CSR 8); no DSP primitives are instantiated;
//   * test_mode has no function; the DUMMY loop-back is not provided.
`default_nettype none

/* verilator lint_off UNUSEDPARAM */
module dtpu_core #(
    parameter integer DATA_WIDTH_MAC       = 64,
    parameter integer ROWS                 = 8,
    parameter integer COLUMNS              = 8,
    parameter integer SIZE_WMEMORY         = 8192,
    parameter integer ADDRESS_SIZE_WMEMORY = 32,
    parameter integer ADDRESS_SIZE_CSR     = 32,
    parameter integer SIZE_CSR             = 1024,
    parameter integer DATA_WIDTH_CSR       = 8,
    parameter integer DATA_WIDTH_WMEMORY   = 64,
    parameter integer DATA_WIDTH_FIFO_IN   = 64,
    parameter integer DATA_WIDTH_FIFO_OUT  = 64,
    parameter integer MAX_BOARD_DSP        = 220,
    parameter integer PRECISIONS           = 1
) (
    input  wire                            clk,
    input  wire                            aresetn,
    input  wire                            test_mode,
    input  wire                            enable,
    // CSR memory (BRAM master)
    output wire                            csr_ce,
    input  wire [DATA_WIDTH_CSR-1:0]       csr_dout,
    output wire [DATA_WIDTH_CSR-1:0]       csr_din,
    output wire                            csr_we,
    output wire [ADDRESS_SIZE_CSR-1:0]     csr_address,
    output wire                            csr_clk,
    output wire                            csr_reset,
    // weight memory (BRAM master)
    output wire                            wm_ce,
    input  wire [DATA_WIDTH_WMEMORY-1:0]   wm_dout,
    output wire [DATA_WIDTH_WMEMORY-1:0]   wm_din,
    output wire                            wm_we,
    output wire [ADDRESS_SIZE_WMEMORY-1:0] wm_address,
    output wire                            wm_clk,
    output wire                            wm_reset,
    // input FIFO (acc_fifo_read)
    input  wire [DATA_WIDTH_FIFO_IN-1:0]   infifo_dout,
    output wire                            infifo_read,
    input  wire                            infifo_is_empty,    // EMPTY_N: 1 = data
    // output FIFO (acc_fifo_write)
    output wire [DATA_WIDTH_FIFO_OUT-1:0]  outfifo_din,
    output wire                            outfifo_write,
    input  wire                            outfifo_is_full,    // FULL_N: 1 = room
    // control (acc_handshake, ap_ctrl_chain)
    input  wire                            cs_start,
    output wire                            cs_ready,
    output wire                            cs_done,
    input  wire                            cs_continue,
    output wire                            cs_idle,
    // debug
    output wire [3:0]                      state,
    output wire [3:0]                      d_out,
    // added: the run's error code (contract.CORE_ERRORS), valid with cs_done
    output wire [3:0]                      err_code
);
/* verilator lint_on UNUSEDPARAM */
    localparam integer MAXW = ((PRECISIONS >> 3) & 1) != 0 ? 64 : ((PRECISIONS >> 2) & 1) != 0 ? 32
                            : ((PRECISIONS >> 1) & 1) != 0 ? 16 : 8;
    localparam integer AW   = MAXW + 1;                          // operand width of the PEs
    localparam integer ACCW = (PRECISIONS & 14) != 0 ? 64 : 32;  // widest output lane
    localparam integer PMAX = (COLUMNS * MAXW + 63) / 64;
    localparam integer IDXW = 16;
    localparam integer PW   = 9;

    wire reset_i = ~aresetn;
    wire en, pipe_busy, stg_can_accept, stg_busy, mxu_busy, y_valid, issue, chain_clear;
    wire load_weight, op_signed, lane32;
    wire [IDXW-1:0] load_idx;
    wire [PW-1:0] act_idx, q_words;
    wire [3:0] prec_sel;
    wire [ROWS-1:0] group_first;
    wire [ROWS*8-1:0] group_last_row;
    wire [7:0] out_groups;
    wire [COLUMNS*AW-1:0] x_ops;
    wire [ROWS*COLUMNS*AW-1:0] w_ops;
    wire [ROWS*ACCW-1:0] y_out;

    // the whole pipeline stalls while a step waits for the output staging
    assign en = !(y_valid && !stg_can_accept);
    assign pipe_busy = mxu_busy || stg_busy;

    dtpu_control_unit #(
        .ROWS(ROWS), .COLUMNS(COLUMNS), .PRECISIONS(PRECISIONS), .SIZE_WMEMORY(SIZE_WMEMORY),
        .ADDRESS_SIZE_CSR(ADDRESS_SIZE_CSR), .ADDRESS_SIZE_WMEMORY(ADDRESS_SIZE_WMEMORY),
        .DATA_WIDTH_CSR(DATA_WIDTH_CSR), .IDXW(IDXW), .PW(PW)
    ) cu (
        .clk(clk), .reset(reset_i), .glb_enable(enable),
        .csr_ce(csr_ce), .csr_address(csr_address), .csr_dout(csr_dout),
        .wm_ce(wm_ce), .wm_address(wm_address),
        .infifo_not_empty(infifo_is_empty), .infifo_read(infifo_read),
        .cs_start(cs_start), .cs_ready(cs_ready), .cs_done(cs_done), .cs_continue(cs_continue),
        .cs_idle(cs_idle),
        .en(en), .pipe_busy(pipe_busy), .load_weight(load_weight), .load_idx(load_idx),
        .act_idx(act_idx), .issue(issue), .chain_clear(chain_clear),
        .prec_sel(prec_sel), .op_signed(op_signed), .group_first(group_first),
        .group_last_row(group_last_row), .out_groups(out_groups), .lane32(lane32),
        .q_words(q_words), .err_code(err_code), .data_precision(d_out), .state_out(state));

    dtpu_ls_array #(
        .ROWS(ROWS), .COLUMNS(COLUMNS), .PRECISIONS(PRECISIONS), .AW(AW), .ACCW(ACCW),
        .PMAX(PMAX), .IDXW(IDXW), .PW(PW)
    ) ls_array_inst (
        .clk(clk), .reset(reset_i),
        .load_weight(load_weight), .load_idx(load_idx), .wm_dout(wm_dout),
        .infifo_read(infifo_read), .infifo_dout(infifo_dout), .act_idx(act_idx),
        .prec_sel(prec_sel), .op_signed(op_signed), .x_ops(x_ops), .w_ops(w_ops),
        .en(en), .y_out(y_out), .y_valid(y_valid), .group_last_row(group_last_row),
        .out_groups(out_groups), .lane32(lane32), .q_words(q_words),
        .outfifo_not_full(outfifo_is_full), .outfifo_din(outfifo_din),
        .outfifo_write(outfifo_write), .stg_can_accept(stg_can_accept), .stg_busy(stg_busy));

    dtpu_mxu #(.ROWS(ROWS), .COLUMNS(COLUMNS), .AW(AW), .ACCW(ACCW)) engine (
        .clk(clk), .reset(reset_i), .en(en), .chain_clear(chain_clear),
        .x_valid(issue), .x_ops(x_ops), .w_ops(w_ops), .group_first(group_first),
        .y_out(y_out), .y_valid(y_valid), .busy(mxu_busy));

    // the core only reads its memories; same clock for the BRAM interfaces
    assign csr_din = '0;
    assign csr_we = 1'b0;
    assign csr_clk = clk;
    assign csr_reset = reset_i;
    assign wm_din = '0;
    assign wm_we = 1'b0;
    assign wm_clk = clk;
    assign wm_reset = reset_i;
    wire unused_core = test_mode;
endmodule
`default_nettype wire
