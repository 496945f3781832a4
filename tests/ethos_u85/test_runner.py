"""tlm.ethos_u85.runner: region binding, BASEP/REGIONCFG/MEM_ATTR/QBASE programming over APB, input
checks and how a run ends, on STOP-only and DMA-only streams built with isa.encode.

The DMA copies are the observable proof of the binding: a byte lands in the right output only
if BASEP[src_region] and BASEP[dst_region] point at the areas the runner filled.
"""
from __future__ import annotations

import numpy as np
import pytest

from tlm.ethos_u85 import isa
from tlm.ethos_u85 import registers as R
from tlm.ethos_u85.config import CONFIGS, Policy
from tlm.ethos_u85.memory import Channel, Interface
from tlm.ethos_u85.runner import DRIVER_DEFAULTS, DriverConfig, RunError, plan_memory, run_model
from tlm.ethos_u85.vela import Payload, Quantization, TensorInfo, VelaModel

CONFIG_256, ID_WORD = CONFIGS["ethos-u85-256"].config_word, 0x20007000
STOP = isa.encode("NPU_OP_STOP", mask=0xFFFF)


def dma(src_region, src, dst_region, dst, length):
    return (isa.encode("NPU_SET_DMA0_SRC_REGION", region=src_region)
            + isa.encode("NPU_SET_DMA0_DST_REGION", region=dst_region)
            + isa.encode("NPU_SET_DMA0_SRC", addr=src) + isa.encode("NPU_SET_DMA0_DST", addr=dst)
            + isa.encode("NPU_SET_DMA0_LEN", addr=length)
            + isa.encode("NPU_OP_DMA_START") + isa.encode("NPU_OP_DMA_WAIT"))


def t(name, shape, region, offset, dtype="int8"):
    return TensorInfo(name, tuple(shape), dtype, region, offset, Quantization("none"))


def model(stream, *, read_only=b"", scratch=2048, fast=0, inputs=(), outputs=(), cop="COP1",
          config=CONFIG_256, features=None):
    payload = Payload(cop, np.array(stream, np.uint32), config, ID_WORD if config is not None else None,
                      features)
    return VelaModel("synthetic", "npz", payload, bytes(read_only), scratch, fast, tuple(inputs), tuple(outputs))


def rand(seed, shape, dtype=np.int8):
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, size=shape).astype(dtype)


def overlaps(a_lo, a_hi, b_lo, b_hi):
    return a_lo < b_hi and b_lo < a_hi


# ---------------------------------------------------------------------------- memory map
def test_plan_cop1_areas_windows_and_guards():
    m = model(STOP, read_only=b"\1" * 100, scratch=2048, fast=512,
              inputs=[t("in", (1, 4, 4, 16), 1, 1024)], outputs=[t("out", (1, 4, 4, 16), 1, 0)])
    mm = plan_memory(m)
    names = [a.name for a in mm.areas]
    assert names == ["command_stream", "read_only", "scratch", "scratch_fast", "unbound"]
    assert [mm.region_area(r).name for r in range(8)] == \
        ["read_only", "scratch", "scratch_fast"] + ["unbound"] * 5
    assert mm.area("command_stream").size == 4 * len(STOP)
    assert (mm.area("read_only").size, mm.area("scratch").size, mm.area("scratch_fast").size) == (100, 2048, 512)
    # scratch_fast in the SRAM window (REGIONCFG.region2 -> MEM_ATTR1 -> sram), the rest on EXT
    for a in mm.areas:
        want = Interface.sram if a.name == "scratch_fast" else Interface.ext
        assert a.interface == want, a
        base = DRIVER_DEFAULTS.sram_base if want == Interface.sram else DRIVER_DEFAULTS.ext_base
        assert a.address >= base and a.address % 4096 == 0
    assert mm.basep == tuple(mm.region_area(r).address for r in range(8))
    # no area overlaps another area or any DECERR range; each area is followed by one
    spans = [(a.address, a.address + max(a.size, 1)) for a in mm.areas if a.size]
    for i, s in enumerate(spans):
        assert not any(overlaps(*s, *o) for o in spans[i + 1:])
        assert not any(overlaps(*s, lo, hi) for lo, hi in mm.faults)
        assert any(lo <= s[1] + 4096 and hi > s[1] for lo, hi in mm.faults)
    unbound = mm.area("unbound").address
    assert (unbound, unbound + (1 << 32)) in mm.faults


