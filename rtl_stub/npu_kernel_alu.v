// npu_kernel_alu.v -- one output element of the kernel datapath (TRM 3.6.6, 3.6.7, 3.10.5,
// 3.10.6), combinational: operation, rescale, activation, truncation to the 8-bit OFM.
//
// Elementwise (is_pool = 0), a and b are the operands with their zero points subtracted
// (read_ifm / read_ifm2; a scalar operand is OP_SCALAR minus its zero point, see
// npu_kernel.v):
//   mul:  acc = (int32_t)(a * b)                     (no input scaling)
//   add/sub/min/max: acc = scale_a(a) op scale_b(b)  (int32_t wrap)
//         scale_x(v) = (int32_t)rounded_shift_right(v * X_SCALE.scale, X_SCALE.shift,
//                                                   X_SCALE.round_mode, X_SCALE.dbl_rnd)
//   rescale_mode_global: OFM_SCALE.scale / shift.
// Pooling (is_pool = 1): acc = the pooled accumulator; rescale_mode_avpool (avg = 1:
// scale and shift from the built-in table for d = count_m1 + 1) or rescale_mode_normal
// with the global OFM_SCALE.
// Then rescale = rounded_shift_right(acc * scale, shift, OFM_SCALE.round_mode,
// OFM_SCALE.dbl_rnd), and activation (lut_none): t = (int32_t)(r + OFM zero point);
// clip_range b16: t = t < min ? min : t > max ? max : t; the OFM byte is t[7:0]
// (write_ofm's truncate). Operand ranges (the kernel unit guarantees them): data operands
// fit 9 bits; a scalar operand fits 33 bits, and 16 bits for add/sub/min/max.
`default_nettype none

module npu_kernel_alu (
    input  wire        is_pool,
    input  wire [2:0]  ew_op,         // elementwise_mode: mul 0, add 1, sub 2, min 3, max 4
    input  wire [32:0] a,             // signed
    input  wire [32:0] b,             // signed
    input  wire        a_wide,        // a is a scalar operand (mul: b is the 9-bit factor)
    input  wire [30:0] a_scale,
    input  wire [5:0]  a_shift,
    input  wire        a_rnd,
    input  wire [4:0]  a_dbl,
    input  wire [30:0] b_scale,
    input  wire [5:0]  b_shift,
    input  wire        b_rnd,
    input  wire [4:0]  b_dbl,
    input  wire [31:0] pool_acc,      // signed
    input  wire        avg,
    input  wire [5:0]  count_m1,
    input  wire [30:0] o_scale,
    input  wire [5:0]  o_shift,
    input  wire [2:0]  o_rnd,
    input  wire [4:0]  o_dbl,
    input  wire [16:0] o_zp,          // signed
    input  wire        clip,
    input  wire [16:0] o_min,         // signed
    input  wire [16:0] o_max,         // signed
    output wire [7:0]  q
);
`include "gen/npu_isa.vh"
`include "gen/npu_kernel.vh"

    // ---------------------------------------------------------------- input scaling
    wire signed [47:0] pa = $signed(a[15:0]) * $signed({1'b0, a_scale});
    wire signed [47:0] pb = $signed(b[15:0]) * $signed({1'b0, b_scale});
    wire [31:0] sa, sb;
    npu_rsr #(.PW(48)) u_sa (.p(pa), .shift(a_shift), .mode({2'b00, a_rnd}), .dbl(a_dbl), .q(sa));
    npu_rsr #(.PW(48)) u_sb (.p(pb), .shift(b_shift), .mode({2'b00, b_rnd}), .dbl(b_dbl), .q(sb));

    // ---------------------------------------------------------------- operation
    wire signed [32:0] mx = a_wide ? a : b;
    wire signed [8:0]  my = a_wide ? b[8:0] : a[8:0];
    wire signed [41:0] prod = mx * my;
    logic [31:0] acc_ew;
    always @(*) begin
        case (ew_op)
            NPU_E_ELEMENTWISE_MODE_MUL[2:0]: acc_ew = prod[31:0];
            NPU_E_ELEMENTWISE_MODE_ADD[2:0]: acc_ew = sa + sb;
            NPU_E_ELEMENTWISE_MODE_SUB[2:0]: acc_ew = sa - sb;
            NPU_E_ELEMENTWISE_MODE_MIN[2:0]: acc_ew = ($signed(sa) < $signed(sb)) ? sa : sb;
            default:                         acc_ew = ($signed(sa) > $signed(sb)) ? sa : sb;
        endcase
    end
    wire [31:0] acc = is_pool ? pool_acc : acc_ew;

    // ---------------------------------------------------------------- rescale
    wire [36:0] avg_entry = NPU_AVGPOOL_TABLE[count_m1 * 37 +: 37];
    wire [30:0] scale = avg ? avg_entry[30:0] : o_scale;
    wire [5:0]  shift = avg ? avg_entry[36:31] : o_shift;
    wire signed [63:0] po = $signed(acc) * $signed({1'b0, scale});
    wire [31:0] r;
    npu_rsr #(.PW(64)) u_so (.p(po), .shift(shift), .mode(o_rnd), .dbl(o_dbl), .q(r));

    // ---------------------------------------------------------------- activation
    wire [31:0] t  = r + {{15{o_zp[16]}}, o_zp};
    wire [31:0] lo = {{15{o_min[16]}}, o_min};
    wire [31:0] hi = {{15{o_max[16]}}, o_max};
    wire [31:0] c  = !clip ? t : ($signed(t) < $signed(lo)) ? lo : ($signed(t) > $signed(hi)) ? hi : t;
    assign q = c[7:0];

    wire unused_ok = ^{prod[41:32], c[31:8]};
endmodule

`default_nettype wire
