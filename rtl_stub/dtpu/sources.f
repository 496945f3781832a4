dtpu_pe.v
dtpu_mxu.v
dtpu_control_unit.v
dtpu_ls_array.v
dtpu_core.v
dtpu_arg_buf.v
dtpu_out_fifo.v
dtpu.v