def test_plan_separate_io_regions():
    m = model(STOP, scratch=0, cop="COP2", features=2,
              inputs=[t("a", (1, 8, 8, 16), 3, 0), t("b", (1, 1, 1, 16), 3, 1024)],
              outputs=[t("y", (1, 8, 8, 16), 4, 0)])
    mm = plan_memory(m)
    assert [a.name for a in mm.areas] == ["command_stream", "read_only", "scratch", "scratch_fast",
                                          "input", "output", "unbound"]
    assert (mm.area("input").size, mm.area("input").regions) == (1040, (3,))
    assert (mm.area("output").size, mm.area("output").regions) == (1024, (4,))
    assert mm.area("unbound").regions == (5, 6, 7)
    assert mm.basep[3] == mm.area("input").address and mm.basep[4] == mm.area("output").address


@pytest.mark.parametrize("tensor, msg", [
    (t("x", (1, 4, 4, 16), 1, 2000), "input 0 ('x') at offset 0x7d0 + 256 bytes lies outside region 1 (2048 bytes)"),
    (t("x", (1, 4, 4, 16), 0, 0), "lies outside region 0 (0 bytes)"),
    (t("x", (1, 4, 4, 16), 9, 0), "input 0 ('x') is in region 9, outside 0..7"),
])
def test_plan_rejects_tensor_outside_its_region(tensor, msg):
    with pytest.raises(RunError) as e:
        plan_memory(model(STOP, inputs=[tensor]))
    assert e.value.kind == "model" and msg in str(e.value)


# ---------------------------------------------------------------------------- APB programming
def _apb_writes(dev):
    names = {r.offset: r.ident for r in R.iter_registers()}
    return [(names[d["addr"]], d["data"]) for ev, d in dev.events if ev == "apb" and d["write"]]


def test_programming_sequence_and_readback():
    m = model(STOP, read_only=b"\7" * 32, fast=64)
    res = run_model(m, [])
    dev, mm, drv = res.device, res.memory_map, DRIVER_DEFAULTS

    def rd(ident):
        data, err = dev.apb_read(R.offset_of(ident))
        assert err == 0
        return data

    for n in range(4):
        assert rd(f"MEM_ATTR{n}") == drv.mem_attr[n]
    assert R.get("MEM_ATTR1").decode(rd("MEM_ATTR1"))["axi_port"] == 0          # sram
    assert R.get("MEM_ATTR2").decode(rd("MEM_ATTR2"))["axi_port"] == 1          # ext
    regioncfg = R.get("REGIONCFG").decode(rd("REGIONCFG"))
    assert regioncfg == {"region0": 3, "region1": 2, "region2": 1, "region3": 2, "region4": 2,
                         "region5": 2, "region6": 2, "region7": 2}
    assert (rd("QCONFIG"), rd("AXI_SRAM"), rd("AXI_EXT")) == (2, 0x2_0F0B, 0x2_1F3F)
    cs = mm.area("command_stream")
    assert (rd("QBASE_LO") | rd("QBASE_HI") << 32, rd("QSIZE")) == (cs.address, 4 * len(STOP))
    for n in range(8):
        assert rd(f"BASEP{n}_LO") | rd(f"BASEP{n}_HI") << 32 == mm.basep[n]
    # the driver's order: axi_init, then queue and base pointers, then CMD with RS=1 (keeping CE/PE)
    writes = _apb_writes(dev)
    idents = [w[0] for w in writes]
    assert idents[:6] == ["MEM_ATTR0", "MEM_ATTR1", "MEM_ATTR2", "MEM_ATTR3", "QCONFIG", "REGIONCFG"]
    assert set(idents[6:8]) == {"AXI_SRAM", "AXI_EXT"}
    assert idents[8:11] == ["QBASE_LO", "QBASE_HI", "QSIZE"]
    assert idents[11:27] == [f"BASEP{n}_{w}" for n in range(8) for w in ("LO", "HI")]
    assert writes[27] == ("CMD", 0xD) and writes[28] == ("CMD", 0xE)            # RS, then clear_irq
    assert len(writes) == 29
    # STATUS seen when the NPU stopped: stopped with irq_raised; the IRQ is cleared afterwards
    assert res.status_fields["state"] == 0 and res.status_fields["irq_raised"] == 1
    assert not any(res.status_fields[b] for b in ("bus_status", "cmd_parse_error", "branch_fault", "ecc_fault"))
    assert res.stop_reason.kind.value == "npu_op_stop" and not dev.irq


