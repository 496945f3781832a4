"""The adapter TLM (tlm/dtpu/adapter.py): register map, commands, buffers, output stream.

Data results are checked against core.run_reference-independent expectations where they
matter (tests/dtpu/test_dtpu_core.py covers the MXU arithmetic); here the behaviour of the
adapter's contract rules is checked with hand-built cases."""
from __future__ import annotations

import numpy as np
import pytest

from tlm.dtpu import contract as C
from tlm.dtpu.adapter import CmdQueueFull, Dtpu

ST = {f.name: f for f in C.STATUS_FIELDS}
IN = {a.name: a.index for a in C.IN_ARGS}


def status(d: Dtpu) -> dict:
    v, resp = d.axil_read(C.OFFSET["STATUS"])
    assert resp == C.RESP_OKAY
    return {n: f.get(v) for n, f in ST.items()}


def init(d: Dtpu, rqt=7, mode=0, length=0):
    for name, v in (("CTRL", 1), ("CTRL", 0), ("IARG_RQT_EN", rqt), ("OARG_LENGTH_MODE", mode),
                    ("OARG0_LENGTH", length)):
        assert d.axil_write(C.OFFSET[name], v) == C.RESP_OKAY


def identity_weights(cfg):
    """int8 W[r][c] = 1 if r == c: y[r] = x[r]."""
    return np.array([1 << (8 * r) if r < cfg.columns else 0 for r in range(cfg.rows)], np.uint64)


def outputs(d: Dtpu) -> list[list[int]]:
    pkts, cur = [], []
    while d.out_valid():
        w, last = d.out_pop()
        cur.append(w)
        if last:
            pkts.append(cur)
            cur = []
    assert not cur, "a packet without TLAST"
    return pkts


def test_register_map_access_classes():
    d = Dtpu()
    for w in C.words():
        v, resp = d.axil_read(w.offset)
        assert resp == C.RESP_OKAY
        if not w.exists or w.reg.access == C.WO:
            assert v == 0
    assert d.axil_read(0x008)[1] == C.RESP_SLVERR
    assert d.axil_read(0x002)[1] == C.RESP_SLVERR
    assert d.axil_write(0x1000, 1) == C.RESP_SLVERR
    assert d.axil_write(C.OFFSET["IARG0_STATUS"], 1) == C.RESP_SLVERR
    assert d.axil_write(C.OFFSET["OARG0_LENGTH"], 5, strb=0x3) == C.RESP_SLVERR
    assert d.axil_read(C.OFFSET["OARG0_LENGTH"])[0] == 0
    assert d.axil_write(C.OFFSET["ISCALAR3_DATA"], 7) == C.RESP_OKAY
    assert d.axil_read(C.OFFSET["ISCALAR3_DATA"])[0] == 0
    assert d.axil_write(C.OFFSET["IARG_RQT_EN"], 0xFFFFFFFF) == C.RESP_OKAY
    assert d.axil_read(C.OFFSET["IARG_RQT_EN"])[0] == 0x7       # three input arguments
    s = status(d)
    assert s["IDLE"] == 1 and s["DONE"] == 0 and s["CMDQ"] == 0


def test_step_run_identity_and_weight_reuse():
    d = Dtpu()
    cfg = d.cfg
    init(d)
    d.stream_packet(IN["WMEM"], identity_weights(cfg))
    xs = [0x0102030405060708, 0xF0E0D0C0B0A09080]
    for k, x in enumerate(xs):
        d.stream_packet(IN["CSR"], [C.csr_word("int8", signed=False)])
        d.stream_packet(IN["INFIFO"], [x])
        d.axil_write(C.OFFSET["CMD"], C.cmd_word("EXECUTE_STEP"))
        d.axil_write(C.OFFSET["CMD"], C.cmd_word("UPDATE_IN_ARG", 0b101))   # CSR + data; weights kept
        (pkt,) = outputs(d)
        lanes = [(w >> s) & 0xFFFFFFFF for w in pkt for s in (0, 32)]
        assert lanes == [(x >> (8 * r)) & 0xFF for r in range(8)], k
    s = status(d)
    assert s["DONE"] and s["READY"] and not s["CORE_ERR"]
    assert d.axil_read(C.OFFSET["IARG1_STATUS"])[0] == 1          # weights still held
    assert d.axil_read(C.OFFSET["IARG0_STATUS"])[0] == 1 << 4    # CSR released: EMPTY


