// npu_fwd.v -- the fast weight decoder (FWD) of the Ethos-U85 stand-in: decodes one FWD
// weight stream (TRM 3.9.11) into signed weights -255..255, in stream order.
//
//   header   256 bits: raw_mode_flag, small_lut_flag, reserved, zero_point (int8),
//            16 LUT entries (9 bits each, sign in the LSB) - positions in gen/npu_conv.vh
//   words    256 bits each: raw mode 32 x int8 (value - zero_point), else 64 x 4-bit (LUT)
//            or, with small_lut_flag, 128 x 2-bit indices into the LUT
// Only whole words count (tlm.weights.decode_fwd): a stream of L bytes holds
// floor((L - 32) / 32) words. The header's reserved bits are not checked (the TRM declares
// them SYMBOL_UINT). Up to OW weights a cycle, at most out_space.
// stop_end: every weight of the stream is out; stop_err: the stream is shorter than its
// header. As for npu_swd.v, the consumer makes either an error only if it needs more.
`default_nettype none

module npu_fwd #(
    parameter integer OW = 8
) (
    input  wire            CLK,
    input  wire            rst_n,
    input  wire            start,
    input  wire [31:0]     len_bytes,
    input  wire            in_valid,
    input  wire [127:0]    in_data,
    output wire            in_ready,
    input  wire [3:0]      out_space,
    output logic [OW*9-1:0] out_w,
    output logic [3:0]     out_n,
    output wire            stop_err,
    output wire            stop_end,
    output wire            busy
);
`include "gen/npu_conv.vh"
    localparam integer BBW = 512;
    localparam integer HB = FWD_WORD_BYTES * 8;      // header bits

    logic [BBW-1:0] bb;
    logic [9:0]     bcnt;
    logic [31:0]    len_q, rx;
    logic           active, hdr, raw, lut2;
    logic [7:0]     zp;
    logic [8:0]     lut [0:15];
    logic [31:0]    left;                 // weights still to give (whole words only)
    wire            exhausted = (rx >= len_q);
    assign in_ready = active && !exhausted && (bcnt <= 10'(BBW - 128));
    wire            take_in = in_valid && in_ready;
    wire [31:0]     rleft = len_q - rx;
    wire [7:0]      in_bits = (rleft >= 32'd16) ? 8'd128 : {rleft[4:0], 3'b000};

    // weights a word holds: 32 raw, 64 LUT4, 128 LUT2
    wire [31:0] words = (len_q < 32'(FWD_WORD_BYTES)) ? 32'd0 : (len_q - 32'(FWD_WORD_BYTES)) >> 5;
    wire [3:0]  bits_per = raw ? 4'd8 : lut2 ? 4'd2 : 4'd4;
    wire        h_raw    = bb[FWD_H_RAW];
    wire        h_small  = bb[FWD_H_SMALL];

    // ---------------------------------------------------------------- output
    logic [3:0]  n, room;
    logic [9:0]  have;
    logic [7:0]  v8;
    logic [3:0]  ix;
    logic [8:0]  e;
    always @(*) begin : expand
        integer k;
        out_w = {(OW*9){1'b0}};
        room = (out_space > 4'(OW)) ? 4'(OW) : out_space;
        have = (bits_per == 4'd8) ? {3'd0, bcnt[9:3]} : (bits_per == 4'd4) ? {2'd0, bcnt[9:2]} : {1'b0, bcnt[9:1]};
        n = room;
        if ({6'd0, n} > have) n = have[3:0];
        if ({28'd0, n} > left) n = left[3:0];
        if (!hdr) n = 4'd0;
        v8 = 8'd0; ix = 4'd0; e = 9'd0;
        for (k = 0; k < OW; k = k + 1) begin
            if (raw) begin
                v8 = bb[k*8 +: 8];
                out_w[k*9 +: 9] = {v8[7], v8} - {zp[7], zp};
            end else begin
                ix = lut2 ? {2'b00, bb[k*2 +: 2]} : bb[k*4 +: 4];
                e = lut[ix];
                out_w[k*9 +: 9] = e[0] ? 9'd0 - {1'b0, e[8:1]} : {1'b0, e[8:1]};
            end
            if (k >= n) out_w[k*9 +: 9] = 9'd0;
        end
        out_n = n;
    end
    wire [9:0] used = hdr ? 10'(n * bits_per) : ((bcnt >= 10'(HB)) ? 10'(HB) : 10'd0);
    assign stop_end = active && hdr && (left == 32'd0);
    assign stop_err = active && !hdr && (len_q < 32'(FWD_WORD_BYTES));
    assign busy = active && !stop_end && !stop_err;

    wire [BBW-1:0] bb_sh = bb >> used;
    wire [9:0]     bcnt_sh = bcnt - used;
    wire [BBW-1:0] bb_in = {{(BBW-128){1'b0}}, in_data} << bcnt_sh;

    always_ff @(posedge CLK or negedge rst_n) begin : seq
        integer k;
        if (!rst_n) begin
            bb <= {BBW{1'b0}}; bcnt <= 10'd0; len_q <= 32'd0; rx <= 32'd0;
            active <= 1'b0; hdr <= 1'b0; raw <= 1'b0; lut2 <= 1'b0; zp <= 8'd0; left <= 32'd0;
        end else if (start) begin
            bb <= {BBW{1'b0}}; bcnt <= 10'd0; len_q <= len_bytes; rx <= 32'd0;
            active <= 1'b1; hdr <= 1'b0; left <= 32'd0;
        end else if (active) begin
            bb <= take_in ? (bb_sh | bb_in) : bb_sh;
            bcnt <= bcnt_sh + (take_in ? {2'b0, in_bits} : 10'd0);
            if (take_in) rx <= rx + 32'd16;
            if (!hdr && bcnt >= 10'(HB)) begin
                hdr <= 1'b1;
                raw <= h_raw;
                lut2 <= h_small;
                zp <= bb[FWD_H_ZP +: FWD_HW_ZP];
                for (k = 0; k < 16; k = k + 1) lut[k] <= bb[FWD_H_LUT + k * FWD_HW_LUT_ENTRY +: FWD_HW_LUT_ENTRY];
                left <= (words << 5) << (h_raw ? 2'd0 : h_small ? 2'd2 : 2'd1);
            end else if (hdr) begin
                left <= left - {28'd0, n};
            end
        end
    end

endmodule

`default_nettype wire
