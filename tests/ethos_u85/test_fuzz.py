"""The hostile-input stream fuzzer (tlm/core/fuzz.py with the U85 target, tlm/ethos_u85/fuzz.py)
in the normal suite.

* A fixed-seed run of 1,000 cases must have zero invariant violations (`make fuzz N=...`
  runs more; a failure prints the report with a one-line reproduction per case).
* The fuzzer is reproducible from (seed, index).
* Its checks have teeth: planted bugs (a kernel op that writes outside its OFM, swallows a
  bus error, writes memory behind the transaction log or changes PROT; a DMA that writes
  one byte off; an exception escaping run(); and one per invariant of tlm.ethos_u85.fuzz: RESET,
  PROT/RESET read-back, max_steps, IRQ, sticky bits, faulting channel, AxPROT, port,
  transactions after an error or while stopped, PSLVERR, decode, DMA bounding box and
  budget cut) are each reported as a violation.
* The Vela corpus is not empty (the test flow installs Vela).
"""
from __future__ import annotations

import numpy as np
import pytest

from tlm.ethos_u85 import isa
from tlm.ethos_u85.device import Device
from tlm.ethos_u85 import fuzz
from tlm.ethos_u85.memory import BusFault, Channel, Resp, Transaction

SEED = 20_251_122
CASES = 1000


def test_fixed_seed_run_has_no_violations():
    s = fuzz.run(SEED, CASES, cpu_limit=5.0, abort_cpu=10.0)
    assert s.cases == CASES
    assert not s.violations, "\n" + s.report()


# Cases a longer run found (seed 7261 of 5,000): DMAs into the LUT RAM with 10**8..10**9 runs,
# whose hazard footprint was enumerated run by run (MemoryError, 14 s CPU); now the whole RAM
@pytest.mark.parametrize("case", [1333, 1814, 4348, 4452, 4572])
def test_found_cases_stay_fixed(case):
    r = fuzz.run_case(fuzz.make_case(7261, case), cpu_limit=5.0, abort_cpu=10.0)
    assert not r.violations, r.violations


def test_cases_are_reproducible():
    for i in (0, 1, 17, 999):
        a, b = fuzz.make_case(SEED, i), fuzz.make_case(SEED, i)
        assert a == b and a.repro == f"python -m tlm.core.fuzz --device ethos-u85 --seed {SEED} --case {i}"
    assert fuzz.make_case(SEED, 1) != fuzz.make_case(SEED + 1, 1)
    for gen in fuzz.GENERATORS:
        c = fuzz.make_case(SEED, 3, gen)
        assert c.gen == gen or (gen == "vela" and not fuzz.corpus())   # (test_vela_corpus_is_not_empty)


def test_generator_mix_and_report():
    s = fuzz.run(SEED + 7, 60)
    assert set(s.gens) <= set(fuzz.GENERATORS) and s.cases == 60
    text = s.report()
    for head in ("cases run:", "run outcomes", "faults", "model-limit events", "unpredictable events",
                 "invariant violations:"):
        assert head in text


# ---------------------------------------------------------------------------- planted bugs
def _case(words, faults=(), **kw) -> fuzz.Case:
    c = fuzz.Case(0, 0, "planted", stream=list(words), faults=list(faults), **kw)
    for n in range(8):
        c.setup += [(fuzz.OFF[f"BASEP{n}_LO"], (n + 1) << 20)]
    return c


def _enc(*cmds):
    out = []
    for c in cmds:
        name, f = (c, {}) if isinstance(c, str) else c
        out += isa.encode(name, **f)
    return out


OFM_OP = _enc(("NPU_SET_OFM_REGION", dict(region=2)), ("NPU_SET_OFM_BASE0", dict(addr=0x100)),
              ("NPU_SET_OFM_STRIDE_X", dict(addr=1)), ("NPU_SET_OFM_STRIDE_Y", dict(addr=4)),
              ("NPU_SET_IFM_REGION", dict(region=1)), "NPU_OP_ELEMENTWISE", ("NPU_OP_STOP", dict(mask=1)))


def _violations(case, **kw):
    r = fuzz.run_case(case, **kw)
    return r.violations


