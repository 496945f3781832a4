// dtpu_ls_array.v -- the load/store array of dtpu_core (thesis §4.4.3, Fig. 4.11).
//
// * L/S weight units: the ROWS*P weight words of a run (weight-stationary: loaded once
//   per run, in LOAD); Filter&Select unpacks them into one AW-bit operand per PE.
// * L/S activation units: the first P-1 words of an input vector; the P-th word comes
//   straight from the input FIFO when the step is issued; Filter&Select gives one
//   operand per column.
//   Unpacking (contract DATA_RULES "operand packing"): lane c of a precision of b bits is
//   bits [c*b +: b] of the vector's words laid end to end (little-endian); SIGNED
//   sign-extends it, else zero-extends, to AW bits.
// * Compact&Select and the output staging: when a step leaves the MXU, lane k (k <
//   out_groups) is the chained value of row group_last_row[k]; the lanes are written as
//   q_words words, one per cycle while the output FIFO is not full (FULL_N): 32-bit lanes
//   two a word for int8 (lane 2j in bits [31:0]), 64-bit lanes one a word otherwise.
// `DTPU_PLANTED_BUG` (test-only define) takes the last int8 activation lane from its
// neighbour: the bench must notice.
`default_nettype none

module dtpu_ls_array #(
    parameter integer ROWS       = 8,
    parameter integer COLUMNS    = 8,
    parameter integer PRECISIONS = 1,
    parameter integer AW         = 9,
    parameter integer ACCW       = 32,
    parameter integer PMAX       = 1,
    parameter integer IDXW       = 16,
    parameter integer PW         = 9
) (
    input  wire                         clk,
    input  wire                         reset,
    // weights
    input  wire                         load_weight,
    input  wire [IDXW-1:0]              load_idx,
    input  wire [63:0]                  wm_dout,
    // activations
    input  wire                         infifo_read,
    input  wire [63:0]                  infifo_dout,
    input  wire [PW-1:0]                act_idx,
    input  wire [3:0]                   prec_sel,
    input  wire                         op_signed,
    output logic [COLUMNS*AW-1:0]       x_ops,
    output logic [ROWS*COLUMNS*AW-1:0]  w_ops,
    // results
    input  wire                         en,
    input  wire [ROWS*ACCW-1:0]         y_out,
    input  wire                         y_valid,
    input  wire [ROWS*8-1:0]            group_last_row,
    input  wire [7:0]                   out_groups,
    input  wire                         lane32,
    input  wire [PW-1:0]                q_words,
    input  wire                         outfifo_not_full,   // FULL_N
    output logic [63:0]                 outfifo_din,
    output wire                         outfifo_write,
    output wire                         stg_can_accept,
    output wire                         stg_busy
);
`include "gen/dtpu_contract.vh"

    localparam integer AREGS = (PMAX > 1) ? PMAX - 1 : 1;
    localparam [PW-1:0] AREGS_P = AREGS[PW-1:0];
    localparam [7:0]    ROWS_8 = ROWS[7:0];
    localparam [PW:0]   ROWS_L = ROWS[PW:0];
    localparam [PW-1:0] ROWS_P = ROWS[PW-1:0];

    // ---------------------------------------------------------------- L/S units
    logic [ROWS*PMAX*64-1:0] wreg;
    logic [AREGS*64-1:0]     areg;
    // not every precision uses every word or bit (lanes past COLUMNS, P < PMAX, int8: no areg)
    wire unused_ls = ^{wreg, areg};
    always_ff @(posedge clk) begin
        if (load_weight)
            wreg[load_idx*64 +: 64] <= wm_dout;
        if (infifo_read && act_idx < AREGS_P)
            areg[act_idx*64 +: 64] <= infifo_dout;
    end

    // ---------------------------------------------------------------- Filter&Select
    // candidate operands of each built precision, OR-ed under the one-hot prec_sel
    localparam integer XN = COLUMNS * AW;
    localparam integer WN = ROWS * COLUMNS * AW;
    wire [4*XN-1:0] x_cand;     // precision i at [i*XN +: XN]
    wire [4*WN-1:0] w_cand;
    genvar i, r, c;
    generate
        for (i = 0; i < 4; i = i + 1) begin : g_prec
            localparam integer B = (i == 0) ? DTPU_PREC0_BITS : (i == 1) ? DTPU_PREC1_BITS
                                 : (i == 2) ? DTPU_PREC2_BITS : DTPU_PREC3_BITS;
            localparam integer P = (COLUMNS * B + 63) / 64;
            if (((PRECISIONS >> i) & 1) != 0) begin : g_built
                wire [P*64-1:0] vec;
                if (P > 1) begin : g_multi
                    assign vec = {infifo_dout, areg[(P-1)*64-1:0]};
                end else begin : g_single
                    assign vec = infifo_dout;
                end
                for (c = 0; c < COLUMNS; c = c + 1) begin : g_col
