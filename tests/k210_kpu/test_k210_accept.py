"""The acceptance author's traces (traces/accept_*, written by k210_accept_gen.py from the
digest, kpu.c and nncase with expectations from k210_accept_ref.py, not from the TLM):
the committed files are what the generator writes, they cover what issue 15 lists, the
reference itself agrees with hand-computed values, and the seed's own layer 0 runs at full
size through the register path."""
from __future__ import annotations

import filecmp
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from tests.k210_kpu import k210_accept_gen as gen
from tests.k210_kpu import k210_accept_ref as ref
from tlm.core import registry
from tlm.core.trace import parse, replay
from tlm.k210_kpu.registers import OFFSET, POOL_TYPES, LayerArgument

HERE = Path(__file__).resolve().parent
ACCEPT = sorted((HERE / "traces").glob("accept_*/trace.txt"))


def test_committed_traces_are_the_generators(tmp_path):
    for make in gen.TRACES:
        make(tmp_path)
    made = sorted(p.name for p in tmp_path.iterdir())
    assert made == [p.parent.name for p in ACCEPT]
    for name in made:
        cmp = filecmp.dircmp(tmp_path / name, HERE / "traces" / name)
        assert not (cmp.left_only or cmp.right_only), (name, cmp.left_only, cmp.right_only)
        _, bad, err = filecmp.cmpfiles(tmp_path / name, HERE / "traces" / name, cmp.common_files,
                                       shallow=False)
        assert not bad and not err, f"{name}: {bad + err} differ (run python -m tests.k210_kpu.k210_accept_gen)"


@pytest.mark.parametrize("path", ACCEPT, ids=[p.parent.name for p in ACCEPT])
def test_accept_trace_replays(path):
    tr = parse(path)
    res = replay(tr, registry.get(tr.device).make_target(tr.config))
    assert res.exit_status == 0, "\n".join(res.messages)
    assert res.passed == tr.checks


def _layers(path: Path) -> list:
    """(LayerArgument, eight_bit_mode) of every layer a trace pushes."""
    out, words, eight = [], [], 0
    for s in parse(path).steps:
        if s.op == "write_reg" and s.args[0] == OFFSET["eight_bit_mode"]:
            eight = s.args[1] & 1
        elif s.op == "write_reg" and s.args[0] == OFFSET["layer_argument_fifo"]:
            words.append(s.args[1])
            if len(words) == 12:
                out.append((LayerArgument(words), eight))
                words = []
    assert not words
    return out


def test_accept_traces_cover_issue_15():
    layers = [x for p in ACCEPT for x in _layers(p)]
    assert {la.pool_type for la, _ in layers} == set(range(10))
    assert {la.kernel_type for la, _ in layers} == {0, 1}
    assert {(la.depth_wise_layer, la.kernel_type) for la, _ in layers} >= {(1, 1), (0, 0), (0, 1)}
    assert {e for _, e in layers} == {0, 1}
    assert any(la.send_data_out for la, _ in layers) and any(la.load_time > 0 for la, _ in layers)
    assert {la.coef_group for la, _ in layers} == {1, 2, 4} and any(la.row_switch_addr > 1 for la, _ in layers)
    dsts = [la.image_dst_addr for la, _ in layers]
    assert 0 in dsts and any(d > 0x4000 for d in dsts)                  # the ping-pong ends
    ops = {s.op for p in ACCEPT for s in parse(p).steps}
    assert ops >= {"load_mem", "write_reg", "read_reg", "poll_reg", "wait_irq", "check_mem"}


# ------------------------------------------------------------------------------------------
# The reference against hand-computed values
# ------------------------------------------------------------------------------------------
def test_pool_reading_agrees_with_the_register_table():
    """The reference's own reading of the pool enum (digest §4, §9) is the model's table."""
    assert {c: (p.size, p.stride) for c, p in POOL_TYPES.items()} == {c: v[:2] for c, v in ref.POOLS.items()}
    sel = {"left_top": (0, 0), "right_top": (0, 1)}
    for c, (_, _, kind) in ref.POOLS.items():
        assert POOL_TYPES[c].kind == ("select" if kind in sel else kind)
        assert kind not in sel or POOL_TYPES[c].offset == sel[kind]