def test_stream_end_without_stop_completes():
    res = run_model(model(isa.encode("NPU_SET_IFM_REGION", region=1)), [])
    assert res.stop_reason.kind.value == "cmd_end_reached" and res.status_fields["cmd_end_reached"] == 1


# ---------------------------------------------------------------------------- binding by DMA
def test_regions_0_1_2_bound_and_ports_attributed():
    ro = rand(1, 96).tobytes()
    x = rand(2, (1, 4, 4, 16))
    stream = (dma(0, 16, 2, 32, 64)           # read_only[16:80] -> scratch_fast[32:96]
              + dma(2, 32, 1, 0, 64)          # scratch_fast[32:96] -> output0 (scratch + 0)
              + dma(1, 1024, 1, 256, 256)     # input0 -> output1 (scratch + 256)
              + STOP)
    m = model(stream, read_only=ro, scratch=2048, fast=128,
              inputs=[t("x", (1, 4, 4, 16), 1, 1024)],
              outputs=[t("y0", (1, 1, 4, 16), 1, 0), t("y1", (1, 4, 4, 16), 1, 256)])
    res = run_model(m, [x], log_transactions=True)
    assert res.outputs[0].tobytes() == ro[16:80]
    assert res.outputs[1].shape == (1, 4, 4, 16) and np.array_equal(res.outputs[1], x)
    mm, log = res.memory_map, res.device.memory.log
    fast, cs = mm.area("scratch_fast"), mm.area("command_stream")
    assert log and all(tx.resp == 0 for tx in log)
    for tx in log:
        in_fast = fast.address <= tx.addr < fast.address + fast.size
        assert tx.port == ("SRAM0" if in_fast else "EXT0"), tx
    assert {tx.port for tx in log if tx.channel == Channel.rd_cmd} == {"EXT0"}
    assert all(cs.address <= tx.addr < cs.address + 4096 for tx in log if tx.channel == Channel.rd_cmd)
    assert sum(tx.length for tx in log if tx.port == "SRAM0") == 128     # 64 written, 64 read back


def test_output_aliasing_input_reads_the_input_back():
    x = rand(3, (1, 8, 8, 16))
    m = model(STOP, inputs=[t("x", (1, 8, 8, 16), 1, 0)], outputs=[t("y", (1, 8, 8, 16), 1, 0)])
    res = run_model(m, [x])
    assert np.array_equal(res.outputs[0], x)
    res.outputs[0][:] = 0                                   # outputs are copies, not views of x
    assert x.any()


def test_int16_io_little_endian():
    x = rand(4, (1, 2, 2, 8), np.int16)
    m = model(dma(1, 64, 1, 0, 64) + STOP, inputs=[t("x", (1, 2, 2, 8), 1, 64, "int16")],
              outputs=[t("y", (1, 2, 2, 8), 1, 0, "int16")])
    res = run_model(m, [x], log_transactions=True)
    assert res.outputs[0].dtype == np.int16 and np.array_equal(res.outputs[0], x)
    base = res.memory_map.basep[1]
    assert res.device.memory.read(base + 64, 2) == int(x.flat[0]).to_bytes(2, "little", signed=True)


def test_cop2_separate_io_regions():
    a, b = rand(5, (1, 8, 8, 16)), rand(6, (1, 1, 1, 16))
    stream = dma(3, 0, 4, 0, 1024) + dma(3, 1024, 4, 1024, 16) + STOP
    m = model(stream, scratch=0, cop="COP2", features=2,
              inputs=[t("a", (1, 8, 8, 16), 3, 0), t("b", (1, 1, 1, 16), 3, 1024)],
              outputs=[t("ya", (1, 8, 8, 16), 4, 0), t("yb", (1, 1, 1, 16), 4, 1024)])
    res = run_model(m, [a, b])
    assert np.array_equal(res.outputs[0], a) and np.array_equal(res.outputs[1], b)
    mm = res.memory_map
    assert res.device.basep(3) == mm.area("input").address and res.device.basep(4) == mm.area("output").address
    assert mm.area("input").address != mm.area("output").address


