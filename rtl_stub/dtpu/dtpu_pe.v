// dtpu_pe.v -- one processing element of the MXU (thesis Fig. 4.14: SMUL in the first
// column, SMAC in the others).
//
// Weight-stationary: `w` is the PE's weight operand, static during a run. Every enabled
// cycle the activation moves on to the PE below (a_out) and the partial sum to the PE on
// the right (p_out): p_out = (FIRST ? 0 : p_in) + a_in * w, modulo 2^ACCW. Operands are
// AW-bit two's complement values (the Filter&Select unit sign- or zero-extends each lane
// to AW = widest built precision + 1), so one signed multiplier serves every precision
// and both signednesses; the low ACCW bits of the product are the contract's product
// modulo the output lane width.
`default_nettype none

module dtpu_pe #(
    parameter integer AW    = 9,
    parameter integer ACCW  = 32,
    parameter integer FIRST = 0
) (
    input  wire                   clk,
    input  wire                   en,
    input  wire signed [AW-1:0]   a_in,
    input  wire signed [AW-1:0]   w,
    input  wire [ACCW-1:0]        p_in,
    output logic signed [AW-1:0]  a_out,
    output logic [ACCW-1:0]       p_out
);
    localparam integer PW = 2 * AW;
    wire signed [PW-1:0] prod = a_in * w;
    wire [ACCW-1:0] prod_acc;

    generate
        if (PW >= ACCW) begin : g_trunc
            assign prod_acc = prod[ACCW-1:0];
            if (PW > ACCW) begin : g_unused
                wire unused_hi = ^prod[PW-1:ACCW];   // bits beyond the lane wrap away
            end
        end else begin : g_sext
            assign prod_acc = {{(ACCW - PW){prod[PW-1]}}, prod};
        end
    endgenerate

    wire [ACCW-1:0] acc_in = (FIRST != 0) ? {ACCW{1'b0}} : p_in;

    always_ff @(posedge clk) begin
        if (en) begin
            a_out <= a_in;
            p_out <= acc_in + prod_acc;
        end
    end
endmodule
`default_nettype wire
