"""The seed's example (seeds/004: layer 0 of kendryte-standalone-demo's gencode_output.c):
its field values, the seed's own formulas, the digest's errata, and the layer run.

The field values below are copied from the seed text (not derived); the 64-bit words are
computed by hand from the kpu.h bit positions, as an independent check of the register
table."""
from __future__ import annotations

import math

import numpy as np

from tests.k210_kpu import test_k210_cases as cases
from tests.k210_kpu import test_k210_reference as ref
from tlm.k210_kpu import convert
from tlm.k210_kpu.device import WEIGHT_BUFFER, plan
from tlm.k210_kpu.layout import RAM_SIZE, row_layout
from tlm.k210_kpu.registers import LAYER_FIELDS, LayerArgument

# the seed's designated initialisers, field by field (arg_x as the 24-bit pattern it prints)
SEED_FIELDS = dict(
    coef_row_offset=0, coef_column_offset=0,
    image_dst_addr=0x6980, image_src_addr=0x0,
    load_act=1, active_addr=0, row_switch_addr=0x5, channel_switch_addr=0x4b0, coef_size=0,
    coef_group=1,
    depth_wise_layer=0, ram_flag=0, int_en=0, full_add=0,
    dma_total_byte=307199, send_data_out=0, channel_byte_num=19199,
    arg_x=0x809179, arg_w=0x0, shr_x=8, shr_w=0,
    arg_add=0,
    wb_row_switch_addr=0x3, wb_channel_switch_addr=0x168, wb_group=1,
    o_col_high=0x77, i_col_high=0xef, i_row_wid=0x13f, o_row_wid=0x9f,
    bypass_conv=0, pad_value=0x0, load_para=1, pad_type=0, kernel_type=1, pool_type=1,
    dma_burst_size=15, bwsx_base_addr=0, first_stride=0,
    o_ch_num_coef=0xf, i_ch_num=0x2, o_ch_num=0xf,
    load_time=0, para_size=864, para_start_addr=0, load_coor=1,
)
# the twelve words, by hand from kpu.h: e.g. kernel_calc_type_cfg = load_act<<31 |
# coef_group<<28 | row_switch_addr<<16 | channel_switch_addr = 0x80000000 | 0x10000000 | 0x50000 | 0x4b0
SEED_WORDS = (
    0x0000000000000000,   # interrupt_enabe
    0x0000698000000000,   # image_addr
    0x000f000f00000002,   # image_channel_num
    0x0001dc9f0003bd3f,   # image_size
    0x00000000000f0411,   # kernel_pool_type_cfg
    0x0000000001b00001,   # kernel_load_cfg
    0x0000000000000000,   # kernel_offset
    0x00000000900504b0,   # kernel_calc_type_cfg
    0x0000000000130168,   # write_back_cfg
    0x0080917900000080,   # conv_value
    0x0000000000000000,   # conv_value2
    0x0004afff4aff0000,   # dma_parameter
)
W, H, C = 320, 240, 3                    # seed: input 320*240, RGB
WO, HO, CO = 160, 120, 16                # output 160*120 after 2x2 max pooling, 16 channels


def seed_layer() -> LayerArgument:
    f = dict(SEED_FIELDS)
    f["arg_x"] = f["arg_x"] - (1 << 24)                      # the 24-bit pattern as signed
    return LayerArgument.from_fields(f)


def test_every_field_of_the_seed_is_in_the_table():
    assert set(SEED_FIELDS) == set(LAYER_FIELDS)


def test_seed_words_match_hand_encoding():
    la = seed_layer()
    assert la.words == SEED_WORDS, "\n" + la.describe()
    back = LayerArgument(SEED_WORDS)
    assert back.arg_x == 0x809179 - (1 << 24) == -8351367
    for name, v in SEED_FIELDS.items():
        if name != "arg_x":
            assert getattr(back, name) == v, name