def test_40_bit_windows_and_all_sram_routing():
    """Areas above 4 GiB (QBASE_HI/BASEP*_HI matter) and a REGIONCFG/QCONFIG that routes
    everything to the SRAM port group."""
    drv = DriverConfig(regioncfg=0x5555, qconfig=0, sram_base=0xAB_0000_0000, ext_base=0x12_3400_0000)
    x = rand(7, (1, 4, 4, 16))
    m = model(dma(1, 1024, 1, 0, 256) + STOP, inputs=[t("x", (1, 4, 4, 16), 1, 1024)],
              outputs=[t("y", (1, 4, 4, 16), 1, 0)])
    res = run_model(m, [x], driver=drv, log_transactions=True)
    assert np.array_equal(res.outputs[0], x)
    assert all(a.address >> 32 == 0xAB for a in res.memory_map.areas if a.name != "unbound")
    assert res.device.qbase >> 32 == 0xAB and res.device.basep(1) >> 32 == 0xAB
    assert {tx.port for tx in res.device.memory.log} == {"SRAM0"}


# ---------------------------------------------------------------------------- configuration
@pytest.mark.parametrize("name", list(CONFIGS))
def test_config_from_embedded_config_word(name):
    res = run_model(model(STOP, config=CONFIGS[name].config_word), [])
    assert res.config.name == name
    assert res.device.apb_read(R.offset_of("CONFIG"))[0] == CONFIGS[name].config_word


def test_config_override_and_defaults():
    assert run_model(model(STOP), [], config="ethos-u85-2048").config.name == "ethos-u85-2048"
    assert run_model(model(STOP, config=None, cop=None), []).config.name == "ethos-u85-256"


@pytest.mark.parametrize("config_word, msg", [
    (0x00003008, "compiled for product 0, not an Ethos-U85 (CONFIG 0x00003008)"),
    (0x20000116, "unknown Ethos-U85 configuration 'ethos-u85-64'"),
])
def test_config_rejected(config_word, msg):
    with pytest.raises(RunError) as e:
        run_model(model(STOP, config=config_word), [])
    assert e.value.kind == "input" and msg in str(e.value)


# ---------------------------------------------------------------------------- input checks
IN = [t("x", (1, 4, 4, 16), 1, 1024)]


@pytest.mark.parametrize("inputs, msg", [
    ([], "the model has 1 input, got 0"),
    ([np.zeros((1, 4, 4, 16), np.int8)] * 2, "the model has 1 input, got 2"),
    ([np.zeros((1, 4, 16, 3), np.int8)], "input 0 ('x') has shape [1, 4, 16, 3] (192 elements), the model "
                                          "expects [1, 4, 4, 16] (NHWC, 256 elements)"),
    ([np.zeros((1, 4, 4, 16), np.uint8)], "input 0 ('x') has dtype uint8, the model expects int8"),
    ([np.zeros((1, 4, 4, 16), np.int8).tolist()], "input 0 ('x') has dtype int64, the model expects int8"),
])
def test_inputs_rejected_with_one_message(inputs, msg):
    with pytest.raises(RunError) as e:
        run_model(model(STOP, inputs=IN), inputs)
    assert e.value.kind == "input" and str(e.value) == msg


@pytest.mark.parametrize("shape", [(4, 4, 16), (1, 256), (256,), (16, 16), (1, 1, 1, 4, 4, 16)])
def test_any_shape_with_the_element_count(shape):
    """Vela folds a leading RESHAPE into the input (micro_speech: TFLite [1, 1960], raw input
    [1, 49, 40, 1]); the bytes are the same in C order, so any shape with the count is taken."""
    x = rand(8, shape)
    res = run_model(model(STOP, inputs=IN, outputs=[t("y", (1, 4, 4, 16), 1, 1024)]), [x])
    assert np.array_equal(res.outputs[0].ravel(), x.ravel())


# ---------------------------------------------------------------------------- unused inputs, state
UNUSED = t("shape", (1, 1, 1, 4), 1, 2 ** 64, "int32")


