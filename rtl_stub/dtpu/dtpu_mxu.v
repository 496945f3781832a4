// dtpu_mxu.v -- the Matrix Multiplication Unit (thesis §4.4.3 "mxu_wrapper", M = ROWS
// weight rows, K = COLUMNS input lanes): a weight-stationary systolic array.
//
// Data flow (contract DATA_RULES "step", "row groups"):
//   * an issued vector x (COLUMNS operands) enters the enskew registers: column c is
//     delayed c cycles, so the partial sums meet their operands;
//   * each activation moves one row down per cycle, each partial sum one column right;
//     the first column does not accumulate (dtpu_pe FIRST);
//   * row r's sum leaves column COLUMNS-1 after COLUMNS + r cycles; the deskew registers
//     (ROWS-1-r of them) align all rows: y[r] of a step is valid LAT = COLUMNS + ROWS - 1
//     enabled cycles after the step was issued (valid bit pipeline `vpipe`);
//   * row groups: when a step leaves the array, the chain register of row r takes
//     h[r] = (group_first[r] ? 0 : h[r-1]) + y[r] - the partial sum of the row above as it
//     was after the previous step. y_out is that new value, per row; the output staging
//     (dtpu_ls_array) picks the last row of each group.
// Every register advances only when `en` is high (the pipeline stalls as a whole when the
// output staging cannot take a step). `chain_clear` zeroes the chain at the start of a run.
`default_nettype none

module dtpu_mxu #(
    parameter integer ROWS    = 8,
    parameter integer COLUMNS = 8,
    parameter integer AW      = 9,
    parameter integer ACCW    = 32
) (
    input  wire                          clk,
    input  wire                          reset,
    input  wire                          en,
    input  wire                          chain_clear,
    input  wire                          x_valid,
    input  wire [COLUMNS*AW-1:0]         x_ops,      // column c at [c*AW +: AW]
    input  wire [ROWS*COLUMNS*AW-1:0]    w_ops,      // W[r][c] at [(r*COLUMNS+c)*AW +: AW]
    input  wire [ROWS-1:0]               group_first,
    output wire [ROWS*ACCW-1:0]          y_out,      // chained row values of the step leaving
    output wire                          y_valid,
    output wire                          busy        // a step is inside the array
);
    localparam integer LAT = COLUMNS + ROWS - 1;

    // ---- valid pipeline ----
    logic [LAT-1:0] vpipe;
    generate
        if (LAT > 1) begin : g_vpipe
            always_ff @(posedge clk) begin
                if (reset)
                    vpipe <= '0;
                else if (en)
                    vpipe <= {vpipe[LAT-2:0], x_valid};
            end
        end else begin : g_vpipe1
            always_ff @(posedge clk) begin
                if (reset)
                    vpipe <= '0;
                else if (en)
                    vpipe <= x_valid;
            end
        end
    endgenerate
    assign y_valid = vpipe[LAT-1];
    wire unused_bottom;                     // the last row passes its activations nowhere
    assign busy = |vpipe;

    // ---- PE grid ----
    wire [ROWS*COLUMNS*AW-1:0]   a_grid;   // a_out of PE(r,c)
    wire [ROWS*COLUMNS*ACCW-1:0] p_grid;   // p_out of PE(r,c)
    wire [COLUMNS*AW-1:0]        skewed;   // column inputs of row 0
    wire [ROWS*ACCW-1:0]         y_rows;   // deskewed row sums of the step leaving

    genvar r, c;
    generate
        for (c = 0; c < COLUMNS; c = c + 1) begin : g_skew
            wire [AW-1:0] x_c = x_valid ? x_ops[c*AW +: AW] : {AW{1'b0}};
            if (c == 0) begin : g_direct
                assign skewed[0 +: AW] = x_c;
            end else begin : g_delay
                logic [c*AW-1:0] sr;            // c stages, newest at the bottom
                if (c == 1) begin : g_one
                    always_ff @(posedge clk)
                        if (en) sr <= x_c;
                end else begin : g_more
                    always_ff @(posedge clk)
                        if (en) sr <= {sr[(c-1)*AW-1:0], x_c};
                end
                assign skewed[c*AW +: AW] = sr[c*AW-1 -: AW];
            end
        end

        for (r = 0; r < ROWS; r = r + 1) begin : g_row
            for (c = 0; c < COLUMNS; c = c + 1) begin : g_col
                wire [AW-1:0]   a_in = (r == 0) ? skewed[c*AW +: AW] : a_grid[((r-1)*COLUMNS+c)*AW +: AW];
                wire [ACCW-1:0] p_in = (c == 0) ? {ACCW{1'b0}} : p_grid[(r*COLUMNS+c-1)*ACCW +: ACCW];
                dtpu_pe #(.AW(AW), .ACCW(ACCW), .FIRST(c == 0 ? 1 : 0)) pe (
                    .clk(clk), .en(en),
                    .a_in(a_in), .w(w_ops[(r*COLUMNS+c)*AW +: AW]), .p_in(p_in),
                    .a_out(a_grid[(r*COLUMNS+c)*AW +: AW]),
                    .p_out(p_grid[(r*COLUMNS+c)*ACCW +: ACCW]));
            end
        end

        // ---- deskew ----
        for (r = 0; r < ROWS; r = r + 1) begin : g_out
            wire [ACCW-1:0] row_sum = p_grid[(r*COLUMNS+COLUMNS-1)*ACCW +: ACCW];
            if (r == ROWS - 1) begin : g_nodelay
                assign y_rows[r*ACCW +: ACCW] = row_sum;
            end else begin : g_deskew
                localparam integer N = ROWS - 1 - r;   // stages
                logic [N*ACCW-1:0] ds;
                if (N == 1) begin : g_one
                    always_ff @(posedge clk)
                        if (en) ds <= row_sum;
                end else begin : g_more
                    always_ff @(posedge clk)
                        if (en) ds <= {ds[(N-1)*ACCW-1:0], row_sum};
                end
                assign y_rows[r*ACCW +: ACCW] = ds[N*ACCW-1 -: ACCW];
            end
        end
    endgenerate

    // ---- row-group chain ----
    logic [ROWS*ACCW-1:0] h;          // row values after the last step that left the array
    logic [ROWS*ACCW-1:0] h_new;
    assign unused_bottom = ^a_grid[ROWS*COLUMNS*AW-1:(ROWS-1)*COLUMNS*AW];
    integer i, up;
    always @(*) begin
        for (i = 0; i < ROWS; i = i + 1) begin
            up = (i > 0) ? i - 1 : 0;
            h_new[i*ACCW +: ACCW] = ((i == 0 || group_first[i]) ? {ACCW{1'b0}} : h[up*ACCW +: ACCW])
                                    + y_rows[i*ACCW +: ACCW];
        end
    end
    always_ff @(posedge clk) begin
        if (reset || chain_clear)
            h <= '0;
        else if (en && y_valid)
            h <= h_new;
    end
    assign y_out = h_new;
endmodule
`default_nettype wire
