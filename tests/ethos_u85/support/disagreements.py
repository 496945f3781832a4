"""Vela/LiteRT disagreement checks shared by the published-model and catalog tests: the
TLM equals the stream's own arithmetic (numpy from the stream's registers and scale/bias
records, TRM 3.6.6 rounding), and LiteRT's layer equals the same numpy with LiteRT's
rounding, so an expected difference cannot hide another error."""
from __future__ import annotations

import numpy as np

from tlm.ethos_u85 import fmap, isa
from tlm.ethos_u85.ops import KERNEL_OPS
from tlm.ethos_u85.runner import run_model


def interpreter(data: bytes, preserve: bool = False):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                     experimental_preserve_all_tensors=preserve)
    it.allocate_tensors()
    return it


def tlm_inputs(model, inputs: list) -> list:
    """LiteRT's inputs in Vela's order, without those the stream never reads."""
    everything = sorted(model.inputs + model.unused_inputs, key=lambda t: t.index)
    assert len(everything) == len(inputs), (
        f"Vela lists {len(everything)} inputs, the TFLite model has {len(inputs)}")
    return [inputs[t.index] for t in model.inputs]


def regval(cmd: str, **fields) -> int:
    return isa.register_value(isa.decode_word(isa.encode(cmd, **fields), 0))


def with_regs(snap, **values):
    raw = dict(snap._raw)
    raw.update(values)
    return isa.RegisterSnapshot(raw)


def rounded_shift_right(x, shift: int, mode: int, dbl_rnd: int) -> np.ndarray:
    """TRM 3.6.6 rounded_shift_right, numpy (from the TRM text)."""
    x = np.asarray(x, np.int64)
    if shift == 0:
        return x
    r = 1 << (shift - 1)
    d = (1 << (30 - dbl_rnd)) if shift > 31 - dbl_rnd else 0
    m = isa.round_mode_ofm(mode).name
    rr = {"double_symmetric": np.where(x >= 0, r + d, r - d), "double_asymmetric": r + d,
          "truncate_to_zero": np.where(x >= 0, 0, (1 << shift) - 1), "truncate_to_lower": 0,
          "natural": r, "symmetric": np.where(x >= 0, r, r - 1)}[m]
    return (x + rr) >> shift


def scale_records(raw: bytes, n: int, acc_i48: bool):
    """(bias, scale, shift) of the first n 80-bit scale/bias records (TRM 3.7, LSB first)."""
    rec = np.frombuffer(raw[:10 * n], np.uint8).reshape(n, 10).astype(np.int64)
    le = lambda lo, hi: sum(rec[:, i] << (8 * (i - lo)) for i in range(lo, hi))   # noqa: E731
    if acc_i48:
        bias, scale = le(0, 6), le(6, 8) & 0x7FFF
        bias = np.where(bias >= 1 << 47, bias - (1 << 48), bias)
    else:
        bias, scale = le(0, 4), le(4, 8) & 0x7FFFFFFF
        bias = np.where(bias >= 1 << 31, bias - (1 << 32), bias)
    return bias, scale, rec[:, 8] & 0x3F


def s16(v: int) -> int:
    return v - 65536 if v >= 32768 else v


