"""The NE16's job handshake and queue: ACQUIRE / TRIGGER (commit and start, commit without
start), STATUS slots, RUNNING_JOB, FINISHED, SOFT_CLEAR both ways, the end-of-job event,
ACQUIRE when full or busy, bad register accesses, rejected and aborted jobs. Data results of
the jobs are checked against the numpy reference (tlm.ne16.reference via Layer.reference)."""
import numpy as np
import pytest

from tlm.core.memory import Memory, Resp
from tlm.ne16 import builder, host, layers
from tlm.ne16 import registers as R
from tlm.ne16.device import ACQUIRE_BUSY, ACQUIRE_FULL
from tlm.ne16.engine import Stream
from tlm.ne16.job import JobConfig
from tlm.ne16.trace_target import Ne16TraceTarget

OFF = R.OFFSETS
S0 = R.field("STATUS", "STATUS0").mask
S1 = R.field("STATUS", "STATUS1").mask


def small(seed, **kw):
    kw.setdefault("h", 4)
    kw.setdefault("w", 4)
    kw.setdefault("cin", 16)
    kw.setdefault("cout", 8)
    kw.setdefault("kind", "conv3x3")
    kw.setdefault("stride", 1)
    return layers.random_layer(seed, **kw)


def two_programs():
    """Two layers laid out in disjoint memory, one job each."""
    a = builder.build(small(101), "gapsdk", base=0x10000000)
    b = builder.build(small(102, kind="conv1x1"), "pulpnnx", base=0x10010000)
    assert len(a.jobs) == len(b.jobs) == 1
    return a, b


def fresh():
    t = Ne16TraceTarget()
    return t, t.dev, host.Host(t)


def test_reset_values():
    t, dev, h = fresh()
    for r in R.REGISTERS:
        if r.name != "ACQUIRE":
            assert t.read_reg(r.offset) == 0, r.name
    assert not dev.busy and dev.events_pending == 0
    assert t.faults() == []


def test_single_job_handshake_and_result():
    t, dev, h = fresh()
    a, _ = two_programs()
    h.load(a)
    assert t.read_reg(OFF["ACQUIRE"]) == 0
    h.program(a.jobs[0])
    for reg, v in zip(R.JOB_REGS, a.jobs[0]):        # registers read back as written
        assert t.read_reg(reg.offset) == v
    t.write_reg(OFF["TRIGGER"], 0)
    assert t.read_reg(OFF["STATUS"]) == S0 and dev.busy
    assert t.read_reg(OFF["RUNNING_JOB"]) == 0
    assert t.wait_irq(10_000)
    assert t.read_reg(OFF["STATUS"]) == 0 and not dev.busy
    assert t.read_reg(OFF["RUNNING_JOB"]) == 0
    assert t.read_reg(OFF["FINISHED"]) == 1
    assert t.read_reg(OFF["FINISHED"]) == 0            # read clears (EXT hwpe-ctrl)
    np.testing.assert_array_equal(h.output(a), a.layer.reference())
    assert not t.wait_irq(100)                          # one job, one event
    assert t.faults() == []


def test_two_jobs_in_flight_and_acquire_when_full():
    t, dev, h = fresh()
    a, b = two_programs()
    h.load(a)
    h.load(b)
    ja = h.dispatch(a.jobs[0])
    jb = h.dispatch(b.jobs[0])
    assert (ja, jb) == (0, 1)
    assert t.read_reg(OFF["STATUS"]) == S0 | S1
    assert t.read_reg(OFF["ACQUIRE"]) == ACQUIRE_FULL   # full: nothing changes
    assert t.read_reg(OFF["STATUS"]) == S0 | S1
    assert h.acquire() is None                          # pulp-nnx: >= 256 is "not acquired"
    assert not h.resolve_check(ja) and not h.resolve_check(jb)
    assert t.wait_irq(100_000)                          # job 0's event
    assert t.read_reg(OFF["STATUS"]) == S1
    assert h.resolve_check(ja) and not h.resolve_check(jb)
    assert t.wait_irq(100_000)                          # job 1's event
    assert t.read_reg(OFF["STATUS"]) == 0 and t.read_reg(OFF["RUNNING_JOB"]) == 1
    assert h.resolve_check(jb)
    assert t.read_reg(OFF["FINISHED"]) == 2
    np.testing.assert_array_equal(h.output(a), a.layer.reference())
    np.testing.assert_array_equal(h.output(b), b.layer.reference())
    # the third job reuses context 0
    assert h.dispatch(a.jobs[0]) == 2 and t.read_reg(OFF["STATUS"]) == S0
    assert t.faults() == []


