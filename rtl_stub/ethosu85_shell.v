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
    // ---- Clock and reset (TRM 5.1) ----
    input  wire          CLK,
    input  wire          nRESET,
    input  wire          nMBISTRESET,
    // ---- Configuration (TRM 5.2); sampled at hard reset (CFG* also at soft reset) ----
    input  wire          PORPL,
    input  wire          PORSL,
    input  wire          DBGEN,
    input  wire          SPIDEN,
    input  wire [31:0]   CFGSRAMCAP,
    input  wire [31:0]   CFGEXTCAP,
    input  wire [39:0]   CFGSRAMHASH0,
    // ---- Interrupt (TRM 5.3), level-triggered ----
    output wire          IRQ,
    // ---- Power Q-Channel (TRM 5.4) ----
    output wire          PWRQACTIVE,
    input  wire          PWRQREQn,
    output wire          PWRQACCEPTn,
    output wire          PWRQDENY,
    // ---- Clock Q-Channel (TRM 5.5) ----
    output wire          CLKQACTIVE,
    input  wire          CLKQREQn,
    output wire          CLKQACCEPTn,
    output wire          CLKQDENY,
    // ---- Warm-reset halt (TRM 5.6) ----
    input  wire          WRSTQREQ,
    output wire          WRSTQACK,
    // ---- Debug cross-trigger (TRM 5.7) ----
    input  wire          DBGHALTREQ,
    input  wire          DBGRESTARTREQ,
    output wire          DBGHALTACK,
    // ---- AXI5 manager port SRAM0 (TRM 5.8) ----
    output wire          AWAKEUPSRAM0,
    input  wire          ACLKENSRAM0,
    output wire          AWVALIDSRAM0,
    output wire [5:0]    AWIDSRAM0,
    output wire [39:0]   AWADDRSRAM0,
    output wire [7:0]    AWLENSRAM0,
    output wire [2:0]    AWSIZESRAM0,
    output wire [1:0]    AWBURSTSRAM0,
    output wire [3:0]    AWCACHESRAM0,
    output wire [1:0]    AWDOMAINSRAM0,
    output wire [2:0]    AWPROTSRAM0,
    input  wire          AWREADYSRAM0,
    output wire          WVALIDSRAM0,
    output wire [127:0]  WDATASRAM0,
    output wire [15:0]   WSTRBSRAM0,
    output wire          WLASTSRAM0,
    input  wire          WREADYSRAM0,
    input  wire          BVALIDSRAM0,
    input  wire [5:0]    BIDSRAM0,
    input  wire [1:0]    BRESPSRAM0,
    output wire          BREADYSRAM0,
    output wire          ARVALIDSRAM0,
    output wire [5:0]    ARIDSRAM0,
    output wire [39:0]   ARADDRSRAM0,
    output wire [7:0]    ARLENSRAM0,
    output wire [2:0]    ARSIZESRAM0,
    output wire [1:0]    ARBURSTSRAM0,
    output wire [3:0]    ARCACHESRAM0,
    output wire [1:0]    ARDOMAINSRAM0,
    output wire [2:0]    ARPROTSRAM0,
    input  wire          ARREADYSRAM0,
    input  wire          RVALIDSRAM0,
    input  wire [5:0]    RIDSRAM0,
    input  wire [127:0]  RDATASRAM0,
    input  wire [1:0]    RRESPSRAM0,
    input  wire          RLASTSRAM0,
    output wire          RREADYSRAM0,
    // ---- AXI5 manager port EXT0 (TRM 5.8) ----
    output wire          AWAKEUPEXT0,
    input  wire          ACLKENEXT0,
    output wire          AWVALIDEXT0,
    output wire [5:0]    AWIDEXT0,
    output wire [39:0]   AWADDREXT0,
    output wire [7:0]    AWLENEXT0,
    output wire [2:0]    AWSIZEEXT0,
    output wire [1:0]    AWBURSTEXT0,
    output wire [3:0]    AWCACHEEXT0,
    output wire [1:0]    AWDOMAINEXT0,
    output wire [2:0]    AWPROTEXT0,
    input  wire          AWREADYEXT0,
    output wire          WVALIDEXT0,
    output wire [127:0]  WDATAEXT0,
    output wire [15:0]   WSTRBEXT0,
    output wire          WLASTEXT0,
    input  wire          WREADYEXT0,
    input  wire          BVALIDEXT0,
    input  wire [5:0]    BIDEXT0,
    input  wire [1:0]    BRESPEXT0,
    output wire          BREADYEXT0,
    output wire          ARVALIDEXT0,
    output wire [5:0]    ARIDEXT0,
    output wire [39:0]   ARADDREXT0,
    output wire [7:0]    ARLENEXT0,
    output wire [2:0]    ARSIZEEXT0,
    output wire [1:0]    ARBURSTEXT0,
    output wire [3:0]    ARCACHEEXT0,
    output wire [1:0]    ARDOMAINEXT0,
    output wire [2:0]    ARPROTEXT0,
    input  wire          ARREADYEXT0,
    input  wire          RVALIDEXT0,
    input  wire [5:0]    RIDEXT0,
    input  wire [127:0]  RDATAEXT0,
    input  wire [1:0]    RRESPEXT0,
    input  wire          RLASTEXT0,
    output wire          RREADYEXT0,
    // ---- APB5 completer (TRM 5.9), 8 KiB register window ----
    input  wire          PWAKEUP,
    input  wire          PCLKEN,
    input  wire          PSEL,
    input  wire          PENABLE,
    input  wire [2:0]    PPROT,
    input  wire          PWRITE,
    input  wire [12:0]   PADDR,
    input  wire [31:0]   PWDATA,
    input  wire [3:0]    PSTRB,
    output wire          PREADY,
    output wire          PSLVERR,
    output wire [31:0]   PRDATA,
    // ---- DFT and MBIST (TRM 5.10); tie inactive ----
    input  wire          DFTCGEN,
    input  wire [1:0]    DFTRSTDISABLE,
    input  wire          DFTRAMHOLD,
    input  wire          MBISTREQ
);
    // Written by tb/tlm_pins.py.
    reg           tlm_IRQ;
    reg           tlm_PWRQACTIVE;
    reg           tlm_PWRQACCEPTn;
    reg           tlm_PWRQDENY;
    reg           tlm_CLKQACTIVE;
    reg           tlm_CLKQACCEPTn;
    reg           tlm_CLKQDENY;
    reg           tlm_WRSTQACK;
    reg           tlm_DBGHALTACK;
    reg           tlm_AWAKEUPSRAM0;
    reg           tlm_AWVALIDSRAM0;
    reg  [5:0]    tlm_AWIDSRAM0;
    reg  [39:0]   tlm_AWADDRSRAM0;
    reg  [7:0]    tlm_AWLENSRAM0;
    reg  [2:0]    tlm_AWSIZESRAM0;
    reg  [1:0]    tlm_AWBURSTSRAM0;
    reg  [3:0]    tlm_AWCACHESRAM0;
    reg  [1:0]    tlm_AWDOMAINSRAM0;
    reg  [2:0]    tlm_AWPROTSRAM0;
    reg           tlm_WVALIDSRAM0;
    reg  [127:0]  tlm_WDATASRAM0;
    reg  [15:0]   tlm_WSTRBSRAM0;
    reg           tlm_WLASTSRAM0;
    reg           tlm_BREADYSRAM0;
    reg           tlm_ARVALIDSRAM0;
    reg  [5:0]    tlm_ARIDSRAM0;
    reg  [39:0]   tlm_ARADDRSRAM0;
    reg  [7:0]    tlm_ARLENSRAM0;
    reg  [2:0]    tlm_ARSIZESRAM0;
    reg  [1:0]    tlm_ARBURSTSRAM0;
    reg  [3:0]    tlm_ARCACHESRAM0;
    reg  [1:0]    tlm_ARDOMAINSRAM0;
    reg  [2:0]    tlm_ARPROTSRAM0;
    reg           tlm_RREADYSRAM0;
    reg           tlm_AWAKEUPEXT0;
    reg           tlm_AWVALIDEXT0;
    reg  [5:0]    tlm_AWIDEXT0;
    reg  [39:0]   tlm_AWADDREXT0;
    reg  [7:0]    tlm_AWLENEXT0;
    reg  [2:0]    tlm_AWSIZEEXT0;
    reg  [1:0]    tlm_AWBURSTEXT0;
    reg  [3:0]    tlm_AWCACHEEXT0;
    reg  [1:0]    tlm_AWDOMAINEXT0;
    reg  [2:0]    tlm_AWPROTEXT0;
    reg           tlm_WVALIDEXT0;
    reg  [127:0]  tlm_WDATAEXT0;
    reg  [15:0]   tlm_WSTRBEXT0;
    reg           tlm_WLASTEXT0;
    reg           tlm_BREADYEXT0;
    reg           tlm_ARVALIDEXT0;
    reg  [5:0]    tlm_ARIDEXT0;
    reg  [39:0]   tlm_ARADDREXT0;
    reg  [7:0]    tlm_ARLENEXT0;
    reg  [2:0]    tlm_ARSIZEEXT0;
    reg  [1:0]    tlm_ARBURSTEXT0;
    reg  [3:0]    tlm_ARCACHEEXT0;
    reg  [1:0]    tlm_ARDOMAINEXT0;
    reg  [2:0]    tlm_ARPROTEXT0;
    reg           tlm_RREADYEXT0;
    reg           tlm_PREADY;
    reg           tlm_PSLVERR;
    reg  [31:0]   tlm_PRDATA;

    assign IRQ = tlm_IRQ;
    assign PWRQACTIVE = tlm_PWRQACTIVE;
    assign PWRQACCEPTn = tlm_PWRQACCEPTn;
    assign PWRQDENY = tlm_PWRQDENY;
    assign CLKQACTIVE = tlm_CLKQACTIVE;
    assign CLKQACCEPTn = tlm_CLKQACCEPTn;
    assign CLKQDENY = tlm_CLKQDENY;
    assign WRSTQACK = tlm_WRSTQACK;
    assign DBGHALTACK = tlm_DBGHALTACK;
    assign AWAKEUPSRAM0 = tlm_AWAKEUPSRAM0;
    assign AWVALIDSRAM0 = tlm_AWVALIDSRAM0;
    assign AWIDSRAM0 = tlm_AWIDSRAM0;
    assign AWADDRSRAM0 = tlm_AWADDRSRAM0;
    assign AWLENSRAM0 = tlm_AWLENSRAM0;
    assign AWSIZESRAM0 = tlm_AWSIZESRAM0;
    assign AWBURSTSRAM0 = tlm_AWBURSTSRAM0;
    assign AWCACHESRAM0 = tlm_AWCACHESRAM0;
    assign AWDOMAINSRAM0 = tlm_AWDOMAINSRAM0;
    assign AWPROTSRAM0 = tlm_AWPROTSRAM0;
    assign WVALIDSRAM0 = tlm_WVALIDSRAM0;
    assign WDATASRAM0 = tlm_WDATASRAM0;
    assign WSTRBSRAM0 = tlm_WSTRBSRAM0;
    assign WLASTSRAM0 = tlm_WLASTSRAM0;
    assign BREADYSRAM0 = tlm_BREADYSRAM0;
    assign ARVALIDSRAM0 = tlm_ARVALIDSRAM0;
    assign ARIDSRAM0 = tlm_ARIDSRAM0;
    assign ARADDRSRAM0 = tlm_ARADDRSRAM0;
    assign ARLENSRAM0 = tlm_ARLENSRAM0;
    assign ARSIZESRAM0 = tlm_ARSIZESRAM0;
    assign ARBURSTSRAM0 = tlm_ARBURSTSRAM0;
    assign ARCACHESRAM0 = tlm_ARCACHESRAM0;
    assign ARDOMAINSRAM0 = tlm_ARDOMAINSRAM0;
    assign ARPROTSRAM0 = tlm_ARPROTSRAM0;
    assign RREADYSRAM0 = tlm_RREADYSRAM0;
    assign AWAKEUPEXT0 = tlm_AWAKEUPEXT0;
    assign AWVALIDEXT0 = tlm_AWVALIDEXT0;
    assign AWIDEXT0 = tlm_AWIDEXT0;
    assign AWADDREXT0 = tlm_AWADDREXT0;
    assign AWLENEXT0 = tlm_AWLENEXT0;
    assign AWSIZEEXT0 = tlm_AWSIZEEXT0;
    assign AWBURSTEXT0 = tlm_AWBURSTEXT0;
    assign AWCACHEEXT0 = tlm_AWCACHEEXT0;
    assign AWDOMAINEXT0 = tlm_AWDOMAINEXT0;
    assign AWPROTEXT0 = tlm_AWPROTEXT0;
    assign WVALIDEXT0 = tlm_WVALIDEXT0;
    assign WDATAEXT0 = tlm_WDATAEXT0;
    assign WSTRBEXT0 = tlm_WSTRBEXT0;
    assign WLASTEXT0 = tlm_WLASTEXT0;
    assign BREADYEXT0 = tlm_BREADYEXT0;
    assign ARVALIDEXT0 = tlm_ARVALIDEXT0;
    assign ARIDEXT0 = tlm_ARIDEXT0;
    assign ARADDREXT0 = tlm_ARADDREXT0;
    assign ARLENEXT0 = tlm_ARLENEXT0;
    assign ARSIZEEXT0 = tlm_ARSIZEEXT0;
    assign ARBURSTEXT0 = tlm_ARBURSTEXT0;
    assign ARCACHEEXT0 = tlm_ARCACHEEXT0;
    assign ARDOMAINEXT0 = tlm_ARDOMAINEXT0;
    assign ARPROTEXT0 = tlm_ARPROTEXT0;
    assign RREADYEXT0 = tlm_RREADYEXT0;
    assign PREADY = tlm_PREADY;
    assign PSLVERR = tlm_PSLVERR;
    assign PRDATA = tlm_PRDATA;
endmodule
/* verilator lint_on UNUSEDSIGNAL */
/* verilator lint_on UNDRIVEN */
/* verilator lint_on DECLFILENAME */
