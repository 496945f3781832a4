// npu_kernel_alu.v -- the arithmetic of one output element of the kernel datapath (TRM
// 3.6.6, 3.6.7, 3.10.5, 3.10.6): one 33x32 multiplier and one rounded_shift_right (npu_rsr)
// shared by up to three phases, chosen by the caller (npu_kernel.v keeps sa/sb between
// phases):
//
//   phase 0  elementwise add/sub/min/max: r32 = scale_a(a)
//              scale_x(v) = (int32_t)rounded_shift_right(v * X_SCALE.scale, X_SCALE.shift,
//                                                        X_SCALE.round_mode, X_SCALE.dbl_rnd)
//            elementwise mul: r32 = (int32_t)(a * b)             (no input scaling)
//   phase 1  elementwise add/sub/min/max: r32 = scale_b(b)
//   phase 2  acc = pooling: pool_acc; mul: sa; add: sa + sb; sub: sa - sb; min/max (int32)
//            r = rounded_shift_right(acc * scale, shift, OFM_SCALE.round_mode,
//                                    OFM_SCALE.dbl_rnd)
//              scale, shift: avg = 1 (rescale_mode_avpool): the built-in table entry of
//              d = count_m1 + 1 (gen/npu_kernel.vh); else OFM_SCALE (global)
//            activation (lut_none): t = (int32_t)(r + OFM zero point); clip_range b16:
//            t = t < min ? min : t > max ? max : t; q = t[7:0] (write_ofm's truncate).
//
// a and b are the operands with their zero points subtracted (read_ifm / read_ifm2; a
// scalar operand is OP_SCALAR minus its zero point, see npu_kernel.v). Ranges the kernel
// unit guarantees: data operands fit 9 bits; a scalar fits 33 bits (mul) or 16 bits
// (add/sub/min/max, a TRM assert of scale_a/scale_b). Every product given to npu_rsr fits
// 64 bits (|16b x 31b| < 2^47, |32b x 31b| < 2^62).
`default_nettype none

module npu_kernel_alu (
    input  wire [1:0]  phase,
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
    input  wire [31:0] sa,            // phase 0 result (signed)
    input  wire [31:0] sb,            // phase 1 result (signed)
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
    output wire [31:0] r32,
    output wire [7:0]  q
);
`include "gen/npu_isa.vh"
`include "gen/npu_kernel.vh"

    wire mulop = (ew_op == NPU_E_ELEMENTWISE_MODE_MUL[2:0]);

    // ---------------------------------------------------------------- acc of phase 2
    logic [31:0] acc_ew;
    always @(*) begin
        case (ew_op)
            NPU_E_ELEMENTWISE_MODE_MUL[2:0]: acc_ew = sa;
            NPU_E_ELEMENTWISE_MODE_ADD[2:0]: acc_ew = sa + sb;
            NPU_E_ELEMENTWISE_MODE_SUB[2:0]: acc_ew = sa - sb;
            NPU_E_ELEMENTWISE_MODE_MIN[2:0]: acc_ew = ($signed(sa) < $signed(sb)) ? sa : sb;
            default:                         acc_ew = ($signed(sa) > $signed(sb)) ? sa : sb;
        endcase
    end
    wire [31:0] acc = is_pool ? pool_acc : acc_ew;
    wire [36:0] avg_entry = NPU_AVGPOOL_TABLE[count_m1 * 37 +: 37];

    // ---------------------------------------------------------------- shared multiplier
    logic [32:0] mx;
    logic [31:0] my;
    logic [5:0]  sh;
    logic [2:0]  rm;
    logic [4:0]  db;
    always @(*) begin
        case (phase)
            2'd0: begin
                if (mulop) begin
                    mx = a_wide ? a : b;
                    my = a_wide ? {{23{b[8]}}, b[8:0]} : {{23{a[8]}}, a[8:0]};
                end else begin
                    mx = {{17{a[15]}}, a[15:0]};
                    my = {1'b0, a_scale};
                end
                sh = a_shift; rm = {2'b00, a_rnd}; db = a_dbl;
            end
            2'd1: begin
                mx = {{17{b[15]}}, b[15:0]};
                my = {1'b0, b_scale};
                sh = b_shift; rm = {2'b00, b_rnd}; db = b_dbl;
            end
            default: begin
                mx = {acc[31], acc};
                my = {1'b0, avg ? avg_entry[30:0] : o_scale};
                sh = avg ? avg_entry[36:31] : o_shift; rm = o_rnd; db = o_dbl;
            end
        endcase
    end
    wire signed [64:0] p = $signed(mx) * $signed(my);
    wire [31:0] r;
    npu_rsr #(.PW(64)) u_rsr (.p(p[63:0]), .shift(sh), .mode(rm), .dbl(db), .q(r));
    assign r32 = (phase == 2'd0 && mulop) ? p[31:0] : r;

    // ---------------------------------------------------------------- activation
    wire [31:0] t  = r + {{15{o_zp[16]}}, o_zp};
    wire [31:0] lo = {{15{o_min[16]}}, o_min};
    wire [31:0] hi = {{15{o_max[16]}}, o_max};
    wire [31:0] c  = !clip ? t : ($signed(t) < $signed(lo)) ? lo : ($signed(t) > $signed(hi)) ? hi : t;
    assign q = c[7:0];

    wire unused_ok = ^{p[64], a[32:16], b[32:16], c[31:8]};
endmodule

`default_nettype wire
