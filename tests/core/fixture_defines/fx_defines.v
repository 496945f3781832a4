// A module whose output is a macro (tests/core/test_fixture_rebuild.py).
`ifndef FX_VALUE
`define FX_VALUE 0
`endif
module fx_defines (output wire [7:0] value);
    assign value = `FX_VALUE;
endmodule
