// npu_axi_room.vh -- bytes from an address to the end of its max_beats window (TRM 3.3.1.18-21:
// a burst never crosses a 64/128/256-byte boundary, 64 << min(AXI_x.max_beats,
// CFG_x_CAP.max_beats)); included inside the modules that split transfers into bursts
// (npu_dma, npu_wfetch).
    function [8:0] room;
        input [1:0] mbc;                 // effective max_beats code, 0..2
        input [7:0] lo;                  // addr[7:0]
        begin
            case (mbc)
                2'd0:    room = 9'd64  - {3'd0, lo[5:0]};
                2'd1:    room = 9'd128 - {2'd0, lo[6:0]};
                default: room = 9'd256 - {1'd0, lo[7:0]};
            endcase
        end
    endfunction
