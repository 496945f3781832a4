// npu_region_route.v -- where the accesses of a memory region go (TRM 3.3.1.13-14, 3.3.2,
// 3.6.3): base address BASEP[region], MEM_ATTR[REGIONCFG.region<n>] -> AXI port group
// (axi_port: 0 SRAM, 1 EXT), AxCACHE (memtype table, read and write) and AxDOMAIN.
// Combinational. With use_attr = 1 the MEM_ATTR index is attr_idx instead of the
// REGIONCFG entry (command fetch: QCONFIG.cmd_region0).
`default_nettype none

module npu_region_route (
    input  wire [2:0]    region,
    input  wire          use_attr,
    input  wire [1:0]    attr_idx,
    input  wire [319:0]  basep,          // BASEP0..7, 40 bits each, n at [40n +: 40]
    input  wire [15:0]   regioncfg,
    input  wire [31:0]   mem_attr,       // MEM_ATTR0..3, 8 bits each
    output wire [39:0]   base,
    output wire          ext,
    output wire [3:0]    arcache,
    output wire [3:0]    awcache,
    output wire [1:0]    domain
);
`include "gen/npu_regs.vh"
    wire [1:0] idx  = use_attr ? attr_idx : regioncfg[region*2 +: 2];
    wire [7:0] attr = mem_attr[idx*8 +: 8];
    wire [3:0] memtype = attr[NPU_F_MEM_ATTR0_MEMTYPE +: 4];
    assign base    = basep[region*40 +: 40];
    assign ext     = attr[NPU_F_MEM_ATTR0_AXI_PORT];
    assign domain  = attr[NPU_F_MEM_ATTR0_MEM_DOMAIN +: 2];
    assign arcache = NPU_ARCACHE_BY_MEMTYPE[memtype*4 +: 4];
    assign awcache = NPU_AWCACHE_BY_MEMTYPE[memtype*4 +: 4];
endmodule

`default_nettype wire