def test_events_already_raised_return_at_once():
    t, dev, h = fresh()
    a, b = two_programs()
    h.load(a)
    h.load(b)
    h.dispatch(a.jobs[0])
    h.dispatch(b.jobs[0])
    dev.run()                                           # both jobs end before anyone waits
    assert dev.events_pending == 2 and t.read_reg(OFF["STATUS"]) == 0
    assert t.wait_irq(1) and t.wait_irq(1)              # two events, consumed one at a time
    assert not t.wait_irq(1_000)


def test_commit_without_trigger_starts_with_the_next_triggered_job():
    t, dev, h = fresh()
    a, b = two_programs()
    h.load(a)
    h.load(b)
    ja = h.dispatch(a.jobs[0], start=False)             # TRIGGER non-0: commit only
    assert t.read_reg(OFF["STATUS"]) == S0 and not dev.busy
    assert not t.wait_irq(1_000)                        # nothing runs
    assert dev.history == []
    jb = h.dispatch(b.jobs[0], start=True)              # TRIGGER 0 releases the queue
    assert t.wait_irq(100_000) and t.wait_irq(100_000)
    assert [r.job_id for r in dev.history] == [ja, jb]  # in commit order
    np.testing.assert_array_equal(h.output(a), a.layer.reference())
    np.testing.assert_array_equal(h.output(b), b.layer.reference())
    assert t.faults() == []


def test_commit_without_trigger_behind_a_released_job_runs_after_it():
    t, dev, h = fresh()
    a, b = two_programs()
    h.load(a)
    h.load(b)
    h.dispatch(a.jobs[0], start=True)
    h.dispatch(b.jobs[0], start=False)
    assert t.wait_irq(100_000) and t.wait_irq(100_000)
    np.testing.assert_array_equal(h.output(b), b.layer.reference())
    assert t.faults() == []


def test_two_commits_without_trigger_stay_queued_and_are_reported():
    t, dev, h = fresh()
    a, b = two_programs()
    h.dispatch(a.jobs[0], start=False)
    h.dispatch(b.jobs[0], start=False)
    assert t.read_reg(OFF["STATUS"]) == S0 | S1
    assert not t.wait_irq(1_000)
    faults = t.faults()
    assert len(faults) == 1 and "only the first job in a queue" in faults[0]
    h.soft_clear(keep_registers=True)                   # the way out
    assert t.read_reg(OFF["STATUS"]) == 0


def test_acquire_twice_is_busy_and_trigger_without_acquire_is_ignored():
    t, dev, h = fresh()
    t.write_reg(OFF["TRIGGER"], 0)
    assert t.read_reg(OFF["STATUS"]) == 0
    assert "without an acquired job" in t.faults()[0]
    assert t.read_reg(OFF["ACQUIRE"]) == 0
    assert t.read_reg(OFF["ACQUIRE"]) == ACQUIRE_BUSY   # already acquired: nothing changes
    t.write_reg(OFF["TRIGGER"], 1)
    assert t.read_reg(OFF["ACQUIRE"]) == 1              # the ID counter moved on once


@pytest.mark.parametrize("keep", [False, True], ids=["clear-0-all", "clear-non0-keep-regs"])
def test_soft_clear(keep):
    t, dev, h = fresh()
    a, b = two_programs()
    h.load(a)
    h.load(b)
    h.dispatch(a.jobs[0])
    h.dispatch(b.jobs[0], start=False)
    dev.step()                                          # job 0 starts and runs one subtile
    assert dev.running is not None
    before = [dev.regs(c) for c in (0, 1)]
    t.write_reg(OFF["SOFT_CLEAR"], 7 if keep else 0)
    assert t.read_reg(OFF["STATUS"]) == 0 and not dev.busy
    assert t.read_reg(OFF["RUNNING_JOB"]) == 0 and t.read_reg(OFF["FINISHED"]) == 0
    assert dev.history[0].outcome == "cleared"
    assert not t.wait_irq(1_000)                        # the abandoned job raises no event
    after = [dev.regs(c) for c in (0, 1)]
    if keep:
        assert after == before and any(before[0])
    else:
        assert after == [tuple([0] * 24)] * 2
    assert t.read_reg(OFF["ACQUIRE"]) == 0              # job IDs restart, context 0 first
    if keep:                                            # context 0 still holds job a
        t.write_reg(OFF["TRIGGER"], 0)
        assert t.wait_irq(100_000)
        np.testing.assert_array_equal(h.output(a), a.layer.reference())
    assert t.faults() == []


