"""The KPU's control registers, interrupts, FIFOs, table fetch, and every documented outcome
of programming it wrongly (an event, never an exception)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.k210_kpu import test_k210_cases as cases
from tests.k210_kpu import test_k210_reference as ref
from tlm.core.memory import Resp
from tlm.core.trace import poll
from tlm.k210_kpu.device import ACT_TABLE_WORDS, AI_IO_BASE_ADDR, AI_RAM_BASE_ADDR, KPU, FetchChannel, bursts, phys
from tlm.k210_kpu.layout import LINE, row_layout
from tlm.k210_kpu.registers import CONFIG_REGISTERS, IRQ_ALL, LAYER_ARGUMENT, OFFSET, REG_BY_NAME, irq_bits, reg_value
from tlm.k210_kpu.trace_target import K210TraceTarget

CALC, EMPTY, FULL = (irq_bits(calc_done_int=1), irq_bits(layer_cfg_almost_empty_int=1),
                     irq_bits(layer_cfg_almost_full_int=1))


def small_case(seed=1, **kw):
    rng = np.random.default_rng(cases.SEED + seed)
    args = dict(kernel=3, depthwise=False, pool=0, eight_bit=True, c_in=2, c_out=3, h=8, w=8)
    args.update(kw)
    return cases.random_case(rng, **args)


def test_register_table_is_kpu_config_t():
    offs = [r.offset for r in CONFIG_REGISTERS]
    assert offs == sorted(offs) and len(set(offs)) == len(offs)
    assert all(o % 8 == 0 for o in offs)
    assert [o // 8 for o in offs] == list(range(len(offs)))      # consecutive uint64 members
    assert len(LAYER_ARGUMENT) == 12 and [w.index for w in LAYER_ARGUMENT] == list(range(12))
    for w in LAYER_ARGUMENT:                                      # no two fields share a bit
        used = 0
        for f in w.fields:
            assert not used & f.mask, f.name
            used |= f.mask


def test_reset_values_and_read_back():
    k = KPU()
    for r in CONFIG_REGISTERS:
        if r.access in ("rw", "ro") or r.name == "interrupt_clear":
            assert k.read(r.offset) == 0, r.name
    for name in ("interrupt_mask", "fifo_threshold", "fifo_ctrl", "eight_bit_mode"):
        k.write(OFFSET[name], (1 << 64) - 1)
        assert k.read(OFFSET[name]) == REG_BY_NAME[name].mask, name
    assert not [e for e in k.events if e.fault]


@pytest.mark.parametrize("op,offset", [("write", OFFSET["interrupt_status"]), ("write", OFFSET["interrupt_raw"]),
                                       ("write", OFFSET["fifo_data_out"]), ("write", 0x48),
                                       ("read", OFFSET["layer_argument_fifo"]), ("read", 0x1000)])
def test_bad_register_accesses_are_faults(op, offset):
    t = K210TraceTarget()
    if op == "write":
        t.write_reg(offset, 5)
    else:
        assert t.read_reg(offset) == 0
    f = t.faults()
    assert len(f) == 1 and "register_access" in f[0], f
    assert t.read_reg(OFFSET["interrupt_raw"]) == 0


def test_interrupt_clear_status_and_line():
    k = KPU()
    k.raw = IRQ_ALL
    k.write(OFFSET["interrupt_mask"], CALC | FULL)
    assert k.read(OFFSET["interrupt_status"]) == EMPTY and k.irq
    k.write(OFFSET["interrupt_clear"], EMPTY)
    assert k.read(OFFSET["interrupt_raw"]) == CALC | FULL and not k.irq
    assert k.read(OFFSET["interrupt_clear"]) == 0
    k.write(OFFSET["interrupt_mask"], 0)
    assert k.irq


def push(t, la):
    for w in la.words:
        t.write_reg(OFFSET["layer_argument_fifo"], w)


def test_layer_events_int_en_and_thresholds():
    case = small_case()
    t = K210TraceTarget()
    cases.load_case(t, case)
    t.write_reg(OFFSET["fifo_threshold"], reg_value("fifo_threshold", fifo_full_threshold=10,
                                                    fifo_empty_threshold=1))
    t.write_reg(OFFSET["eight_bit_mode"], 1)
    for w in case.la.words[:11]:
        t.write_reg(OFFSET["layer_argument_fifo"], w)
    assert t.read_reg(OFFSET["interrupt_raw"]) == 0          # eleven words: nothing taken
    t.write_reg(OFFSET["layer_argument_fifo"], case.la.words[11])
    assert t.read_reg(OFFSET["interrupt_raw"]) == CALC | EMPTY   # full threshold 10 not reached
    t.write_reg(OFFSET["interrupt_clear"], IRQ_ALL)
    push(t, case.la.replace(int_en=0))
    assert t.read_reg(OFFSET["interrupt_raw"]) == EMPTY          # no calc_done without int_en
    t.write_reg(OFFSET["fifo_threshold"], reg_value("fifo_threshold", fifo_full_threshold=1))
    t.write_reg(OFFSET["interrupt_clear"], IRQ_ALL)
    push(t, case.la.replace(int_en=0))
    assert t.read_reg(OFFSET["interrupt_raw"]) == EMPTY | FULL
    t.write_reg(OFFSET["interrupt_mask"], IRQ_ALL)
    assert not t.wait_irq(10)
    assert not t.faults()


def test_fifo_flushes_and_empty_reads():
    case = small_case()
    t = K210TraceTarget()
    cases.load_case(t, case)
    t.write_reg(OFFSET["eight_bit_mode"], 1)
    for w in case.la.words[:5]:
        t.write_reg(OFFSET["layer_argument_fifo"], w)
    t.write_reg(OFFSET["fifo_ctrl"], reg_value("fifo_ctrl", dma_fifo_flush_n=1, gs_fifo_flush_n=1,
                                               cmd_fifo_flush_n=1, resp_fifo_flush_n=1))  # cfg flush
    push(t, case.la)                          # a whole layer after the flush runs normally
    assert t.read_reg(OFFSET["interrupt_raw"]) & CALC
    first = t.read_reg(OFFSET["fifo_data_out"])
    assert first == int.from_bytes(case.expect.tobytes()[:8], "little")
    t.write_reg(OFFSET["fifo_ctrl"], reg_value("fifo_ctrl", cfg_fifo_flush_n=1))   # dma flush
    assert not t.faults()
    assert t.read_reg(OFFSET["fifo_data_out"]) == 0     # empty: reads 0, noted, not a fault
    assert not t.faults()
    assert [e.kind for e in t.kpu.events if not e.fault] == ["fifo_empty_read"]


# every field combination the model rejects: (label, replacement fields, text in the event)
BAD = [
    ("reserved bit", dict(), "reserved bits"),
    ("ram_flag", dict(ram_flag=1), "ram_flag"),
    ("full_add", dict(full_add=1), "full_add"),
    ("pad_type", dict(pad_type=1), "pad_type"),
    ("bypass_conv", dict(bypass_conv=1), "bypass_conv"),
    ("load_para", dict(load_para=0), "load_para"),
    ("load_coor", dict(load_coor=0), "load_coor"),
    ("coef_size", dict(coef_size=3), "coef_size"),
    ("coef_row_offset", dict(coef_row_offset=1), "coef_row_offset"),
    ("coef_column_offset", dict(coef_column_offset=2), "coef_column_offset"),
    ("kernel_type", dict(kernel_type=2), "kernel_type"),
    ("pool_type", dict(pool_type=10), "pool_type"),
    ("first_stride with pool", dict(first_stride=1, pool_type=1), "first_stride"),
    ("depthwise channels", dict(depth_wise_layer=1), "depth_wise_layer"),
    ("height 3", dict(i_col_high=2), "height"),
    ("width 600", dict(i_row_wid=599), "width"),
    ("coef_group 3", dict(coef_group=3), "group 3"),
    ("row_switch_addr", dict(coef_group=1, row_switch_addr=0), "row switch"),
    ("channel_switch_addr", dict(channel_switch_addr=1), "channel switch"),
    ("past the KPU RAM", dict(image_dst_addr=0x7fff), "end of the 2 MiB"),
    ("output size", dict(o_row_wid=6), "output size"),
    ("channel_byte_num", dict(channel_byte_num=10), "channel_byte_num"),
    ("dma_total_byte", dict(dma_total_byte=10), "dma_total_byte"),
    ("o_ch_num_coef", dict(o_ch_num_coef=7), "o_ch_num_coef"),
    ("para_size", dict(para_size=17), "para_size"),
    ("load_time", dict(load_time=3), "load_time"),
    ("weight buffer", dict(para_size=80000), "weight buffer"),
    ("active_addr", dict(active_addr=cases.ACT_AT + 8), "aligned"),
    ("fetch past 4 GiB", dict(para_start_addr=0xFFFFFFF0), "32-bit address space"),
]


@pytest.mark.parametrize("label,fields,text", BAD, ids=[b[0] for b in BAD])
def test_rejected_layer_arguments(label, fields, text):
    case = small_case()
    la = case.la.replace(**fields)
    if label == "reserved bit":
        w = list(la.words)
        word = next(x for x in LAYER_ARGUMENT if x.name == "kernel_calc_type_cfg")
        w[word.index] |= word.reserved_mask & -word.reserved_mask     # its lowest reserved bit
        la = type(la)(w)
    k = KPU()
    t = K210TraceTarget(memory=k.memory)
    t.kpu = k
    cases.load_case(t, case)
    k.memory.log_enabled = True
    before = k.memory.read(AI_RAM_BASE_ADDR, 1 << 16)
    k.write(OFFSET["eight_bit_mode"], 1)
    push(t, la)
    f = t.faults()
    assert len(f) == 1 and "bad_layer_argument" in f[0] and text in f[0], f
    assert k.memory.log == []                                  # nothing fetched
    assert k.memory.read(AI_RAM_BASE_ADDR, 1 << 16) == before  # nothing written
    assert k.read(OFFSET["interrupt_raw"]) & CALC              # a waiting host does not hang
    assert not k.out_fifo


def test_bus_error_on_weights_fetch():
    case = small_case()
    t = K210TraceTarget()
    cases.load_case(t, case)
    t.kpu.memory.inject_fault(cases.WEIGHTS_AT + 16, cases.WEIGHTS_AT + 17, Resp.SLVERR, "r")
    t.write_reg(OFFSET["eight_bit_mode"], 1)
    out_before = t.read_mem(AI_IO_BASE_ADDR + LINE * case.la.image_dst_addr, 256)
    push(t, case.la)
    f = t.faults()
    assert len(f) == 1 and "bus_error" in f[0] and "SLVERR" in f[0] and "weights" in f[0], f
    assert t.read_mem(AI_IO_BASE_ADDR + LINE * case.la.image_dst_addr, 256) == out_before
    assert t.wait_irq(1)


def test_36_bit_overflow_wraps_and_is_reported():
    case = small_case(seed=3)
    big = (1 << 39) - 1                                  # arg_add * 2 input channels > 2**35
    la = case.la.replace(arg_add=big)
    acc = ref.conv_acc(case.x, case.w, False, case.pad_value, case.arg_x, case.shr_x, case.arg_w,
                       case.shr_w, big)
    acc = ((acc + (1 << 35)) % (1 << 36)) - (1 << 35)   # the model's documented wrap
    v = ref.batchnorm(acc, case.bn["norm_mul"], case.bn["norm_shift"], case.bn["norm_add"])
    v = ((v + (1 << 35)) % (1 << 36)) - (1 << 35)
    a = case.act
    expect = ref.pool(ref.activation(v, a["x_start"], a["y_mul"], a["shift_number"], a["result_bias"]), 0)
    case.la, case.expect = la, expect
    out, _, t = cases.run_case(case)
    f = t.faults()
    assert any("alu_overflow" in x and "convolution" in x for x in f), f
    assert np.array_equal(out, expect)


def test_fetch_transactions():
    case = small_case(seed=4, c_in=64, c_out=70, h=4, w=4, eight_bit=False)   # two loads
    la = case.la
    for burst_size in (15, 0, 10):
        k = KPU()
        k.memory.log_enabled = True
        t = K210TraceTarget(memory=k.memory)
        t.kpu = k
        cases.load_case(t, case)
        push(t, la.replace(dma_burst_size=burst_size))
        log = k.memory.log
        beat = 8 * (burst_size + 1)
        assert all(x.length <= beat and x.addr // 4096 == (x.addr + x.length - 1) // 4096 for x in log)
        assert all(not x.write and x.port == "AXI" for x in log)
        chans = [x.channel for x in log]
        assert chans == sorted(chans) and chans[0] == FetchChannel.activation
        per = {ch: sum(x.length for x in log if x.channel == ch) for ch in FetchChannel}
        assert per == {FetchChannel.activation: 8 * ACT_TABLE_WORDS, FetchChannel.batchnorm: 8 * 70,
                       FetchChannel.weights: case.w.size * 2}
        assert not t.faults()
    assert bursts(4090, 20, 128) == [(4090, 6), (4096, 14)]


def test_io_aliases():
    """Tables at the uncached alias (0x40000000 + x, what kpu.c hands the KPU after
    subtracting IOMEM) and KPU RAM at 0x80600000 give the same result."""
    case = small_case(seed=5)
    out_a, stream_a, _ = cases.run_case(case)
    alias = -0x40000000
    la = case.la.replace(para_start_addr=cases.WEIGHTS_AT + alias, bwsx_base_addr=cases.BN_AT + alias,
                         active_addr=cases.ACT_AT + alias)
    case.la = la
    out_b, stream_b, t = cases.run_case(case)
    assert np.array_equal(out_a, out_b) and stream_a == stream_b and not t.faults()
    assert phys(0x40600000) == 0x80600000 and phys(0x40800000) == 0x40800000
    assert t.read_mem(0x80600000, 64) == t.read_mem(0x40600000, 64)


def test_write_back_keeps_line_padding():
    case = small_case(seed=6, w=8)                  # 8 wide in 16-byte slots: 8 padding bytes each
    groups, _, pitch = row_layout(8)
    t = K210TraceTarget()
    dst = AI_IO_BASE_ADDR + LINE * case.la.image_dst_addr
    t.load_mem(dst, bytes([0xA5]) * 4096)
    out, _, t = cases.run_case(case, t)
    raw = t.read_mem(dst, LINE)
    for slot in range(min(groups, case.expect.shape[0])):
        assert raw[slot * pitch + 8:(slot + 1) * pitch] == bytes([0xA5]) * (pitch - 8)
        assert raw[slot * pitch:slot * pitch + 8] != bytes([0xA5]) * 8
    assert np.array_equal(out, case.expect)


def test_two_streaming_layers_concatenate_padded():
    case = small_case(seed=7, w=4, h=5, c_out=1)    # 1x5x4 = 20 bytes -> 3 words
    t = K210TraceTarget()
    cases.load_case(t, case)
    t.write_reg(OFFSET["eight_bit_mode"], 1)
    push(t, case.la)
    push(t, case.la)
    words = [t.read_reg(OFFSET["fifo_data_out"]) for _ in range(6)]
    raw = b"".join(w.to_bytes(8, "little") for w in words)
    one = case.expect.tobytes() + bytes(4)
    assert raw == one + one and not t.faults()


def test_load_mem_into_register_window_is_a_fault():
    t = K210TraceTarget()
    t.load_mem(0x40800000, b"\x01")
    assert "register window" in t.faults()[0]


@pytest.mark.parametrize("seq,why", [
    (["wait", ("raw", CALC, CALC)], "read after the interrupt: the layer is done"),
    (["wait", ("status", EMPTY, EMPTY), ("raw", CALC, CALC)], "status shows almost_empty too"),
    (["wait", "clear", ("status", 0, IRQ_ALL)], "clear right after the first interrupt: nothing left"),
    (["wait", "clear", "wait", ("status", CALC, IRQ_ALL), "clear", ("raw", 0, IRQ_ALL)],
     "kpu_run's ISR: almost_empty, then calc_done"),
    (["wait", "clear", ("poll", CALC), "clear", ("raw", 0, IRQ_ALL)], "clear, then poll calc_done"),
    ([("raw", CALC | EMPTY, IRQ_ALL)], "a read without a wait"),
    (["clear", "wait", ("raw", CALC, IRQ_ALL)], "a clear before anything was shown holds calc_done"),
])
def test_calc_done_after_almost_empty(seq, why):
    """kpu_run's mask (calc_done and almost_empty open), a last layer with int_en: calc_done
    comes after the almost_empty of the same layer, and every host sequence that looks after
    it waits sees it (device.py, 'calc_done comes after ...')."""
    case = small_case(seed=8)
    t = K210TraceTarget()
    cases.load_case(t, case)
    t.write_reg(OFFSET["eight_bit_mode"], 1)
    t.write_reg(OFFSET["fifo_threshold"], reg_value("fifo_threshold", fifo_full_threshold=10,
                                                    fifo_empty_threshold=1))
    t.write_reg(OFFSET["interrupt_mask"], FULL)
    push(t, case.la.replace(int_en=1))
    for op in seq:
        if op == "wait":
            assert t.wait_irq(10), why
        elif op == "clear":
            t.write_reg(OFFSET["interrupt_clear"], IRQ_ALL)
        elif op[0] == "poll":
            assert poll(lambda: t.read_reg(OFFSET["interrupt_raw"]), t.idle, op[1], op[1], 10)[0], why
        else:
            assert t.read_reg(OFFSET[f"interrupt_{op[0]}"]) & op[2] == op[1], why
    assert not t.faults()


def test_a_new_layer_is_not_held_by_an_old_clear():
    case = small_case(seed=9)
    t = K210TraceTarget()
    cases.load_case(t, case)
    t.write_reg(OFFSET["eight_bit_mode"], 1)
    t.write_reg(OFFSET["interrupt_mask"], IRQ_ALL)
    push(t, case.la.replace(int_en=1))
    t.write_reg(OFFSET["interrupt_clear"], IRQ_ALL)            # holds the first calc_done
    assert t.read_reg(OFFSET["interrupt_raw"]) & CALC == 0
    push(t, case.la.replace(int_en=1))
    assert t.read_reg(OFFSET["interrupt_raw"]) & CALC           # the second one is not held
    assert not t.wait_irq(5) and not t.faults()                 # masked: the line stays low