def test_round_shift_half_even():
    hand = {(5, 1): 2, (7, 1): 4, (-5, 1): -2, (-7, 1): -4, (-3, 1): -2, (3, 0): 3, (6, 2): 2,
            (-6, 2): -2, (10, 2): 2, (-10, 2): -2, (1, 63): 0, (-(1 << 62), 63): 0,
            (3 << 61, 62): 2, (-(3 << 61), 62): -2, (-(5 << 60), 62): -1, (1 << 62, 62): 1}
    for (p, s), want in hand.items():
        assert ref.round_shift_half_even(p, s) == want, (p, s)
    rng = np.random.default_rng(99)
    print("seed 99")
    for _ in range(2000):
        s = int(rng.integers(0, 64))
        p = int(rng.integers(-(1 << 51), 1 << 51)) >> int(rng.integers(0, 50))
        f = Fraction(p, 1 << s)
        fl = f.numerator // f.denominator
        r = f - fl
        want = fl + (1 if r > Fraction(1, 2) or (r == Fraction(1, 2) and fl % 2) else 0)
        assert ref.round_shift_half_even(p, s) == want, (p, s)


def test_activation_int64_path_equals_python_ints():
    rng = np.random.default_rng(7)
    print("seed 7")
    xs = sorted(int(x) for x in rng.integers(-(1 << 34), 1 << 34, 15))
    act = ref.Act([-(1 << 35)] + xs, [int(m) for m in rng.integers(-32768, 32768, 16)],
                  [int(s) for s in rng.integers(0, 64, 16)], [int(b) for b in rng.integers(0, 256, 16)])
    v = rng.integers(-(1 << 35) + 1, 1 << 35, 20000)
    got = ref.activate(act, v)
    for val, y in zip(v.tolist(), got.tolist()):
        i = max(i for i in range(16) if val > act.x_start[i])
        e = ref.round_shift_half_even((val - act.x_start[i]) * act.y_mul[i], act.shift[i]) + act.bias[i]
        assert y == min(max(e, 0), 255), val


def test_activation_segment_boundary_and_clamp():
    xs = [-(1 << 35), 0, 100] + [1000 + i for i in range(13)]
    act = ref.Act(xs, [0, 1, -3] + [0] * 13, [0, 1, 0] + [0] * 13, [7, 10, 200] + [0] * 13)
    v = np.array([[[-5, 0, 1, 3, 100, 101, 170]]])
    # -5 and 0: segment 0 (v > x_start strictly) -> 7; 1: seg 1, (1*1)>>1 = 0.5 -> 0 (even) + 10;
    # 3: 1.5 -> 2 + 10; 100: seg 1, 50 + 10; 101: seg 2, -3 + 200; 170: -210 + 200 -> clamp 0
    assert ref.activate(act, v).ravel().tolist() == [7, 7, 10, 12, 60, 197, 0]