def test_unused_input_is_not_asked_for():
    """Vela's TRANSPOSE_CONV output-shape input (offset 2**64-1: never read by the stream):
    the runner takes the inputs the stream reads, or every input in Vela's order."""
    x = rand(9, (1, 4, 4, 16))
    m = model(STOP, inputs=[t("x", (1, 4, 4, 16), 1, 1024)], outputs=[t("y", (1, 4, 4, 16), 1, 1024)])
    m = VelaModel(m.path, m.source, m.payload, m.read_only, m.scratch_size, m.scratch_fast_size,
                  (TensorInfo("x", (1, 4, 4, 16), "int8", 1, 1024, Quantization("none"), 1),), m.outputs,
                  (UNUSED,))
    for inputs in ([x], [np.array([1, 4, 4, 16], np.int32), x]):
        assert np.array_equal(run_model(m, inputs).outputs[0], x)
    e = _raises(m, [x, x, x])
    assert e.kind == "input" and str(e) == ("the model has 1 input (not counting 1 the command stream never "
                                            "reads: 'shape'), got 3")


def test_state_tensors_start_as_litert_resets_them():
    """LiteRT's ResetVariableTensor: an int8 state tensor holds its zero point, any other
    type 0 bytes (an int16 zero point is not applied)."""
    q8, q16 = Quantization("per_tensor", (0.5,), (-4,)), Quantization("per_tensor", (0.25,), (7,))
    var8 = TensorInfo("h", (1, 16), "int8", 1, 512, q8, 0)
    var16 = TensorInfo("c", (1, 16), "int16", 1, 640, q16, 1)
    m = model(STOP, scratch=2048, outputs=[t("all", (1, 160), 1, 512)])
    m = VelaModel(m.path, m.source, m.payload, m.read_only, m.scratch_size, m.scratch_fast_size, (), m.outputs,
                  (), (var8, var16))
    out = run_model(m, []).outputs[0].ravel()
    assert (out[:16] == -4).all() and (out[128:160] == 0).all()
    e = _raises(VelaModel(m.path, m.source, m.payload, m.read_only, 600, 0, (), (), (), (var8, var16)))
    assert e.kind == "model" and "variable 1 ('c')" in str(e)
    # --separate-io-regions: Vela's raw .npz names region 1 for state tensors of regions 3/4
    sep = model(STOP, cop="COP2", features=2)
    e = _raises(VelaModel(sep.path, "npz", sep.payload, b"", 2048, 0, (), (), (), (var8,)))
    assert e.kind == "model" and "--separate-io-regions raw .npz" in str(e)


# ---------------------------------------------------------------------------- warnings
RESERVED = isa.encode("NPU_OP_ELEMENTWISE", elementwise_mode=12)   # an UNPREDICTABLE op (TRM assert)


def test_unpredictable_events_are_warnings_one_per_kind():
    res = run_model(model(RESERVED + RESERVED + STOP), [])
    assert [(w.kind, w.offset, w.op, w.count) for w in res.warnings] == [
        ("unpredictable", 0, "NPU_OP_ELEMENTWISE", 2)]
    assert str(res.warnings[0]) == ("UNPREDICTABLE at command offset 0x0 (NPU_OP_ELEMENTWISE): reserved "
                                    "elementwise_mode 12 [2 times]")
    assert len(res.unpredictable) == 2
    e = _raises(model(RESERVED + RESERVED + STOP), strict=True)
    assert e.kind == "strict" and e.warnings == tuple(res.warnings) and e.offset == 0
    assert run_model(model(STOP), [], strict=True).warnings == []


def test_config_that_disagrees_with_the_config_word_warns():
    res = run_model(model(STOP), [], config="ethos-u85-512")
    assert [w.kind for w in res.warnings] == ["config"] and res.config.name == "ethos-u85-512"
    assert "256 MACs per cycle, ethos-u85-512 has 512" in str(res.warnings[0])
    assert run_model(model(STOP), [], config="ethos-u85-256").warnings == []
    assert run_model(model(STOP, config=None, cop=None), [], config="ethos-u85-512").warnings == []
    e = _raises(model(STOP), config="ethos-u85-2048", strict=True)
    assert e.kind == "strict" and e.warnings[0].kind == "config"
    u55 = 0x00003008 | CONFIGS["ethos-u85-256"].macs_per_cc     # product 0, 256 MACs
    res = run_model(model(STOP, config=u55), [], config="ethos-u85-256")
    assert "product 0, ethos-u85-256 is product 2" in str(res.warnings[0])