def test_register_port_details():
    t, dev, h = fresh()
    t.read_reg(OFF["ACQUIRE"])
    off = R.by_name("PADDING").offset
    dev.periph_write(off, 0x11223344)
    dev.periph_write(off, 0xAABBCCDD, be=0b0101)        # byte enables merge
    assert t.read_reg(off) == 0x11BB33DD
    t.write_reg(OFF["SWSYNC"], 5)
    assert t.read_reg(OFF["SWSYNC"]) == 0               # EXT: no effect, reads 0
    t.write_reg(OFF["STATUS"], 0xFFFF)                  # read-only: ignored
    assert t.read_reg(OFF["STATUS"]) == 0
    assert t.faults() == []
    assert t.read_reg(0x1C) == 0 and t.faults() == []   # reserved word of the block
    assert t.read_reg(0x80) == 0
    t.write_reg(0x3FC, 1)
    f = t.faults()
    assert len(f) == 2 and "unmapped offset 0x80" in f[0] and "0x3fc" in f[1]


def test_write_to_a_context_in_flight_is_reported():
    t, dev, h = fresh()
    a, _ = two_programs()
    h.dispatch(a.jobs[0], start=False)
    t.read_reg(OFF["ACQUIRE"])
    t.write_reg(OFF["TRIGGER"], 1)                      # context 1 committed too
    t.write_reg(R.by_name("CONFIG0").offset, 0)         # lands in context 0: in flight
    assert "in flight" in t.faults()[-1]


@pytest.mark.parametrize("field,value,why", [
    ("FILTER_MODE", 3, "reserved"),
    ("NORM_BITS", 3, "reserved"),
    ("QUANT_BITS", 3, "reserved"),
])
def test_reserved_config0_values_reject_the_job(field, value, why):
    t, dev, h = fresh()
    a, _ = two_programs()
    h.load(a)
    regs = list(a.jobs[0])
    cfg = R.by_name("CONFIG0")
    regs[cfg.index] = cfg.field(field).put(regs[cfg.index], value)
    mem_before = dev.memory.read(a.out_addr, a.out_size)
    h.dispatch(regs)
    assert t.wait_irq(10)                               # the event still comes
    assert t.read_reg(OFF["STATUS"]) == 0 and t.read_reg(OFF["FINISHED"]) == 1
    faults = t.faults()
    assert len(faults) == 1 and "rejected" in faults[0] and why in faults[0]
    assert dev.history[-1].outcome == "rejected" and dev.history[-1].transactions == 0
    assert dev.memory.read(a.out_addr, a.out_size) == mem_before


@pytest.mark.parametrize("mutate,why", [
    (lambda g: g.update(SUBTILE_NB0=0), "is 0"),
    (lambda g: g.update(SUBTILE_REM0=R.by_name("SUBTILE_REM0").encode(KO=33, KI=16)), "exceeds"),
    (lambda g: g.update(SUBTILE_REM2=R.by_name("SUBTILE_REM2").encode(HI=6, WI=5)), "exceeds"),
    (lambda g: g.update(CONFIG0=R.by_name("CONFIG0").encode(
        **dict(R.by_name("CONFIG0").decode(g["CONFIG0"]), LINEAR=1, FILTER_MODE=1))),
     "LINEAR"),
    (lambda g: g.update(CONFIG0=R.by_name("CONFIG0").field("STREAMIN").put(g["CONFIG0"], 1)),
     "STREAMIN"),
    (lambda g: g.update(SUBTILE_NB0=R.by_name("SUBTILE_NB0").encode(KO=0xFFFF, KI=0xFFFF),
                        SUBTILE_NB1=R.by_name("SUBTILE_NB1").encode(HO=0xFFFF, WO=0xFFFF)),
     "budget"),
    # a fuzzed trace (tools/trace_fuzz) whose 65,552 subtiles ran 24 s under the earlier 2**18
    (lambda g: g.update(SUBTILE_NB0=R.by_name("SUBTILE_NB0").encode(KO=0x2002, KI=2),
                        SUBTILE_NB1=R.by_name("SUBTILE_NB1").encode(HO=2, WO=2)),
     "budget"),
])
def test_illegal_programming_is_rejected(mutate, why):
    a, _ = two_programs()
    g = {r.name: v for r, v in zip(R.JOB_REGS, a.jobs[0])}
    mutate(g)
    cfg = JobConfig.from_regs([g[r.name] for r in R.JOB_REGS])
    assert why in cfg.problem()


