// ethosu85.v -- open RTL stand-in of the Arm Ethos-U85 NPU, phase 1 (control plane, DMA,
// 8-bit ELEMENTWISE and POOL kernels).
//
// The port list (gen/ethosu85_ports.vh, generated from tb/ports.py) is the one of the
// DUT=tlm shell ethosu85_shell.v: TRM chapter 5 names; one SRAM and one EXT AXI manager
// port (SRAM0, EXT0); 128-bit data, 40-bit address, 6-bit IDs, 16-bit WSTRB.
// See rtl_stub/ethos_u85/README.md for what is implemented and how unimplemented operations stop.
//
//   npu_cpm          reset sequence, PROT (CPL/CSL), CFG pin sampling, Q-Channels,
//                    warm-reset and debug halt
//   npu_apb_regs     APB5 completer, register file (gen/npu_regs.vh from tlm/registers.py)
//   npu_pmu          PMU and PMU_COUNTERS pages
//   npu_cmd_fetch    command-stream fetch (channel rd_cmd)
//   npu_cmd_decode   decoder of every cmd0/cmd1 opcode, sticky NPU_SET state, execution
//                    control, STATUS, IRQ
//   npu_dma          NPU_OP_DMA_START engine: 1D/2D/3D, gather/scatter, internal LUT RAM
//                    destination (channels rd_mem2mem, rd_mem2mem_idx, wr_mem2mem)
//   npu_kernel       NPU_OP_ELEMENTWISE / NPU_OP_POOL / NPU_OP_RESIZE (channels rd_ifm,
//                    rd_ifm_stream, wr_ofm), the chaining FIFOs; npu_kernel_alu, npu_rsr:
//                    its arithmetic; npu_act: activation() (shared with npu_conv)
//   npu_conv         NPU_OP_CONV / NPU_OP_DEPTHWISE (channels rd_ifm, rd_weights,
//                    rd_scale_bias, rd_ifm_stream for a matrix multiply, wr_ofm; a
//                    chained OFM into npu_kernel's FIFOs; LUT functions on npu_dma's
//                    LUT RAM read port while it is busy)
//   npu_region_route region -> BASEP, MEM_ATTR (port group, AxCACHE, AxDOMAIN)
//   npu_axi_rd/wr    one AXI manager port side each; npu_axi_addr: their AR/AW channel
//                    (arbitration, address register, outstanding limit)
//
// Parameters: MACS (128/256/512/1024/2048) selects the CONFIG word and the hardware
// outstanding-transaction maxima (TRM Table 2-2); default ethos-u85-256. RESET_CYCLES is
// the length of the reset sequence (STATUS.reset_status = 1).
//
// AXI IDs: ARID/AWID = {2'b00, pmu_axi_channel} (rd_cmd 0, rd_ifm 1, rd_weights 2,
// rd_scale_bias 3, rd_mem2mem 4, rd_ifm_stream 5, rd_mem2mem_idx 6, wr_ofm 8, wr_mem2mem 9), so every burst of one channel
// keeps its order and an error response names its channel.
// AxPROT = {1'b0 (data), CSL, CPL} from PROT. AxCACHE/AxDOMAIN from the MEM_ATTR entry of
// the region (QCONFIG for the command stream). With one port per group the CFG*HASH
// striping selects nothing: all SRAM-group traffic uses SRAM0, all EXT-group traffic EXT0.
`default_nettype none

module ethosu85 #(
    parameter integer MACS = 256,
    parameter integer RESET_CYCLES = 8
) (
`include "gen/ethosu85_ports.vh"
);
`include "gen/npu_regs.vh"

    // ================================================================ configuration
    localparam [31:0] CONFIG_WORD =
        (MACS == 128)  ? NPU_CONFIG_WORD_128  : (MACS == 512)  ? NPU_CONFIG_WORD_512 :
        (MACS == 1024) ? NPU_CONFIG_WORD_1024 : (MACS == 2048) ? NPU_CONFIG_WORD_2048 :
                         NPU_CONFIG_WORD_256;
    localparam integer SRAM_MAX_RD =
        (MACS == 128)  ? NPU_SRAM_MAX_RD_128  : (MACS == 512)  ? NPU_SRAM_MAX_RD_512 :
        (MACS == 1024) ? NPU_SRAM_MAX_RD_1024 : (MACS == 2048) ? NPU_SRAM_MAX_RD_2048 :
                         NPU_SRAM_MAX_RD_256;
    localparam integer SRAM_MAX_WR =
        (MACS == 128)  ? NPU_SRAM_MAX_WR_128  : (MACS == 512)  ? NPU_SRAM_MAX_WR_512 :
        (MACS == 1024) ? NPU_SRAM_MAX_WR_1024 : (MACS == 2048) ? NPU_SRAM_MAX_WR_2048 :
                         NPU_SRAM_MAX_WR_256;
    localparam integer EXT_MAX_RD =
        (MACS == 128)  ? NPU_EXT_MAX_RD_128  : (MACS == 512)  ? NPU_EXT_MAX_RD_512 :
        (MACS == 1024) ? NPU_EXT_MAX_RD_1024 : (MACS == 2048) ? NPU_EXT_MAX_RD_2048 :
                         NPU_EXT_MAX_RD_256;
    localparam integer EXT_MAX_WR =
        (MACS == 128)  ? NPU_EXT_MAX_WR_128  : (MACS == 512)  ? NPU_EXT_MAX_WR_512 :
        (MACS == 1024) ? NPU_EXT_MAX_WR_1024 : (MACS == 2048) ? NPU_EXT_MAX_WR_2048 :
                         NPU_EXT_MAX_WR_256;
    localparam integer DESC_W = 437;
    localparam [5:0] ID_RD_CMD = {2'b00, NPU_CH_RD_CMD};
    localparam [5:0] ID_RD_M2M = {2'b00, NPU_CH_RD_MEM2MEM};
    localparam [5:0] ID_RD_IDX = {2'b00, NPU_CH_RD_MEM2MEM_IDX};
    localparam [5:0] ID_WR_M2M = {2'b00, NPU_CH_WR_MEM2MEM};
    localparam [5:0] ID_RD_IFM = {2'b00, NPU_CH_RD_IFM};
    localparam [5:0] ID_RD_IFM2 = {2'b00, NPU_CH_RD_IFM_STREAM};
    localparam [5:0] ID_WR_OFM = {2'b00, NPU_CH_WR_OFM};
    localparam [5:0] ID_RD_W = {2'b00, NPU_CH_RD_WEIGHTS};
    localparam [5:0] ID_RD_SB = {2'b00, NPU_CH_RD_SCALE_BIAS};

    // ================================================================ nets
    // CPM
    wire        core_rst_n, soft_clear, reset_status, soft_halt, pause, cpl, csl, pwr_masked;
    wire        clk_stopped;
    wire [1:0]  reset_word;
    wire [31:0] cfg_sram_cap, cfg_ext_cap;
    wire [39:0] cfg_sram_hash0;
    // APB register file
    wire        reset_wr, new_cpl, new_csl, cmd_wr;
    wire [1:0]  reset_wdata;
    wire        cmd_start, cmd_clear_irq, cmd_stop_req, q_written;
    wire [15:0] cmd_clr_hist;
    wire        clock_q_enable, power_q_enable;
    wire [39:0] qbase;
    wire [31:0] qsize;
    wire [1:0]  qconfig;
    wire [15:0] regioncfg;
    wire [31:0] mem_attr;
    wire [17:0] axi_sram, axi_ext;
    wire [319:0] basep;
    wire        pmu_we;
    wire [12:0] pmu_addr;
    wire [31:0] pmu_wdata, pmu_rdata;
    // core
    wire [31:0] status_core, qread;
    wire        running, cond_flag, npu_irq;
    wire        pmu_irq_set, pmu_mask_we, pmu_mask_val;
    // ports
    wire        s_rd_idle, s_wr_idle, e_rd_idle, e_wr_idle;
    wire        ports_idle = s_rd_idle && s_wr_idle && e_rd_idle && e_wr_idle;

    // ================================================================ CPM
    npu_cpm #(.RESET_CYCLES(RESET_CYCLES)) u_cpm (
        .CLK(CLK), .nRESET(nRESET), .PORPL(PORPL), .PORSL(PORSL), .DBGEN(DBGEN), .SPIDEN(SPIDEN),
        .CFGSRAMCAP(CFGSRAMCAP), .CFGEXTCAP(CFGEXTCAP), .CFGSRAMHASH0(CFGSRAMHASH0),
        .reset_wr(reset_wr), .new_cpl(new_cpl), .new_csl(new_csl), .reset_wdata(reset_wdata),
        .cmd_wr(cmd_wr), .clock_q_enable(clock_q_enable), .power_q_enable(power_q_enable),
        .apb_busy(PSEL), .PWAKEUP(PWAKEUP), .running(running), .irq(npu_irq),
        .axi_quiet(ports_idle),
        .core_rst_n(core_rst_n), .soft_clear(soft_clear), .reset_status(reset_status),
        .soft_halt(soft_halt), .pause(pause), .cpl(cpl), .csl(csl), .reset_word(reset_word),
        .cfg_sram_cap(cfg_sram_cap), .cfg_ext_cap(cfg_ext_cap), .cfg_sram_hash0(cfg_sram_hash0),
        .pwr_masked(pwr_masked), .clk_stopped(clk_stopped),
        .CLKQREQn(CLKQREQn), .CLKQACCEPTn(CLKQACCEPTn), .CLKQDENY(CLKQDENY), .CLKQACTIVE(CLKQACTIVE),
        .PWRQREQn(PWRQREQn), .PWRQACCEPTn(PWRQACCEPTn), .PWRQDENY(PWRQDENY), .PWRQACTIVE(PWRQACTIVE),
        .WRSTQREQ(WRSTQREQ), .WRSTQACK(WRSTQACK),
        .DBGHALTREQ(DBGHALTREQ), .DBGRESTARTREQ(DBGRESTARTREQ), .DBGHALTACK(DBGHALTACK));

    // ================================================================ APB register file
    npu_apb_regs #(.CONFIG_WORD(CONFIG_WORD)) u_apb (
        .CLK(CLK), .nRESET(nRESET), .core_rst_n(core_rst_n),
        .PCLKEN(PCLKEN), .PSEL(PSEL), .PENABLE(PENABLE), .PPROT(PPROT), .PWRITE(PWRITE),
        .PADDR(PADDR), .PWDATA(PWDATA), .PSTRB(PSTRB), .PREADY(PREADY), .PSLVERR(PSLVERR),
        .PRDATA(PRDATA), .stall(clk_stopped),
        .reset_status(reset_status), .soft_clear(soft_clear), .cpl(cpl), .csl(csl),
        .reset_word(reset_word), .cfg_sram_cap(cfg_sram_cap), .cfg_ext_cap(cfg_ext_cap),
        .cfg_sram_hash0(cfg_sram_hash0),
        .reset_wr(reset_wr), .new_cpl(new_cpl), .new_csl(new_csl), .reset_wdata(reset_wdata),
        .cmd_wr(cmd_wr),
        .status_core(status_core), .running(running), .qread(qread), .cond_flag(cond_flag),
        .cmd_start(cmd_start), .cmd_clear_irq(cmd_clear_irq), .cmd_stop_req(cmd_stop_req),
        .cmd_clr_hist(cmd_clr_hist), .q_written(q_written),
        .clock_q_enable(clock_q_enable), .power_q_enable(power_q_enable),
        .qbase(qbase), .qsize(qsize), .qconfig(qconfig), .regioncfg(regioncfg),
        .mem_attr(mem_attr), .axi_sram(axi_sram), .axi_ext(axi_ext), .basep(basep),
        .pmu_we(pmu_we), .pmu_addr(pmu_addr), .pmu_wdata(pmu_wdata), .pmu_rdata(pmu_rdata));

    // ================================================================ effective AXI limits
    // min(AXI_x register, CFG_x_CAP pins); the hardware maxima are applied in the ports
    function [5:0] min6;
        input [5:0] a, b;
        min6 = (a < b) ? a : b;
    endfunction
    function [1:0] min_beats;
        input [1:0] a, b;
        begin
            min_beats = (a < b) ? a : b;
            if (min_beats == 2'd3) min_beats = 2'd2;          // reserved: B256
        end
    endfunction
    wire [5:0] s_rd_m1 = min6(axi_sram[5:0], cfg_sram_cap[5:0]);
    wire [5:0] s_wr_m1 = min6({1'b0, axi_sram[12:8]}, {1'b0, cfg_sram_cap[12:8]});
    wire [5:0] e_rd_m1 = min6(axi_ext[5:0], cfg_ext_cap[5:0]);
    wire [5:0] e_wr_m1 = min6({1'b0, axi_ext[12:8]}, {1'b0, cfg_ext_cap[12:8]});
    wire [1:0] s_mb = min_beats(axi_sram[17:16], cfg_sram_cap[17:16]);
    wire [1:0] e_mb = min_beats(axi_ext[17:16], cfg_ext_cap[17:16]);
    wire [2:0] axprot = {1'b0, csl, cpl};

    // ================================================================ AXI read ports
    // client 0: command fetch (rd_cmd), 1: DMA data (rd_mem2mem), 2: DMA index (rd_mem2mem_idx),
    // 3: kernel IFM (rd_ifm), 4: kernel IFM2 (rd_ifm_stream), 5: weight or scale/bias stream
    // (rd_weights / rd_scale_bias)
    wire        f_rq_valid, f_rq_ready;
    wire [39:0] f_rq_addr;
    wire [7:0]  f_rq_len;
    wire        d_rq_valid, d_rq_ext, d_rq_ready;
    wire [39:0] d_rq_addr;
    wire [7:0]  d_rq_len;
    wire [3:0]  d_rq_cache;
    wire [1:0]  d_rq_domain;
    wire        i_rq_valid, i_rq_ext, i_rq_ready;
    wire [39:0] i_rq_addr;
    wire [3:0]  i_rq_cache;
    wire [1:0]  i_rq_domain;
    wire        ka_rq_valid, ka_rq_ext, ka_rq_ready, kb_rq_valid, kb_rq_ext, kb_rq_ready;
    wire [39:0] ka_rq_addr, kb_rq_addr;
    wire [3:0]  ka_rq_cache, kb_rq_cache;
    wire [1:0]  ka_rq_domain, kb_rq_domain;
    wire [7:0]  ka_rq_len;
    // client 3 (rd_ifm) is shared by the kernel unit (single beats) and the CONV unit; client
    // 1 of the write ports (wr_ofm) likewise: only one kernel operation runs at a time
    wire        kk_rq_valid, kk_rq_ext, cc_rq_valid, cc_rq_ext;
    wire [39:0] kk_rq_addr, cc_rq_addr;
    wire [3:0]  kk_rq_cache, cc_rq_cache;
    wire [1:0]  kk_rq_domain, cc_rq_domain;
    wire [7:0]  cc_rq_len;
    assign ka_rq_valid  = kk_rq_valid || cc_rq_valid;
    assign ka_rq_ext    = cc_rq_valid ? cc_rq_ext : kk_rq_ext;
    assign ka_rq_addr   = cc_rq_valid ? cc_rq_addr : kk_rq_addr;
    assign ka_rq_cache  = cc_rq_valid ? cc_rq_cache : kk_rq_cache;
    assign ka_rq_domain = cc_rq_valid ? cc_rq_domain : kk_rq_domain;
    assign ka_rq_len    = cc_rq_valid ? cc_rq_len : 8'd0;
    // client 4 (rd_ifm_stream) likewise: the kernel unit's IFM2 and a matrix multiply's weights
    wire        kj_rq_valid, kj_rq_ext, cj_rq_valid, cj_rq_ext;
    wire [39:0] kj_rq_addr, cj_rq_addr;
    wire [3:0]  kj_rq_cache, cj_rq_cache;
    wire [1:0]  kj_rq_domain, cj_rq_domain;
    assign kb_rq_valid  = kj_rq_valid || cj_rq_valid;
    assign kb_rq_ext    = cj_rq_valid ? cj_rq_ext : kj_rq_ext;
    assign kb_rq_addr   = cj_rq_valid ? cj_rq_addr : kj_rq_addr;
    assign kb_rq_cache  = cj_rq_valid ? cj_rq_cache : kj_rq_cache;
    assign kb_rq_domain = cj_rq_valid ? cj_rq_domain : kj_rq_domain;
    wire        w_rq_valid, w_rq_ext, w_rq_ready, w_rq_scale;
    wire [39:0] w_rq_addr;
    wire [7:0]  w_rq_len;
    wire [3:0]  w_rq_cache;
    wire [1:0]  w_rq_domain;
    wire [39:0] unused_qbase_route;
    wire        q_ext;
    wire [3:0]  q_arcache, unused_q_awcache;
    wire [1:0]  q_domain;
    npu_region_route u_qroute (
        .region(3'd0), .use_attr(1'b1), .attr_idx(qconfig), .basep(basep), .regioncfg(regioncfg),
        .mem_attr(mem_attr), .base(unused_qbase_route), .ext(q_ext), .arcache(q_arcache),
        .awcache(unused_q_awcache), .domain(q_domain));

    wire [5:0]  s_rq_ready, e_rq_ready;
    wire        s_rb_valid, e_rb_valid, s_rb_last, e_rb_last;
    wire [5:0]  s_rb_id, e_rb_id;
    wire [127:0] s_rb_data, e_rb_data;
    wire [1:0]  s_rb_resp, e_rb_resp;
    wire [15:0] s_rd_ev, e_rd_ev, s_wr_ev, e_wr_ev;
    wire [5:0]   s_rq_valid = {w_rq_valid && !w_rq_ext, kb_rq_valid && !kb_rq_ext,
                               ka_rq_valid && !ka_rq_ext, i_rq_valid && !i_rq_ext,
                               d_rq_valid && !d_rq_ext, f_rq_valid && !q_ext};
    wire [5:0]   e_rq_valid = {w_rq_valid && w_rq_ext, kb_rq_valid && kb_rq_ext,
                               ka_rq_valid && ka_rq_ext, i_rq_valid && i_rq_ext,
                               d_rq_valid && d_rq_ext, f_rq_valid && q_ext};
    wire [239:0] rq_addr6   = {w_rq_addr, kb_rq_addr, ka_rq_addr, i_rq_addr, d_rq_addr, f_rq_addr};
    wire [47:0]  rq_len6    = {w_rq_len, 8'd0, ka_rq_len, 8'd0, d_rq_len, f_rq_len};
    wire [35:0]  rq_id6     = {w_rq_scale ? ID_RD_SB : ID_RD_W, ID_RD_IFM2, ID_RD_IFM, ID_RD_IDX,
                               ID_RD_M2M, ID_RD_CMD};
    wire [23:0]  rq_cache6  = {w_rq_cache, kb_rq_cache, ka_rq_cache, i_rq_cache, d_rq_cache, q_arcache};
    wire [11:0]  rq_dom6    = {w_rq_domain, kb_rq_domain, ka_rq_domain, i_rq_domain, d_rq_domain,
                               q_domain};
    assign f_rq_ready = q_ext ? e_rq_ready[0] : s_rq_ready[0];
    assign d_rq_ready = d_rq_ext ? e_rq_ready[1] : s_rq_ready[1];
    assign i_rq_ready = i_rq_ext ? e_rq_ready[2] : s_rq_ready[2];
    assign ka_rq_ready = ka_rq_ext ? e_rq_ready[3] : s_rq_ready[3];
    assign kb_rq_ready = kb_rq_ext ? e_rq_ready[4] : s_rq_ready[4];
    assign w_rq_ready = w_rq_ext ? e_rq_ready[5] : s_rq_ready[5];

    npu_axi_rd #(.NC(6), .HW_MAX_OUT(SRAM_MAX_RD)) u_sram_rd (
        .CLK(CLK), .rst_n(core_rst_n), .aclken(ACLKENSRAM0), .max_out_m1(s_rd_m1), .axprot(axprot),
        .rq_valid(s_rq_valid), .rq_ready(s_rq_ready), .rq_addr(rq_addr6), .rq_len(rq_len6),
        .rq_id(rq_id6), .rq_cache(rq_cache6), .rq_domain(rq_dom6),
        .rb_valid(s_rb_valid), .rb_id(s_rb_id), .rb_data(s_rb_data), .rb_resp(s_rb_resp),
        .rb_last(s_rb_last), .idle(s_rd_idle), .pmu_ev(s_rd_ev),
        .ARVALID(ARVALIDSRAM0), .ARID(ARIDSRAM0), .ARADDR(ARADDRSRAM0), .ARLEN(ARLENSRAM0),
        .ARSIZE(ARSIZESRAM0), .ARBURST(ARBURSTSRAM0), .ARCACHE(ARCACHESRAM0),
        .ARDOMAIN(ARDOMAINSRAM0), .ARPROT(ARPROTSRAM0), .ARREADY(ARREADYSRAM0),
        .RVALID(RVALIDSRAM0), .RID(RIDSRAM0), .RDATA(RDATASRAM0), .RRESP(RRESPSRAM0),
        .RLAST(RLASTSRAM0), .RREADY(RREADYSRAM0));
    npu_axi_rd #(.NC(6), .HW_MAX_OUT(EXT_MAX_RD)) u_ext_rd (
        .CLK(CLK), .rst_n(core_rst_n), .aclken(ACLKENEXT0), .max_out_m1(e_rd_m1), .axprot(axprot),
        .rq_valid(e_rq_valid), .rq_ready(e_rq_ready), .rq_addr(rq_addr6), .rq_len(rq_len6),
        .rq_id(rq_id6), .rq_cache(rq_cache6), .rq_domain(rq_dom6),
        .rb_valid(e_rb_valid), .rb_id(e_rb_id), .rb_data(e_rb_data), .rb_resp(e_rb_resp),
        .rb_last(e_rb_last), .idle(e_rd_idle), .pmu_ev(e_rd_ev),
        .ARVALID(ARVALIDEXT0), .ARID(ARIDEXT0), .ARADDR(ARADDREXT0), .ARLEN(ARLENEXT0),
        .ARSIZE(ARSIZEEXT0), .ARBURST(ARBURSTEXT0), .ARCACHE(ARCACHEEXT0),
        .ARDOMAIN(ARDOMAINEXT0), .ARPROT(ARPROTEXT0), .ARREADY(ARREADYEXT0),
        .RVALID(RVALIDEXT0), .RID(RIDEXT0), .RDATA(RDATAEXT0), .RRESP(RRESPEXT0),
        .RLAST(RLASTEXT0), .RREADY(RREADYEXT0));

    // read data to the clients, by ARID
    wire s_hit_f = s_rb_valid && (s_rb_id == ID_RD_CMD);
    wire e_hit_f = e_rb_valid && (e_rb_id == ID_RD_CMD);
    wire s_hit_d = s_rb_valid && (s_rb_id == ID_RD_M2M);
    wire e_hit_d = e_rb_valid && (e_rb_id == ID_RD_M2M);
    wire s_hit_i = s_rb_valid && (s_rb_id == ID_RD_IDX);
    wire e_hit_i = e_rb_valid && (e_rb_id == ID_RD_IDX);
    wire s_hit_ka = s_rb_valid && (s_rb_id == ID_RD_IFM);
    wire e_hit_ka = e_rb_valid && (e_rb_id == ID_RD_IFM);
    wire s_hit_kb = s_rb_valid && (s_rb_id == ID_RD_IFM2);
    wire e_hit_kb = e_rb_valid && (e_rb_id == ID_RD_IFM2);
    wire s_hit_w = s_rb_valid && (s_rb_id == ID_RD_W || s_rb_id == ID_RD_SB);
    wire e_hit_w = e_rb_valid && (e_rb_id == ID_RD_W || e_rb_id == ID_RD_SB);

    // ================================================================ AXI write ports
    // client 0: DMA (wr_mem2mem), 1: kernel OFM (wr_ofm)
    wire        d_wq_valid, d_wq_ext, d_wq_ready, d_wd_valid, d_wd_ext, d_wd_ready, d_wd_last;
    wire        k_wq_valid, k_wq_ext, k_wq_ready, k_wd_valid, k_wd_ready;
    wire [39:0] k_wq_addr;
    wire [3:0]  k_wq_cache;
    wire [1:0]  k_wq_domain;
    wire [127:0] k_wd_data;
    wire [15:0] k_wd_strb;
    wire        kw_wq_valid, kw_wq_ext, kw_wd_valid, cw_wq_valid, cw_wq_ext, cw_wd_valid;
    wire [39:0] kw_wq_addr, cw_wq_addr;
    wire [7:0]  cw_wq_len;                      // the CONV unit's bursts (the kernel unit's: one beat)
    wire        cw_wd_last;
    wire [3:0]  kw_wq_cache, cw_wq_cache;
    wire [1:0]  kw_wq_domain, cw_wq_domain;
    wire [127:0] kw_wd_data, cw_wd_data;
    wire [15:0] kw_wd_strb, cw_wd_strb;
    assign k_wq_valid  = kw_wq_valid || cw_wq_valid;
    assign k_wq_ext    = c_busy ? cw_wq_ext : kw_wq_ext;
    assign k_wq_addr   = cw_wq_valid ? cw_wq_addr : kw_wq_addr;
    assign k_wq_cache  = cw_wq_valid ? cw_wq_cache : kw_wq_cache;
    assign k_wq_domain = cw_wq_valid ? cw_wq_domain : kw_wq_domain;
    assign k_wd_valid  = kw_wd_valid || cw_wd_valid;
    assign k_wd_data   = cw_wd_valid ? cw_wd_data : kw_wd_data;
    assign k_wd_strb   = cw_wd_valid ? cw_wd_strb : kw_wd_strb;
    // B responses of wr_ofm: the CONV unit's while it is busy, else the kernel unit's (a unit
    // finishes only when all its writes are answered, and the two never run together)
    wire        ofm_b = (s_wb_valid && s_wb_id == ID_WR_OFM) || (e_wb_valid && e_wb_id == ID_WR_OFM);
    wire [39:0] d_wq_addr;
    wire [7:0]  d_wq_len;
    wire [3:0]  d_wq_cache;
    wire [1:0]  d_wq_domain;
    wire [127:0] d_wd_data;
    wire [15:0] d_wd_strb;
    wire [1:0]  s_wq_ready, e_wq_ready, s_wd_ready, e_wd_ready;
    wire        s_wb_valid, e_wb_valid;
    wire [5:0]  s_wb_id, e_wb_id, s_wbeat_id, e_wbeat_id;
    wire [1:0]  s_wb_resp, e_wb_resp;
    assign d_wq_ready = d_wq_ext ? e_wq_ready[0] : s_wq_ready[0];
    assign d_wd_ready = d_wd_ext ? e_wd_ready[0] : s_wd_ready[0];
    assign k_wq_ready = k_wq_ext ? e_wq_ready[1] : s_wq_ready[1];
    assign k_wd_ready = k_wq_ext ? e_wd_ready[1] : s_wd_ready[1];
    wire [1:0]   s_wq_valid = {k_wq_valid && !k_wq_ext, d_wq_valid && !d_wq_ext};
    wire [1:0]   e_wq_valid = {k_wq_valid && k_wq_ext, d_wq_valid && d_wq_ext};
    wire [1:0]   s_wd_valid = {k_wd_valid && !k_wq_ext, d_wd_valid && !d_wd_ext};
    wire [1:0]   e_wd_valid = {k_wd_valid && k_wq_ext, d_wd_valid && d_wd_ext};
    wire [79:0]  wq_addr2   = {k_wq_addr, d_wq_addr};
    wire [15:0]  wq_len2    = {cw_wq_valid ? cw_wq_len : 8'd0, d_wq_len};
    wire [11:0]  wq_id2     = {ID_WR_OFM, ID_WR_M2M};
    wire [7:0]   wq_cache2  = {k_wq_cache, d_wq_cache};
    wire [3:0]   wq_dom2    = {k_wq_domain, d_wq_domain};
    wire [255:0] wd_data2   = {k_wd_data, d_wd_data};
    wire [31:0]  wd_strb2   = {k_wd_strb, d_wd_strb};
    wire [1:0]   wd_last2   = {cw_wd_valid ? cw_wd_last : 1'b1, d_wd_last};

    npu_axi_wr #(.NC(2), .HW_MAX_OUT(SRAM_MAX_WR)) u_sram_wr (
        .CLK(CLK), .rst_n(core_rst_n), .aclken(ACLKENSRAM0), .max_out_m1(s_wr_m1[4:0]), .axprot(axprot),
        .wq_valid(s_wq_valid), .wq_ready(s_wq_ready), .wq_addr(wq_addr2),
        .wq_len(wq_len2), .wq_id(wq_id2), .wq_cache(wq_cache2), .wq_domain(wq_dom2),
        .wd_valid(s_wd_valid), .wd_ready(s_wd_ready), .wd_data(wd_data2),
        .wd_strb(wd_strb2), .wd_last(wd_last2),
        .wb_valid(s_wb_valid), .wb_id(s_wb_id), .wb_resp(s_wb_resp), .idle(s_wr_idle),
        .pmu_ev(s_wr_ev), .wbeat_id(s_wbeat_id),
        .AWVALID(AWVALIDSRAM0), .AWID(AWIDSRAM0), .AWADDR(AWADDRSRAM0), .AWLEN(AWLENSRAM0),
        .AWSIZE(AWSIZESRAM0), .AWBURST(AWBURSTSRAM0), .AWCACHE(AWCACHESRAM0),
        .AWDOMAIN(AWDOMAINSRAM0), .AWPROT(AWPROTSRAM0), .AWREADY(AWREADYSRAM0),
        .WVALID(WVALIDSRAM0), .WDATA(WDATASRAM0), .WSTRB(WSTRBSRAM0), .WLAST(WLASTSRAM0),
        .WREADY(WREADYSRAM0), .BVALID(BVALIDSRAM0), .BID(BIDSRAM0), .BRESP(BRESPSRAM0),
        .BREADY(BREADYSRAM0));
    npu_axi_wr #(.NC(2), .HW_MAX_OUT(EXT_MAX_WR)) u_ext_wr (
        .CLK(CLK), .rst_n(core_rst_n), .aclken(ACLKENEXT0), .max_out_m1(e_wr_m1[4:0]), .axprot(axprot),
        .wq_valid(e_wq_valid), .wq_ready(e_wq_ready), .wq_addr(wq_addr2),
        .wq_len(wq_len2), .wq_id(wq_id2), .wq_cache(wq_cache2), .wq_domain(wq_dom2),
        .wd_valid(e_wd_valid), .wd_ready(e_wd_ready), .wd_data(wd_data2),
        .wd_strb(wd_strb2), .wd_last(wd_last2),
        .wb_valid(e_wb_valid), .wb_id(e_wb_id), .wb_resp(e_wb_resp), .idle(e_wr_idle),
        .pmu_ev(e_wr_ev), .wbeat_id(e_wbeat_id),
        .AWVALID(AWVALIDEXT0), .AWID(AWIDEXT0), .AWADDR(AWADDREXT0), .AWLEN(AWLENEXT0),
        .AWSIZE(AWSIZEEXT0), .AWBURST(AWBURSTEXT0), .AWCACHE(AWCACHEEXT0),
        .AWDOMAIN(AWDOMAINEXT0), .AWPROT(AWPROTEXT0), .AWREADY(AWREADYEXT0),
        .WVALID(WVALIDEXT0), .WDATA(WDATAEXT0), .WSTRB(WSTRBEXT0), .WLAST(WLASTEXT0),
        .WREADY(WREADYEXT0), .BVALID(BVALIDEXT0), .BID(BIDEXT0), .BRESP(BRESPEXT0),
        .BREADY(BREADYEXT0));

    assign AWAKEUPSRAM0 = !(s_rd_idle && s_wr_idle);
    assign AWAKEUPEXT0  = !(e_rd_idle && e_wr_idle);

    // ================================================================ bus faults
    // first error response (SLVERR/DECERR) of a cycle, SRAM before EXT, read before write
    wire s_rerr = s_rb_valid && s_rb_resp[1];
    wire s_berr = s_wb_valid && s_wb_resp[1];
    wire e_rerr = e_rb_valid && e_rb_resp[1];
    wire e_berr = e_wb_valid && e_wb_resp[1];
    wire       fault_valid = s_rerr || s_berr || e_rerr || e_berr;
    wire       fault_if = !(s_rerr || s_berr);
    wire [3:0] fault_ch = s_rerr ? s_rb_id[3:0] : s_berr ? s_wb_id[3:0] :
                          e_rerr ? e_rb_id[3:0] : e_wb_id[3:0];

    // ================================================================ command fetch
    wire        fetch_restart, fetch_enable, fetch_idle, pop1, pop2, w_have1, w_have2;
    wire [31:0] fetch_off, w0, w1;
    npu_cmd_fetch u_fetch (
        .CLK(CLK), .rst_n(core_rst_n), .restart(fetch_restart), .restart_off(fetch_off),
        .enable(fetch_enable), .qbase(qbase), .qsize(qsize),
        .rq_valid(f_rq_valid), .rq_addr(f_rq_addr), .rq_len(f_rq_len), .rq_ready(f_rq_ready),
        .rb_valid(s_hit_f || e_hit_f), .rb_data(s_hit_f ? s_rb_data : e_rb_data),
        .rb_resp(s_hit_f ? s_rb_resp : e_rb_resp),
        .w_have1(w_have1), .w_have2(w_have2), .w0(w0), .w1(w1), .pop1(pop1), .pop2(pop2),
        .idle(fetch_idle));

    // ================================================================ decoder / control
    wire              dma_push, dma_full, dma_abort, dma_idle;
    wire              st_we, st_kind, k_op_pool, k_op_ew, k_op_resize, k_unsup, k_unpred, k_start, k_busy;
    wire              k_flag;
    wire              c_op_dw, c_op_wi2, c_unsup, c_unpred, c_start, c_busy, c_flag, c_flag_set;
    wire [9:0]        st_opc;
    wire [63:0]       st_raw;
    wire [5:0]        k_op_mode;
    wire [6:0]        k_lut_raddr, c_lut_raddr;  // LUT RAM read port: kernel unit, CONV unit
    wire [127:0]      k_lut_rdata;
    wire              c_cf_we;               // CONV chained OFM -> the kernel unit's FIFO
    wire [15:0]       c_cf_idx;
    wire [31:0]       c_cf_data;
    wire              k_chain;
    wire [DESC_W-1:0] dma_desc;
    wire [2:0]        dma_outstanding;
    npu_cmd_decode #(.DESC_W(DESC_W)) u_dec (
        .CLK(CLK), .rst_n(core_rst_n),
        .cmd_start(cmd_start), .cmd_clear_irq(cmd_clear_irq), .cmd_stop_req(cmd_stop_req),
        .cmd_clr_hist(cmd_clr_hist), .q_written(q_written), .pmu_irq_set(pmu_irq_set),
        .qsize(qsize), .reset_halt(soft_halt), .pause(pause),
        .fault_valid(fault_valid), .fault_if(fault_if), .fault_ch(fault_ch),
        .fetch_restart(fetch_restart), .fetch_off(fetch_off), .fetch_enable(fetch_enable),
        .w_have1(w_have1), .w_have2(w_have2), .w0(w0), .w1(w1), .pop1(pop1), .pop2(pop2),
        .fetch_idle(fetch_idle),
        .dma_push(dma_push), .dma_desc(dma_desc), .dma_full(dma_full),
        .dma_outstanding(dma_outstanding), .dma_abort(dma_abort), .dma_idle(dma_idle),
        .ports_idle(ports_idle),
        .st_we(st_we), .st_kind(st_kind), .st_opc(st_opc), .st_raw(st_raw),
        .k_op_pool(k_op_pool), .k_op_ew(k_op_ew), .k_op_resize(k_op_resize), .k_op_mode(k_op_mode),
        .k_unsupported(k_unsup), .k_unpredictable(k_unpred), .k_start(k_start), .k_busy(k_busy),
        .k_flag(k_flag), .k_chain(k_chain),
        .c_op_dw(c_op_dw), .c_op_wi2(c_op_wi2), .c_unsupported(c_unsup), .c_unpredictable(c_unpred),
        .c_start(c_start), .c_busy(c_busy), .c_flag(c_flag), .c_flag_set(c_flag_set),
        .pmu_mask_we(pmu_mask_we), .pmu_mask_val(pmu_mask_val),
        .status_word(status_core), .running(running), .qread(qread),
        .cond_result_flag(cond_flag), .irq(npu_irq));
    assign IRQ = npu_irq;

    // ================================================================ DMA
    npu_dma #(.DESC_W(DESC_W)) u_dma (
        .CLK(CLK), .rst_n(core_rst_n),
        .push(dma_push), .push_desc(dma_desc), .full(dma_full), .outstanding(dma_outstanding),
        .abort(dma_abort), .pause(pause),
        .basep(basep), .regioncfg(regioncfg), .mem_attr(mem_attr), .sram_mb(s_mb), .ext_mb(e_mb),
        .rq_valid(d_rq_valid), .rq_ext(d_rq_ext), .rq_addr(d_rq_addr), .rq_len(d_rq_len),
        .rq_cache(d_rq_cache), .rq_domain(d_rq_domain), .rq_ready(d_rq_ready),
        .rb_valid(s_hit_d || e_hit_d), .rb_data(s_hit_d ? s_rb_data : e_rb_data),
        .rb_resp(s_hit_d ? s_rb_resp : e_rb_resp),
        .iq_valid(i_rq_valid), .iq_ext(i_rq_ext), .iq_addr(i_rq_addr), .iq_cache(i_rq_cache),
        .iq_domain(i_rq_domain), .iq_ready(i_rq_ready),
        .ib_valid(s_hit_i || e_hit_i), .ib_data(s_hit_i ? s_rb_data : e_rb_data),
        .ib_resp(s_hit_i ? s_rb_resp : e_rb_resp),
        .wq_valid(d_wq_valid), .wq_ext(d_wq_ext), .wq_addr(d_wq_addr), .wq_len(d_wq_len),
        .wq_cache(d_wq_cache), .wq_domain(d_wq_domain), .wq_ready(d_wq_ready),
        .wd_valid(d_wd_valid), .wd_ext(d_wd_ext), .wd_data(d_wd_data), .wd_strb(d_wd_strb),
        .wd_last(d_wd_last), .wd_ready(d_wd_ready),
        .wb_valid((s_wb_valid && s_wb_id == ID_WR_M2M) || (e_wb_valid && e_wb_id == ID_WR_M2M)),
        .lut_raddr(c_busy ? c_lut_raddr : k_lut_raddr), .lut_rdata(k_lut_rdata),
        .idle(dma_idle));

    // ================================================================ kernel operations
    npu_kernel #(.MACS(MACS)) u_kernel (
        .CLK(CLK), .rst_n(core_rst_n),
        .set_we(st_we), .set_kind(st_kind), .set_opc(st_opc), .set_raw(st_raw),
        .op_pool(k_op_pool), .op_ew(k_op_ew), .op_resize(k_op_resize), .op_mode(k_op_mode),
        .op_unsupported(k_unsup), .op_unpredictable(k_unpred),
        .start(k_start), .busy(k_busy), .abort(dma_abort), .pause(pause), .cond_flag(k_flag),
        .chain_open(k_chain),
        .basep(basep), .regioncfg(regioncfg), .mem_attr(mem_attr),
        .lut_raddr(k_lut_raddr), .lut_rdata(k_lut_rdata),
        .cv_start(c_start), .cv_we(c_cf_we), .cv_idx(c_cf_idx), .cv_data(c_cf_data),
        .a_rq_valid(kk_rq_valid), .a_rq_ext(kk_rq_ext), .a_rq_addr(kk_rq_addr),
        .a_rq_cache(kk_rq_cache), .a_rq_domain(kk_rq_domain), .a_rq_ready(ka_rq_ready),
        .a_rb_valid(s_hit_ka || e_hit_ka), .a_rb_data(s_hit_ka ? s_rb_data : e_rb_data),
        .a_rb_resp(s_hit_ka ? s_rb_resp : e_rb_resp),
        .b_rq_valid(kj_rq_valid), .b_rq_ext(kj_rq_ext), .b_rq_addr(kj_rq_addr),
        .b_rq_cache(kj_rq_cache), .b_rq_domain(kj_rq_domain), .b_rq_ready(kb_rq_ready),
        .b_rb_valid(s_hit_kb || e_hit_kb), .b_rb_data(s_hit_kb ? s_rb_data : e_rb_data),
        .b_rb_resp(s_hit_kb ? s_rb_resp : e_rb_resp),
        .wq_valid(kw_wq_valid), .wq_ext(kw_wq_ext), .wq_addr(kw_wq_addr), .wq_cache(kw_wq_cache),
        .wq_domain(kw_wq_domain), .wq_ready(k_wq_ready),
        .wd_valid(kw_wd_valid), .wd_data(kw_wd_data), .wd_strb(kw_wd_strb), .wd_ready(k_wd_ready),
        .wb_valid(ofm_b && !c_busy));

    // ================================================================ CONV / DEPTHWISE
    npu_conv #(.MACS(MACS), .NUM_WD_LOG2(CONFIG_WORD[NPU_F_CONFIG_NUM_WD +: 2])) u_conv (
        .CLK(CLK), .rst_n(core_rst_n),
        .set_we(st_we), .set_kind(st_kind), .set_opc(st_opc), .set_raw(st_raw),
        .op_dw(c_op_dw), .op_wi2(c_op_wi2), .op_unsupported(c_unsup), .op_unpredictable(c_unpred),
        .start(c_start), .busy(c_busy), .abort(dma_abort), .pause(pause),
        .cond_flag(c_flag), .cond_set(c_flag_set),
        .basep(basep), .regioncfg(regioncfg), .mem_attr(mem_attr), .sram_mb(s_mb), .ext_mb(e_mb),
        .lut_raddr(c_lut_raddr), .lut_rdata(k_lut_rdata),
        .cf_we(c_cf_we), .cf_idx(c_cf_idx), .cf_data(c_cf_data),
        .a_rq_valid(cc_rq_valid), .a_rq_ext(cc_rq_ext), .a_rq_addr(cc_rq_addr), .a_rq_len(cc_rq_len),
        .a_rq_cache(cc_rq_cache), .a_rq_domain(cc_rq_domain), .a_rq_ready(ka_rq_ready),
        .a_rb_valid(s_hit_ka || e_hit_ka), .a_rb_data(s_hit_ka ? s_rb_data : e_rb_data),
        .a_rb_resp(s_hit_ka ? s_rb_resp : e_rb_resp),
        .w_rq_valid(w_rq_valid), .w_rq_ext(w_rq_ext), .w_rq_addr(w_rq_addr), .w_rq_len(w_rq_len),
        .w_rq_scale(w_rq_scale), .w_rq_cache(w_rq_cache), .w_rq_domain(w_rq_domain),
        .w_rq_ready(w_rq_ready),
        .w_rb_valid(s_hit_w || e_hit_w), .w_rb_data(s_hit_w ? s_rb_data : e_rb_data),
        .w_rb_resp(s_hit_w ? s_rb_resp : e_rb_resp),
        .b_rq_valid(cj_rq_valid), .b_rq_ext(cj_rq_ext), .b_rq_addr(cj_rq_addr),
        .b_rq_cache(cj_rq_cache), .b_rq_domain(cj_rq_domain), .b_rq_ready(kb_rq_ready),
        .b_rb_valid(s_hit_kb || e_hit_kb), .b_rb_data(s_hit_kb ? s_rb_data : e_rb_data),
        .b_rb_resp(s_hit_kb ? s_rb_resp : e_rb_resp),
        .wq_valid(cw_wq_valid), .wq_ext(cw_wq_ext), .wq_addr(cw_wq_addr), .wq_len(cw_wq_len), .wq_cache(cw_wq_cache),
        .wq_domain(cw_wq_domain), .wq_ready(k_wq_ready),
        .wd_valid(cw_wd_valid), .wd_data(cw_wd_data), .wd_strb(cw_wd_strb), .wd_last(cw_wd_last),
        .wd_ready(k_wd_ready),
        .wb_valid(ofm_b && c_busy));

    // ================================================================ PMU
    npu_pmu u_pmu (
        .CLK(CLK), .rst_n(core_rst_n), .we(pmu_we), .addr(pmu_addr), .wdata(pmu_wdata),
        .rdata(pmu_rdata), .running(running),
        .ev_sram(s_rd_ev | s_wr_ev), .ev_ext(e_rd_ev | e_wr_ev),
        .sram_rd_ch(s_rb_id[3:0]), .sram_wr_ch(s_wbeat_id[3:0]),
        .ext_rd_ch(e_rb_id[3:0]), .ext_wr_ch(e_wbeat_id[3:0]),
        .mask_we(pmu_mask_we), .mask_val(pmu_mask_val), .irq_set(pmu_irq_set));

    // ================================================================ unused inputs
    wire unused_ok = ^{nMBISTRESET, DFTCGEN, DFTRSTDISABLE, DFTRAMHOLD, MBISTREQ, pwr_masked,
                       s_rb_last, e_rb_last, s_wr_m1[5], e_wr_m1[5], s_wb_resp[0], e_wb_resp[0],
                       axi_sram[15:13], axi_sram[7:6], axi_ext[15:13], axi_ext[7:6],
                       unused_qbase_route, unused_q_awcache, s_wbeat_id[5:4], e_wbeat_id[5:4]};
endmodule

`default_nettype wire