`ifdef DTPU_PLANTED_BUG
                    localparam integer SRC = (i == 0 && c == COLUMNS - 1 && c > 0) ? c - 1 : c;
`else
                    localparam integer SRC = c;
`endif
                    wire [B-1:0] xl = vec[SRC*B +: B];
                    assign x_cand[i*XN + c*AW +: AW] = {{(AW-B){op_signed & xl[B-1]}}, xl};
                    for (r = 0; r < ROWS; r = r + 1) begin : g_row
                        wire [B-1:0] wl = wreg[r*P*64 + c*B +: B];
                        assign w_cand[i*WN + (r*COLUMNS+c)*AW +: AW] = {{(AW-B){op_signed & wl[B-1]}}, wl};
                    end
                end
                wire unused_vec = ^vec;             // lanes past COLUMNS in the last word
            end else begin : g_absent
                assign x_cand[i*XN +: XN] = '0;
                assign w_cand[i*WN +: WN] = '0;
            end
        end
    endgenerate

    always @(*) begin
        x_ops = '0;
        w_ops = '0;
        if (prec_sel[0]) begin x_ops = x_ops | x_cand[0*XN +: XN]; w_ops = w_ops | w_cand[0*WN +: WN]; end
        if (prec_sel[1]) begin x_ops = x_ops | x_cand[1*XN +: XN]; w_ops = w_ops | w_cand[1*WN +: WN]; end
        if (prec_sel[2]) begin x_ops = x_ops | x_cand[2*XN +: XN]; w_ops = w_ops | w_cand[2*WN +: WN]; end
        if (prec_sel[3]) begin x_ops = x_ops | x_cand[3*XN +: XN]; w_ops = w_ops | w_cand[3*WN +: WN]; end
    end

    // ---------------------------------------------------------------- Compact&Select
    logic [ROWS*ACCW-1:0] stg;
    logic [PW-1:0]        stg_left, stg_idx;
    integer k;
    logic [ROWS*ACCW-1:0] lanes;
    always @(*) begin
        for (k = 0; k < ROWS; k = k + 1)
            lanes[k*ACCW +: ACCW] = (k < out_groups && group_last_row[k*8 +: 8] < ROWS_8)
                                    ? y_out[group_last_row[k*8 +: 8]*ACCW +: ACCW] : {ACCW{1'b0}};
    end

    assign outfifo_write  = (stg_left != 0) && outfifo_not_full;
    assign stg_can_accept = (stg_left == 0) || (stg_left == 1 && outfifo_not_full);
    assign stg_busy       = (stg_left != 0);

    always_ff @(posedge clk) begin
        if (reset) begin
            stg_left <= '0;
            stg_idx <= '0;
            stg <= '0;
        end else if (y_valid && en) begin
            stg <= lanes;
            stg_left <= q_words;
            stg_idx <= '0;
        end else if (outfifo_write) begin
            stg_left <= stg_left - 1'b1;
            stg_idx <= stg_idx + 1'b1;
        end
    end

    // output word stg_idx: two 32-bit lanes (int8) or one 64-bit lane
    wire [PW:0] lo = {stg_idx, 1'b0};
    wire [PW:0] hi = {stg_idx, 1'b1};
    wire [63:0] word32 = {(hi < ROWS_L) ? stg[hi*ACCW +: 32] : 32'd0,
                          (lo < ROWS_L) ? stg[lo*ACCW +: 32] : 32'd0};
    generate
        if (ACCW >= 64) begin : g_lane64
            always @(*)
                outfifo_din = lane32 ? word32 : (stg_idx < ROWS_P) ? stg[stg_idx*ACCW +: 64] : 64'd0;
        end else begin : g_lane32
            wire unused_lane32 = lane32;
            always @(*)
                outfifo_din = word32;
        end
    endgenerate
endmodule
`default_nettype wire
