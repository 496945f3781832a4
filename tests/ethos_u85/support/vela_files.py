"""Synthetic Vela outputs for the loader and CLI tests: COP1/COP2 payloads and raw .npz files."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from tlm.ethos_u85 import isa

CONFIG_256, ID_WORD = 0x20000118, 0x20007000
STREAM = (isa.encode("NPU_SET_IFM_BASE0", addr=0x400) + isa.encode("NPU_SET_IFM_REGION", region=1)
          + isa.encode("NPU_OP_CONV") + isa.encode("NPU_OP_STOP", mask=0))   # ends in NUL bytes


# ---------------------------------------------------------------------------- synthetic payloads
def cop1(words, config=CONFIG_256, ident=ID_WORD, extra=()) -> bytes:
    n = len(words)
    tags = [int.from_bytes(b"COP1", "little"), 0x00100001, config, ident, 5, 5, 5, *extra,
            2 | ((n >> 16) & 0xFF) << 8 | (n & 0xFFFF) << 16]
    return np.array(tags + list(words), dtype="<u4").tobytes()


def cop2(words, config=CONFIG_256, ident=ID_WORD, features=1, staging=0, entries=b"") -> bytes:
    meta = struct.pack("<I4sHHI", 36, b"VEUM", 1, 0, 20) + struct.pack("<IIIQ", config, ident,
                                                                       features, staging)
    pad = b"\xff" * (-(16 + len(entries) + 8 + len(meta)) % 16)
    body = meta + pad + np.array(words, dtype="<u4").tobytes()
    rest = entries + struct.pack("<II", 1, len(body)) + body
    return b"COP2" + struct.pack("<HHQ", 1, 0, len(rest)) + rest


def write_npz(path, payload: bytes, weight=b"", drop=(), **override):
    q = {"quant_type": "per_tensor", "scale": np.array([0.5], np.float32),
         "zero_point": np.array([-3], np.int32)}
    z = dict(cmd_data=np.array(payload), weight_data=np.array(weight), weight_region=np.array(0),
             scratch_size=np.array(2048), scratch_region=np.array(1), scratch_fast_size=np.array(0),
             scratch_fast_region=np.array(2),
             input_shape=np.array([[1, 1, 1, 8, 8, 16]]), input_elem_size=np.array([1]),
             input_region=np.array([1]), input_offset=np.array([1024]),
             input_quantization=np.array([q], dtype=object),
             output_shape=np.array([[1, 1, 1, 1, 1, 10]]), output_elem_size=np.array([2]),
             output_region=np.array([1]), output_offset=np.array([0]),
             output_quantization=np.array([q], dtype=object))
    z.update(override)
    np.savez(path, **{k: v for k, v in z.items() if k not in drop})
    return Path(path)