def test_seed_formulas():
    la = LayerArgument(SEED_WORDS)
    assert (la.i_row_wid + 1, la.i_col_high + 1) == (W, H)
    assert (la.o_row_wid + 1, la.o_col_high + 1) == (WO, HO)
    assert (la.i_ch_num + 1, la.o_ch_num + 1) == (C, CO)
    assert la.row_switch_addr == math.ceil(W / 64) == 5
    assert la.channel_switch_addr == la.row_switch_addr * H == 1200 == 0x4b0
    assert la.coef_group == 1 and W > 32                       # width > 32 -> 1
    assert la.wb_row_switch_addr == math.ceil(WO / 64) == 3
    assert la.wb_channel_switch_addr == HO * 3 == 360 == 0x168
    assert la.wb_group == 1 and WO > 32
    assert row_layout(W) == (1, 5, 64) and row_layout(WO) == (1, 3, 64)
    # DMA byte counts: fields hold count - 1
    assert la.channel_byte_num + 1 == WO * HO == 19200
    assert la.dma_total_byte + 1 == WO * HO * CO == 307200
    # output at the end of the 2 MiB KPU RAM (layer index 0 is even)
    out_size = math.ceil(CO / la.wb_group) * 64 * la.wb_channel_switch_addr
    assert la.image_dst_addr == (RAM_SIZE - out_size) // 64 == 27008 == 0x6980
    # weights: 16-bit (eight_bit_mode = 0 in kpu_task_init), 3x3x3 per output channel
    per_channel = 3 * 3 * C * 2
    assert la.para_size == 864 == C * 9 * 2 * CO == CO * per_channel
    assert la.o_ch_num_coef == min(WEIGHT_BUFFER // per_channel, CO) - 1 == 15
    assert la.load_time == math.ceil(CO / (la.o_ch_num_coef + 1)) - 1 == 0


def test_seed_arithmetic_fields():
    la = LayerArgument(SEED_WORDS)
    bw_div_sw = la.arg_x / 2 ** la.shr_x                      # shr_x, arg_x = pow_next_log_of_2(bw/sw)
    assert abs(bw_div_sw - (-32622.52734375)) < 1e-9
    assert abs(bw_div_sw / 65535 - (-0.49779)) < 1e-4          # wmin / wrange, 16-bit weights
    assert convert.pow_next_log_of_2(bw_div_sw) == (la.shr_x, la.arg_x)
    assert la.arg_w == la.arg_add == la.pad_value == 0         # bx = 0: the input range starts at 0
    # kpu_task_init's dequantisation of the last layer: real = q*scale + bias
    scale, bias = 0.12349300010531557, -13.528212547302246
    assert abs(255 * scale + bias - 17.9625) < 1e-3


def test_errata():
    la = LayerArgument(SEED_WORDS)
    # D1: the seed's comment "19200*16 = 308200" is an arithmetic slip; the field is 307200 - 1
    assert 19200 * 16 == 307200 != 308200 and la.dma_total_byte == 307199
    # A4: "4K / per-channel size" and the 72 KiB buffer give the same o_ch_num_coef here
    assert min(4096 // 54, CO) - 1 == min(WEIGHT_BUFFER // 54, CO) - 1 == la.o_ch_num_coef
    # A3: send_data_out = 0 ("enable output data" in the comment): only the last layer streams,
    # kpu_run sets it; the model streams nothing for this layer
    assert la.send_data_out == 0
    # A1: dma_burst_size 15 = 16 beats of 8 bytes (the model's reading) = 128-byte bursts
    p = plan(la, eight_bit=False)
    assert p.ok, p.errors


def test_converter_geometry_reproduces_the_seed():
    """The MC formulas of convert.geometry give every geometry field of the seed's layer 0."""
    geo = convert.geometry((C, H, W), CO, 3, False, 1, eight_bit=False, src=0, dst=0x6980)
    la = LayerArgument(SEED_WORDS)
    for name, v in geo.items():
        assert getattr(la, name) == v, name


def test_seed_layer_runs_against_the_reference():
    """Layer 0 with its geometry and 16-bit weights, random tables (the seed has none):
    320x240x3 -> 3x3 conv -> 16 channels -> 2x2 max pool -> 160x120x16."""
    rng = np.random.default_rng(cases.SEED + 4)
    print(f"seed {cases.SEED + 4}")
    case = cases.random_case(rng, 3, False, 1, False, c_in=C, c_out=CO, h=H, w=W, src=0, dst=0x6980)
    la = LayerArgument(SEED_WORDS).replace(
        arg_x=case.arg_x, shr_x=case.shr_x, arg_w=case.arg_w, shr_w=case.shr_w, arg_add=case.arg_add,
        pad_value=case.pad_value, int_en=1, send_data_out=1, para_start_addr=cases.WEIGHTS_AT,
        bwsx_base_addr=cases.BN_AT, active_addr=cases.ACT_AT)
    assert {k: v for k, v in case.la.fields().items()} == la.fields()
    cases.check(case, "seed layer 0")
    assert case.expect.shape == (CO, HO, WO)
    assert ref.POOLS[la.pool_type][:3] == ("max", 2, 2)