def test_clean_planted_op_has_no_violation():
    def good(snap, port, dev):        # writes its 1x1x1 OFM
        port.write(2, 0x100, b"\x07", Channel.wr_ofm)
    assert _violations(_case(OFM_OP), kernel_ops={"NPU_OP_ELEMENTWISE": good}) == []


def test_detects_write_outside_ofm():
    def bad(snap, port, dev):
        port.write(2, 0x100 + 4096, b"\x07", Channel.wr_ofm)
    v = _violations(_case(OFM_OP), kernel_ops={"NPU_OP_ELEMENTWISE": bad})
    assert any("outside the OFM window" in m for m in v), v


def test_detects_batched_write_outside_ofm():
    """The same through DataPort.write_runs (Memory's batched path, TxnBatch listeners)."""
    def bad(snap, port, dev):
        port.write_runs(2, [0x100, 0x100 + 8192], [1, 2], b"\x01\x02\x03", Channel.wr_ofm)
    for per_txn in (False, True):
        c = _case(OFM_OP)
        c.per_txn_path = per_txn
        v = _violations(c, kernel_ops={"NPU_OP_ELEMENTWISE": bad})
        assert any("outside the OFM window" in m for m in v), (per_txn, v)


def test_detects_backdoor_write():
    def bad(snap, port, dev):
        dev.memory.write(0x30_0000, b"\x01\x02")
    v = _violations(_case(OFM_OP), kernel_ops={"NPU_OP_ELEMENTWISE": bad})
    assert any("changed without a write transaction" in m for m in v), v


def test_detects_swallowed_bus_error():
    def bad(snap, port, dev):
        try:
            port.read(1, 0, 16, Channel.rd_ifm)
        except BusFault:
            pass                          # the bug: the op goes on
    faults = [(2 << 20, (2 << 20) + 16, int(Resp.SLVERR), "r")]
    v = _violations(_case(OFM_OP, faults), kernel_ops={"NPU_OP_ELEMENTWISE": bad})
    assert any("did not stop the NPU with bus_status" in m for m in v), v


def test_bus_error_reported_correctly_is_clean():
    def reads(snap, port, dev):
        port.read(1, 0, 16, Channel.rd_ifm)
    faults = [(2 << 20, (2 << 20) + 16, int(Resp.DECERR), "r")]
    r = fuzz.run_case(_case(OFM_OP, faults), kernel_ops={"NPU_OP_ELEMENTWISE": reads})
    assert r.violations == [] and r.outcome == "ERROR/bus_status"


def test_detects_prot_change():
    def bad(snap, port, dev):
        dev.cpl = 1 - dev.cpl
    v = _violations(_case(OFM_OP), kernel_ops={"NPU_OP_ELEMENTWISE": bad})
    assert any("PROT changed" in m for m in v), v


def test_detects_dma_off_by_one(monkeypatch):
    import tlm.ethos_u85.ops.dma as dma

    real = dma.dma_start

    def shifted(rf, port, lut=None, **kw):
        class Shift:
            def __init__(self, p):
                self.p, self.route = p, p.route

            def read_abs(self, *a):
                return self.p.read_abs(*a)

            def write_abs(self, r, addr, data, ch):
                return self.p.write_abs(r, addr + 1, data, ch)
        return real(rf, Shift(port), lut=lut, **kw)

    monkeypatch.setattr(dma, "dma_start", shifted)
    words = _enc(("NPU_SET_DMA0_SRC_REGION", dict(region=1)), ("NPU_SET_DMA0_DST_REGION", dict(region=2)),
                 ("NPU_SET_DMA0_LEN", dict(addr=64)), "NPU_OP_DMA_START")
    v = _violations(_case(words))
    assert any("TRM pseudocode gives" in m for m in v), v


def test_detects_exception_escaping_run(monkeypatch):
    def boom(self):
        raise KeyError("model bug")
    monkeypatch.setattr(Device, "_check_stop", boom)
    v = _violations(_case(_enc("NPU_OP_STOP")))
    assert any("exception escaped Device.run" in m and "KeyError" in m for m in v), v


