// dtpu.v -- the DTPU as the thesis deploys it (Fig. 4.8): Xilinx's AXI4-Stream
// Accelerator Adapter around dtpu_core. This is an open stand-in for the adapter's part
// the library uses (contract ADAPTER_RULES, REGISTERS, COMMANDS; gen/dtpu_contract.vh):
//
//   s_axi_*      AXI4-Lite completer, the adapter's register map (16-bit word offsets of
//                the thesis' library; SLVERR for unmapped words, read-only writes,
//                partial WSTRB; a CMD write to a full queue waits for room)
//   s_axis_0/1/2 AXI4-Stream targets of input arguments 0 (CSR memory, 8-bit x SIZE_CSR),
//                1 (weight memory, 64-bit x SIZE_WMEMORY), 2 (input FIFO, 64-bit x
//                INFIFO_DEPTH); BUFFER_DEPTH buffers each (dtpu_arg_buf)
//   m_axis_0     AXI4-Stream initiator of output argument 0 (dtpu_out_fifo)
//   interrupt    CTRL.GIE & STATUS.DONE
//
// Control: CMD words enter a queue of CMDQ_DEPTH; the head runs when it can
// (UPDATE_IN_ARG after the active run, EXECUTE_STEP when idle with the IARG_RQT_EN
// arguments ready); continuous mode starts runs by itself and releases the IARG_RQT_EN
// buffers after each. Starting a run raises cs_start until the core's cs_ready; the
// core's cs_done is acknowledged at once (cs_continue).
//
// Parameters default to the DTPU_* macros of gen/dtpu_config.vh (the default configuration
// of tlm/dtpu/contract.py unless a build defines them first: the bench's runner prepends a
// file of `define lines for the configuration under test).
`default_nettype none

`include "gen/dtpu_config.vh"

