// dtpu_shell.v -- port-only shell of module dtpu, for DUT=tlm.
//
// The ports of the stand-in (gen/dtpu_ports.vh, from tlm/dtpu/contract.py top_ports) and
// no logic: the bench's TLM-behind-pins adapter (tb/dtpu/tlm_pins.py) reads the inputs
// through VPI and writes every output <port> through the variable tlm_<port> it copies
// (Verilator does not keep VPI writes into a top-level output port). Parameters of the
// stand-in are accepted and ignored: the configuration comes from DTPU_CONFIG.
/* verilator lint_off DECLFILENAME */
/* verilator lint_off UNDRIVEN */
/* verilator lint_off UNUSEDSIGNAL */
/* verilator lint_off UNUSEDPARAM */
`include "gen/dtpu_config.vh"

module dtpu #(
`include "gen/dtpu_params.vh"
) (
`include "gen/dtpu_ports.vh"
);
`include "gen/dtpu_shell.vh"
endmodule
/* verilator lint_on UNUSEDPARAM */
/* verilator lint_on UNUSEDSIGNAL */
/* verilator lint_on UNDRIVEN */
/* verilator lint_on DECLFILENAME */