def test_detects_slow_and_hanging_ops():
    def slow(snap, port, dev):
        x = 0
        while True:                       # a hang: the CPU watchdog aborts the case
            x += 1
    r = fuzz.run_case(_case(OFM_OP), cpu_limit=0.2, abort_cpu=0.5, kernel_ops={"NPU_OP_ELEMENTWISE": slow})
    assert any(m.startswith("hang:") for m in r.violations) and any(m.startswith("slow:") for m in r.violations)


def test_dma_oracle_matches_the_trm_pseudocode_example():
    """The oracle on a 3D strided copy with a negative slice stride (cf. tests/test_dma.py)."""
    rf = isa.RegisterFile()
    for name, f in (("NPU_SET_DMA0_SRC_REGION", dict(region=1, stride_mode=2)),
                    ("NPU_SET_DMA0_DST_REGION", dict(region=2)), ("NPU_SET_DMA0_DST", dict(addr=512)),
                    ("NPU_SET_DMA0_LEN", dict(addr=8)), ("NPU_SET_DMA0_SIZE0", dict(size=4)),
                    ("NPU_SET_DMA0_SIZE1", dict(size=3)), ("NPU_SET_DMA0_SRC_STRIDE0", dict(addr=20)),
                    ("NPU_SET_DMA0_SRC_STRIDE1", dict(addr=256)), ("NPU_SET_DMA0_DST_STRIDE0", dict(addr=16)),
                    ("NPU_SET_DMA0_DST_STRIDE1", dict(addr=-64))):
        rf.set(isa.decode_word(isa.encode(name, **f), 0))
    basep = [0, 0x1000, 0x8000, 0, 0, 0, 0, 0]
    rd, wr, ix, complete = fuzz.dma_oracle(rf.snapshot(), basep)([])
    assert complete and ix == []
    assert rd == [(0x1000 + 256 * z + 20 * y, 8) for z in range(3) for y in range(4)]
    assert wr == [(0x8000 + 512 - 64 * z + 16 * y, 8) for z in range(3) for y in range(4)]
    assert np.all(np.diff([a for a, _ in wr[:4]]) == 16)


# ---------------------------------------------------------------------------- model budgets
def _indexed_dma_loop(lines):
    """An always-taken loop around a legal gather of `lines` 16-byte lines."""
    return _enc(("NPU_SET_DMA0_SRC_REGION", dict(region=1, stride_mode=1, idx_mode=1)),
                ("NPU_SET_DMA0_DST_REGION", dict(region=2)), ("NPU_SET_DMA0_IDX_REGION", dict(region=3)),
                ("NPU_SET_DMA0_IDX_MAX", dict(idx_max=1000)), ("NPU_SET_DMA0_LEN", dict(addr=16)),
                ("NPU_SET_DMA0_SIZE0", dict(size=lines)), ("NPU_SET_DMA0_DST_STRIDE0", dict(addr=16)),
                "NPU_OP_DMA_START", ("NPU_OP_BRANCH", dict(branch_target=0x28)))


def test_case_work_budget_stops_a_stream_of_expensive_legal_dmas():
    """2,000 steps of 4,096-line gathers would take minutes: the case's work budget
    (CASE_WORK, run(max_work)) ends it with BUDGET after a few dozen of them, no violation
    (the budget counts work units, not seconds: no timing is asserted, so the CPU limit
    that makes a case 'slow' is far above its ~3 s; a fresh clone's loaded make test once
    measured 5.02 s against the default 5 s)."""
    r = fuzz.run_case(_case(_indexed_dma_loop(4096), chunks=[2000]), cpu_limit=60.0, abort_cpu=120.0,
                      wall_limit=600.0)
    assert r.violations == [] and r.outcome == "BUDGET", r.violations
    assert r.steps < 40, r.steps


