// dtpu_control_unit.v -- the control unit of dtpu_core (thesis §4.4.2, Fig. 4.10).
//
// States (gen/dtpu_contract.vh DTPU_ST_*, contract.CORE_STATES):
//   IDLE       cs_idle; wait for cs_start (and the global enable)
//   FETCH_CSR  read CSR bytes 0..7 (BRAM, one cycle latency), decode them (contract CSR
//              fields, errors in CORE_ERRORS order), pulse cs_ready; an illegal CSR goes
//              to DONE with its error code, reading no weight and no input
//   LOAD       read the ROWS*P weight words from WM_START into the L/S weight units;
//              clear the row-group chain
//   COMPUTE    while the input FIFO is not empty (EMPTY_N): read a word whenever the
//              pipeline advances; every P-th word issues a step into the MXU
//   SAVE       the input is exhausted (the adapter starts a run only with a complete
//              packet, so empty means the end): wait until the MXU and the output staging
//              are empty; a partial vector left over is the INPUT_TAIL error
//   DONE       cs_done until cs_continue (ap_ctrl_chain)
// The decoded run configuration (precision one-hot, signedness, row groups, output words
// per step) is held in registers for the datapath while the run lasts.
`default_nettype none

module dtpu_control_unit #(
    parameter integer ROWS                 = 8,
    parameter integer COLUMNS              = 8,
    parameter integer PRECISIONS           = 1,
    parameter integer SIZE_WMEMORY         = 8192,
    parameter integer ADDRESS_SIZE_CSR     = 32,
    parameter integer ADDRESS_SIZE_WMEMORY = 32,
    parameter integer DATA_WIDTH_CSR       = 8,
    parameter integer IDXW                 = 16,   // weight word index width
    parameter integer PW                   = 9     // width of P and Q counts
) (
    input  wire                            clk,
    input  wire                            reset,
    input  wire                            glb_enable,
    // CSR memory (read only)
    output logic                           csr_ce,
    output logic [ADDRESS_SIZE_CSR-1:0]    csr_address,
    input  wire  [DATA_WIDTH_CSR-1:0]      csr_dout,
    // weight memory (read only)
    output logic                           wm_ce,
    output logic [ADDRESS_SIZE_WMEMORY-1:0] wm_address,
    // input FIFO
    input  wire                            infifo_not_empty,   // EMPTY_N
    output wire                            infifo_read,
    // handshake (ap_ctrl_chain)
    input  wire                            cs_start,
    output logic                           cs_ready,
    output wire                            cs_done,
    input  wire                            cs_continue,
    output wire                            cs_idle,
    // datapath control
    input  wire                            en,                 // the pipeline advances
    input  wire                            pipe_busy,          // MXU or staging hold data
    output wire                            load_weight,        // wm_dout is word load_idx
    output wire  [IDXW-1:0]                load_idx,
    output logic [PW-1:0]                  act_idx,            // word of the vector being read
    output wire                            issue,              // a step enters the MXU
    output logic                           chain_clear,
    // run configuration
    output logic [3:0]                     prec_sel,           // one-hot: PRECISIONS index
    output logic                           op_signed,
    output logic [ROWS-1:0]                group_first,
    output logic [ROWS*8-1:0]              group_last_row,     // row index of group k's last row
    output logic [7:0]                     out_groups,
    output logic                           lane32,
    output logic [PW-1:0]                  q_words,
    output logic [3:0]                     err_code,
    output logic [3:0]                     data_precision,
    output logic [3:0]                     state_out
);
`include "gen/dtpu_contract.vh"

    // words per vector (P) of each precision
    localparam integer P0 = (COLUMNS * DTPU_PREC0_BITS + 63) / 64;
    localparam integer P1 = (COLUMNS * DTPU_PREC1_BITS + 63) / 64;
    localparam integer P2 = (COLUMNS * DTPU_PREC2_BITS + 63) / 64;
    localparam integer P3 = (COLUMNS * DTPU_PREC3_BITS + 63) / 64;
    localparam [8:0]  ROWS_9 = ROWS[8:0];
    localparam [32:0] SIZE_WM = {1'b0, SIZE_WMEMORY[31:0]};

    logic [3:0]  state;
    logic [3:0]  cnt;              // FETCH_CSR step
    logic [63:0] csr_word;
    logic [IDXW:0] wcnt;           // LOAD step
    logic [PW-1:0] p_words;
    logic [31:0] wm_start;
    logic [IDXW:0] n_weights;      // ROWS * P of the run

    assign state_out = state;
    assign cs_idle = (state == DTPU_ST_IDLE);
    assign cs_done = (state == DTPU_ST_DONE);

    // ---------------------------------------------------------------- CSR decoding
    wire [3:0] f_prec  = csr_word[DTPU_CSR_ARITHMETIC_PRECISION_LSB +: DTPU_CSR_ARITHMETIC_PRECISION_W];
    wire       f_chain = csr_word[DTPU_CSR_ACTIVATE_CHAIN_LSB];
    wire       f_sign  = csr_word[DTPU_CSR_SIGNED_LSB];
    wire [1:0] f_rsv   = csr_word[DTPU_CSR_RESERVED0_LSB +: DTPU_CSR_RESERVED0_W];
    wire [7:0] f_fp    = csr_word[DTPU_CSR_FP_MODE_LSB +: DTPU_CSR_FP_MODE_W];
    wire [7:0] f_g     = csr_word[DTPU_CSR_GROUP_ROWS_LSB +: DTPU_CSR_GROUP_ROWS_W];
    wire [7:0] f_ng    = csr_word[DTPU_CSR_OUT_GROUPS_LSB +: DTPU_CSR_OUT_GROUPS_W];
    wire [31:0] f_wm   = csr_word[DTPU_CSR_WM_START_LSB +: DTPU_CSR_WM_START_W];

    wire [3:0] match = {f_prec == DTPU_PREC3_CODE, f_prec == DTPU_PREC2_CODE,
                        f_prec == DTPU_PREC1_CODE, f_prec == DTPU_PREC0_CODE};
    wire [3:0] built = PRECISIONS[3:0];
    wire [8:0] g_eff = (f_g == 8'd0) ? 9'd1 : {1'b0, f_g};

    logic [8:0]  ng_max;
    logic [8:0]  ng_eff;
    logic [PW-1:0] p_run;
    logic [3:0]  dec_err;
    logic [ROWS-1:0] first_d;
    logic [ROWS*8-1:0] last_d;
    integer k;
    logic [8:0] pos;
    wire [31:0] nw32 = ROWS * {{(32-PW){1'b0}}, p_run};   // weight words of the run
    wire [32:0] wm_need = {1'b0, nw32};
    wire unused_nw = ^nw32[31:IDXW+1];
    logic [15:0] acc;
    always @(*) begin
        // groups that fit: count k with (k+1)*G <= ROWS
        ng_max = 9'd0;
        for (k = 0; k < ROWS; k = k + 1)
            if ((k + 1) * g_eff <= ROWS)
                ng_max = ng_max + 9'd1;
        ng_eff = (f_ng == 8'd0) ? ng_max : {1'b0, f_ng};
        p_run = match[3] ? P3[PW-1:0] : match[2] ? P2[PW-1:0] : match[1] ? P1[PW-1:0] : P0[PW-1:0];
        if (match == 4'd0)                                       dec_err = DTPU_ERR_BAD_PRECISION;
        else if ((match & ~built) != 4'd0)                      dec_err = DTPU_ERR_PRECISION_NOT_BUILT;
        else if (f_fp != DTPU_NO_FP)                             dec_err = DTPU_ERR_FP_UNSUPPORTED;
        else if (!f_chain && !match[3])                          dec_err = DTPU_ERR_CHAIN;
        else if (f_rsv != 2'd0)                                  dec_err = DTPU_ERR_RESERVED;
        else if (g_eff > ROWS_9)                                  dec_err = DTPU_ERR_GROUP_ROWS;
        else if (ng_eff > ng_max)                                dec_err = DTPU_ERR_OUT_GROUPS;
        else if ({1'b0, f_wm} + wm_need > SIZE_WM) dec_err = DTPU_ERR_WM_RANGE;
        else                                                     dec_err = DTPU_ERR_NONE;
        // first row of each group; last row of group k (k*G + G - 1)
        pos = 9'd0;
        for (k = 0; k < ROWS; k = k + 1) begin
            first_d[k] = (pos == 9'd0);
            pos = (pos + 9'd1 == g_eff) ? 9'd0 : pos + 9'd1;
        end
        acc = {7'd0, g_eff} - 16'd1;
        for (k = 0; k < ROWS; k = k + 1) begin
            last_d[k*8 +: 8] = acc[7:0];
            acc = acc + {7'd0, g_eff};
        end
    end

    // ---------------------------------------------------------------- FSM
    assign infifo_read = (state == DTPU_ST_COMPUTE) && infifo_not_empty && en;
    assign issue = infifo_read && (act_idx == p_words - 1'b1);

    always_ff @(posedge clk) begin
        if (reset) begin
            state <= DTPU_ST_IDLE;
            cnt <= '0;
            csr_word <= '0;
            cs_ready <= 1'b0;
            wcnt <= '0;
            act_idx <= '0;
            chain_clear <= 1'b0;
            err_code <= DTPU_ERR_NONE;
            prec_sel <= 4'd1;
            op_signed <= 1'b0;
            group_first <= {ROWS{1'b1}};
            group_last_row <= '0;
            out_groups <= '0;
            lane32 <= 1'b1;
            q_words <= '0;
            p_words <= {{(PW-1){1'b0}}, 1'b1};
            wm_start <= '0;
            n_weights <= '0;
            data_precision <= '0;
        end else begin
            cs_ready <= 1'b0;
            chain_clear <= 1'b0;
            case (state)
                DTPU_ST_IDLE: begin
                    if (cs_start && glb_enable) begin
                        state <= DTPU_ST_FETCH_CSR;
                        cnt <= '0;
                        err_code <= DTPU_ERR_NONE;
                    end
                end
                DTPU_ST_FETCH_CSR: begin
                    if (cnt >= 4'd1 && cnt <= 4'd8)
                        csr_word[(cnt - 4'd1)*8 +: 8] <= csr_dout;
                    cnt <= cnt + 4'd1;
                    if (cnt == 4'd9) begin
                        cs_ready <= 1'b1;
                        data_precision <= f_prec;
                        prec_sel <= match;
                        op_signed <= f_sign;
                        group_first <= first_d;
                        group_last_row <= last_d;
                        out_groups <= ng_eff[7:0];
                        lane32 <= match[0];
                        q_words <= match[0] ? ({1'b0, ng_eff[PW-1:1]} + {{(PW-1){1'b0}}, ng_eff[0]}) : ng_eff[PW-1:0];
                        p_words <= p_run;
                        wm_start <= f_wm;
                        n_weights <= nw32[IDXW:0];
                        if (dec_err != DTPU_ERR_NONE) begin
                            err_code <= dec_err;
                            state <= DTPU_ST_DONE;
                        end else begin
                            state <= DTPU_ST_LOAD;
                            wcnt <= '0;
                            chain_clear <= 1'b1;
                        end
                    end
                end
                DTPU_ST_LOAD: begin
                    wcnt <= wcnt + 1'b1;
                    if (wcnt == n_weights) begin
                        state <= DTPU_ST_COMPUTE;
                        act_idx <= '0;
                    end
                end
                DTPU_ST_COMPUTE: begin
                    if (infifo_read)
                        act_idx <= issue ? '0 : act_idx + 1'b1;
                    if (!infifo_not_empty)
                        state <= DTPU_ST_SAVE;
                end
                DTPU_ST_SAVE: begin
                    if (!pipe_busy) begin
                        state <= DTPU_ST_DONE;
                        if (act_idx != 0)           // the input ended inside a vector
                            err_code <= DTPU_ERR_INPUT_TAIL;
                    end
                end
                DTPU_ST_DONE: begin
                    if (cs_continue)
                        state <= DTPU_ST_IDLE;
                end
                default: state <= DTPU_ST_IDLE;
            endcase
        end
    end

    // the weight word read in the previous cycle (BRAM latency 1) goes to its L/S unit
    assign load_weight = (state == DTPU_ST_LOAD) && (wcnt != 0);
    assign load_idx = wcnt[IDXW-1:0] - 1'b1;

    // memory reads
    always @(*) begin
        csr_ce = (state == DTPU_ST_FETCH_CSR) && (cnt < 4'd8);
        csr_address = {{(ADDRESS_SIZE_CSR-4){1'b0}}, cnt};
        wm_ce = (state == DTPU_ST_LOAD) && (wcnt < n_weights);
        wm_address = wm_start[ADDRESS_SIZE_WMEMORY-1:0] + {{(ADDRESS_SIZE_WMEMORY-IDXW-1){1'b0}}, wcnt};
    end
endmodule
`default_nettype wire
