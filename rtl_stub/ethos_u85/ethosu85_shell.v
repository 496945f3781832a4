// ethosu85_shell.v -- port-only shell of the Arm Ethos-U85 top level, for DUT=tlm.
//
// The module has the TRM chapter 5 port list of a configuration with one SRAM and one EXT
// AXI manager port (SRAM0, EXT0; 128-bit data, 40-bit address, 6-bit IDs, 16-bit WSTRB).
// It has no logic. Every input is read by the bench's TLM-behind-pins adapter
// (tb/tlm_pins.py) through VPI; every output <PORT> is a continuous copy of a variable
// tlm_<PORT> that the adapter writes. (Verilator does not keep values written through VPI
// into a top-level output port, so the ports cannot be the written variables themselves.)
// The bench binds to the port names only, so it drives the RTL stand-in (ethosu85.v) or
// licensed RTL with the same port names unchanged.
//
// Plain Verilog-2005. Checked with "verilator --lint-only -Wall" and "iverilog -g2012".
// The timescale is given by the build (tb/run.py).

// The module is named ethosu85 like the NPU and the stand-in, not like this file. Inputs
// are only read, and tlm_* only written, from Python.
/* verilator lint_off DECLFILENAME */
/* verilator lint_off UNDRIVEN */
/* verilator lint_off UNUSEDSIGNAL */
module ethosu85 (
`include "gen/ethosu85_ports.vh"
);
`include "gen/ethosu85_shell.vh"
endmodule
/* verilator lint_on UNUSEDSIGNAL */
/* verilator lint_on UNDRIVEN */
/* verilator lint_on DECLFILENAME */