def test_huge_stride_dma_is_a_model_limit_not_a_memory_blowup():
    """65,535 lines of 9 bytes (inside the byte budget) 1 MiB apart: one 64 KiB page each."""
    words = _enc(("NPU_SET_DMA0_SRC_REGION", dict(region=1, stride_mode=1)),
                 ("NPU_SET_DMA0_DST_REGION", dict(region=2)),
                 ("NPU_SET_DMA0_LEN", dict(addr=9)), ("NPU_SET_DMA0_SIZE0", dict(size=0x7FFF)),
                 ("NPU_SET_DMA0_DST_STRIDE0", dict(addr=1 << 20)), "NPU_OP_DMA_START", ("NPU_OP_STOP", dict(mask=1)))
    r = fuzz.run_case(_case(words))
    assert r.violations == [] and r.outcome == "ERROR/cmd_parse_error", r.violations
    assert any("memory pages" in k for k in r.events), r.events


@pytest.mark.parametrize("per_txn", [False, True])
def test_batched_2d_3d_dma_agrees_with_the_oracle(per_txn, monkeypatch):
    """The model copies a non-overlapping 2D/3D DMA as two batches (all line reads, then all
    line writes); the checker compares each channel's runs in order, which that keeps."""
    words = _enc(("NPU_SET_DMA0_SRC_REGION", dict(region=1, stride_mode=2)),
                 ("NPU_SET_DMA0_DST_REGION", dict(region=2)),
                 ("NPU_SET_DMA0_LEN", dict(addr=24)), ("NPU_SET_DMA0_SIZE0", dict(size=5)),
                 ("NPU_SET_DMA0_SIZE1", dict(size=3)), ("NPU_SET_DMA0_SRC_STRIDE0", dict(addr=-40)),
                 ("NPU_SET_DMA0_SRC_STRIDE1", dict(addr=300)), ("NPU_SET_DMA0_DST_STRIDE0", dict(addr=24)),
                 ("NPU_SET_DMA0_DST_STRIDE1", dict(addr=-200)), ("NPU_SET_DMA0_DST", dict(addr=4096)),
                 ("NPU_SET_DMA0_SRC", dict(addr=1024)), "NPU_OP_DMA_START", ("NPU_OP_STOP", dict(mask=1)))
    import tlm.ethos_u85.ops.dma as dma
    real, used = dma._copy_batched, []
    monkeypatch.setattr(dma, "_copy_batched", lambda *a: used.append(real(*a)) or used[-1])
    c = _case(words)
    c.per_txn_path = per_txn
    r = fuzz.run_case(c)
    assert r.violations == [] and r.outcome == "STOP", r.violations
    assert used == [15 * 24]                         # the batched copy ran (per_txn: line by line inside)


# ---------------------------------------------------------------------------- more planted bugs
STOP1 = _enc(("NPU_OP_STOP", dict(mask=1)))


def test_detects_reset_change():
    def bad(snap, port, dev):
        dev.reset_word = 3
    v = _violations(_case(OFM_OP), kernel_ops={"NPU_OP_ELEMENTWISE": bad})
    assert any("RESET changed" in m for m in v), v


@pytest.mark.parametrize("reg", ["PROT", "RESET"])
def test_detects_wrong_apb_readback(reg, monkeypatch):
    """The device's state is right but the APB read of the register is not."""
    real = Device._read_reg
    monkeypatch.setattr(Device, "_read_reg",
                        lambda self, r: real(self, r) ^ (1 if r.offset == fuzz.OFF[reg] else 0))
    v = _violations(_case(STOP1))
    assert any(f"APB read of {reg}" in m for m in v), v


def test_detects_run_past_max_steps(monkeypatch):
    real = Device.run
    monkeypatch.setattr(Device, "run", lambda self, max_steps=None, max_work=None: real(self, None, max_work))
    words = _enc(("NPU_SET_IFM_REGION", dict(region=1)), "NPU_OP_KERNEL_WAIT", "NPU_OP_DMA_WAIT") + STOP1
    r = fuzz.run_case(_case(words, chunks=[1, 1, 1, 1]))
    assert any("run(max_steps=1) executed" in m for m in r.violations), r.violations


def test_detects_error_stop_without_irq(monkeypatch):
    real = Device._stop
    monkeypatch.setattr(Device, "_stop", lambda self, kind, irq=True, **kw: real(self, kind, False, **kw))
    v = _violations(_case([0xFFFF_FFFF] + STOP1))          # a reserved word: cmd_parse_error
    assert any("error stop without irq_raised/IRQ" in m for m in v), v


