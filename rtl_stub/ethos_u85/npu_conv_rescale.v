// npu_conv_rescale.v -- one lane of the output stage of NPU_OP_CONV / NPU_OP_DEPTHWISE in
// the Ethos-U85 stand-in: write_accumulator's bias add and rescale (TRM 3.6.6), combinational.
//
//   a = acc at the accumulator width (acc_format i32: the low 32 bits, sign-extended: the
//       wrap of every accumulate(), as the sum is exact modulo 2^48)
//   per_channel: a = accumulate(a, bias)            (wraps at 32 / 48 bits)
//   r = rounded_shift_right(a * scale, shift, OFM_SCALE.round_mode, OFM_SCALE.dbl_rnd)
//       (scale/shift: the channel's record, or OFM_SCALE with global scale_mode, no bias)
// activation() (zero point, clamps, LUT) and write_ofm's truncation follow in npu_act.v.
// The product needs up to 79 bits
// (48-bit accumulator x 31-bit scale); npu_rsr gives the exact low 32 bits of the result.
`default_nettype none

module npu_conv_rescale (
    input  wire [47:0] acc,
    input  wire        i48,          // acc_format i48
    input  wire        per_ch,       // OFM scale_mode per_channel
    input  wire [47:0] bias,         // signed (a 32-bit bias sign-extended)
    input  wire [30:0] scale,
    input  wire [5:0]  shift,
    input  wire [2:0]  rnd,
    input  wire [4:0]  dbl,
    output wire [31:0] r
);
    // one procedural block (Icarus evaluates net-level adders bit by bit); a * scale as two
    // partial products of at most 64 bits, exact: |a| <= 2^47, each half of the scale < 2^16
    logic [47:0] a0, ab, a;
    logic signed [63:0] p_lo, p_hi;
    logic [79:0] p;
    always @(*) begin
        a0 = i48 ? acc : {{16{acc[31]}}, acc[31:0]};
        ab = a0 + (per_ch ? bias : 48'd0);
        a  = i48 ? ab : {{16{ab[31]}}, ab[31:0]};
        p_lo = 64'($signed(a)) * 64'($signed({1'b0, scale[15:0]}));
        p_hi = 64'($signed(a)) * 64'($signed({1'b0, scale[30:16]}));
        p = {{16{p_lo[63]}}, p_lo} + {p_hi, 16'd0};
    end
    npu_rsr #(.PW(80)) u_rsr (.p(p), .shift(shift), .mode(rnd), .dbl(dbl), .q(r));
endmodule

`default_nettype wire
