// npu_act.v -- activation() and write_ofm's truncation of one output element in the
// Ethos-U85 stand-in (TRM 3.6.7, tlm/ethos_u85/arith.py activation), combinational. The one
// implementation of the activation functions, used by the kernel unit (npu_kernel.v, one
// element a cycle) and by the CONV unit's output stage (npu_conv_out.v, one lane each):
//
//   t = (int32_t)(r + OFM zero point); tanh / sigmoid: their clamps, else clip_range b16:
//   clamp(t, min, max) (the TRM's order: below min first, then above max); then the LUT
//   function (lut_u8_u8, lut_s8_s8, lut_s8_s16, lut_s8_s32, lut_s16_s16, lut_s16_s32,
//   lut_tanh, lut_sigmoid) on the LUT RAM line the caller reads at lut_byte[10:4]
//   q   = the activation's value
//   q_t = write_ofm's truncation of q to the OFM type, sign- or zero-extended to 32 bits
//         (the value a chaining FIFO holds; its low bytes are the memory bytes)
//   tab_ok = the table asserts of the LUT functions (ACTIVATION.table), registers only
`default_nettype none

module npu_act (
    input  wire [31:0]  r,             // rescaled value (signed)
    input  wire [16:0]  o_zp,          // signed
    input  wire         clip,          // clip_range b16
    input  wire [16:0]  o_min,         // signed
    input  wire [16:0]  o_max,         // signed
    input  wire [4:0]   act_fn,        // activation_function
    input  wire [2:0]   table_i,       // ACTIVATION.table
    input  wire [1:0]   o_prec,        // OFM activation_precision (b8, b16, b32)
    input  wire         o_sgn,         // OFM activation_type signed
    output wire [10:0]  lut_byte,      // byte of the LUT RAM the LUT function reads
    input  wire [127:0] lut_line,      // the LUT RAM line of lut_byte
    output wire [31:0]  q,
    output wire [31:0]  q_t,
    output wire         tab_ok
);
`include "gen/npu_isa.vh"

    localparam [4:0] F_U8 = NPU_E_ACTIVATION_FUNCTION_LUT_U8_U8[4:0],
                     F_S8 = NPU_E_ACTIVATION_FUNCTION_LUT_S8_S8[4:0], F_S8S16 = NPU_E_ACTIVATION_FUNCTION_LUT_S8_S16[4:0],
                     F_S8S32 = NPU_E_ACTIVATION_FUNCTION_LUT_S8_S32[4:0], F_S16 = NPU_E_ACTIVATION_FUNCTION_LUT_S16_S16[4:0],
                     F_S16S32 = NPU_E_ACTIVATION_FUNCTION_LUT_S16_S32[4:0], F_TANH = NPU_E_ACTIVATION_FUNCTION_LUT_TANH[4:0],
                     F_SIG = NPU_E_ACTIVATION_FUNCTION_LUT_SIGMOID[4:0];
    localparam [1:0] B8 = NPU_E_ACTIVATION_PRECISION_B8[1:0], B16 = NPU_E_ACTIVATION_PRECISION_B16[1:0];

    assign tab_ok = (act_fn == F_S8S16) ? (table_i < 3'd4) :
                    (act_fn == F_S8S32) ? (table_i < 3'd2) :
                    (act_fn == F_S16 || act_fn == F_S16S32 || act_fn == F_TANH || act_fn == F_SIG)
                                        ? (table_i == 3'd0) : 1'b1;

    // one procedural block (Icarus evaluates net-level adders and multipliers bit by bit)
    logic [31:0] t0, t, tsh, v, q_tv;
    logic [31:0] lo, hi;
    logic        do_clip;
    // LUT entry: 8-bit index modes use (table << 8) + byte; interpolating modes the entry
    // i = 256 + (t >> shift) of (base, slope) int16 pairs
    logic [7:0]  i8;
    logic [10:0] e8;
    logic [4:0]  ish;
    logic [8:0]  ie;
    logic [10:0] byte_a;
    logic [31:0] w32;
    logic [15:0] w16;
    logic [7:0]  w8;
    logic signed [31:0] base, slope;
    logic [8:0]  frac;
    logic signed [41:0] fs, b7, s16v, s32v, thv, sgv;
    always @(*) begin
        t0 = r + {{15{o_zp[16]}}, o_zp};
        do_clip = 1'b1;
        if (act_fn == F_TANH) begin lo = 32'hFFFF_0000; hi = 32'h0000_FFFF; end
        else if (act_fn == F_SIG) begin lo = 32'hFFFE_1000; hi = 32'h0001_EFFF; end
        else begin
            lo = {{15{o_min[16]}}, o_min}; hi = {{15{o_max[16]}}, o_max}; do_clip = clip;
        end
        t = !do_clip ? t0 : ($signed(t0) < $signed(lo)) ? lo : ($signed(t0) > $signed(hi)) ? hi : t0;
        i8 = (act_fn == F_U8) ? t[7:0] : t[7:0] + 8'd128;
        e8 = {table_i, i8};
        case (act_fn)
            F_TANH:  ish = 5'd8;
            F_SIG:   ish = 5'd9;
            default: ish = 5'd7;
        endcase
        tsh = $signed(t) >>> ish;
        ie = 9'(10'd256 + tsh[9:0]);
        case (act_fn)
            F_U8, F_S8: byte_a = e8;
            F_S8S16:    byte_a = {e8[9:0], 1'b0};
            F_S8S32:    byte_a = {e8[8:0], 2'b00};
            default:    byte_a = {ie, 2'b00};
        endcase
        // the LUT arithmetic only for a LUT function (the others take t: simulation cost)
        w32 = 32'd0; w16 = 16'd0; w8 = 8'd0; base = 32'sd0; slope = 32'sd0; frac = 9'd0;
        fs = 42'sd0; b7 = 42'sd0; s16v = 42'sd0; s32v = 42'sd0; thv = 42'sd0; sgv = 42'sd0;
        v = t;
        if (act_fn == F_U8 || act_fn == F_S8 || act_fn == F_S8S16 || act_fn == F_S8S32 || act_fn == F_S16
            || act_fn == F_S16S32 || act_fn == F_TANH || act_fn == F_SIG) begin
            w32 = lut_line[{byte_a[3:2], 5'd0} +: 32];
            w16 = lut_line[{byte_a[3:1], 4'd0} +: 16];
            w8  = lut_line[{byte_a[3:0], 3'd0} +: 8];
            base  = {{16{w32[15]}}, w32[15:0]};
            slope = {{16{w32[31]}}, w32[31:16]};
            frac = (act_fn == F_TANH) ? {1'b0, t[7:0]} : (act_fn == F_SIG) ? t[8:0] : {2'd0, t[6:0]};
            fs = $signed({1'b0, frac}) * slope;
            b7  = {{3{base[31]}}, base, 7'd0};
            s16v = b7 + fs + 42'sd64;
            s32v = b7 + fs;
            thv = {{2{base[31]}}, base, 8'd0} + fs + (t[31] ? 42'sd127 : 42'sd128);
            sgv = {{1{base[31]}}, base, 9'd0} + fs + (t[31] ? 42'sh10001FF : 42'sh1000200);
            case (act_fn)
                F_U8:     v = {24'd0, w8};
                F_S8:     v = {{24{w8[7]}}, w8};
                F_S8S16:  v = {{16{w16[15]}}, w16};
                F_S8S32:  v = w32;
                F_S16:    v = {{16{s16v[22]}}, s16v[22:7]};
                F_S16S32: v = s32v[31:0];
                F_TANH:   v = thv[39:8];
                default:  v = sgv[41:10];                        // F_SIG
            endcase
        end
        q_tv = (o_prec == B8) ? {{24{o_sgn & v[7]}}, v[7:0]} :
               (o_prec == B16) ? {{16{o_sgn & v[15]}}, v[15:0]} : v;
    end
    assign lut_byte = byte_a;
    assign q = v;
    assign q_t = q_tv;

    wire unused_ok = ^{t[31:10], s16v[41:23], s16v[6:0], s32v[41:32], thv[41:40], thv[7:0], sgv[9:0],
                       tsh[31:10], e8[10]};
endmodule

`default_nettype wire