def test_execute_waits_for_arguments_and_queue_limit():
    d = Dtpu()
    init(d)
    for _ in range(d.cfg.cmdq_depth):
        d.axil_write(C.OFFSET["CMD"], C.cmd_word("EXECUTE_STEP"))
    assert status(d)["CMDQ"] == d.cfg.cmdq_depth and not d.cmd_space()
    with pytest.raises(CmdQueueFull):
        d.axil_write(C.OFFSET["CMD"], C.cmd_word("EXECUTE_STEP"))
    d.stream_packet(IN["WMEM"], identity_weights(d.cfg))
    d.stream_packet(IN["CSR"], [C.csr_word("int8")])
    assert status(d)["CMDQ"] == d.cfg.cmdq_depth                # input FIFO still missing
    d.stream_packet(IN["INFIFO"], [5, 6])
    assert status(d)["CMDQ"] == 0 and len(d.runs) == d.cfg.cmdq_depth
    assert [r.result.steps for r in d.runs] == [2, 0, 0, 0]      # the FIFO was drained once
    assert len(outputs(d)) == 1


def test_command_errors_and_continuous():
    d = Dtpu()
    init(d, rqt=0b101)
    for word in (3 << 16, C.cmd_word("EXECUTE_STEP", 1), C.cmd_word("UPDATE_IN_ARG", 8), 1 << 28):
        d.axil_write(C.OFFSET["CMD"], word)
        assert status(d)["CMD_ERR"], hex(word)
        d.axil_write(C.OFFSET["STATUS"], ST["CMD_ERR"].mask)
        assert not status(d)["CMD_ERR"]
    d.stream_packet(IN["WMEM"], identity_weights(d.cfg))
    d.axil_write(C.OFFSET["CMD"], C.cmd_word("EXECUTE_CONTINOUS"))
    assert status(d)["CONTINUOUS"]
    for x in (11, 22, 33):
        d.stream_packet(IN["CSR"], [C.csr_word("int8")])
        d.stream_packet(IN["INFIFO"], [x])
    assert [r.auto for r in d.runs] == [True] * 3
    assert [p[0] & 0xFF for p in outputs(d)] == [11, 22, 33]
    assert d.axil_read(C.OFFSET["IARG0_STATUS"])[0] == 1 << 4      # auto-released
    assert d.axil_read(C.OFFSET["IARG1_STATUS"])[0] == 1           # not in RQT_EN: kept
    d.axil_write(C.OFFSET["CMD"], C.cmd_word("UPDATE_IN_ARG", 2))   # refused in continuous mode
    assert status(d)["CMD_ERR"]
    d.axil_write(C.OFFSET["CMD"], C.cmd_word("STOP_EXECUTE_CONTINOUS"))
    assert not status(d)["CONTINUOUS"]


def test_software_length_mode_cuts_packets():
    d = Dtpu()
    init(d, mode=1, length=3)
    d.stream_packet(IN["WMEM"], identity_weights(d.cfg))
    d.stream_packet(IN["CSR"], [C.csr_word("int8", out_groups=1)])   # one 32-bit lane: 1 word a step
    d.stream_packet(IN["INFIFO"], list(range(7)))
    d.axil_write(C.OFFSET["CMD"], C.cmd_word("EXECUTE_STEP"))
    assert [len(p) for p in outputs(d)] == [3, 3, 1]