module dtpu #(
`include "gen/dtpu_params.vh"
) (
`include "gen/dtpu_ports.vh"
);
`include "gen/dtpu_contract.vh"

    localparam integer QW = $clog2(CMDQ_DEPTH + 1);
    localparam integer QP = (CMDQ_DEPTH > 1) ? $clog2(CMDQ_DEPTH) : 1;
    localparam integer QLASTI = CMDQ_DEPTH - 1;
    localparam [QP:0] QLAST = QLASTI[QP:0];

    // ---------------------------------------------------------------- registers
    logic [31:0] ctrl, iarg_rqt_en, oarg_rqt_en, oarg_length_mode, oarg0_length, oarg0_tdest;
    logic st_done, st_ready, st_core_err, st_cmd_err, st_overflow, st_underrun;
    logic [3:0] st_err_code;
    logic continuous;
    wire  srst = ctrl[DTPU_F_CTRL_SOFT_RESET];
    wire  rst_all = !aresetn || srst;

    // ---------------------------------------------------------------- arguments
    wire [3:0] nready0, nready1, nready2;
    wire ovf0, ovf1, ovf2, und0, und1, und_unused2;
    wire [2:0] release_arg;   // drop the head buffers (combinational: seen by the next start)
    wire [63:0] csr_word_q, wm_word_q, in_dout;
    wire in_not_empty, in_pop;
    wire core_csr_ce, core_wm_ce;
    wire [31:0] core_csr_addr, core_wm_addr;
    wire [63:0] unused_f0, unused_f1, unused_rd2;
    wire unused_ne0, unused_ne1;

    dtpu_arg_buf #(.NBUF(BUFFER_DEPTH), .DEPTH((SIZE_CSR + 7) / 8), .FIFO(0)) arg_csr (
        .clk(aclk), .reset(rst_all),
        .s_tdata(s_axis_0_tdata), .s_tvalid(s_axis_0_tvalid), .s_tready(s_axis_0_tready),
        .s_tlast(s_axis_0_tlast), .overflow(ovf0), .release_head(release_arg[0]), .nready(nready0),
        .rd_ce(core_csr_ce), .rd_addr({3'd0, core_csr_addr[31:3]}), .rd_data(csr_word_q),
        .underrun(und0), .f_dout(unused_f0), .f_not_empty(unused_ne0), .f_pop(1'b0));
    dtpu_arg_buf #(.NBUF(BUFFER_DEPTH), .DEPTH(SIZE_WMEMORY), .FIFO(0)) arg_wm (
        .clk(aclk), .reset(rst_all),
        .s_tdata(s_axis_1_tdata), .s_tvalid(s_axis_1_tvalid), .s_tready(s_axis_1_tready),
        .s_tlast(s_axis_1_tlast), .overflow(ovf1), .release_head(release_arg[1]), .nready(nready1),
        .rd_ce(core_wm_ce), .rd_addr(core_wm_addr), .rd_data(wm_word_q),
        .underrun(und1), .f_dout(unused_f1), .f_not_empty(unused_ne1), .f_pop(1'b0));
    dtpu_arg_buf #(.NBUF(BUFFER_DEPTH), .DEPTH(INFIFO_DEPTH), .FIFO(1)) arg_in (
        .clk(aclk), .reset(rst_all),
        .s_tdata(s_axis_2_tdata), .s_tvalid(s_axis_2_tvalid), .s_tready(s_axis_2_tready),
        .s_tlast(s_axis_2_tlast), .overflow(ovf2), .release_head(release_arg[2]), .nready(nready2),
        .rd_ce(1'b0), .rd_addr(32'd0), .rd_data(unused_rd2), .underrun(und_unused2),
        .f_dout(in_dout), .f_not_empty(in_not_empty), .f_pop(in_pop));

    // the CSR is a byte memory: select the byte of the word read
    logic [2:0] csr_byte_q;
    always_ff @(posedge aclk) begin
        if (core_csr_ce)
            csr_byte_q <= core_csr_addr[2:0];
    end
    wire [7:0] csr_byte = csr_word_q[csr_byte_q*8 +: 8];

    wire [2:0] ready_vec = {nready2 != 0, nready1 != 0, nready0 != 0};
    wire args_ready = ((ready_vec | ~iarg_rqt_en[2:0]) == 3'b111);

    // ---------------------------------------------------------------- core
    wire cs_ready, cs_done, cs_idle;
    logic cs_start;
    wire [63:0] out_din;
    wire out_write, out_not_full, out_empty;
    wire [3:0] core_err, unused_state, unused_dout;
    wire [7:0] unused_csr_din;
    wire [63:0] unused_wm_din;
    wire unused_csr_we, unused_csr_clk, unused_csr_rst, unused_wm_we, unused_wm_clk, unused_wm_rst;

    dtpu_core #(.ROWS(ROWS), .COLUMNS(COLUMNS), .SIZE_WMEMORY(SIZE_WMEMORY), .SIZE_CSR(SIZE_CSR),
                .PRECISIONS(PRECISIONS)) core (
        .clk(aclk), .aresetn(!rst_all), .test_mode(1'b0), .enable(1'b1),
        .csr_ce(core_csr_ce), .csr_dout(csr_byte), .csr_din(unused_csr_din), .csr_we(unused_csr_we),
        .csr_address(core_csr_addr), .csr_clk(unused_csr_clk), .csr_reset(unused_csr_rst),
        .wm_ce(core_wm_ce), .wm_dout(wm_word_q), .wm_din(unused_wm_din), .wm_we(unused_wm_we),
        .wm_address(core_wm_addr), .wm_clk(unused_wm_clk), .wm_reset(unused_wm_rst),
        .infifo_dout(in_dout), .infifo_read(in_pop), .infifo_is_empty(in_not_empty),
        .outfifo_din(out_din), .outfifo_write(out_write), .outfifo_is_full(out_not_full),
        .cs_start(cs_start), .cs_ready(cs_ready), .cs_done(cs_done), .cs_continue(cs_done),
        .cs_idle(cs_idle), .state(unused_state), .d_out(unused_dout), .err_code(core_err));

    // ---------------------------------------------------------------- output
    logic run_active, run_auto;
    logic [31:0] run_words, pkt_left;
    wire sw_len = oarg_length_mode[0] && (oarg0_length != 0);
    wire out_push = out_write && out_not_full;
    wire run_end = run_active && cs_done;

    dtpu_out_fifo #(.DEPTH(OUTFIFO_DEPTH)) out_fifo (
        .clk(aclk), .reset(rst_all), .wr_en(out_write), .wr_data(out_din),
        .wr_last(sw_len && pkt_left == 32'd1), .not_full(out_not_full), .empty(out_empty),
        .hold(run_active && run_words != 0), .mark_last(run_end && run_words != 0),
        .m_tdata(m_axis_0_tdata), .m_tvalid(m_axis_0_tvalid), .m_tready(m_axis_0_tready),
        .m_tlast(m_axis_0_tlast));

    // ---------------------------------------------------------------- command queue
    logic [31:0] cmdq [0:CMDQ_DEPTH-1];
    logic [QP-1:0] q_head, q_tail;
    logic [QW-1:0] q_count;
    wire q_full = (q_count == CMDQ_DEPTH[QW-1:0]);
    wire [31:0] head_cmd = cmdq[q_head];
    wire [3:0] h_op = head_cmd[DTPU_F_CMD_OPCODE +: DTPU_W_CMD_OPCODE];
    wire [7:0] h_mask = head_cmd[DTPU_F_CMD_ARG_MASK +: DTPU_W_CMD_ARG_MASK];
    wire [31:0] cmd_fields = ({{(32-DTPU_W_CMD_OPCODE){1'b0}}, {DTPU_W_CMD_OPCODE{1'b1}}} << DTPU_F_CMD_OPCODE)
                           | ({{(32-DTPU_W_CMD_ARG_MASK){1'b0}}, {DTPU_W_CMD_ARG_MASK{1'b1}}} << DTPU_F_CMD_ARG_MASK);
    wire h_upd_in  = (h_op == DTPU_OP_UPDATE_IN_ARG);
    wire h_upd_out = (h_op == DTPU_OP_UPDATE_OUT_ARG);
    wire h_exec    = (h_op == DTPU_OP_EXECUTE_STEP);
    wire h_cont    = (h_op == DTPU_OP_EXECUTE_CONTINOUS);
    wire h_stop    = (h_op == DTPU_OP_STOP_EXECUTE_CONTINOUS);
    wire h_bad = ((head_cmd & ~cmd_fields) != 32'd0)
               || !(h_upd_in || h_upd_out || h_exec || h_cont || h_stop)
               || (h_upd_in && (h_mask >> DTPU_NUM_IARGS) != 8'd0)
               || (h_upd_out && (h_mask >> DTPU_NUM_OARGS) != 8'd0)
               || ((h_exec || h_cont || h_stop) && h_mask != 8'd0)
               || (continuous && (h_upd_in || h_exec))
               || (h_cont && iarg_rqt_en[2:0] == 3'd0);
    wire q_valid = (q_count != 0) && !srst;
    // the head command runs now
    wire h_go = q_valid && (h_bad || h_upd_out || h_cont || h_stop
                            || (h_upd_in && !run_active)
                            || (h_exec && !run_active && args_ready));
    wire auto_go = !srst && (q_count == 0) && continuous && (iarg_rqt_en[2:0] != 3'd0)
                   && !run_active && args_ready;
    wire start_run = (h_go && !h_bad && h_exec) || auto_go;
    assign release_arg = ((h_go && !h_bad && h_upd_in) ? h_mask[2:0] : 3'd0)
                       | ((run_end && run_auto) ? iarg_rqt_en[2:0] : 3'd0);

    // ---------------------------------------------------------------- AXI4-Lite
    logic aw_q, w_q, bvalid_q, rvalid_q;
    logic [15:0] aw_addr;
    logic [31:0] w_data, rdata_q;
    logic [3:0] w_strb;
    logic [1:0] bresp_q, rresp_q;
    assign s_axi_awready = !aw_q && !bvalid_q;
    assign s_axi_wready = !w_q && !bvalid_q;
    assign s_axi_bvalid = bvalid_q;
    assign s_axi_bresp = bresp_q;
    assign s_axi_arready = !rvalid_q;
    assign s_axi_rvalid = rvalid_q;
    assign s_axi_rdata = rdata_q;
    assign s_axi_rresp = rresp_q;

    wire [1:0] w_kind = dtpu_word_kind(aw_addr);
    wire w_bad = (w_kind == 2'd0) || (w_kind == 2'd3) || (w_strb != 4'hF);
    wire w_is_cmd = !w_bad && (aw_addr == DTPU_REG_CMD);
    wire cmd_push = w_is_cmd && !srst;
    // a CMD write waits while the queue is full and the head cannot run
    wire w_go = aw_q && w_q && !bvalid_q && !(cmd_push && q_full && !h_go);
    wire wr = w_go && !w_bad && w_kind == 2'd2;

    wire [31:0] qc32 = {{(32-QW){1'b0}}, q_count};
    wire [3:0] st_cmdq = (qc32 > 32'd15) ? 4'd15 : qc32[3:0];
    wire [31:0] status_word =
          ({31'd0, cs_start}     << DTPU_F_STATUS_START)
        | ({31'd0, st_done}      << DTPU_F_STATUS_DONE)
        | ({31'd0, !run_active}  << DTPU_F_STATUS_IDLE)
        | ({31'd0, st_ready}     << DTPU_F_STATUS_READY)
        | ({31'd0, st_core_err}  << DTPU_F_STATUS_CORE_ERR)
        | ({31'd0, st_cmd_err}   << DTPU_F_STATUS_CMD_ERR)
        | ({31'd0, st_overflow}  << DTPU_F_STATUS_OVERFLOW)
        | ({31'd0, st_underrun}  << DTPU_F_STATUS_UNDERRUN)
        | ({31'd0, continuous}   << DTPU_F_STATUS_CONTINUOUS)
        | ({28'd0, st_err_code}  << DTPU_F_STATUS_ERR_CODE)
        | ({28'd0, st_cmdq}      << DTPU_F_STATUS_CMDQ);

    function automatic [31:0] arg_status(input [3:0] n);
        arg_status = ({28'd0, n} << DTPU_F_IARG_STATUS_USED_BUF)
                   | ({31'd0, n == 4'd0} << DTPU_F_IARG_STATUS_EMPTY)
                   | ({31'd0, n == BUFFER_DEPTH[3:0]} << DTPU_F_IARG_STATUS_FULL);
    endfunction

    logic [31:0] rmux;
    always @(*) begin
        case (s_axi_araddr)
            DTPU_REG_CTRL:             rmux = ctrl;
            DTPU_REG_STATUS:           rmux = status_word;
            DTPU_REG_IARG_RQT_EN:      rmux = iarg_rqt_en;
            DTPU_REG_OARG_RQT_EN:      rmux = oarg_rqt_en;
            DTPU_REG_OARG_LENGTH_MODE: rmux = oarg_length_mode;
            DTPU_REG_IARG0_STATUS:     rmux = arg_status(nready0);
            DTPU_REG_IARG1_STATUS:     rmux = arg_status(nready1);
            DTPU_REG_IARG2_STATUS:     rmux = arg_status(nready2);
            DTPU_REG_OARG0_STATUS:     rmux = ({31'd0, out_empty} << DTPU_F_OARG_STATUS_EMPTY)
                                            | ({31'd0, !out_not_full} << DTPU_F_OARG_STATUS_FULL);
            DTPU_REG_OARG0_LENGTH:     rmux = oarg0_length;
            DTPU_REG_OARG0_TDEST:      rmux = oarg0_tdest;
            default:                   rmux = 32'd0;       // CMD, RAZ/WI and unmapped words
        endcase
    end

    always_ff @(posedge aclk) begin
        if (!aresetn) begin
            aw_q <= 1'b0; w_q <= 1'b0; bvalid_q <= 1'b0; rvalid_q <= 1'b0;
            aw_addr <= '0; w_data <= '0; w_strb <= '0; bresp_q <= '0; rdata_q <= '0; rresp_q <= '0;
        end else begin
            if (s_axi_awvalid && s_axi_awready) begin aw_q <= 1'b1; aw_addr <= s_axi_awaddr; end
            if (s_axi_wvalid && s_axi_wready) begin w_q <= 1'b1; w_data <= s_axi_wdata; w_strb <= s_axi_wstrb; end
            if (w_go) begin
                aw_q <= 1'b0; w_q <= 1'b0; bvalid_q <= 1'b1;
                bresp_q <= w_bad ? DTPU_RESP_SLVERR : DTPU_RESP_OKAY;
            end else if (bvalid_q && s_axi_bready) begin
                bvalid_q <= 1'b0;
            end
            if (s_axi_arvalid && s_axi_arready) begin
                rvalid_q <= 1'b1;
                rdata_q <= rmux;
                rresp_q <= (dtpu_word_kind(s_axi_araddr) == 2'd0) ? DTPU_RESP_SLVERR : DTPU_RESP_OKAY;
            end else if (rvalid_q && s_axi_rready) begin
                rvalid_q <= 1'b0;
            end
        end
    end

    // configuration registers (kept over a soft reset)
    always_ff @(posedge aclk) begin
        if (!aresetn) begin
            ctrl <= '0; iarg_rqt_en <= '0; oarg_rqt_en <= '0; oarg_length_mode <= '0;
            oarg0_length <= '0; oarg0_tdest <= '0;
        end else if (wr) begin
            case (aw_addr)
                DTPU_REG_CTRL:             ctrl <= w_data & DTPU_WMASK_CTRL;
                DTPU_REG_IARG_RQT_EN:      iarg_rqt_en <= w_data & DTPU_WMASK_IARG_RQT_EN;
                DTPU_REG_OARG_RQT_EN:      oarg_rqt_en <= w_data & DTPU_WMASK_OARG_RQT_EN;
                DTPU_REG_OARG_LENGTH_MODE: oarg_length_mode <= w_data & DTPU_WMASK_OARG_LENGTH_MODE;
                DTPU_REG_OARG0_LENGTH:     oarg0_length <= w_data & DTPU_WMASK_OARG_LENGTH;
                DTPU_REG_OARG0_TDEST:      oarg0_tdest <= w_data & DTPU_WMASK_OARG_TDEST;
                default: ;
            endcase
        end
    end

    // ---------------------------------------------------------------- control and status
    wire [31:0] w1c = (wr && aw_addr == DTPU_REG_STATUS) ? (w_data & DTPU_W1C_STATUS) : 32'd0;
    always_ff @(posedge aclk) begin
        if (rst_all) begin
            q_head <= '0; q_tail <= '0; q_count <= '0;
            continuous <= 1'b0; run_active <= 1'b0; run_auto <= 1'b0; cs_start <= 1'b0;
            run_words <= '0; pkt_left <= '0;
            st_done <= 1'b0; st_ready <= 1'b0; st_core_err <= 1'b0; st_cmd_err <= 1'b0;
            st_overflow <= 1'b0; st_underrun <= 1'b0; st_err_code <= '0;
        end else begin
            // queue
            if (wr && cmd_push) begin
                cmdq[q_tail] <= w_data;
                q_tail <= ({1'b0, q_tail} == QLAST) ? '0 : q_tail + 1'b1;
            end
            if (h_go)
                q_head <= ({1'b0, q_head} == QLAST) ? '0 : q_head + 1'b1;
            q_count <= q_count + {{(QW-1){1'b0}}, wr && cmd_push} - {{(QW-1){1'b0}}, h_go};
            if (h_go && !h_bad) begin
                if (h_cont)
                    continuous <= 1'b1;
                if (h_stop)
                    continuous <= 1'b0;
            end
            // runs
            if (start_run) begin
                run_active <= 1'b1;
                run_auto <= auto_go && !(h_go && h_exec);
                cs_start <= 1'b1;
                run_words <= '0;
                pkt_left <= oarg0_length;
            end
            if (cs_ready)
                cs_start <= 1'b0;
            if (out_push) begin
                run_words <= run_words + 1'b1;
                if (sw_len)
                    pkt_left <= (pkt_left == 32'd1) ? oarg0_length : pkt_left - 1'b1;
            end
            if (run_end)
                run_active <= 1'b0;
            // status: a hardware event wins over a W1C write in the same cycle
            st_done     <= (st_done & ~w1c[DTPU_F_STATUS_DONE]) | run_end;
            st_ready    <= (st_ready & ~w1c[DTPU_F_STATUS_READY]) | cs_ready;
            st_cmd_err  <= (st_cmd_err & ~w1c[DTPU_F_STATUS_CMD_ERR]) | (h_go && h_bad);
            st_overflow <= (st_overflow & ~w1c[DTPU_F_STATUS_OVERFLOW]) | ovf0 | ovf1 | ovf2;
            st_underrun <= (st_underrun & ~w1c[DTPU_F_STATUS_UNDERRUN]) | und0 | und1;
            if (run_end && core_err != DTPU_ERR_NONE) begin
                st_core_err <= 1'b1;
                st_err_code <= core_err;
            end else if (w1c[DTPU_F_STATUS_CORE_ERR]) begin
                st_core_err <= 1'b0;
                st_err_code <= '0;
            end
        end
    end

    assign irq = ctrl[DTPU_F_CTRL_GIE] && st_done;

    wire unused_top = ^{oarg_rqt_en, oarg0_tdest, cs_idle, und_unused2, unused_f0, unused_f1,
                        unused_rd2, unused_ne0, unused_ne1, unused_state, unused_dout,
                        unused_csr_din, unused_wm_din, unused_csr_we, unused_csr_clk,
                        unused_csr_rst, unused_wm_we, unused_wm_clk, unused_wm_rst, head_cmd[31:20]};
endmodule
`default_nettype wire
