"""The sticky NPU_SET state at the kernel operations of a Vela command stream, decoded by the
ISA table (tlm/isa.py): what the weight and scale/bias tests read their streams' parameters
from."""
from __future__ import annotations

import numpy as np

from tlm.ethos_u85 import isa

COP1 = int.from_bytes(b"COP1", "little")
COP1_HEADER_WORDS = 8


def kernel_op_states(cmd_data: bytes, ops=("NPU_OP_CONV", "NPU_OP_DEPTHWISE")) -> list:
    """[(operation name, isa.RegisterSnapshot)] at each operation in *ops* of a COP1 payload."""
    words = np.frombuffer(cmd_data, "<u4")
    assert words[0] == COP1, "not a COP1 payload"
    rf, out = isa.RegisterFile(), []
    for d in isa.iter_decode(words[COP1_HEADER_WORDS:].tolist()):
        if d.name in ops:
            out.append((d.name, rf.snapshot()))
        elif not d.cmd.is_op:
            rf.set(d)
    return out