def test_core_error_reads_nothing_writes_nothing():
    d = Dtpu()
    init(d)
    d.stream_packet(IN["WMEM"], [0] * 8)
    d.stream_packet(IN["CSR"], [C.csr_word("int8", fp_mode=1)])
    d.stream_packet(IN["INFIFO"], [1, 2, 3])
    d.axil_write(C.OFFSET["CMD"], C.cmd_word("EXECUTE_STEP"))
    s = status(d)
    assert s["CORE_ERR"] and s["ERR_CODE"] == C.ERR["FP_UNSUPPORTED"] and s["DONE"]
    assert not d.out_valid() and d.runs[-1].inputs == 0
    d.axil_write(C.OFFSET["STATUS"], ST["CORE_ERR"].mask)
    s = status(d)
    assert not s["CORE_ERR"] and s["ERR_CODE"] == 0


def test_overflow_underrun_and_missing_csr():
    d = Dtpu()
    init(d, rqt=0b110)                                   # the CSR does not gate a start
    d.stream_packet(IN["WMEM"], [7])                     # shorter than the weight block
    d.stream_packet(IN["INFIFO"], [1])
    d.axil_write(C.OFFSET["CMD"], C.cmd_word("EXECUTE_STEP"))
    s = status(d)
    assert s["ERR_CODE"] == C.ERR["BAD_PRECISION"] and s["UNDERRUN"]
    d.stream_packet(IN["CSR"], [C.csr_word("int8")] * (d.cfg.size_csr // 8 + 1))
    assert status(d)["OVERFLOW"]


def test_a_packet_far_beyond_the_buffer_is_cut_at_its_capacity():
    """A beat stream of millions of beats (a DMA LENGTH near its 26-bit limit): the buffer
    takes its capacity, the rest is dropped with OVERFLOW, in one step; a packet fed beat by
    beat stores the same elements (the 64-bit beats split lowest byte first)."""
    words = np.arange(1 << 21, dtype=np.uint64) * np.uint64(0x0101010101010101)
    d, e = Dtpu(), Dtpu()
    for x in (d, e):
        init(x, rqt=0b110)
    d.stream_packet(IN["INFIFO"], words)
    assert status(d)["OVERFLOW"]
    arg = d.args[IN["INFIFO"]]
    cap = arg.buffers[0].data.size
    few = words[:cap // (8 // arg.arg.unit) + 2]
    for i, w in enumerate(few):
        e.stream_beat(IN["INFIFO"], int(w), i == len(few) - 1)
    assert status(e)["OVERFLOW"]
    got, want = d.args[IN["INFIFO"]].buffers[0], e.args[IN["INFIFO"]].buffers[0]
    assert got.length == want.length == cap
    assert np.array_equal(got.data, want.data)
    per = 8 // arg.arg.unit
    assert list(got.data[:per + 1]) == [0] * per + [1 if per > 1 else 0x0101010101010101]


def test_soft_reset_empties_and_blocks():
    d = Dtpu()
    init(d)
    d.stream_packet(IN["WMEM"], [1, 2])
    d.axil_write(C.OFFSET["CMD"], C.cmd_word("EXECUTE_STEP"))
    d.axil_write(C.OFFSET["CTRL"], 1)
    assert not d.stream_ready(0) and status(d)["CMDQ"] == 0
    assert d.axil_read(C.OFFSET["IARG1_STATUS"])[0] == 1 << 4
    d.axil_write(C.OFFSET["CMD"], C.cmd_word("EXECUTE_STEP"))    # ignored while in reset
    d.axil_write(C.OFFSET["CTRL"], 0)
    assert status(d)["CMDQ"] == 0 and d.stream_ready(0)
    assert d.axil_read(C.OFFSET["IARG_RQT_EN"])[0] == 7           # configuration kept


def test_interrupt_is_gie_and_done():
    d = Dtpu()
    init(d, rqt=0)
    d.axil_write(C.OFFSET["CTRL"], 2)
    assert not d.interrupt
    d.axil_write(C.OFFSET["CMD"], C.cmd_word("EXECUTE_STEP"))       # no argument gates it
    assert d.interrupt and status(d)["ERR_CODE"] == C.ERR["BAD_PRECISION"]
    d.axil_write(C.OFFSET["STATUS"], 0x3)
    assert not d.interrupt