# ---------------------------------------------------------------------------- disagreement checks
def check_fc_rounding(data: bytes, inputs: list, model, monkeypatch) -> int:
    """Every fully connected layer (CONV, 1x1 kernel, 1x1 OFM, IFM in memory) of the stream
    equals numpy from its registers: W.(x - zp) + bias, scale/shift of the stream's
    scale/bias records, OFM_SCALE's rounding mode, zero point, clamp, LUT (lut_none or
    lut_s8_s8), int8 OFM. LiteRT's FULLY_CONNECTED of the same layer equals the same numpy
    with one rounding ('natural': (x*scale + 2**(shift-1)) >> shift) on LiteRT's input.
    *data*: the TFLite model, *inputs*: LiteRT's inputs, *model*: its Vela compilation.
    Returns the number of outputs where the two roundings differ."""
    seen = []
    conv = KERNEL_OPS["NPU_OP_CONV"]

    def spy(snap, port, dev):
        f = snap.field
        fc = (f("NPU_SET_KERNEL_HEIGHT_M1", "height_m1") == 0 and f("NPU_SET_KERNEL_WIDTH_M1", "width_m1") == 0
              and f("NPU_SET_OFM_HEIGHT_M1", "height_m1") == 0 and f("NPU_SET_OFM_WIDTH_M1", "width_m1") == 0)
        ifm, ofm = fmap.FeatureMap.from_registers(snap, "IFM"), fmap.FeatureMap.from_registers(snap, "OFM")
        if not fc or ifm.storage > 1 or ofm.storage > 1:
            return conv(snap, port, dev)
        depth = f("NPU_SET_IFM_DEPTH_M1", "depth_m1") + 1
        od = f("NPU_SET_OFM_DEPTH_M1", "depth_m1") + 1
        x = fmap.read_fmap(Backdoor(port, ifm.region), ifm, range(1), range(1), range(depth)).ravel()
        sb = port.memory.read(port.address(f("NPU_SET_SCALE_REGION", "region"), f("NPU_SET_SCALE_BASE", "addr")),
                              f("NPU_SET_SCALE_LENGTH", "length"))
        lut = bytes(np.asarray(dev.lut, np.uint8))
        conv(snap, port, dev)
        y = fmap.read_fmap(Backdoor(port, ofm.region), ofm, range(1), range(1), range(od)).ravel()
        seen.append((snap, x, sb, lut, y))

    monkeypatch.setitem(KERNEL_OPS, "NPU_OP_CONV", spy)
    run_model(model, tlm_inputs(model, inputs), strict=True)
    monkeypatch.setitem(KERNEL_OPS, "NPU_OP_CONV", conv)
    assert seen, "no fully connected layer found in the stream"

    it = interpreter(data, preserve=True)
    for d, x in zip(it.get_input_details(), inputs, strict=True):
        it.set_tensor(d["index"], x)
    it.invoke()
    fcs = [op for op in it._get_ops_details() if op["op_name"] == "FULLY_CONNECTED"]
    checked = differ = 0
    for snap, x, sb, lut, y in seen:
        f = snap.field
        od, idp = len(y), len(x)
        match = [op for op in fcs if it.get_tensor(int(op["inputs"][1])).shape == (od, idp)]
        if len(match) != 1:
            continue
        op = match[0]
        w = it.get_tensor(int(op["inputs"][1])).astype(np.int64)
        i48 = f("NPU_SET_ACC_FORMAT", "acc_format") == isa.acc_format.i48
        bias, scale, shift = scale_records(sb, od, i48)
        if int(op["inputs"][2]) >= 0:
            assert np.array_equal(bias, it.get_tensor(int(op["inputs"][2])).astype(np.int64))
        zp_in = s16(f("NPU_SET_IFM_ZERO_POINT", "zero_point"))
        zp_out = s16(f("NPU_SET_OFM_ZERO_POINT", "zero_point"))
        lo, hi = s16(f("NPU_SET_ACTIVATION_MIN", "clip_boundary")), s16(f("NPU_SET_ACTIVATION_MAX", "clip_boundary"))
        fn = f("NPU_SET_ACTIVATION", "activation_function")
        assert fn in (isa.activation_function.lut_none, isa.activation_function.lut_s8_s8), fn
        assert f("NPU_SET_OFM_PRECISION", "activation_precision") == isa.activation_precision.b8

        def layer(xv, mode):
            acc = w @ (np.asarray(xv, np.int64) - zp_in) + bias
            if not i48:
                acc = ((acc + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
            v = np.concatenate([rounded_shift_right(acc[c:c + 1] * scale[c], int(shift[c]), mode,
                                                    f("NPU_SET_OFM_SCALE", "dbl_rnd")) for c in range(od)])
            v = v + zp_out
            if f("NPU_SET_ACTIVATION", "activation_clip_range") == isa.activation_clip_range.b16:
                v = np.clip(v, lo, hi)
            if fn == isa.activation_function.lut_s8_s8:
                t = f("NPU_SET_ACTIVATION", "table")
                v = np.frombuffer(lut, np.int8)[(t << 8) + ((v + 128) & 0xFF)].astype(np.int64)
            return ((v + 128) & 0xFF) - 128

        rm = f("NPU_SET_OFM_SCALE", "round_mode")
        assert np.array_equal(y, layer(x, rm)), "the TLM differs from the stream's own arithmetic"
        differ += int((layer(x, rm) != layer(x, isa.round_mode_ofm.natural)).sum())
        # LiteRT's layer: its own input, one rounding, no fused activation
        lx = it.get_tensor(int(op["inputs"][0])).ravel().astype(np.int64)
        ly = it.get_tensor(int(op["outputs"][0])).ravel().astype(np.int64)
        if fn == isa.activation_function.lut_none:
            assert np.array_equal(ly, layer(lx, isa.round_mode_ofm.natural))
        else:
            acc = w @ (lx - zp_in) + bias
            single = np.concatenate([rounded_shift_right(acc[c:c + 1] * scale[c], int(shift[c]),
                                                         isa.round_mode_ofm.natural, 0) for c in range(od)])
            assert np.array_equal(ly, np.clip(single + zp_out, -128, 127)), "LiteRT's FC does not round once"
        checked += 1
    assert checked, "no fully connected layer matched to the TFLite model"
    return differ


class Backdoor:
    """fmap accessor: region-relative byte reads/writes that bypass the bus (no transactions)."""

    def __init__(self, port, region: int):
        self._port, self._region = port, region

    def read(self, addr: int, n: int):
        return self._port.memory.read(self._port.address(self._region, int(addr)), int(n))

    def write(self, addr: int, data) -> None:
        raw = bytes(data) if isinstance(data, (bytes, bytearray, memoryview)) else np.asarray(data, np.uint8).tobytes()
        self._port.memory.write(self._port.address(self._region, int(addr)), raw)
