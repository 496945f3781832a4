// npu_kernel_alu.v -- the arithmetic of one output element of the kernel datapath (TRM
// 3.6.6, 3.6.7, 3.10.5, 3.10.6): one 49x32 multiplier and one rounded_shift_right (npu_rsr)
// shared by up to three phases, chosen by the caller (npu_kernel.v keeps sa/sb between
// phases):
//
//   phase 0  elementwise (not mul): r = scale_a(a)
//              scale_x(v) = (int32_t)rounded_shift_right(v * X_SCALE.scale, X_SCALE.shift,
//                                                        X_SCALE.round_mode, X_SCALE.dbl_rnd)
//              for b8 and signed b16 operands; b32 and unsigned b16 operands pass unscaled
//            elementwise mul: r = a * b (64 bits, no input scaling)
//   phase 1  elementwise: r = scale_b(b) (lrelu: scale_b(a))
//   phase 2  acc = pooling: pool_acc (reduce_sum: 48 bits); elementwise: the mode of sa, sb
//            (add, sub, min, max, shr, shl, lshr, clz, abs, lrelu, cmp_*, and, or, xor, not,
//            and_not), wrapped to int32 except the b32 mul product
//            RESIZE: r = rounded_shift_right((int64)acc << 16, OFM_SCALE.shift, ...)
//            rescale: rescale_mode_global / normal r = rounded_shift_right(acc * scale, shift,
//            OFM_SCALE.round_mode, OFM_SCALE.dbl_rnd) (scale, shift: OFM_SCALE, or the
//            average-pool table entry of d = count_m1 + 1); shift_only (b32 mul) without the
//            multiply; none (shr, shl, lshr): acc
//            q = r, the value activation() takes (npu_act.v, instantiated by the caller)
//
// a and b are the operands with their zero points subtracted (read_ifm / read_ifm2; a
// scalar operand is OP_SCALAR minus its zero point, see npu_kernel.v): up to 33 bits.
// Only the low 32 bits of any rounded result are used (every consumer casts to int32_t),
// and npu_rsr gives them exactly.
`default_nettype none

module npu_kernel_alu (
    input  wire [1:0]  phase,
    input  wire        is_pool,
    input  wire [5:0]  ew_op,         // elementwise_mode
    input  wire [32:0] a,             // signed
    input  wire [32:0] b,             // signed
    input  wire        pass_a,        // a passes scale_a unscaled (b32, unsigned b16)
    input  wire        pass_b,
    input  wire [1:0]  prec,          // IFM precision (shl/lshr masks, b32 mul)
    input  wire [30:0] a_scale,
    input  wire [5:0]  a_shift,
    input  wire        a_rnd,
    input  wire [4:0]  a_dbl,
    input  wire [30:0] b_scale,
    input  wire [5:0]  b_shift,
    input  wire        b_rnd,
    input  wire [4:0]  b_dbl,
    input  wire [63:0] sa,            // phase 0 result (signed; the mul product is 64 bits)
    input  wire [31:0] sb,            // phase 1 result (signed)
    input  wire [47:0] pool_acc,      // signed (32 bits sign-extended, or 48)
    input  wire        avg,
    input  wire        rs,            // RESIZE: rescale shift_only of pool_acc << 16
    input  wire [5:0]  count_m1,
    input  wire [30:0] o_scale,
    input  wire [5:0]  o_shift,
    input  wire [2:0]  o_rnd,
    input  wire [4:0]  o_dbl,
    output wire [63:0] r64,           // phases 0 and 1
    output wire [31:0] q              // phase 2: the value before activation (npu_act.v)
);
`include "gen/npu_isa.vh"
`include "gen/npu_kernel.vh"

    localparam [5:0] M_MUL = NPU_E_ELEMENTWISE_MODE_MUL[5:0], M_ADD = NPU_E_ELEMENTWISE_MODE_ADD[5:0],
                     M_SUB = NPU_E_ELEMENTWISE_MODE_SUB[5:0], M_MIN = NPU_E_ELEMENTWISE_MODE_MIN[5:0],
                     M_MAX = NPU_E_ELEMENTWISE_MODE_MAX[5:0], M_LRELU = NPU_E_ELEMENTWISE_MODE_LRELU[5:0],
                     M_ABS = NPU_E_ELEMENTWISE_MODE_ABS[5:0], M_CLZ = NPU_E_ELEMENTWISE_MODE_CLZ[5:0],
                     M_SHR = NPU_E_ELEMENTWISE_MODE_SHR[5:0], M_SHL = NPU_E_ELEMENTWISE_MODE_SHL[5:0],
                     M_LSHR = NPU_E_ELEMENTWISE_MODE_LSHR[5:0], M_EQ = NPU_E_ELEMENTWISE_MODE_CMP_EQ[5:0],
                     M_NE = NPU_E_ELEMENTWISE_MODE_CMP_NE[5:0], M_GE = NPU_E_ELEMENTWISE_MODE_CMP_GE[5:0],
                     M_GT = NPU_E_ELEMENTWISE_MODE_CMP_GT[5:0], M_AND = NPU_E_ELEMENTWISE_MODE_AND[5:0],
                     M_OR = NPU_E_ELEMENTWISE_MODE_OR[5:0], M_XOR = NPU_E_ELEMENTWISE_MODE_XOR[5:0],
                     M_NOT = NPU_E_ELEMENTWISE_MODE_NOT[5:0], M_ANDN = NPU_E_ELEMENTWISE_MODE_AND_NOT[5:0];
    localparam [1:0] B8 = NPU_E_ACTIVATION_PRECISION_B8[1:0], B16 = NPU_E_ACTIVATION_PRECISION_B16[1:0];

    wire mulop  = !is_pool && (ew_op == M_MUL);
    wire mul64  = mulop && prec != B8 && prec != B16;          // b32: shift-only rescale
    wire [31:0] sa32 = sa[31:0];
    wire [31:0] pmask = (prec == B8) ? 32'h0000_00FF : (prec == B16) ? 32'h0000_FFFF : 32'hFFFF_FFFF;

    // ---------------------------------------------------------------- the mode (phase 2)
    logic [31:0] acc_ew;
    logic [5:0]  clz_n;
    integer i;
    always @(*) begin
        clz_n = 6'd32;
        for (i = 0; i < 32; i = i + 1)
            if (sa32[i]) clz_n = 6'(31 - i);
        case (ew_op)
            M_MUL:   acc_ew = sa32;
            M_ADD:   acc_ew = sa32 + sb;
            M_SUB:   acc_ew = sa32 - sb;
            M_MIN:   acc_ew = ($signed(sa32) < $signed(sb)) ? sa32 : sb;
            M_MAX:   acc_ew = ($signed(sa32) > $signed(sb)) ? sa32 : sb;
            M_LRELU: acc_ew = a[32] ? sb : sa32;
            M_ABS:   acc_ew = sa32[31] ? 32'd0 - sa32 : sa32;
            M_CLZ:   acc_ew = {26'd0, clz_n};
            M_SHL:   acc_ew = (sa32 << sb[4:0]) & pmask;
            M_LSHR:  acc_ew = (sa32 & pmask) >> sb[4:0];
            M_EQ:    acc_ew = (sa32 == sb) ? 32'hFFFF_FFFF : 32'd0;
            M_NE:    acc_ew = (sa32 != sb) ? 32'hFFFF_FFFF : 32'd0;
            M_GE:    acc_ew = ($signed(sa32) >= $signed(sb)) ? 32'hFFFF_FFFF : 32'd0;
            M_GT:    acc_ew = ($signed(sa32) > $signed(sb)) ? 32'hFFFF_FFFF : 32'd0;
            M_AND:   acc_ew = sa32 & sb;
            M_OR:    acc_ew = sa32 | sb;
            M_XOR:   acc_ew = sa32 ^ sb;
            M_NOT:   acc_ew = ~sa32;
            M_ANDN:  acc_ew = sa32 & ~sb;
            default: acc_ew = sa32;                  // shr: the shift is the rounding below
        endcase
    end
    wire [47:0] acc48 = is_pool ? pool_acc : {{16{acc_ew[31]}}, acc_ew};
    wire [36:0] avg_entry = NPU_AVGPOOL_TABLE[count_m1 * 37 +: 37];
    wire        ew_none = !is_pool && (ew_op == M_SHR || ew_op == M_SHL || ew_op == M_LSHR);

    // ---------------------------------------------------------------- shared multiplier
    logic [48:0] mx;
    logic [31:0] my;
    logic [5:0]  sh;
    logic [2:0]  rm;
    logic [4:0]  db;
    always @(*) begin
        case (phase)
            2'd0: begin
                mx = {{33{a[15]}}, a[15:0]};
                my = {1'b0, a_scale};
                sh = a_shift; rm = {2'b00, a_rnd}; db = a_dbl;
            end
            2'd1: begin
                // lrelu scales a with IFM2_SCALE
                mx = (ew_op == M_LRELU) ? {{33{a[15]}}, a[15:0]} : {{33{b[15]}}, b[15:0]};
                my = {1'b0, b_scale};
                sh = b_shift; rm = {2'b00, b_rnd}; db = b_dbl;
            end
            default: begin
                mx = {acc48[47], acc48};
                my = {1'b0, avg ? avg_entry[30:0] : o_scale};
                sh = avg ? avg_entry[36:31] : o_shift; rm = o_rnd; db = o_dbl;
                if (!is_pool && ew_op == M_SHR) begin
                    sh = {1'b0, sb[4:0]};                // shr: rounded by OFM_SCALE's mode
                end
            end
        endcase
    end
    // mx * my as two partial products of at most 64 bits (wider multiplies are slow in
    // Icarus), exact: mx is a sign-extended 48-bit value and each half of my < 2^16
    wire signed [63:0] pw_lo = 64'($signed(mx)) * 64'($signed({1'b0, my[15:0]}));
    wire signed [63:0] pw_hi = 64'($signed(mx)) * 64'($signed({1'b0, my[31:16]}));
    wire [79:0] pw = {{16{pw_lo[63]}}, pw_lo} + {pw_hi, 16'd0};
    // phase 0/1: operand * its scale, phase 2: acc * scale; the mul product (phase 0, mul)
    // a*b of the two 33-bit operands has its own multiplier
    wire [63:0] pmul = 64'($signed(a)) * 64'($signed(b));   // (the product's low 64 bits)
    wire [79:0] prod = (phase == 2'd2 && rs) ? {{16{acc48[47]}}, acc48, 16'd0}
                     : (phase == 2'd2 && (mul64 || (!is_pool && ew_op == M_SHR)))
                       ? (mul64 ? {{16{sa[63]}}, sa} : {{48{sa32[31]}}, sa32})
                       : pw[79:0];
    wire [31:0] r;
    npu_rsr #(.PW(80)) u_rsr (.p(prod), .shift(sh), .mode(rm), .dbl(db), .q(r));
    // scale_b uses the IFM2 type also when lrelu applies it to a
    wire pass = (phase == 2'd0 && pass_a) || (phase == 2'd1 && pass_b);
    wire [32:0] pass_v = (phase == 2'd1 && ew_op != M_LRELU) ? b : a;
    assign r64 = (phase == 2'd0 && mulop) ? pmul[63:0] :
                 pass ? {{31{pass_v[32]}}, pass_v} : {{32{r[31]}}, r};
    wire [31:0] res = ew_none && ew_op != M_SHR ? acc_ew : r;

    assign q = res;

    wire unused_ok = ^{b[32:16] & 17'd0};
endmodule

`default_nettype wire