def test_pools_by_hand():
    a = np.arange(30, dtype=np.uint8).reshape(1, 5, 6)
    assert ref.pool(1, a).tolist() == [[[7, 9, 11], [19, 21, 23]]]
    assert ref.pool(2, a).tolist() == [[[3, 5, 7], [15, 17, 19]]]          # (0+1+6+7)//4 = 3
    assert ref.pool(5, a).tolist() == [[[0, 2, 4], [12, 14, 16]]]
    assert ref.pool(6, a).tolist() == [[[1, 3, 5], [13, 15, 17]]]
    assert ref.pool(3, a).tolist() == [[[21]]] and ref.pool(7, a).tolist() == [[[0]]]
    assert ref.pool(4, a).tolist() == [[[(0 + 1 + 2 + 3) * 4 // 16 + 6 * 6 // 4]]]     # 10
    s1 = ref.pool(9, a)                                      # max 2x2 s1: 5x6, outside taps are 0
    assert s1.shape == (1, 5, 6) and s1[0, 4, 5] == 29 and s1[0, 0, 0] == 7 and s1[0, 4, 0] == 25
    m1 = ref.pool(8, a)                                      # mean 2x2 s1: edge-clamped
    assert m1[0, 4, 5] == 29 and m1[0, 0, 5] == (5 + 5 + 11 + 11) // 4 and m1[0, 4, 0] == (24 + 25) * 2 // 4
    assert np.array_equal(ref.pool(0, a), a)


def test_conv_by_hand():
    x = np.arange(16, dtype=np.uint8).reshape(1, 4, 4)
    L = ref.Layer(x_shape=(1, 4, 4), o_ch=1, kernel=3, depthwise=False, pool=0,
                  weights=np.ones((1, 1, 3, 3), np.uint8), wbits=8, pad_value=7,
                  arg_x=-3, shr_x=1, arg_w=5, shr_w=2, arg_add=-11,
                  bn=ref.BN([1], [0], [0]), act=ref.Act([0] * 16, [0] * 16, [0] * 16, [0] * 16))
    acc = ref.conv_acc(L, x)
    sx = 0 + 1 + 4 + 5 + 5 * 7                               # corner: 4 pixels, 5 pads
    assert acc[0, 0, 0] == sx + ((-3 * sx) >> 1) + ((5 * 9) >> 2) - 11
    sx = 0 + 1 + 2 + 4 + 5 + 6 + 8 + 9 + 10                    # (1, 1): rows 0..2, columns 0..2
    assert acc[0, 1, 1] == sx + ((-3 * sx) >> 1) + 11 - 11
    dw = ref.Layer(x_shape=(2, 4, 4), o_ch=2, kernel=1, depthwise=True, pool=0,
                   weights=np.array([[[2]], [[3]]], np.uint16), wbits=16, pad_value=0,
                   arg_x=0, shr_x=0, arg_w=0, shr_w=0, arg_add=100,
                   bn=ref.BN([1, 1], [0, 0], [0, 0]), act=L.act)
    x2 = np.stack([x[0], x[0]])
    assert ref.conv_acc(dw, x2)[:, 2, 3].tolist() == [2 * 11 + 100, 3 * 11 + 100]     # n_ic = 1


def test_layout_matches_the_seed_example():
    assert ref.row_layout(320) == (1, 5, 64) and ref.row_layout(160)[:2] == (1, 3)
    off = ref.kpu_offsets(3, 240, 320)
    assert off[1, 0, 0] == 5 * 240 * 64 and off[0, 1, 0] == 5 * 64
    assert off[2, 239, 319] == 2 * 1200 * 64 + 239 * 320 + 319
    o4 = ref.kpu_offsets(6, 4, 10)                          # 4 channels a line, 16 bytes each
    assert o4[3, 0, 0] == 48 and o4[4, 0, 0] == 4 * 64 and o4[1, 2, 9] == 16 + 2 * 64 + 9
    assert ref.kpu_bytes(16, 120, 160) == 368640            # the seed's 0x6980 = (2 MiB - this) / 64


# ------------------------------------------------------------------------------------------
# The seed's layer 0 at full size
# ------------------------------------------------------------------------------------------
SEED_LAYER0 = dict(image_dst_addr=0x6980, image_src_addr=0, row_switch_addr=5, channel_switch_addr=0x4b0,
                   coef_group=1, wb_row_switch_addr=3, wb_channel_switch_addr=0x168, wb_group=1,
                   o_col_high=0x77, i_col_high=0xef, i_row_wid=0x13f, o_row_wid=0x9f,
                   kernel_type=1, pool_type=1, dma_burst_size=15, load_para=1, o_ch_num_coef=0xf,
                   i_ch_num=2, o_ch_num=0xf, load_time=0, para_size=864, load_coor=1, load_act=1,
                   channel_byte_num=19199, dma_total_byte=307199, arg_x=0x809179, shr_x=8,
                   arg_w=0, shr_w=0, arg_add=0, pad_value=0)


def test_seed_layer0_full_size(tmp_path):
    """The seed's layer 0 (320x240x3 -> 16 channels, 3x3, max 2x2 s2, 16-bit weights, its
    arg_x/shr_x, destination 0x6980) with random weights, tables and input, under kpu_run,
    the whole output read through fifo_data_out: every seed field value comes out of the
    author's formulas, and the TLM matches the reference byte for byte."""
    a = gen.Author("seed_layer0", 1510, "the seed's layer 0 at full size")
    x0 = a.rng.integers(0, 256, size=(3, 240, 320)).astype(np.uint8)
    L = gen.make_layer(a.rng, x0, 16, 3, 1, 16, vbits=28)
    L.arg_x, L.shr_x, L.arg_w, L.shr_w, L.arg_add, L.pad_value = ref.wrap_signed(0x809179, 24), 8, 0, 0, 0, 0
    acc = ref.conv_acc(L, x0)
    L.bn = gen.make_bn(a.rng, acc, 28, True)
    L.act = gen.make_act(a.rng, ref.batch_norm(L, acc))
    tabs = gen.tables_for(a, L, 0)
    fields = gen.layer_fields(L, 0, gen.ping_pong(0, ref.kpu_bytes(16, 120, 160)), *tabs, int_en=1, send_out=1)
    assert {k: fields[k] for k in SEED_LAYER0} == SEED_LAYER0
    a.load_fmap(x0, 0)
    a.reg(gen.CLEAR, 7)
    a.reg(gen.THRESH, 10 | 1 << 4)
    a.reg(gen.EIGHT, 0)
    a.reg(gen.MASK, gen.ALMOST_FULL)
    a.push(L, x0, 0, 0x6980, tabs, int_en=1, send_out=1)
    a.w.wait_irq(10)
    a.reg(gen.CLEAR, 7)
    a.w.wait_irq(10)                                        # calc_done after the almost_empty
    a.reg(gen.CLEAR, 7)
    a.read_stream(307200)
    a.check_fmap(16, 120, 160, 0x6980)
    path = a.save(tmp_path)
    tr = parse(path)
    res = replay(tr, registry.get(tr.device).make_target(tr.config))
    assert res.exit_status == 0, "\n".join(res.messages[:5])
    assert res.passed == tr.checks == 38400 + 3
