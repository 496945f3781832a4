// npu_dma.v -- mem2mem DMA engine of the Ethos-U85 stand-in (NPU_OP_DMA_START/WAIT,
// TRM 2.3.4, 3.10.4-3.10.5).
//
// Descriptors (captured from the NPU_SET_DMA0_* state when NPU_OP_DMA_START issues) wait
// in a QDEPTH-entry queue; `outstanding` counts queued plus active descriptors for
// NPU_OP_DMA_WAIT. A descriptor is complete when every write has its B response.
//
// Transfer (TRM pseudocode of 3.10.4, with the STRIDE1 / IDX_SKIP1 step per 2D slice):
//   width  = stride_mode == d1 ? 1 : SIZE0;   height = stride_mode == d3 ? SIZE1 : 1
//   for y < height: for x < width:
//       src_i = dst_i = x
//       indexed: idx = int32 at BASEP[idx_region] + idx_p (ARID rd_mem2mem_idx); idx_p += 4
//                skip the line if idx < 0 or idx > idx_max; else src_i (gather) or
//                dst_i (scatter) = idx   (idx * stride0 by a shift-add multiplier)
//       copy LEN bytes  BASEP[src_region] + src + src_i*src_stride0
//                    -> BASEP[dst_region] + dst + dst_i*dst_stride0
//                       (internal destination: offset dst + dst_i*dst_stride0 of the LUT RAM)
//     src += src_stride1; dst += dst_stride1; idx_p += idx_skip1
// Each line is cut into chunks that stay inside one max_beats window of the source port
// and of the destination port (64/128/256 bytes: min(AXI_x.max_beats, CFG_x_CAP.max_beats)),
// so each chunk is one read burst (channel rd_mem2mem, ARID 4) and one write burst
// (wr_mem2mem, AWID 9) that never cross a max_beats or 4 KB boundary. Any byte alignment
// is allowed on both sides: AxADDR is the exact start address, the write data is
// realigned and WSTRB masks the bytes outside the chunk.
//
// Internal destination (dst_region_mode = internal): the chunks are written into the
// 2048-byte LUT RAM (lookup_table_storage, TRM 2.6.2) instead of AXI. A line that would
// end past the LUT (TRM assert, UNPREDICTABLE) ends the descriptor, as in the TLM. The
// alignment asserts (16-byte address and length) are checked by the decoder. The RAM has
// a read port for the activation LUT of the kernel datapath (a later phase).
//
// Chunks go through SLOTS staging slots of 16 beats: reads of later chunks overlap the
// writes of earlier ones (several bursts outstanding, up to the port limits). A chunk
// whose read returned an error response is not written. abort (error, soft reset): no new
// bursts; bursts already on the bus complete; queued descriptors are dropped. pause (warm
// reset / debug halt): no new bursts until pause falls.
//
// Descriptor layout (built by npu_cmd_decode):
//   [39:0] src  [79:40] dst  [119:80] len  [159:120] src_stride0  [199:160] src_stride1
//   [239:200] dst_stride0  [279:240] dst_stride1  [295:280] size0  [311:296] size1
//   [314:312] src_region  [316:315] stride_mode  [319:317] dst_region
//   [359:320] idx  [362:360] idx_region  [393:363] idx_max  [433:394] idx_skip1
//   [434] src_idx_mode  [435] dst_idx_mode  [436] dst_region_mode (1 = internal)
`default_nettype none

module npu_dma #(
    parameter integer DESC_W = 437,
    parameter integer QDEPTH = 4,       // descriptors (TRM: 4)
    parameter integer SLOTS  = 4        // staging slots of 256 bytes
) (
    input  wire              CLK,
    input  wire              rst_n,
    // descriptors
    input  wire              push,
    input  wire [DESC_W-1:0] push_desc,
    output wire              full,
    output wire [2:0]        outstanding,
    input  wire              abort,
    input  wire              pause,
    // routing state (APB registers)
    input  wire [319:0]      basep,
    input  wire [15:0]       regioncfg,
    input  wire [31:0]       mem_attr,
    input  wire [1:0]        sram_mb,        // effective max_beats code of each group, 0..2
    input  wire [1:0]        ext_mb,
    // read bursts
    output wire              rq_valid,
    output wire              rq_ext,
    output wire [39:0]       rq_addr,
    output wire [7:0]        rq_len,
    output wire [3:0]        rq_cache,
    output wire [1:0]        rq_domain,
    input  wire              rq_ready,
    input  wire              rb_valid,       // beats of ARID rd_mem2mem
    input  wire [127:0]      rb_data,
    input  wire [1:0]        rb_resp,
    // index reads (one beat, ARID rd_mem2mem_idx)
    output wire              iq_valid,
    output wire              iq_ext,
    output wire [39:0]       iq_addr,
    output wire [3:0]        iq_cache,
    output wire [1:0]        iq_domain,
    input  wire              iq_ready,
    input  wire              ib_valid,
    input  wire [127:0]      ib_data,
    input  wire [1:0]        ib_resp,
    // write bursts
    output wire              wq_valid,
    output wire              wq_ext,
    output wire [39:0]       wq_addr,
    output wire [7:0]        wq_len,
    output wire [3:0]        wq_cache,
    output wire [1:0]        wq_domain,
    input  wire              wq_ready,
    output wire              wd_valid,
    output wire              wd_ext,
    output wire [127:0]      wd_data,
    output wire [15:0]       wd_strb,
    output wire              wd_last,
    input  wire              wd_ready,
    input  wire              wb_valid,       // B responses of AWID wr_mem2mem
    // LUT RAM read port (16-byte entries)
    input  wire [6:0]        lut_raddr,
    output wire [127:0]      lut_rdata,
    output wire              idle
);
    localparam integer QW = $clog2(QDEPTH);
    localparam integer SW = $clog2(SLOTS);
    localparam [QW:0]  QFULL = QDEPTH[QW:0];
    localparam [QW-1:0] QONE = {{(QW-1){1'b0}}, 1'b1};
    localparam [SW-1:0] SONE = {{(SW-1){1'b0}}, 1'b1};

    // ================================================================ descriptor queue
    logic [DESC_W-1:0] q [0:QDEPTH-1];
    logic [QW-1:0]     q_head, q_tail;
    logic [QW:0]       q_count;
    logic              q_pop, q_flush;
    assign full = (q_count == QFULL);
    assign outstanding = {{(2-QW){1'b0}}, q_count};

    always_ff @(posedge CLK) begin
        if (push && !full) q[q_tail] <= push_desc;
    end

    wire [DESC_W-1:0] d = q[q_head];
    wire [39:0] d_src   = d[39:0];
    wire [39:0] d_dst   = d[79:40];
    wire [39:0] d_len   = d[119:80];
    wire [39:0] d_ss0   = d[159:120];
    wire [39:0] d_ss1   = d[199:160];
    wire [39:0] d_ds0   = d[239:200];
    wire [39:0] d_ds1   = d[279:240];
    wire [15:0] d_size0 = d[295:280];
    wire [15:0] d_size1 = d[311:296];
    wire [2:0]  d_sreg  = d[314:312];
    wire [1:0]  d_smode = d[316:315];
    wire [2:0]  d_dreg  = d[319:317];
    wire [39:0] d_idx   = d[359:320];
    wire [2:0]  d_ireg  = d[362:360];
    wire [30:0] d_imax  = d[393:363];
    wire [39:0] d_iskip = d[433:394];
    wire        d_sidx  = d[434];
    wire        d_didx  = d[435];
    wire        d_dint  = d[436];

    // ================================================================ routing
    wire [39:0] sr_base, dr_base;
    wire        sr_ext, dr_ext;
    wire [3:0]  sr_arc, dr_awc;
    wire [1:0]  sr_dom, dr_dom;
    wire [3:0]  unused_sr_awc, unused_dr_arc;
    npu_region_route u_src_route (
        .region(d_sreg), .use_attr(1'b0), .attr_idx(2'd0), .basep(basep), .regioncfg(regioncfg),
        .mem_attr(mem_attr), .base(sr_base), .ext(sr_ext), .arcache(sr_arc), .awcache(unused_sr_awc),
        .domain(sr_dom));
    wire [39:0] ir_base;
    wire        ir_ext;
    wire [3:0]  ir_arc, unused_ir_awc;
    wire [1:0]  ir_dom;
    npu_region_route u_idx_route (
        .region(d_ireg), .use_attr(1'b0), .attr_idx(2'd0), .basep(basep), .regioncfg(regioncfg),
        .mem_attr(mem_attr), .base(ir_base), .ext(ir_ext), .arcache(ir_arc), .awcache(unused_ir_awc),
        .domain(ir_dom));
    npu_region_route u_dst_route (
        .region(d_dreg), .use_attr(1'b0), .attr_idx(2'd0), .basep(basep), .regioncfg(regioncfg),
        .mem_attr(mem_attr), .base(dr_base), .ext(dr_ext), .arcache(unused_dr_arc), .awcache(dr_awc),
        .domain(dr_dom));

    // ================================================================ chunk generator
    localparam [2:0] G_IDLE = 3'd0, G_LINE = 3'd1, G_CHUNK = 3'd2, G_NEXT = 3'd3, G_DONE = 3'd4,
                     G_IREQ = 3'd5, G_IWAIT = 3'd6, G_MUL = 3'd7;
    logic [2:0]  g;
    logic        a_sidx, a_didx, a_dint;    // gather, scatter, internal destination
    logic [39:0] a_ibase;
    logic        a_iext;
    logic [3:0]  a_iarc;
    logic [1:0]  a_idom;
    logic [39:0] idx_p;
    logic [30:0] mul_a;                     // index (multiplier), shifted right
    logic [39:0] mul_b;                     // stride0 (multiplicand), shifted left
    logic [39:0] prod;                      // index * stride0 mod 2^40
    logic [39:0] a_sbase, a_dbase;      // region bases of the active descriptor
    logic        a_sext, a_dext;
    logic [3:0]  a_arc, a_awc;
    logic [1:0]  a_sdom, a_ddom;
    logic [16:0] width, height, x, y;
    logic [39:0] src_p, dst_p, src_lp, dst_lp;   // 2D-slice and line offsets
    logic [39:0] cur_s, cur_d, rem;

    // ---- staging slots
    logic [SLOTS-1:0] s_busy, s_full, s_bad;
    logic [3:0]   s_soff [0:SLOTS-1];
    logic [3:0]   s_doff [0:SLOTS-1];
    logic [8:0]   s_n    [0:SLOTS-1];
    logic [4:0]   s_rbeats [0:SLOTS-1];
    logic [39:0]  s_daddr [0:SLOTS-1];
    logic         s_dext [0:SLOTS-1];
    logic         s_dint [0:SLOTS-1];
    logic [3:0]   s_awc  [0:SLOTS-1];
    logic [1:0]   s_ddom [0:SLOTS-1];
    logic [127:0] dbuf [0:SLOTS*16-1];
    logic [SW-1:0] alloc_p, fill_p, wr_p;
    logic [4:0]   f_cnt;
    logic [5:0]   b_pend;

    // ---- chunk size: stay inside one max_beats window on both sides
`include "npu_axi_room.vh"
    wire [8:0] s_room = room(a_sext ? ext_mb : sram_mb, cur_s[7:0]);
    wire [8:0] d_room = room(a_dint ? 2'd2 : (a_dext ? ext_mb : sram_mb), cur_d[7:0]);
    wire [8:0] rem9   = (rem > 40'd256) ? 9'd256 : rem[8:0];
    wire [8:0] n_sd   = (s_room < d_room) ? s_room : d_room;
    wire [8:0] n      = (rem9 < n_sd) ? rem9 : n_sd;
    wire [9:0] rb_sum = {6'd0, cur_s[3:0]} + {1'b0, n} + 10'd15;
    wire [4:0] rbeats = rb_sum[8:4];
    wire       last_chunk = ({31'd0, n} == rem);

    assign rq_valid  = (g == G_CHUNK) && !abort && !pause && !s_busy[alloc_p];
    assign rq_ext    = a_sext;
    assign rq_addr   = cur_s;
    assign rq_len    = {3'd0, rbeats - 5'd1};
    assign rq_cache  = a_arc;
    assign rq_domain = a_sdom;
    wire   issue     = rq_valid && rq_ready;

    assign iq_valid  = (g == G_IREQ) && !abort && !pause;
    assign iq_ext    = a_iext;
    assign iq_addr   = a_ibase + idx_p;
    assign iq_cache  = a_iarc;
    assign iq_domain = a_idom;
    // the index word of the beat (ARADDR[3:2] selects the 32-bit lane)
    logic [3:0]  i_lane;
    wire  [31:0] i_word = ib_data[{i_lane[3:2], 5'd0} +: 32];
    wire         i_ok   = !ib_resp[1] && !i_word[31] && (i_word[30:0] <= d_imax);
    // a line that would end past the 2048-byte LUT RAM (internal destination)
    wire [40:0]  lut_end = {1'b0, dst_lp} + {1'b0, d_len};

    wire        slots_free = (s_busy == {SLOTS{1'b0}});
    wire [16:0] x1 = x + 17'd1;
    wire [16:0] y1 = y + 17'd1;
    wire [39:0] src_p1 = src_p + d_ss1;
    wire [39:0] dst_p1 = dst_p + d_ds1;

    wire        idx_on = a_sidx || a_didx;
    wire [39:0] line_s = a_sbase + (a_sidx ? src_p + prod : src_lp);
    wire [39:0] line_d = (a_dint ? 40'd0 : a_dbase) + (a_didx ? dst_p + prod : dst_lp);
    wire [40:0] lut_end_i = {1'b0, dst_p + prod} + {1'b0, d_len};

    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) begin
            g <= G_IDLE;
            a_sbase <= 40'd0; a_dbase <= 40'd0; a_sext <= 1'b0; a_dext <= 1'b0;
            a_arc <= 4'd0; a_awc <= 4'd0; a_sdom <= 2'd0; a_ddom <= 2'd0;
            a_sidx <= 1'b0; a_didx <= 1'b0; a_dint <= 1'b0;
            a_ibase <= 40'd0; a_iext <= 1'b0; a_iarc <= 4'd0; a_idom <= 2'd0;
            width <= 17'd0; height <= 17'd0; x <= 17'd0; y <= 17'd0;
            src_p <= 40'd0; dst_p <= 40'd0; src_lp <= 40'd0; dst_lp <= 40'd0;
            cur_s <= 40'd0; cur_d <= 40'd0; rem <= 40'd0;
            idx_p <= 40'd0; mul_a <= 31'd0; mul_b <= 40'd0; prod <= 40'd0; i_lane <= 4'd0;
        end else begin
            case (g)
                G_IDLE: begin
                    if (q_count != {(QW+1){1'b0}} && !abort) begin
                        a_sbase <= sr_base; a_dbase <= dr_base;
                        a_sext <= sr_ext; a_dext <= dr_ext;
                        a_arc <= sr_arc; a_awc <= dr_awc;
                        a_sdom <= sr_dom; a_ddom <= dr_dom;
                        a_sidx <= d_sidx; a_didx <= d_didx; a_dint <= d_dint;
                        a_ibase <= ir_base; a_iext <= ir_ext; a_iarc <= ir_arc; a_idom <= ir_dom;
                        width  <= (d_smode == 2'd0) ? 17'd1 : {1'b0, d_size0};
                        height <= (d_smode == 2'd2) ? {1'b0, d_size1} : 17'd1;
                        x <= 17'd0; y <= 17'd0;
                        src_p <= d_src; dst_p <= d_dst; src_lp <= d_src; dst_lp <= d_dst;
                        idx_p <= d_idx;
                        // nothing to move (an indexed transfer still reads its indices)
                        if ((d_len == 40'd0 && !(d_sidx || d_didx))
                            || (d_smode != 2'd0 && d_size0 == 16'd0)
                            || (d_smode == 2'd2 && d_size1 == 16'd0))
                            g <= G_DONE;
                        else
                            g <= G_LINE;
                    end
                end
                G_LINE: begin
                    if (abort) begin
                        g <= G_DONE;
                    end else if (idx_on) begin
                        g <= G_IREQ;
                    end else if (a_dint && lut_end > 41'd2048) begin
                        g <= G_DONE;                  // past the LUT RAM: UNPREDICTABLE, stop
                    end else begin
                        cur_s <= line_s;
                        cur_d <= line_d;
                        rem <= d_len;
                        g <= G_CHUNK;
                    end
                end
                G_IREQ: begin
                    if (abort) begin
                        g <= G_DONE;
                    end else if (iq_valid && iq_ready) begin
                        i_lane <= iq_addr[3:0];
                        idx_p <= idx_p + 40'd4;
                        g <= G_IWAIT;
                    end
                end
                G_IWAIT: begin
                    if (ib_valid) begin
                        if (!i_ok || d_len == 40'd0 || abort) begin
                            g <= abort ? G_DONE : G_NEXT;     // skipped line (copy_valid false)
                        end else begin
                            mul_a <= i_word[30:0];
                            mul_b <= a_sidx ? d_ss0 : d_ds0;
                            prod <= 40'd0;
                            g <= G_MUL;
                        end
                    end
                end
                G_MUL: begin
                    if (abort) begin
                        g <= G_DONE;
                    end else if (mul_a == 31'd0) begin
                        if (a_dint && (a_didx ? lut_end_i : lut_end) > 41'd2048) begin
                            g <= G_DONE;
                        end else begin
                            cur_s <= line_s;
                            cur_d <= line_d;
                            rem <= d_len;
                            g <= G_CHUNK;
                        end
                    end else begin
                        if (mul_a[0]) prod <= prod + mul_b;
                        mul_a <= mul_a >> 1;
                        mul_b <= mul_b << 1;
                    end
                end
                G_CHUNK: begin
                    if (abort) begin
                        g <= G_DONE;
                    end else if (issue) begin
                        cur_s <= cur_s + {31'd0, n};
                        cur_d <= cur_d + {31'd0, n};
                        rem <= rem - {31'd0, n};
                        if (last_chunk) g <= G_NEXT;
                    end
                end
                G_NEXT: begin
                    if (abort) begin
                        g <= G_DONE;
                    end else if (x1 < width) begin
                        x <= x1;
                        src_lp <= src_lp + d_ss0;
                        dst_lp <= dst_lp + d_ds0;
                        g <= G_LINE;
                    end else if (y1 < height) begin
                        x <= 17'd0;
                        y <= y1;
                        src_p <= src_p1; dst_p <= dst_p1;
                        src_lp <= src_p1; dst_lp <= dst_p1;
                        idx_p <= idx_p + d_iskip;
                        g <= G_LINE;
                    end else begin
                        g <= G_DONE;
                    end
                end
                default: begin   // G_DONE: wait until every write of the descriptor is answered
                    if (slots_free && b_pend == 6'd0) g <= G_IDLE;
                end
            endcase
        end
    end
    assign q_pop   = (g == G_DONE) && slots_free && (b_pend == 6'd0) && !abort;
    assign q_flush = abort && (g == G_IDLE || (g == G_DONE && slots_free && b_pend == 6'd0));

    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) begin
            q_head <= {QW{1'b0}};
            q_tail <= {QW{1'b0}};
            q_count <= {(QW+1){1'b0}};
        end else if (q_flush) begin
            q_head <= q_tail;
            q_count <= {(QW+1){1'b0}};
        end else begin
            if (push && !full) q_tail <= q_tail + QONE;
            if (q_pop) q_head <= q_head + QONE;
            q_count <= q_count + {{QW{1'b0}}, push && !full} - {{QW{1'b0}}, q_pop};
        end
    end

    // ================================================================ slots: read side
    wire rb_err = rb_resp[1];
    wire rb_last_beat = ({27'd0, f_cnt} + 32'd1 == {27'd0, s_rbeats[fill_p]});
    always_ff @(posedge CLK) begin
        if (issue) begin
            s_soff[alloc_p] <= cur_s[3:0];
            s_doff[alloc_p] <= cur_d[3:0];
            s_n[alloc_p] <= n;
            s_rbeats[alloc_p] <= rbeats;
            s_daddr[alloc_p] <= cur_d;
            s_dext[alloc_p] <= a_dext;
            s_dint[alloc_p] <= a_dint;
            s_awc[alloc_p] <= a_awc;
            s_ddom[alloc_p] <= a_ddom;
        end
        if (rb_valid) dbuf[{fill_p, f_cnt[3:0]}] <= rb_data;
    end

    // ================================================================ slots: write side
    localparam [1:0] W_IDLE = 2'd0, W_AW = 2'd1, W_DATA = 2'd2, W_LUT = 2'd3;
    logic [1:0] w;
    logic [4:0] j;                           // beat of the write burst
    wire  [3:0] w_soff = s_soff[wr_p];
    wire  [3:0] w_doff = s_doff[wr_p];
    wire  [8:0] w_n    = s_n[wr_p];
    wire  [9:0] wb_sum = {6'd0, w_doff} + {1'b0, w_n} + 10'd15;
    wire  [4:0] wbeats = wb_sum[8:4];
    wire        w_ready_slot = s_busy[wr_p] && s_full[wr_p];
    wire        w_drop = s_bad[wr_p] || abort;

    assign wq_valid  = (w == W_AW) && !abort;
    assign wq_ext    = s_dext[wr_p];
    assign wq_addr   = s_daddr[wr_p];
    assign wq_len    = {3'd0, wbeats - 5'd1};
    assign wq_cache  = s_awc[wr_p];
    assign wq_domain = s_ddom[wr_p];

    // realignment: write beat j takes the 16 bytes that start at byte 16*j + soff - doff
    // of the slot's read data (two adjacent read beats, shifted)
    wire signed [5:0] delta = $signed({2'b00, w_soff}) - $signed({2'b00, w_doff});
    wire        neg   = delta[5];
    wire [3:0]  sh    = delta[3:0];          // delta mod 16
    // delta >= 0: beats j and j+1; delta < 0: beats j-1 and j (out-of-range indices only
    // feed lanes that WSTRB masks, so they are clamped)
    wire [4:0]  lo_i  = neg ? ((j == 5'd0) ? 5'd0 : j - 5'd1) : j;
    wire [4:0]  hi_t  = neg ? j : j + 5'd1;
    wire [3:0]  hi_i  = hi_t[4] ? 4'd15 : hi_t[3:0];
    wire [127:0] lo_beat = dbuf[{wr_p, lo_i[3:0]}];
    wire [127:0] hi_beat = dbuf[{wr_p, hi_i}];
    wire [255:0] pair = {hi_beat, lo_beat} >> {sh, 3'b000};
    // WSTRB: bytes [lo_b, hi_b) of beat j lie inside [doff, doff + n) of the burst
    wire [8:0]  bpos  = {j, 4'd0};                       // first byte of beat j
    wire [8:0]  b_end = {5'd0, w_doff} + w_n;            // one past the last byte (<= 256)
    wire [4:0]  lo_b  = (j == 5'd0) ? {1'b0, w_doff} : 5'd0;
    wire [8:0]  b_rem = b_end - bpos;
    wire [4:0]  hi_b  = (b_end <= bpos) ? 5'd0 : ((b_rem >= 9'd16) ? 5'd16 : b_rem[4:0]);
    wire [16:0] m_hi  = (17'd1 << hi_b) - 17'd1;
    wire [16:0] m_lo  = (17'd1 << lo_b) - 17'd1;
    wire [16:0] strb  = m_hi & ~m_lo;
    assign wd_strb  = strb[15:0];
    // lanes outside the chunk are driven 0 (they may hold stale or never-written slot data)
    genvar gb;
    generate
        for (gb = 0; gb < 16; gb = gb + 1) begin : g_lane
            assign wd_data[gb*8 +: 8] = strb[gb] ? pair[gb*8 +: 8] : 8'd0;
        end
    endgenerate
    assign wd_valid = (w == W_DATA);
    assign wd_ext   = s_dext[wr_p];
    assign wd_last  = (j == wbeats - 5'd1);

    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) begin
            w <= W_IDLE;
            j <= 5'd0;
            wr_p <= {SW{1'b0}};
            alloc_p <= {SW{1'b0}};
            fill_p <= {SW{1'b0}};
            f_cnt <= 5'd0;
            s_busy <= {SLOTS{1'b0}};
            s_full <= {SLOTS{1'b0}};
            s_bad <= {SLOTS{1'b0}};
            b_pend <= 6'd0;
        end else begin
            // allocation
            if (issue) begin
                s_busy[alloc_p] <= 1'b1;
                s_full[alloc_p] <= 1'b0;
                s_bad[alloc_p] <= 1'b0;
                alloc_p <= alloc_p + SONE;
            end
            // read data, in issue order
            if (rb_valid) begin
                if (rb_err) s_bad[fill_p] <= 1'b1;
                if (rb_last_beat) begin
                    s_full[fill_p] <= 1'b1;
                    fill_p <= fill_p + SONE;
                    f_cnt <= 5'd0;
                end else begin
                    f_cnt <= f_cnt + 5'd1;
                end
            end
            // writes, in issue order
            case (w)
                W_IDLE: begin
                    if (w_ready_slot) begin
                        if (w_drop) begin
                            s_busy[wr_p] <= 1'b0;
                            wr_p <= wr_p + SONE;
                        end else if (!pause) begin
                            j <= 5'd0;
                            w <= s_dint[wr_p] ? W_LUT : W_AW;
                        end
                    end
                end
                W_AW: begin
                    if (abort) begin
                        s_busy[wr_p] <= 1'b0;
                        wr_p <= wr_p + SONE;
                        w <= W_IDLE;
                    end else if (wq_ready) begin
                        j <= 5'd0;
                        w <= W_DATA;
                    end
                end
                W_LUT: begin     // internal destination: one LUT RAM entry per cycle
                    j <= j + 5'd1;
                    if (wd_last) begin
                        s_busy[wr_p] <= 1'b0;
                        wr_p <= wr_p + SONE;
                        w <= W_IDLE;
                    end
                end
                default: begin   // W_DATA: the AW is on the bus, the burst must complete
                    if (wd_ready) begin
                        j <= j + 5'd1;
                        if (wd_last) begin
                            s_busy[wr_p] <= 1'b0;
                            wr_p <= wr_p + SONE;
                            w <= W_IDLE;
                        end
                    end
                end
            endcase
            b_pend <= b_pend + {5'd0, (w == W_AW) && !abort && wq_ready} - {5'd0, wb_valid};
        end
    end

    // ================================================================ LUT RAM (2048 bytes)
    // Cleared at every reset (TRM 2.2: all NPU memories): a line not written since the reset
    // reads 0 (lut_v), and its first write stores 0 in the bytes it does not write.
    logic [127:0] lut [0:127];
    logic [127:0] lut_v;
    wire  [6:0]   lut_wa = s_daddr[wr_p][10:4] + {2'd0, j};
    wire  [127:0] lut_old = lut_v[lut_wa] ? lut[lut_wa] : 128'd0;
    logic [127:0] lut_new;
    integer lb;
    always @(*) begin
        for (lb = 0; lb < 16; lb = lb + 1)
            lut_new[lb*8 +: 8] = strb[lb] ? pair[lb*8 +: 8] : lut_old[lb*8 +: 8];
    end
    always_ff @(posedge CLK) begin
        if (w == W_LUT) lut[lut_wa] <= lut_new;
    end
    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) lut_v <= 128'd0;
        else if (w == W_LUT) lut_v[lut_wa] <= 1'b1;
    end
    assign lut_rdata = lut_v[lut_raddr] ? lut[lut_raddr] : 128'd0;

    wire unused_ok = ^{ib_resp[0], i_lane[1:0], s_daddr[wr_p][39:11], rb_resp[0], rb_sum[9],
                       rb_sum[3:0], wb_sum[9], wb_sum[3:0], delta[4], lo_i[4], pair[255:128],
                       strb[16], unused_sr_awc, unused_dr_arc, unused_ir_awc};

    assign idle = (g == G_IDLE) && (q_count == {(QW+1){1'b0}}) && slots_free && (b_pend == 6'd0)
                  && (w == W_IDLE);
endmodule

`default_nettype wire
