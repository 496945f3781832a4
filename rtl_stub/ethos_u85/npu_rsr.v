// npu_rsr.v -- rounded_shift_right of the Ethos-U85 (TRM 3.6.6), combinational.
//
//   R = 1 << (shift-1)                                           natural round
//   D = (shift > 31-dbl_rnd) ? 1 << (30-dbl_rnd) : 0              double round
//   double_symmetric (0): p >= 0 ? R + D : R - D
//   natural (1): R       double_asymmetric (2): R + D
//   symmetric (3): p >= 0 ? R : R - 1
//   truncate_to_zero (4): p >= 0 ? 0 : (1 << shift) - 1       truncate_to_lower (5): 0
//   result = (p + R) >> shift (arithmetic); shift 0: p unchanged.
//
// p is the PW-bit signed operand (the product acc*scale); every R is >= 0 and < 2^63, so
// p + R is exact in 66 bits. Only the low 32 bits of the result are produced: every
// user wraps the result to 32 bits (scale_a/scale_b return int32_t; activation() casts
// acc + zero_point to int32_t), and those bits are exact for any shift. Reserved round
// modes (6, 7) and dbl_rnd 31 are UNPREDICTABLE; the kernel unit does not execute them.
`default_nettype none

module npu_rsr #(
    parameter integer PW = 64          // operand width, 32..80
) (
    input  wire [PW-1:0] p,            // signed
    input  wire [5:0]    shift,
    input  wire [2:0]    mode,
    input  wire [4:0]    dbl,
    output wire [31:0]   q
);
`include "gen/npu_isa.vh"
    localparam integer SW = (PW > 64) ? PW + 2 : 66;

    // one procedural block (Icarus evaluates net-level adders and shifters bit by bit)
    logic        neg;
    logic [5:0]  s_m1;
    logic [63:0] half, full_m1, dterm, r;                  // R = 2^(shift-1), 2^shift - 1, D
    logic [6:0]  s_plus;
    logic [4:0]  d_exp;
    logic signed [SW-1:0] sum, shr;
    logic [31:0] q_v;
    always @(*) begin
        neg = p[PW-1];
        s_m1 = shift - 6'd1;
        half = 64'd1 << s_m1;                              // shift >= 1
        full_m1 = {half[62:0], 1'b0} - 64'd1;
        s_plus = {1'b0, shift} + {2'b00, dbl};
        d_exp = 5'd30 - dbl;
        dterm = (s_plus > 7'd31) ? (64'd1 << d_exp) : 64'd0;
        case (mode)
            NPU_E_ROUND_MODE_OFM_DOUBLE_SYMMETRIC[2:0]:  r = neg ? half - dterm : half + dterm;
            NPU_E_ROUND_MODE_OFM_DOUBLE_ASYMMETRIC[2:0]: r = half + dterm;
            NPU_E_ROUND_MODE_OFM_SYMMETRIC[2:0]:         r = neg ? half - 64'd1 : half;
            NPU_E_ROUND_MODE_OFM_TRUNCATE_TO_ZERO[2:0]:  r = neg ? full_m1 : 64'd0;
            NPU_E_ROUND_MODE_OFM_TRUNCATE_TO_LOWER[2:0]: r = 64'd0;
            default:                                     r = half;     // natural
        endcase
        sum = $signed({{(SW-PW){p[PW-1]}}, p}) + $signed({{(SW-64){1'b0}}, r});
        shr = sum >>> shift;
        q_v = (shift == 6'd0) ? p[31:0] : shr[31:0];
    end
    assign q = q_v;

    wire unused_ok = ^{shr[SW-1:32]};
endmodule

`default_nettype wire