@pytest.mark.parametrize("where", ["error", "stop"])
def test_detects_wrong_sticky_bits(where, monkeypatch):
    if where == "error":                  # the ERROR sets one sticky bit too many
        real = Device._raise_error

        def extra(self, bit, detail="", **info):
            self.ecc_fault = 1
            real(self, bit, detail, **info)
        monkeypatch.setattr(Device, "_raise_error", extra)
        v = _violations(_case([0xFFFF_FFFF] + STOP1))
        assert any("ERROR stop [cmd_parse_error]: sticky bits" in m for m in v), v
    else:                                 # an op sets one and the stream STOPs normally

        def bad(snap, port, dev):
            dev.branch_fault = 1
        v = _violations(_case(OFM_OP), kernel_ops={"NPU_OP_ELEMENTWISE": bad})
        assert any("npu_op_stop stop changed sticky bits" in m for m in v), v


def test_detects_wrong_faulting_channel():
    def bad(snap, port, dev):
        try:
            port.read(1, 0, 16, Channel.rd_ifm)
        except BusFault as e:
            e.channel = Channel.rd_weights       # the bug: blamed on another channel
            raise
    faults = [(2 << 20, (2 << 20) + 16, int(Resp.SLVERR), "r")]
    v = _violations(_case(OFM_OP, faults), kernel_ops={"NPU_OP_ELEMENTWISE": bad})
    assert any("faulting_channel/interface" in m for m in v), v


@pytest.mark.parametrize("what", ["prot", "port"])
def test_detects_wrong_axprot_or_port(what):
    import dataclasses

    def bad(snap, port, dev):
        r = port.route(1)
        if what == "prot":
            port.read_abs(dataclasses.replace(r, prot=r.prot ^ 2), r.base, 16, Channel.rd_ifm)
        else:                             # a port the configuration does not have (2 SRAM ports)
            t = Transaction("SRAM3", Channel.rd_ifm, False, r.base, 16, prot=dev.prot_word)
            dev.memory.access(t)
    v = _violations(_case(OFM_OP), kernel_ops={"NPU_OP_ELEMENTWISE": bad})
    want = "AxPROT 0x2 != PROT 0x0" if what == "prot" else "port SRAM3 not present"
    assert any(want in m for m in v), v


def test_detects_transaction_after_error_response():
    def bad(snap, port, dev):
        try:
            port.read(1, 0, 16, Channel.rd_ifm)
        except BusFault:
            port.read(1, 64, 16, Channel.rd_ifm)     # the bug: one more read, then the error
            raise
    faults = [(2 << 20, (2 << 20) + 16, int(Resp.SLVERR), "r")]
    v = _violations(_case(OFM_OP, faults), kernel_ops={"NPU_OP_ELEMENTWISE": bad})
    assert any("after the error response" in m for m in v), v


def test_detects_transaction_while_stopped(monkeypatch):
    real = Device.run

    def run(self, max_steps=None, max_work=None):
        r = real(self, max_steps, max_work)
        self.dataport.read(1, 0, 4, Channel.rd_ifm)       # the bug: a read after the stop
        return r
    monkeypatch.setattr(Device, "run", run)
    v = _violations(_case(STOP1))
    assert any("AXI transaction while STOPPED" in m for m in v), v


def test_detects_refused_apb_access_without_pslverr(monkeypatch):
    monkeypatch.setattr(Device, "permitted", lambda self, pprot: True)
    c = _case(STOP1)
    c.apb = [[("r", fuzz.ID, 0b10), ("w", fuzz.OFF["BASEP0_LO"], 0x100, 0b10, 0xF)]]   # non-secure, PROT secure
    v = _violations(c)
    assert any("apb_read(0x0, pprot=2) not permitted/unaligned but PSLVERR=0" in m for m in v), v
    assert any("not permitted/unaligned/sub-word but PSLVERR=0" in m for m in v), v