def test_model_limit_cause_is_the_error_not_a_warning():
    """A model limit stops the run (RunError kind 'model_limit'); the error carries the
    warnings of the run so far, without repeating its own cause."""
    e = _raises(model(RESERVED + dma(1, 0, 1, 64, 32) + STOP), policy=Policy(dma_max_bytes=16))
    assert e.kind == "model_limit" and e.op == "NPU_OP_DMA_START"
    assert [(w.kind, w.op) for w in e.warnings] == [("unpredictable", "NPU_OP_ELEMENTWISE")]


# ---------------------------------------------------------------------------- how a run ends
def _raises(m, inputs=(), **kw) -> RunError:
    with pytest.raises(RunError) as e:
        run_model(m, list(inputs), **kw)
    return e.value


def test_bus_fault_on_unbound_region():
    e = _raises(model(dma(5, 0, 1, 0, 16) + STOP))
    assert (e.kind, e.offset, e.op) == ("bus_fault", 0x20, "NPU_OP_DMA_START")
    assert str(e).startswith("NPU stopped with bus_status, faulting_interface=ext "
                             "faulting_channel=rd_mem2mem at command offset 0x20 (NPU_OP_DMA_START): DECERR")
    assert R.get("STATUS").decode(e.status)["bus_status"] == 1


@pytest.mark.parametrize("stream, what", [
    (dma(1, 4090, 1, 0, 16), "read past the scratch area into its guard band"),
    (dma(1, 0, 2, 0, 16), "write to scratch_fast of size 0"),
    (dma(1, 0, 0, 0, 16), "write to read_only of size 0"),
])
def test_bus_fault_outside_an_area(stream, what):
    e = _raises(model(stream + STOP, scratch=2048))
    assert e.kind == "bus_fault" and e.op == "NPU_OP_DMA_START", what


def test_parse_error_names_status_bit_and_offset():
    e = _raises(model(isa.encode("NPU_SET_IFM_REGION", region=1) + [0x000003FF] + STOP))
    assert (e.kind, e.offset, e.op) == ("parse_error", 4, None)
    assert str(e).startswith("NPU stopped with cmd_parse_error at command offset 0x4: ")


@pytest.mark.parametrize("policy", [None, Policy(on_unimplemented_op="continue")])
def test_unimplemented_operation(kernel_ops, monkeypatch, policy):
    monkeypatch.delitem(kernel_ops, "NPU_OP_RESIZE", raising=False)
    e = _raises(model(isa.encode("NPU_SET_IFM_REGION", region=1) + isa.encode("NPU_OP_RESIZE") + STOP),
                policy=policy)
    assert (e.kind, e.offset, e.op) == ("unimplemented", 4, "NPU_OP_RESIZE")
    assert "NPU_OP_RESIZE not implemented" in str(e)


@pytest.mark.parametrize("exc, kind", [(ZeroDivisionError("kernel bug"), "model_error"),
                                       (NotImplementedError("int16 max pool"), "unimplemented")])
def test_exception_inside_a_kernel(kernel_ops, monkeypatch, exc, kind):
    def broken(snap, port, dev):
        raise exc

    monkeypatch.setitem(kernel_ops, "NPU_OP_POOL", broken)
    e = _raises(model(isa.encode("NPU_SET_IFM_REGION", region=1) + isa.encode("NPU_OP_POOL") + STOP))
    assert (e.kind, e.offset, e.op) == (kind, 4, "NPU_OP_POOL")
    assert str(exc) in str(e) and "cmd_parse_error" in str(e)


def test_step_budget():
    loop = isa.encode("NPU_SET_IFM_REGION", region=1) + isa.encode("NPU_OP_BRANCH", branch_cond=0, branch_target=0)
    e = _raises(model(loop + STOP), max_steps=50)
    assert e.kind == "budget" and e.stop.steps == 50 and e.device.running
    assert str(e).startswith("step budget used up at command offset 0x")