def test_depthwise_problems():
    lay = small(5, kind="dw3x3", cin=20)
    regs = list(builder.build(lay, "gapsdk").jobs[0])
    assert JobConfig.from_regs(regs).problem() is None
    cfg = R.by_name("CONFIG0")
    r16 = list(regs)
    r16[cfg.index] = cfg.field("MODE16").put(r16[cfg.index], 1)
    assert "MODE16" in JobConfig.from_regs(r16).problem()
    rk = list(regs)
    rem = R.by_name("SUBTILE_REM0")
    rk[rem.index] = rem.field("KO").put(rk[rem.index], 3)
    assert "Ko == Ki" in JobConfig.from_regs(rk).problem()


def test_memory_fault_aborts_the_job_at_that_access():
    mem = Memory(log=True)
    t = Ne16TraceTarget(memory=mem)
    h = host.Host(t)
    a, _ = two_programs()
    h.load(a)
    w = a.addrs["weights"]
    mem.inject_fault(w + 20, w + 21, Resp.SLVERR, "r")
    h.dispatch(a.jobs[0])
    assert t.wait_irq(10_000)
    faults = t.faults()
    assert len(faults) == 1 and "aborted" in faults[0] and "SLVERR" in faults[0]
    last = mem.log[-1]
    assert last.resp == Resp.SLVERR and last.channel == Stream.weights
    assert not any(x.write for x in mem.log)            # aborted before any output
    assert t.read_reg(OFF["STATUS"]) == 0


def test_every_access_is_a_tcdm_transaction():
    """A 3x3 layer of one subtile in every dimension: the stream counts by hand."""
    mem = Memory(log=True)
    t = Ne16TraceTarget(memory=mem)
    lay = layers.random_layer(9, kind="conv3x3", h=5, w=5, cin=16, cout=32, qw=4, stride=1,
                              padding=(0, 0, 0, 0), quant=True, norm_bits=8, out_bits=8,
                              shift=3, bias=None, mode16=False)
    prog = builder.build(lay, "pulpnnx")
    out = host.run_program(prog, t)
    np.testing.assert_array_equal(out, lay.reference())
    count = {}
    for x in mem.log:
        assert x.port == "TCDM" and x.resp == Resp.OKAY
        count[x.channel] = count.get(x.channel, 0) + 1
    # 25 window pixels, 32 output channels x 4 bit-planes, 32 scale bytes in one piece,
    # 9 output pixels
    assert count == {Stream.infeat: 25, Stream.weights: 32 * 4, Stream.scale: 1, Stream.outfeat: 9}
    lens = {(x.channel, x.length) for x in mem.log}
    assert lens == {(Stream.infeat, 16), (Stream.weights, 18), (Stream.scale, 32),
                    (Stream.outfeat, 32)}


def test_addresses_wrap_at_4gib():
    """A layer whose input starts at 0: the padding pre-offset reads wrap to 0xFFFF_FFxx."""
    lay = small(3, w=9, cin=40, padding=(1, 1, 1, 1), pad_value=0)
    prog = builder.build(lay, "gapsdk", base=0)
    assert prog.addrs["input"] < 0x400
    regs = prog.jobs[0]
    assert regs[R.by_name("INFEAT_PTR").index] > 0xFFFF0000
    mem = Memory(log=True)
    out = host.run_program(prog, Ne16TraceTarget(memory=mem))
    np.testing.assert_array_equal(out, lay.reference())
    assert any(x.addr > 0xFFFF0000 for x in mem.log)


def test_gap9_l1_configuration_faults_outside_l1():
    """Config ne16-gap9-l1: a job whose output pointer leaves the L1 windows is aborted at
    its first output write; the same job inside L1 runs."""
    from tlm.core import registry
    lay = small(21)
    good = builder.build(lay, "gapsdk", base=0x10000000)
    t = registry.get("ne16").make_target("ne16-gap9-l1")
    np.testing.assert_array_equal(host.run_program(good, t), lay.reference())
    regs = list(good.jobs[0])
    regs[R.by_name("OUTFEAT_PTR").index] = 0x2000_0000
    h = host.Host(t)
    h.dispatch(regs)
    assert t.wait_irq(10_000)
    f = t.faults()
    assert len(f) == 1 and "DECERR" in f[0] and "outfeat write @0x20000000" in f[0]
    assert t.dev.history[-1].outcome == "aborted"