def test_detects_decode_mismatch(monkeypatch):
    """The device executes another command than the stream holds (a broken decode cache)."""
    import tlm.ethos_u85.device as device

    class Wrong:
        def get(self, key):
            d = isa.decode_word(list(key) if isinstance(key, tuple) else [key], 0)
            return isa.decode_word(isa.encode("NPU_OP_STOP", mask=3), 0) if d.name == "NPU_OP_STOP" else d

        def put(self, key, value):
            pass
    monkeypatch.setattr(device, "_DECODE_CACHE", Wrong())
    v = _violations(_case(STOP1))
    assert any("executed NPU_OP_STOP" in m and "the stream holds NPU_OP_STOP" in m for m in v), v


# ---------------------------------------------------------------------------- DMA past the oracle
DMA64 = _enc(("NPU_SET_DMA0_SRC_REGION", dict(region=1, stride_mode=1)), ("NPU_SET_DMA0_DST_REGION", dict(region=2)),
             ("NPU_SET_DMA0_LEN", dict(addr=8)), ("NPU_SET_DMA0_SIZE0", dict(size=64)),
             ("NPU_SET_DMA0_SRC_STRIDE0", dict(addr=8)), ("NPU_SET_DMA0_DST_STRIDE0", dict(addr=-16)),
             ("NPU_SET_DMA0_DST", dict(addr=4096)), "NPU_OP_DMA_START") + STOP1


def _dma_extra_write(monkeypatch, offset):
    """The planted bug: after the real copy, one more byte at BASEP2 + offset."""
    import tlm.ethos_u85.ops.dma as dma
    real = dma.dma_start

    def extra(rf, port, lut=None, **kw):
        real(rf, port, lut=lut, **kw)
        r = port.route(2)
        port.write_abs(r, r.base + offset, b"\x01", Channel.wr_mem2mem)
    monkeypatch.setattr(dma, "dma_start", extra)


def test_dma_too_large_for_the_oracle_is_bounded(monkeypatch):
    """Past ORACLE_MAX_LINES the writes are checked against the destination's bounding box
    [BASEP2 + 4096 - 63 * 16, BASEP2 + 4096 + 8): clean, then shifted out of it."""
    monkeypatch.setattr(fuzz, "ORACLE_MAX_LINES", 16)
    r = fuzz.run_case(_case(DMA64))
    assert r.violations == [] and r.outcome == "STOP", r.violations
    assert any("too large to enumerate" in k for k in r.events), r.events
    _dma_extra_write(monkeypatch, 4096 + 8)             # just past the box
    v = _violations(_case(DMA64))
    assert any("outside the destination's bounding box" in m for m in v), v


@pytest.mark.parametrize("oracle_lines", [fuzz.ORACLE_MAX_LINES, 16])
def test_detects_budget_cut_dma_that_moved_data(oracle_lines, monkeypatch):
    """A DMA cut by the model budget must move nothing, whether or not the oracle enumerates it."""
    import tlm.ethos_u85.ops.dma as dma
    from tlm.core.errors import BudgetExceeded

    def partial(rf, port, lut=None, **kw):
        r = port.route(2)
        port.write_abs(r, r.base + 4096, b"\x01" * 8, Channel.wr_mem2mem)
        raise BudgetExceeded("planted: cut after one line")
    monkeypatch.setattr(fuzz, "ORACLE_MAX_LINES", oracle_lines)
    monkeypatch.setattr(dma, "dma_start", partial)
    v = _violations(_case(DMA64))
    assert any("cut by the model budget moved data first" in m for m in v), v


def test_vela_corpus_is_not_empty():
    """The 'vela' generator falls back to 'isa' without a corpus: with Vela installed an
    empty corpus is a failure; without it the test skips locally and fails under CI."""
    import importlib.util

    from tests.support import tool_missing
    if not fuzz.corpus() and importlib.util.find_spec("ethosu.vela") is None:
        tool_missing("ethos-u-vela (the fuzzer's Vela corpus)")
    assert fuzz.corpus(), "the Vela corpus is empty although Vela is installed (see tlm.ethos_u85.fuzz.corpus)"


def test_main_refuses_an_empty_corpus_under_ci(monkeypatch, capsys):
    monkeypatch.setattr(fuzz, "corpus", lambda: ())
    monkeypatch.setenv("CI", "true")
    assert fuzz.main(["--cases", "1", "--jobs", "1", "--mem-limit", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Vela corpus is empty" in err
