// npu_wfetch.v -- weight-stream and scale/bias-stream fetch of NPU_OP_CONV and
// NPU_OP_DEPTHWISE (TRM 2.3.4 weight decoder, 3.7 scale and bias stream, 3.9 weight stream,
// 3.10.2-3), the first step of their datapath in the Ethos-U85 stand-in.
//
// On `start` the unit reads, in the TLM's order (tlm/ops/conv.py read_weight_tensor,
// tlm/ops/common.py OpContext.scale_bias):
//   * the weight streams over channel rd_weights, region WEIGHT_REGION: WEIGHT_BASE/LENGTH,
//     and with SWD (weight_format swd) WEIGHT1..3_BASE/LENGTH up to num_wd streams (CONFIG,
//     TRM Table 3-90); none for a CONV with weights_ifm2 (its weights are IFM2);
//   * then, once every weight beat is back, the scale/bias stream over rd_scale_bias, region
//     SCALE_REGION, when OFM scale_mode is per_channel and ACC_FORMAT.acc_output is enable:
//     the bytes the NPU parses, align_up(OFM depth, channels_in_set) * 10 from SCALE_BASE
//     (channels_in_set = align_up(microblock_depth, 16), TRM 3.7.1); not read when the
//     TRM/E-23 checks fail (SCALE_BASE or SCALE_LENGTH not a multiple of 16, SCALE_LENGTH
//     short of those bytes, reserved microblock: UNPREDICTABLE before the read).
// Each stream is cut into INCR bursts of 16-byte beats from the exact byte address
// (BASEP[region] + base + offset), each inside one max_beats window of its port group
// (npu_axi_room.vh), so never across 4 KB; AxCACHE/AxDOMAIN/port from the region's MEM_ATTR
// (npu_region_route). The data is not used yet (no weight decoder): `done` tells the decoder
// that every read completed with OKAY, and the operation then stops with cmd_parse_error.
// An error response ends the unit's part as every bus fault does (the decoder stops the NPU):
// abort (error, soft reset): no new bursts, the ones on the bus complete; pause (warm reset,
// debug halt): no new bursts. busy until every beat is back.
`default_nettype none

module npu_wfetch #(
    parameter integer MACS = 256,
    parameter [1:0]   NUM_WD_LOG2 = 2'd0  // CONFIG.num_wd
) (
    input  wire          CLK,
    input  wire          rst_n,
    // NPU_SET state write port (from the decoder)
    input  wire          set_we,
    input  wire          set_kind,
    input  wire [9:0]    set_opc,
    input  wire [63:0]   set_raw,
    // control
    input  wire          start,
    input  wire          no_weights,     // NPU_OP_CONV weights_ifm2
    input  wire          clear,          // forget `done` (the decoder restarts the fetch)
    input  wire          abort,
    input  wire          pause,
    output wire          busy,
    output logic         done,           // every stream read, no error response
    // routing state (APB registers)
    input  wire [319:0]  basep,
    input  wire [15:0]   regioncfg,
    input  wire [31:0]   mem_attr,
    input  wire [1:0]    sram_mb,
    input  wire [1:0]    ext_mb,
    // read bursts
    output wire          rq_valid,
    output wire          rq_ext,
    output wire [39:0]   rq_addr,
    output wire [7:0]    rq_len,
    output wire          rq_scale,       // ARID rd_scale_bias (else rd_weights)
    output wire [3:0]    rq_cache,
    output wire [1:0]    rq_domain,
    input  wire          rq_ready,
    input  wire          rb_valid,       // a beat of rd_weights or rd_scale_bias
    input  wire [1:0]    rb_resp
);
`include "gen/npu_isa.vh"
`include "npu_axi_room.vh"
    wire unused_hdr = ^set_raw[15:0];
`include "gen/npu_cmd_state.vh"

    localparam integer LOG_MACS = $clog2(MACS);
    localparam [2:0] S_SCALE = 3'd4, S_DRAIN = 3'd5;

    logic        active, bad;
    logic [2:0]  sidx;           // stream: 0..3 weights, 4 scale/bias, 5 drain
    logic [31:0] off;            // bytes of the stream already requested
    logic [11:0] pend;           // beats requested, not yet received

    // ---------------------------------------------------------------- the streams
    logic no_weights_q;
    wire fwd = (f_npu_set_weight_format__weight_format == NPU_E_WEIGHT_FORMAT_FWD[0]);
    wire [2:0] n_w = no_weights_q ? 3'd0 : fwd ? 3'd1 : (3'd1 << NUM_WD_LOG2);

    // scale/bias bytes: align_up(depth, cis) * 10, cis = max(16, MACS >> log2(div[microblock]))
    wire [2:0] mb = f_npu_set_acc_format__microblock;
    logic [3:0] mb_sh;
    always @(*) begin
        case (mb)
            3'd0: mb_sh = 4'd3;  3'd1: mb_sh = 4'd4;  3'd2, 3'd3: mb_sh = 4'd5;
            3'd4: mb_sh = 4'd6;  default: mb_sh = 4'd7;
        endcase
    end
    wire [3:0]  lmbd  = LOG_MACS[3:0] - mb_sh;
    wire [3:0]  lcis  = (lmbd < 4'd4) ? 4'd4 : lmbd;
    wire [16:0] depth = {1'b0, f_npu_set_ofm_depth_m1__depth_m1} + 17'd1;
    wire [16:0] cmask = (17'd1 << lcis) - 17'd1;
    wire [16:0] d_al  = (depth + cmask) & ~cmask;            // <= 65536
    wire [20:0] need  = {1'b0, d_al, 3'd0} + {3'd0, d_al, 1'b0};
    wire [19:0] s_len = f_npu_set_scale_length__length;
    wire [39:0] s_base = f_npu_set_scale_base__addr;
    wire want_scale = (f_npu_set_ofm_precision__scale_mode == NPU_E_OFM_SCALE_MODE_PER_CHANNEL[0])
                      && (f_npu_set_acc_format__acc_output == NPU_E_ACC_OUTPUT_ENABLE[0])
                      && (mb <= NPU_E_MICROBLOCK_U4X4[2:0])
                      && (s_base[3:0] == 4'd0) && (s_len[3:0] == 4'd0) && ({1'b0, s_len} >= need);

    logic [39:0] cur_base;
    logic [31:0] cur_len;
    always @(*) begin
        case (sidx)
            3'd0: begin cur_base = f_npu_set_weight_base__addr;  cur_len = f_npu_set_weight_length__length;  end
            3'd1: begin cur_base = f_npu_set_weight1_base__addr; cur_len = f_npu_set_weight1_length__length; end
            3'd2: begin cur_base = f_npu_set_weight2_base__addr; cur_len = f_npu_set_weight2_length__length; end
            3'd3: begin cur_base = f_npu_set_weight3_base__addr; cur_len = f_npu_set_weight3_length__length; end
            default: begin cur_base = s_base; cur_len = {11'd0, need}; end
        endcase
    end
    wire is_scale = (sidx == S_SCALE);
    wire want = (sidx < n_w) || (is_scale && want_scale);

    // ---------------------------------------------------------------- bursts
    wire [39:0] r_base;
    wire        r_ext;
    wire [3:0]  r_arc, unused_awc;
    wire [1:0]  r_dom;
    npu_region_route u_route (
        .region(is_scale ? f_npu_set_scale_region__region : f_npu_set_weight_region__region),
        .use_attr(1'b0), .attr_idx(2'd0), .basep(basep), .regioncfg(regioncfg),
        .mem_attr(mem_attr), .base(r_base), .ext(r_ext), .arcache(r_arc),
        .awcache(unused_awc), .domain(r_dom));

    wire [39:0] addr  = r_base + cur_base + {8'd0, off};
    wire [31:0] left  = cur_len - off;
    wire [8:0]  rm    = room(r_ext ? ext_mb : sram_mb, addr[7:0]);
    wire [8:0]  n     = (left < {23'd0, rm}) ? left[8:0] : rm;
    wire [9:0]  bsum  = {6'd0, addr[3:0]} + {1'b0, n} + 10'd15;
    wire [4:0]  beats = bsum[8:4];
    wire        more  = want && (left != 32'd0);
    // the scale/bias stream follows the last weight beat (a fault names the TLM's stream)
    assign rq_valid  = active && more && sidx < S_DRAIN && !(is_scale && pend != 12'd0)
                       && !abort && !pause;
    assign rq_ext    = r_ext;
    assign rq_addr   = addr;
    assign rq_len    = {3'd0, beats - 5'd1};
    assign rq_scale  = is_scale;
    assign rq_cache  = r_arc;
    assign rq_domain = r_dom;
    wire issue = rq_valid && rq_ready;

    always_ff @(posedge CLK or negedge rst_n) begin
        if (!rst_n) begin
            active <= 1'b0;
            bad <= 1'b0;
            done <= 1'b0;
            no_weights_q <= 1'b0;
            sidx <= 3'd0;
            off <= 32'd0;
            pend <= 12'd0;
        end else begin
            pend <= pend + (issue ? {7'd0, beats} : 12'd0) - {11'd0, rb_valid};
            if (rb_valid && rb_resp[1]) bad <= 1'b1;
            if (clear) done <= 1'b0;
            if (start) begin
                active <= 1'b1;
                bad <= 1'b0;
                done <= 1'b0;
                no_weights_q <= no_weights;
                sidx <= 3'd0;
                off <= 32'd0;
            end else if (active) begin
                if (sidx == S_DRAIN) begin
                    if (pend == 12'd0) begin
                        active <= 1'b0;
                        done <= !bad && !abort;
                    end
                end else if (abort) begin
                    sidx <= S_DRAIN;
                end else if (issue) begin
                    off <= off + {23'd0, n};
                end else if (!more) begin
                    sidx <= sidx + 3'd1;
                    off <= 32'd0;
                end
            end
        end
    end
    // an abort keeps the unit busy until its bursts are back; `done` stays 0 after it
    assign busy = active || (pend != 12'd0);

    wire unused_ok = ^{unused_hdr, unused_awc, bsum[9], bsum[3:0], rb_resp[0]};
endmodule

`default_nettype wire
