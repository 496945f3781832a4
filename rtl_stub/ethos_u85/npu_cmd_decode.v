// npu_cmd_decode.v -- command decoder and execution control of the Ethos-U85 stand-in.
//
// TRM 3.5 (command stream architecture, execution states), 3.3.1.2-3 (STATUS, CMD),
// 3.6.8 (raise_error), 3.10-3.11 (commands).
//
// * STOPPED -> RUNNING on CMD.transition_to_running_state: at QBASE+QREAD if the last stop
//   was NPU_OP_STOP and QBASE/QSIZE were not written since, else at QBASE (QREAD = 0).
//   Ignored while a sticky fault (bus_status, cmd_parse_error, branch_fault) is set.
// * One command is decoded per cycle from the fetch buffer. Every cmd0/cmd1 opcode of the
//   ISA is decoded: NPU_SET_* commands write the sticky state registers
//   (gen/npu_cmd_state.vh); NPU_OP_* commands are executed as below.
//   - reserved encodings (bits [13:10] != 0, control 2 or 3, unknown opcode) and a cmd1
//     whose second word lies at or past QSIZE: cmd_parse_error.
//   - NPU_OP_STOP: irq_history_mask |= mask, stop (resumable), IRQ.
//   - NPU_OP_IRQ: irq_raised, irq_history_mask |= mask; execution continues.
//   - NPU_OP_BRANCH: branch_target[1:0] != 0 -> cmd_parse_error (TRM assert); a target
//     >= QSIZE -> branch_fault (checked even if not taken); taken when branch_cond is
//     always, or rf_true and COND_STATUS.result_flag = 1.
//   - NPU_OP_DMA_START: queued in the DMA engine (blocks while its queue is full).
//     TRM asserts that fail (internal source, gather and scatter together, reserved
//     stride_mode, internal destination address or length not 16-byte aligned) are
//     UNPREDICTABLE: the command is skipped without effect (as the TLM does).
//   - NPU_OP_DMA_WAIT k: waits until at most k DMA descriptors are outstanding.
//   - NPU_OP_POOL, NPU_OP_ELEMENTWISE, NPU_OP_RESIZE: checked by the kernel unit (npu_kernel.v) against
//     the current NPU_SET state: a configuration it does not implement -> cmd_parse_error
//     (QREAD at the operation); a failed register-only TRM assert (UNPREDICTABLE) -> the
//     command completes without effect (TLM policy); else the operation starts and no
//     further command executes until it has completed (every read back, every write
//     answered), so the kernel unit sees stable NPU_SET state.
//   - NPU_OP_KERNEL_WAIT: operations complete before the next command: completes at once.
//   - NPU_OP_PMU_MASK: passed to the PMU (which applies it if PMCR.mask_en = 1).
//   - NPU_OP_CONV, DEPTHWISE: checked and run by the CONV unit (npu_conv.v) as the kernel
//     unit does for POOL/ELEMENTWISE; inside an open chain (k_chain: the kernel unit's
//     g_chain_length != 0) they cannot be appended: UNPREDICTABLE, no effect.
// * Stops: NPU_OP_STOP, QREAD reaching QSIZE (cmd_end_reached), CMD.stop_request (taken
//   once no chain is open: the commands of an open chain run on), errors.
//   STATUS.state reads RUNNING until every outstanding command fetch, DMA transfer, kernel
//   operation and AXI transaction has completed; then the NPU is STOPPED and irq_raised is
//   set. On an error (and during a soft reset) the DMA and the kernel unit are aborted: no
//   new bursts, outstanding ones complete.
// * The NPU_SET state write port (set_we, set_kind, set_opc, set_raw) is also an output:
//   the kernel unit keeps its own copy of the state (gen/npu_cmd_state.vh).
// * Bus faults: an error response on any port sets bus_status, faulting_interface and
//   faulting_channel (of the first error) and stops the NPU.
`default_nettype none

module npu_cmd_decode #(
    parameter integer DESC_W = 437       // DMA descriptor width (see npu_dma.v)
) (
    input  wire              CLK,
    input  wire              rst_n,
    // APB actions (one-cycle pulses from npu_apb_regs)
    input  wire              cmd_start,
    input  wire              cmd_clear_irq,
    input  wire              cmd_stop_req,
    input  wire [15:0]       cmd_clr_hist,
    input  wire              q_written,       // QBASE or QSIZE written
    input  wire              pmu_irq_set,
    input  wire [31:0]       qsize,
    // halts
    input  wire              reset_halt,      // soft reset: abort and stop issuing
    input  wire              pause,           // warm-reset / debug halt: stop issuing
    // bus faults
    input  wire              fault_valid,
    input  wire              fault_if,        // 0 sram, 1 ext
    input  wire [3:0]        fault_ch,
    // command fetch
    output wire              fetch_restart,
    output wire [31:0]       fetch_off,
    output wire              fetch_enable,
    input  wire              w_have1,
    input  wire              w_have2,
    input  wire [31:0]       w0,
    input  wire [31:0]       w1,
    output wire              pop1,
    output wire              pop2,
    input  wire              fetch_idle,
    // DMA engine
    output wire              dma_push,
    output wire [DESC_W-1:0] dma_desc,
    input  wire              dma_full,
    input  wire [2:0]        dma_outstanding,
    output wire              dma_abort,
    input  wire              dma_idle,
    input  wire              ports_idle,
    // kernel unit (npu_kernel.v)
    output wire              st_we,
    output wire              st_kind,
    output wire [9:0]        st_opc,
    output wire [63:0]       st_raw,
    output wire              k_op_pool,
    output wire              k_op_ew,
    output wire              k_op_resize,
    output wire [5:0]        k_op_mode,
    input  wire              k_unsupported,
    input  wire              k_unpredictable,
    output wire              k_start,
    input  wire              k_busy,
    input  wire              k_flag,
    input  wire              k_chain,        // a chain of kernel operations is open
    // CONV / DEPTHWISE unit (npu_conv.v)
    output wire              c_op_dw,        // NPU_OP_DEPTHWISE (else CONV)
    output wire              c_op_wi2,       // NPU_OP_CONV weights_ifm2
    input  wire              c_unsupported,
    input  wire              c_unpredictable,
    output wire              c_start,
    input  wire              c_busy,
    input  wire              c_flag,
    input  wire              c_flag_set,     // the unit computed COND_STATUS.result_flag
    // PMU
    output wire              pmu_mask_we,
    output wire              pmu_mask_val,
    // status
    output wire [31:0]       status_word,     // STATUS without reset_status
    output wire              running,
    output wire [31:0]       qread,
    output wire              cond_result_flag,
    output wire              irq
);
`include "gen/npu_isa.vh"

    // ---------------------------------------------------------------- state
    localparam [1:0] S_STOPPED = 2'd0, S_RUN = 2'd1, S_DRAIN = 2'd2;
    localparam [1:0] K_STOP = 2'd0, K_END = 2'd1, K_REQ = 2'd2, K_ERR = 2'd3;

    logic [1:0]  fsm;
    logic [1:0]  kind;            // why the NPU is stopping
    logic [31:0] qread_q;
    logic        resume_ok;
    logic        stop_req_pend;
    logic        irq_raised, pmu_irq_raised, bus_status, parse_error, end_reached, branch_fault;
    logic        fault_ifc;
    logic [3:0]  fault_chn;
    logic [15:0] irq_hist;
    wire         sticky = bus_status | parse_error | branch_fault;
    wire [31:0]  qsize_al = {qsize[31:2], 2'b00};

    // ---------------------------------------------------------------- decode
    wire [1:0] ctrl   = w0[15:14];
    wire [3:0] rsv    = w0[13:10];
    wire [9:0] opc    = w0[9:0];
    wire       is1    = (ctrl == NPU_CTRL_CMD1);
    wire       enc_ok = (rsv == 4'd0) && (ctrl == NPU_CTRL_CMD0 || is1);
    wire       opc_ok = is1 ? NPU_CMD1_VALID[opc] : NPU_CMD0_VALID[opc];
    wire       is_set = is1 ? NPU_CMD1_IS_SET[opc] : NPU_CMD0_IS_SET[opc];
    wire [31:0] next4 = qread_q + 32'd4;
    wire [31:0] next8 = qread_q + 32'd8;
    wire       trunc  = is1 && (next8 > qsize_al || next8 < qread_q);
    wire       bad    = !enc_ok || !opc_ok || trunc;
    wire       have   = w_have1 && (bad || !is1 || w_have2);

    wire is_stop   = !is1 && (opc == OPC0_NPU_OP_STOP);
    wire is_irq    = !is1 && (opc == OPC0_NPU_OP_IRQ);
    wire is_dmas   = !is1 && (opc == OPC0_NPU_OP_DMA_START);
    wire is_dmaw   = !is1 && (opc == OPC0_NPU_OP_DMA_WAIT);
    wire is_kwait  = !is1 && (opc == OPC0_NPU_OP_KERNEL_WAIT);
    wire is_pmask  = !is1 && (opc == OPC0_NPU_OP_PMU_MASK);
    wire is_pool   = !is1 && (opc == OPC0_NPU_OP_POOL);
    wire is_ew     = !is1 && (opc == OPC0_NPU_OP_ELEMENTWISE);
    wire is_resize = !is1 && (opc == OPC0_NPU_OP_RESIZE);
    wire is_conv   = !is1 && (opc == OPC0_NPU_OP_CONV || opc == OPC0_NPU_OP_DEPTHWISE);
    wire is_branch = is1 && (opc == OPC1_NPU_OP_BRANCH);

    wire [15:0] mask16 = w0[31:16];

    // ---------------------------------------------------------------- DMA_START checks
    // Names follow the generated npu_cmd_state.vh (f_<command>__<field>).
    wire [DESC_W-1:0] desc;
    logic set_we;
    wire  set_kind = is1;
    wire [9:0]  set_opc = opc;
    wire [63:0] set_raw = {w1, w0};
    wire unused_hdr = ^set_raw[15:0];     // header bits: no field
`include "gen/npu_cmd_state.vh"

    wire dma_unpred = (f_npu_set_dma0_src_region__region_mode != NPU_E_DMA_REGION_MODE_EXTERNAL[0])
                   || (f_npu_set_dma0_src_region__idx_mode == NPU_E_DMA_IDX_MODE_ENABLED[0]
                       && f_npu_set_dma0_dst_region__idx_mode == NPU_E_DMA_IDX_MODE_ENABLED[0])
                   || (f_npu_set_dma0_src_region__stride_mode > NPU_E_DMA_STRIDE_MODE_D3[1:0]);
    wire dma_internal = (f_npu_set_dma0_dst_region__region_mode == NPU_E_DMA_REGION_MODE_INTERNAL[0]);
    // internal (LUT RAM) destination: 16-byte aligned address and length (TRM 3.10.4 assert)
    wire dma_lut_misaligned = dma_internal && (f_npu_set_dma0_dst__addr[3:0] != 4'd0
                                               || f_npu_set_dma0_len__addr[3:0] != 4'd0);
    // descriptor layout: see npu_dma.v
    assign desc = {dma_internal,                                  // [436]
                   f_npu_set_dma0_dst_region__idx_mode,           // [435]
                   f_npu_set_dma0_src_region__idx_mode,           // [434]
                   f_npu_set_dma0_idx_skip1__addr,                // [433:394]
                   f_npu_set_dma0_idx_max__idx_max,               // [393:363]
                   f_npu_set_dma0_idx_region__region,             // [362:360]
                   f_npu_set_dma0_idx__addr,                      // [359:320]
                   f_npu_set_dma0_dst_region__region,            // [319:317]
                   f_npu_set_dma0_src_region__stride_mode,       // [316:315]
                   f_npu_set_dma0_src_region__region,            // [314:312]
                   f_npu_set_dma0_size1__size,                   // [311:296]
                   f_npu_set_dma0_size0__size,                   // [295:280]
                   f_npu_set_dma0_dst_stride1__addr,             // [279:240]
                   f_npu_set_dma0_dst_stride0__addr,             // [239:200]
                   f_npu_set_dma0_src_stride1__addr,             // [199:160]
                   f_npu_set_dma0_src_stride0__addr,             // [159:120]
                   f_npu_set_dma0_len__addr,                     // [119:80]
                   f_npu_set_dma0_dst__addr,                     // [79:40]
                   f_npu_set_dma0_src__addr};                    // [39:0]

    // ---------------------------------------------------------------- execute
    // a stop request is taken at a command boundary outside a chain
    wire stop_now = stop_req_pend && !k_chain;
    wire exec = (fsm == S_RUN) && !pause && !reset_halt && !bus_status && !stop_now
                && !k_busy && !c_busy && (qread_q < qsize_al) && have;

    logic        adv4, adv8, do_stop, do_irq, do_perr, do_bfault, do_branch, do_push;
    logic        do_pmu, do_kstart, do_cstart;
    wire [31:0]  br_target = w1;
    wire         br_taken = (w0[16] == NPU_E_BRANCH_COND_ALWAYS[0]) || cond_result_flag;
    always @(*) begin
        adv4 = 1'b0; adv8 = 1'b0; do_stop = 1'b0; do_irq = 1'b0; do_perr = 1'b0;
        do_bfault = 1'b0; do_branch = 1'b0; do_push = 1'b0; do_pmu = 1'b0; set_we = 1'b0;
        do_kstart = 1'b0; do_cstart = 1'b0;
        if (exec) begin
            if (bad) begin
                do_perr = 1'b1;
            end else if (is_set) begin
                set_we = 1'b1;
                if (is1) adv8 = 1'b1; else adv4 = 1'b1;
            end else if (is1) begin
                // the only cmd1 operation: NPU_OP_BRANCH
                if (is_branch) begin
                    if (br_target[1:0] != 2'd0) do_perr = 1'b1;
                    else if (br_target >= qsize) do_bfault = 1'b1;
                    else if (br_taken) do_branch = 1'b1;
                    else adv8 = 1'b1;
                end else begin
                    do_perr = 1'b1;
                end
            end else if (is_stop) begin
                do_stop = 1'b1;
            end else if (is_irq) begin
                do_irq = 1'b1;
                adv4 = 1'b1;
            end else if (is_dmas) begin
                if (dma_unpred || dma_lut_misaligned) adv4 = 1'b1;   // UNPREDICTABLE: no effect
                else if (!dma_full) begin
                    do_push = 1'b1;
                    adv4 = 1'b1;
                end
            end else if (is_dmaw) begin
                if (dma_outstanding <= {1'b0, w0[17:16]}) adv4 = 1'b1;
            end else if (is_kwait) begin
                adv4 = 1'b1;
            end else if (is_pmask) begin
                do_pmu = 1'b1;
                adv4 = 1'b1;
            end else if (is_pool || is_ew || is_resize) begin
                if (k_unsupported) begin
                    do_perr = 1'b1;                 // not implemented by the stand-in
                end else if (k_unpredictable) begin
                    adv4 = 1'b1;                    // UNPREDICTABLE: no effect
                end else begin
                    do_kstart = 1'b1;
                    adv4 = 1'b1;
                end
            end else if (is_conv) begin
                if (c_unsupported) begin
                    do_perr = 1'b1;                 // not implemented by the stand-in
                end else if (c_unpredictable || k_chain) begin
                    adv4 = 1'b1;                    // UNPREDICTABLE: no effect
                end else begin
                    do_cstart = 1'b1;
                    adv4 = 1'b1;
                end
            end else begin
                do_perr = 1'b1;                     // (no other operation reaches here)
            end
        end
    end

    assign pop1 = adv4 || do_stop;
    assign pop2 = adv8;
    assign dma_push = do_push;
    assign dma_desc = desc;
    assign pmu_mask_we = do_pmu;
    assign pmu_mask_val = w0[16];
    assign st_we = set_we;
    assign st_kind = set_kind;
    assign st_opc = set_opc;
    assign st_raw = set_raw;
    assign k_op_pool = is_pool;
    assign k_op_ew = is_ew;
    assign k_op_resize = is_resize;
    assign k_op_mode = w0[21:16];
    assign k_start = do_kstart;
    assign c_start = do_cstart;
    assign c_op_dw = (opc == OPC0_NPU_OP_DEPTHWISE);
    assign c_op_wi2 = w0[16];

    // ---------------------------------------------------------------- control
    wire start_ok = (fsm == S_STOPPED) && cmd_start && !sticky && !reset_halt;
    wire [31:0] start_off = resume_ok ? qread_q : 32'd0;
    wire fault_new = fault_valid && !bus_status;
    wire drained = fetch_idle && dma_idle && !k_busy && !c_busy && ports_idle;

    assign fetch_restart = start_ok || do_branch;
    assign fetch_off = do_branch ? br_target : start_off;
    assign fetch_enable = (fsm == S_RUN) && !pause && !reset_halt && !bus_status && !stop_now;
    assign dma_abort = reset_halt || bus_status || (fsm == S_DRAIN && kind == K_ERR);

    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) begin
            fsm <= S_STOPPED;
            kind <= K_STOP;
            qread_q <= 32'd0;
            resume_ok <= 1'b0;
            stop_req_pend <= 1'b0;
            irq_raised <= 1'b0;
            pmu_irq_raised <= 1'b0;
            bus_status <= 1'b0;
            parse_error <= 1'b0;
            end_reached <= 1'b0;
            branch_fault <= 1'b0;
            fault_ifc <= 1'b0;
            fault_chn <= 4'd0;
            irq_hist <= 16'd0;
        end else begin
            // ---- IRQ sources and clears (a set wins over a clear in the same cycle)
            if (cmd_clear_irq) begin
                irq_raised <= 1'b0;
                pmu_irq_raised <= 1'b0;
            end
            if (pmu_irq_set) pmu_irq_raised <= 1'b1;
            if (do_irq) irq_raised <= 1'b1;
            irq_hist <= (irq_hist & ~cmd_clr_hist) | ((do_irq || do_stop) ? mask16 : 16'd0);

            // ---- bus faults (first one is recorded)
            if (fault_new) begin
                bus_status <= 1'b1;
                fault_ifc <= fault_if;
                fault_chn <= fault_ch;
            end
            if (q_written) begin
                resume_ok <= 1'b0;
                if (fsm == S_STOPPED) end_reached <= 1'b0;
            end

            // ---- QREAD
            if (adv4) qread_q <= next4;
            else if (adv8) qread_q <= next8;
            else if (do_stop) qread_q <= next4;
            else if (do_branch) qread_q <= br_target;

            case (fsm)
                S_STOPPED: begin
                    if (start_ok) begin
                        fsm <= S_RUN;
                        qread_q <= start_off;
                        resume_ok <= 1'b0;
                        stop_req_pend <= 1'b0;
                    end
                end
                S_RUN: begin
                    if (cmd_stop_req) stop_req_pend <= 1'b1;
                    if (fault_new || bus_status || reset_halt) begin
                        fsm <= S_DRAIN;
                        kind <= K_ERR;
                    end else if (do_perr) begin
                        parse_error <= 1'b1;
                        fsm <= S_DRAIN;
                        kind <= K_ERR;
                    end else if (do_bfault) begin
                        branch_fault <= 1'b1;
                        fsm <= S_DRAIN;
                        kind <= K_ERR;
                    end else if (do_stop) begin
                        fsm <= S_DRAIN;
                        kind <= K_STOP;
                    end else if (stop_now && !pause) begin
                        fsm <= S_DRAIN;
                        kind <= K_REQ;
                    end else if (!pause && qread_q >= qsize_al) begin
                        fsm <= S_DRAIN;
                        kind <= K_END;
                    end
                end
                default: begin   // S_DRAIN
                    if (fault_new) kind <= K_ERR;
                    if (drained && !fault_new) begin
                        fsm <= S_STOPPED;
                        stop_req_pend <= 1'b0;
                        if (!reset_halt) irq_raised <= 1'b1;
                        if (kind == K_END) end_reached <= 1'b1;
                        resume_ok <= (kind == K_STOP);
                    end
                end
            endcase
        end
    end

    assign running = (fsm != S_STOPPED);
    assign qread = qread_q;
    // bit 0 of the last OFM element of the last kernel operation that computed it (npu_kernel.v
    // or npu_conv.v)
    logic flag_conv;
    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) flag_conv <= 1'b0;
        else if (do_kstart) flag_conv <= 1'b0;
        else if (c_flag_set) flag_conv <= 1'b1;
    end
    assign cond_result_flag = flag_conv ? c_flag : k_flag;
    assign irq = irq_raised | pmu_irq_raised;
    assign status_word = {irq_hist, fault_chn, fault_ifc, 1'b0, branch_fault, 1'b0 /* ecc_fault */,
                          1'b0, pmu_irq_raised, end_reached, parse_error, 1'b0 /* reset_status */,
                          bus_status, irq_raised, running};
endmodule

`default_nettype wire
