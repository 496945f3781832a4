"""The warm paths of the Ethos-U85 TLM against the command-by-command ordinary path.

Three layers make a run that repeats cheap (module docs: tlm.ethos_u85.device, tlm.ethos_u85.ops.plan):

* segments (``Device(segments=)``): a run of NPU_SET commands and its command fetches
  replayed at once;
* operation plans (``Device(plans=)``): kernel ops and DMA built from a recorded ordinary run
  and replayed with their data checks;
* run traces (``Device(traces=)``): a whole run replayed as its segments and operations.

``runner.run_model(..., warm_paths=False)`` turns all three off (the ordinary path).

They must be invisible.  Every network here runs once the ordinary way (all three off) and
three times with them on (the cold run that builds plans, the run that records the trace,
the run that replays it), and every run must agree with the ordinary one in outputs, the
AXI transaction log (Transaction for Transaction, in order), model cycles, the stop reason
(steps, QREAD, work units), STATUS, PMU totals, operation counts, the device events (with
their cycle stamps and register snapshots), the register file, COND_STATUS, the chaining
state and the LUT RAM.  The last run must have replayed a trace and planned operations
(else the comparison would be vacuous).

Invalidation: after the warm-up, a run with something changed must again equal the
ordinary run of the changed case - the read-only data (weights, scale/bias, LUT tables;
random bytes, seeds printed), the command stream (a register value), the inputs, an
injected fault, a step budget that ends inside the trace, a hook that adds a memory
listener in the middle of the run.  The PMU with counters counting (segments and traces
stand aside, plans run) equals the ordinary path counter for counter.

Networks: catalog networks (tests/nets, Vela 5.2) and, where ``../shared/models`` exists
(or $NPU_SHARED_MODELS), the published tflite-micro models (LSTMs with chaining FIFOs, LUT
activations, DMA into the LUT RAM).  Without that folder those cases skip with the reason,
and fail under CI=true.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tests.support import require, tool_missing
from tlm.ethos_u85 import device, runner, vela
from tlm.ethos_u85 import registers as R
from tlm.ethos_u85.memory import Fault, FaultList, Memory, Resp
from tlm.ethos_u85.ops import plan
from tools.shared import shared_dir
from tlm.ethos_u85.ops.common import snapshot_key

SEED = int(os.environ.get("TLM_TEST_SEED", "20261122"))
CONFIG = "ethos-u85-256"
CATALOG = ["tinynet", "add_int16", "mul_int16", "conv2d_3x3_int16", "dwconv_3x3_s2_valid_relu6_pt",
           "avgpool_global_7x7", "softmax_1x10", "softmax_int16", "tanh_int16", "fc_64x32_pc",
           "resize_nearest_8x8to16x16", "transpose_0213"]
SHARED = ["tflm_micro_speech_lstm", "tflm_mnist_lstm", "tflm_dtln_noise_suppression", "tflm_micro_speech",
          "tflm_hello_world", "tflm_person_detect", "seanet_conv4", "seanet_add10", "seanet_sub1"]


def shared_models_dir() -> "Path | None":
    d = shared_dir("models")
    return d if d is not None and d.is_dir() and any(d.glob("*.tflite")) else None


# ---------------------------------------------------------------------------- models
def _catalog(name):
    from tests import nets

    require("ethosu.vela")
    tfl = nets.build(name)
    vm = vela.load(nets.compiled(name, CONFIG))
    return vm, nets.make_inputs(tfl, 1235)


def _shared(stem):
    d = shared_models_dir()
    if d is None:
        tool_missing("published models not found: no ../shared/models (or $NPU_SHARED_MODELS) with *.tflite")
    require("ethosu.vela")
    from tests.nets.compile import compiled_bytes

    vm = vela.load(compiled_bytes((d / f"{stem}.tflite").read_bytes(), stem, CONFIG))
    rng = np.random.default_rng(1235)
    ins = []
    for t in vm.inputs:
        info = np.iinfo(np.dtype(t.dtype))
        ins.append(rng.integers(info.min, int(info.max) + 1, size=t.shape).astype(t.dtype))
    return vm, ins


def load(name):
    return _shared(name) if name in SHARED else _catalog(name)


# ---------------------------------------------------------------------------- caches
@pytest.fixture
def fresh():
    """Each test starts without plans, segments or traces from earlier tests."""
    device.clear_warm_caches()
    yield
    device.clear_warm_caches()


@pytest.fixture
def plays(monkeypatch):
    """Counts the commands each trace replay executed."""
    out: list = []
    real = device.Device._play

    def counted(self, *a, **k):
        n = real(self, *a, **k)
        out.append(n)
        return n
    monkeypatch.setattr(device.Device, "_play", counted)
    return out


def run(vm, inputs, **kw):
    try:
        r = runner.run_model(vm, inputs, config=CONFIG, log_transactions=True, **kw)
        return observe(r.device, r.outputs, r.stop_reason, r.status)
    except runner.RunError as e:
        return observe(e.device, None, e.stop, e.status) | {"error": (e.kind, e.offset)}


def observe(dev, outputs, stop, status) -> dict:
    st = dev.op_state

    def ev(e, d):
        d = {k: v for k, v in d.items() if k not in ("snapshot", "tb")}
        snap = d.get("snapshot")
        return e, tuple(sorted((k, repr(v)) for k, v in d.items())), snapshot_key(snap) if snap else None
    return dict(
        outputs=None if outputs is None else [(o.dtype.str, o.shape, o.tobytes()) for o in outputs],
        log=list(dev.memory.log), cycle=dev.cycle, stop=stop, status=status, pmu=dict(dev.pmu.totals),
        counts=dict(dev.op_counts), events=[ev(e, d) for e, d in dev.events], rf=dict(dev.rf._raw),
        cond=dev.cond_status, chain=(st.chain_length, st.num_ifm, tuple(st.fifo_valid), tuple(st.fifo_count)),
        fifo=[np.concatenate(f).tobytes() if f else b"" for f in st.fifo], lut=dev.lut.tobytes(), qread=dev.qread,
        irq=dev.irq)


def assert_same(got: dict, want: dict, what: str) -> None:
    for k in want:
        if k == "log":
            assert len(got[k]) == len(want[k]), f"{what}: {len(got[k])} transactions, ordinary {len(want[k])}"
            for i, (a, b) in enumerate(zip(got[k], want[k])):
                assert a == b, f"{what}: transaction {i}: {a} != ordinary {b}"
        else:
            assert got[k] == want[k], f"{what}: {k} differs from the ordinary path"


def ordinary(monkeypatch, vm, inputs, **kw) -> dict:
    return run(vm, inputs, warm_paths=False, **kw)


def warm_up(monkeypatch, vm, inputs, want=None, runs=3, **kw):
    """Run *runs* times with the warm paths on, each equal to the ordinary run."""
    for i in range(runs):
        got = run(vm, inputs, **kw)
        if want is not None:
            assert_same(got, want, f"warm run {i}")
    return got


# ================================================================================= networks
@pytest.mark.parametrize("name", CATALOG + SHARED)
def test_network_warm_runs_equal_ordinary(monkeypatch, fresh, plays, name):
    vm, inputs = load(name)
    want = ordinary(monkeypatch, vm, inputs)
    warm_up(monkeypatch, vm, inputs, want)
    assert plays and plays[-1] == want["stop"].steps, f"the last run did not replay a whole trace: {plays}"
    planned = plan.plan_count()
    declined = [k for k, n in plan.STATS.items() if k[0] == "no plan"]
    assert planned or declined, "no operation got a plan, and none was declined: nothing was tried"


@pytest.mark.parametrize("name", ["tinynet", "softmax_int16", "tflm_micro_speech_lstm"])
def test_pmu_counting_warm_equals_ordinary(monkeypatch, fresh, name):
    """Counters counting: segments and traces stand aside, plans run; every counter, the
    cycle counter and the overflow state equal the ordinary path's."""
    vm, inputs = load(name)
    real = runner.Device
    evs = [R.PMU_EVENT_BY_NAME[e] for e in ("ext_rd_data_beat_received", "ext_wr_trans_accepted",
                                             "sram_rd_data_beat_received", "ext_rd_trans_completed")]
    off = {r.ident: r.offset for r in R.REGISTERS}
    seen = []

    def make(*a, **kw):
        d = real(*a, **kw)
        for n, ev in enumerate(evs):
            d.pmu.write(off[f"PMEVTYPER{n}"], ev)
        d.pmu.write(off["PMCNTENSET"], 0xF | 1 << 31)
        d.pmu.write(off["PMCR"], 1)
        seen.append(d)
        return d
    monkeypatch.setattr(runner, "Device", make)
    want = ordinary(monkeypatch, vm, inputs)
    counters = [list(seen[-1].pmu.evcnt), seen[-1].pmu.ccnt, seen[-1].pmu.ovs]
    for i in range(3):
        got = run(vm, inputs)
        assert_same(got, want, f"run {i}")
        assert [list(seen[-1].pmu.evcnt), seen[-1].pmu.ccnt, seen[-1].pmu.ovs] == counters, f"run {i}"
    assert any(n for (op, k), n in plan.STATS.items() if k == "planned"), "no plan ran"


# ================================================================================= invalidation
LSTM = "tflm_micro_speech_lstm"


def _lut_offset(monkeypatch, vm, inputs) -> "int | None":
    """Where the read-only data holds a LUT table the run loads (its first 64 bytes)."""
    r = runner.run_model(vm, inputs, config=CONFIG, warm_paths=False)
    lut = r.device.lut.tobytes()
    k = next((i for i in range(0, len(lut), 64) if any(lut[i:i + 64])), None)
    return None if k is None else bytes(vm.read_only).find(lut[k:k + 64])


@pytest.mark.parametrize("name", ["tinynet", "tanh_int16", LSTM])
def test_changed_read_only_data_runs_as_the_ordinary_path(monkeypatch, fresh, request, name):
    """Weights, scale/bias records and LUT tables live in the read-only data; after the
    warm-up, runs with bytes of it changed (random offsets and values; one inside the LUT
    table the run loads) equal the ordinary runs of the changed models."""
    vm, inputs = load(name)
    warm_up(monkeypatch, vm, inputs)
    seed = SEED + sum(map(ord, request.node.name))
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    ro = bytes(vm.read_only)
    offsets = [int(o) for o in rng.integers(0, len(ro), 3)]
    lut = _lut_offset(monkeypatch, vm, inputs)
    if lut is not None and lut >= 0:
        offsets.append(lut + 7)
    for off in offsets:
        changed = bytearray(ro)
        changed[off] ^= int(rng.integers(1, 256))
        vm2 = vela.VelaModel(vm.path, vm.source, vm.payload, bytes(changed), vm.scratch_size,
                             vm.scratch_fast_size, vm.inputs, vm.outputs)
        want = ordinary(monkeypatch, vm2, inputs)
        got = run(vm2, inputs)
        assert_same(got, want, f"read-only byte 0x{off:x} changed")
    got = run(vm, inputs)                               # and back: the original again
    assert_same(got, ordinary(monkeypatch, vm, inputs), "original after the changes")


def _lut_byte_changed(monkeypatch, vm, inputs, i: int, x: int):
    """*vm* with byte *i* of the LUT table the run loads (_lut_offset) XORed with *x*."""
    off = _lut_offset(monkeypatch, vm, inputs)
    assert off is not None and off >= 0, "no LUT table found in the read-only data"
    changed = bytearray(vm.read_only)
    changed[off + i] ^= x
    return vela.VelaModel(vm.path, vm.source, vm.payload, bytes(changed), vm.scratch_size,
                          vm.scratch_fast_size, vm.inputs, vm.outputs)


def test_lut_table_change_declines_the_lut_plans(monkeypatch, fresh, plays):
    """A LUT table changed inside the read-only data: the LUT ops' plans decline (their
    LUT bytes differ) and the ordinary ops run; the results equal the ordinary path."""
    vm, inputs = load(LSTM)
    warm_up(monkeypatch, vm, inputs)
    vm2 = _lut_byte_changed(monkeypatch, vm, inputs, 11, 0x5A)
    want = ordinary(monkeypatch, vm2, inputs)
    plan.STATS.clear()
    assert_same(run(vm2, inputs), want, "LUT changed")
    assert any(n for (op, k), n in plan.STATS.items() if k == "declined"), plan.STATS


def test_lut_activation_conv_is_planned_and_declines_on_a_changed_lut(monkeypatch, fresh):
    """dtln's last CONV has a LUT activation (not the fused epilogue's case): its plan takes
    write_accumulator's steps, so every run is planned and equals the ordinary path; with a
    byte of the LUT table it loads changed, the plan declines (LUT RAM compared on every
    run) and the ordinary op runs, again equal to the ordinary path."""
    vm, inputs = load("tflm_dtln_noise_suppression")
    want = ordinary(monkeypatch, vm, inputs)
    warm_up(monkeypatch, vm, inputs, want)
    plan.STATS.clear()
    assert_same(run(vm, inputs), want, "warm run")
    assert plan.STATS["NPU_OP_CONV", "planned"] > 0 and plan.STATS["NPU_OP_CONV", "ordinary"] == 0, plan.STATS
    luts = [p for p in plan._PLANS.values() if p and p.lut is not None and p.macs]
    assert luts, "no planned CONV with a LUT activation"
    vm2 = _lut_byte_changed(monkeypatch, vm, inputs, 5, 0x33)
    want2 = ordinary(monkeypatch, vm2, inputs)
    plan.STATS.clear()
    assert_same(run(vm2, inputs), want2, "LUT changed")
    assert plan.STATS["NPU_OP_CONV", "declined"] > 0, plan.STATS


@pytest.mark.parametrize("name", ["tinynet", LSTM])
def test_changed_command_stream_runs_as_the_ordinary_path(monkeypatch, fresh, name):
    """A register value in the stream changed (an OFM zero point, an activation bound, an
    OFM scale): the segments and the trace of the old stream no longer apply."""
    from tlm.ethos_u85 import isa

    vm, inputs = load(name)
    warm_up(monkeypatch, vm, inputs)
    words = vm.command_words
    decoded = list(isa.iter_decode(words))
    targets = [d for d in decoded if d.cmd.name in ("NPU_SET_OFM_ZERO_POINT", "NPU_SET_ACTIVATION_MAX",
                                                    "NPU_SET_OFM_SCALE")]
    assert targets
    for d in targets[len(targets) // 2::max(1, len(targets) // 3)][:3]:
        w = words.copy()
        w[d.offset // 4] ^= 1 << 16                     # bit 0 of the payload field
        pl = vela.Payload(vm.payload.cop_format, w, vm.config_word, vm.id_word, vm.payload.features,
                          vm.payload.staging_usage)
        vm2 = vela.VelaModel(vm.path, vm.source, pl, vm.read_only, vm.scratch_size, vm.scratch_fast_size,
                             vm.inputs, vm.outputs)
        want = ordinary(monkeypatch, vm2, inputs)
        assert_same(run(vm2, inputs), want, f"{d.cmd.name} at 0x{d.offset:x} changed")


@pytest.mark.parametrize("name", ["tinynet", LSTM])
def test_new_inputs_run_as_the_ordinary_path(monkeypatch, fresh, name):
    vm, inputs = load(name)
    warm_up(monkeypatch, vm, inputs)
    rng = np.random.default_rng(SEED)
    for k in range(2):
        new = [rng.integers(np.iinfo(x.dtype).min, int(np.iinfo(x.dtype).max) + 1, size=x.shape).astype(x.dtype)
               for x in inputs]
        want = ordinary(monkeypatch, vm, new)
        got = run(vm, new)
        assert_same(got, want, f"new inputs {k}")
        if name not in SHARED:                          # (the LSTM's 3 outputs saturate)
            assert got["outputs"] != run(vm, inputs)["outputs"] or k, "the outputs did not depend on the inputs"


@pytest.mark.parametrize("name", ["tinynet", LSTM])
def test_injected_fault_runs_as_the_ordinary_path(monkeypatch, fresh, name):
    """A fault inside the scratch area (read and written by the ops) or the command stream:
    the run stops with the ordinary path's bus fault, STATUS, QREAD and log."""
    vm, inputs = load(name)
    warm_up(monkeypatch, vm, inputs)
    mm = runner.plan_memory(vm)
    real = runner.Device
    for area, frac, kind in (("scratch", 0.5, "rw"), ("scratch", 0.1, "w"), ("command_stream", 0.7, "r")):
        a = mm.area(area)
        lo = a.address + int(a.size * frac) // 16 * 16

        def make(*args, **kw):
            d = real(*args, **kw)
            d.memory.inject_fault(lo, lo + 16, Resp.SLVERR, kind)
            return d
        monkeypatch.setattr(runner, "Device", make)
        want = ordinary(monkeypatch, vm, inputs)
        got = run(vm, inputs)
        assert_same(got, want, f"fault in {area} at 0x{lo:x} ({kind})")
        monkeypatch.setattr(runner, "Device", real)


def test_step_budget_inside_a_trace(monkeypatch, fresh):
    """max_steps ending inside the trace: the replay does not start (the budget does not
    leave room for it) and the loop stops where the ordinary path stops."""
    vm, inputs = load("tinynet")
    want_full = ordinary(monkeypatch, vm, inputs)
    warm_up(monkeypatch, vm, inputs)
    for steps in (1, 7, want_full["stop"].steps // 2, want_full["stop"].steps - 1):
        want = ordinary(monkeypatch, vm, inputs, max_steps=steps)
        assert want.get("error", (None,))[0] == "budget"
        assert_same(run(vm, inputs, max_steps=steps), want, f"max_steps={steps}")


def test_listener_added_by_a_hook_mid_run(monkeypatch, fresh):
    """A hook that adds a memory listener at an op event: from then on every transaction
    is made one by one (the listener sees each), and the result equals the ordinary path."""
    vm, inputs = load("tinynet")
    warm_up(monkeypatch, vm, inputs)
    real = runner.Device
    heard: dict = {}

    def make(*args, **kw):
        d = real(*args, **kw)
        seen = heard.setdefault(id(d), [])
        ops = []

        def hook(ev, det):
            if ev == "op":
                ops.append(det["name"])
                if len(ops) == 4:
                    d.memory.listeners.append(seen.append)
        d.hooks.append(hook)
        return d
    monkeypatch.setattr(runner, "Device", make)
    want = ordinary(monkeypatch, vm, inputs)
    n_want = len(heard.popitem()[1])
    got = run(vm, inputs)
    assert_same(got, want, "listener added mid-run")
    assert len(heard.popitem()[1]) == n_want > 0


# ================================================================================= pieces
def test_fault_list_token_names_its_contents():
    """Equal fault-list contents have equal tokens and different contents different
    tokens, through every list mutator and across Memory objects."""
    m1, m2 = Memory(), Memory()
    assert isinstance(m1.faults, FaultList)
    tokens: dict = {(): m1.faults.token}
    assert m2.faults.token == m1.faults.token
    f = m1.inject_fault(0x100, 0x200, Resp.DECERR)
    m2.inject_fault(0x100, 0x200, Resp.DECERR)
    assert m2.faults.token == m1.faults.token != tokens[()]
    g, h = Fault(0, 4, Resp.SLVERR, "r"), Fault(8, 9, Resp.SLVERR, "w")
    for change in (lambda l: l.append(g), lambda l: l.pop(), lambda l: l.clear(), lambda l: l.extend([f, g]),
                   lambda l: l.insert(0, h), lambda l: l.__setitem__(0, Fault(8, 10, Resp.SLVERR, "w")),
                   lambda l: l.remove(f), lambda l: l.__iadd__([f]), lambda l: l.reverse(),
                   lambda l: l.__delitem__(slice(0, 1)), lambda l: l.sort(key=lambda x: x.lo)):
        change(m1.faults)
        key = tuple(m1.faults)
        tok = tokens.setdefault(key, m1.faults.token)
        assert m1.faults.token == tok, key                              # same contents, same token
        assert list(tokens.values()).count(tok) == 1, key               # others have others
    m1.faults = [Fault(1, 2, Resp.SLVERR, "rw")]
    assert isinstance(m1.faults, FaultList) and m1.faults.token not in tokens.values()


def test_fault_free_equals_brute_force(rng=None):
    rng = np.random.default_rng(SEED)
    m = Memory()
    for _ in range(12):
        lo = int(rng.integers(0, 4000))
        m.inject_fault(lo, lo + int(rng.integers(1, 300)), Resp.SLVERR, ["r", "w", "rw"][int(rng.integers(0, 3))])
    for _ in range(2000):
        lo = int(rng.integers(0, 4500))
        hi = lo + int(rng.integers(1, 200))
        for write in (False, True):
            k = "w" if write else "r"
            want = not any(f.lo < hi and lo < f.hi and k in f.kind for f in m.faults)
            assert m.fault_free(lo, hi, write) == want, (lo, hi, write)
    assert not m.fault_free((1 << 40) - 4, (1 << 40) + 4, False)


def test_pmu_tally_equals_advance():
    from tlm.ethos_u85.pmu import Pmu, summarise
    from tlm.ethos_u85.memory import Channel, Transaction

    txns = [Transaction("EXT0", Channel.rd_ifm, False, 0x1000 + 48 * i, 40 + i) for i in range(5)]
    txns += [Transaction("SRAM1", Channel.wr_ofm, True, 0x30, 17)]
    a, b = Pmu(), Pmu()
    for k in range(3):
        a.advance(10 + k, True, txns)
        b.tally(10 + k, True, txns, Pmu.increments(summarise(txns)))
    assert a.totals == b.totals and a.totals


def test_policy_change_runs_as_the_ordinary_path(monkeypatch, fresh):
    """Plans built under the default Policy; a run with tighter op budgets must fail (or
    not) exactly as the ordinary path does under them, and a Policy assigned to a device
    later changes the plans' environment."""
    from tlm.ethos_u85.config import Policy

    vm, inputs = load("tinynet")
    warm_up(monkeypatch, vm, inputs)
    tight = Policy().replace(max_op_elements=2000, max_op_pages=1)
    want = ordinary(monkeypatch, vm, inputs, policy=tight)
    assert want.get("error", (None,))[0] == "model_limit", want.get("error")
    assert_same(run(vm, inputs, policy=tight), want, "tight Policy")
    d = device.Device(CONFIG)
    before = plan.env_token(d), d._fetch_sig()
    d.policy = Policy().replace(cycles_per_command=3)
    assert plan.env_token(d) is not before[0] and d._fetch_sig() is not before[1]


class _Heard:
    """A passive hook that takes the events named in ``hook_events`` only and records them."""
    passive = True

    def __init__(self, events):
        self.hook_events = frozenset(events)
        self.got: list = []

    def __call__(self, ev, det):
        assert ev in self.hook_events, f"hook called for {ev!r}, wants only {sorted(self.hook_events)}"
        self.got.append((ev, det["cycle"], det.get("name"), det.get("offset")))


def test_hook_event_filter_on_a_trace_replay(monkeypatch, fresh, plays):
    """A trace replay makes the 'op' event of a planned operation without the _event call and
    only for hooks that take 'op' events (a hook's ``hook_events``): every observable, and what each
    hook hears, equal the ordinary path; a replay that drops an op event is caught."""
    vm, inputs = load(LSTM)
    real = runner.Device
    hooks: list = []

    def make(*a, **kw):
        d = real(*a, **kw)
        hooks[:] = [_Heard({"op", "irq"}), _Heard({"irq"})]
        d.hooks.extend(hooks)
        return d
    monkeypatch.setattr(runner, "Device", make)

    def heard():
        return [list(h.got) for h in hooks]
    want = ordinary(monkeypatch, vm, inputs)
    want_heard = heard()
    assert sum(e == "op" for e, *_ in want_heard[0]) == sum(want["counts"].values()) > 1000
    assert want_heard[1] and all(e == "irq" for e, *_ in want_heard[1])
    for i in range(3):
        assert_same(run(vm, inputs), want, f"warm run {i}")
        assert heard() == want_heard, f"warm run {i}: the hooks heard other events"
    assert plays and plays[-1] == want["stop"].steps, f"the last run did not replay a whole trace: {plays}"
    # planted: the replay forgets the hooks that take 'op' events
    monkeypatch.setattr(device.Device, "_op_hooks", lambda self: [])
    got = run(vm, inputs)
    assert plays[-1] == want["stop"].steps
    assert_same(got, want, "planted run (the event log still complete)")
    assert heard()[0] != want_heard[0] and heard()[1] == want_heard[1], "the dropped op events went unnoticed"


# ================================================================================= softmax tails
def _pool_plans():
    return [(k, p) for k, p in plan._PLANS.items() if p and k[0] == "NPU_OP_POOL"]


def test_softmax_head_pools_are_planned_and_decline_on_a_read_fault(monkeypatch, fresh):
    """micro_speech's softmax head: a max POOL over a 1x4 window and a reduce_sum POOL (int32
    IFM) have plans (the 1x1 table at the window's maximum; the channel sum then the output
    stage); every warm run equals the ordinary path with both planned.  With a read fault on
    a POOL's IFM bytes the plan declines (its accesses are no longer fault free) and the run
    stops as the ordinary path stops."""
    vm, inputs = load("tflm_micro_speech")
    want = ordinary(monkeypatch, vm, inputs)
    warm_up(monkeypatch, vm, inputs, want)
    assert not [k for k in plan.STATS if k[0] == "no plan" and k[1].startswith("pool")], plan.STATS
    plan.STATS.clear()
    assert_same(run(vm, inputs), want, "warm run")
    assert plan.STATS["NPU_OP_POOL", "planned"] == 2 and plan.STATS["NPU_OP_POOL", "ordinary"] == 0, plan.STATS
    assert len(_pool_plans()) == 2
    real = runner.Device
    for k, p in _pool_plans():
        lo, hi = p.rint[0]

        def make(*args, **kw):
            d = real(*args, **kw)
            done = []

            def hook(ev, det):                          # (before the op runs; the IFM's producer has written)
                if ev == "op" and not done and snapshot_key(det["snapshot"]) == k[2]:    # (this POOL)
                    done.append(d.memory.inject_fault(lo, hi, Resp.SLVERR, "r"))
            d.hooks.append(hook)
            return d
        monkeypatch.setattr(runner, "Device", make)
        want_f = ordinary(monkeypatch, vm, inputs)
        assert "error" in want_f, "the fault did not stop the ordinary run"
        plan.STATS.clear()
        assert_same(run(vm, inputs), want_f, f"read fault at 0x{lo:x}")
        assert plan.STATS["NPU_OP_POOL", "declined"] >= 1, plan.STATS
        monkeypatch.setattr(runner, "Device", real)
    assert_same(run(vm, inputs), want, "no fault again")


_EW32_MODES = ("add", "sub", "mul", "min", "max", "shr", "shl", "lshr", "clz", "abs", "div", "cmp_ge", "and",
               "not")


def _ew32_case(rng):
    """A random 32-bit ELEMENTWISE op of 1-4 elements (the softmax tails' kind): mode, OFM type,
    zero point, OFM scale, rounding and clipping drawn at random."""
    from tests.ethos_u85.test_ops_elementwise import M, ew_bench

    mode = str(rng.choice(_EW32_MODES))
    n = int(rng.integers(1, 5))
    a = rng.integers(-(1 << 31), 1 << 31, size=(1, 1, n)).astype(np.int32)
    b = rng.integers(-(1 << 31), 1 << 31, size=(1, 1, n)).astype(np.int32)
    if rng.integers(0, 2):                               # small values too (no saturation)
        a, b = (a >> int(rng.integers(8, 31))).astype(np.int32), (b >> int(rng.integers(8, 31))).astype(np.int32)
    if mode == "div":
        b[b == 0] = 3
        b[b == -1] = 2
    odt = np.dtype(rng.choice([np.int8, np.int16, np.int32]))
    so = (1, 0) if mode == "div" else (int(rng.integers(1, 1 << 20)), int(rng.integers(0, 40)))
    ofm_zp = 0 if mode == "div" or odt == np.int32 else int(rng.integers(-128, 128))
    kw = dict(out_dtype=odt, ofm_zp=ofm_zp, so=so, ofm_round=int(rng.integers(0, 6)),
              clip=bool(rng.integers(0, 2)) and odt != np.int32)
    return M[mode], mode, a, b, kw, ew_bench


def test_int32_elementwise_plans_equal_the_ordinary_path(fresh):
    """Random 32-bit ELEMENTWISE ops (seeds printed): the plan (elementwise.compute, then the
    plan's output stage) gives the ordinary op's OFM, memory log and UNPREDICTABLE reports
    and the literal per-element pseudocode's OFM, on the data it was built from and on new
    data with the same registers; the plan is used (STATS), not only built."""
    from tests.ethos_u85.test_ops_elementwise import REF_OPS, run_ew

    from tests.ethos_u85.support.opbench import unpredictable
    planned = 0
    for k in range(40):
        seed = SEED + k
        rng = np.random.default_rng(seed)
        mode, name, a, b, kw, ew_bench = _ew32_case(rng)
        for data in range(3):                            # built, then planned (new data twice)
            if data:
                a = rng.permutation(a.reshape(-1)).reshape(a.shape) ^ np.int32(data)
                if name == "div":
                    b = np.where((b == 0) | (b == -1), 5, b).astype(np.int32)
            bb = ew_bench(a, b, **kw)
            want = run_ew(bb, mode, plans=False)
            out_want, log_want = bb.output(want), list(want.memory.log)
            ref = run_ew(bb, mode, kernel_ops=REF_OPS)
            plan.STATS.clear()
            got = run_ew(bb, mode)
            what = f"seed {seed} {name} data {data}"
            assert unpredictable(got) == unpredictable(want) == unpredictable(ref), what
            assert np.array_equal(bb.output(got), out_want), what
            assert np.array_equal(out_want, bb.output(ref)), what
            assert list(got.memory.log) == log_want, what
            planned += plan.STATS["NPU_OP_ELEMENTWISE", "planned"]
    print(f"seeds {SEED}..{SEED + 39}: {planned} planned runs")
    assert planned >= 40, planned


def test_int32_elementwise_plan_declines_a_division_by_zero(fresh):
    """A 32-bit div planned on nonzero divisors, then run with the same registers and a zero
    divisor: the plan's compute raises (div: b != 0), so the plan declines and the ordinary
    op runs and reports the UNPREDICTABLE case as the ordinary path does."""
    from tests.ethos_u85.test_ops_elementwise import M, ew_bench, run_ew

    from tests.ethos_u85.support.opbench import unpredictable
    a = np.array([[[7, -9, 1 << 30]]], np.int32)
    for b in ([[[2, 3, -5]]], [[[4, 1, 7]]]):
        bb = ew_bench(a, np.array(b, np.int32), clip=False)
        run_ew(bb, M["div"])
    plan.STATS.clear()
    bb = ew_bench(a, np.array([[[2, 3, -5]]], np.int32), clip=False)
    run_ew(bb, M["div"])
    assert plan.STATS["NPU_OP_ELEMENTWISE", "planned"] == 1, plan.STATS
    bb = ew_bench(a, np.array([[[2, 0, -5]]], np.int32), clip=False)
    want = run_ew(bb, M["div"], plans=False)
    plan.STATS.clear()
    got = run_ew(bb, M["div"])
    assert plan.STATS["NPU_OP_ELEMENTWISE", "declined"] == 1, plan.STATS
    assert any("div: b != 0" in w for w in unpredictable(got))
    assert unpredictable(got) == unpredictable(want)
    assert np.array_equal(bb.output(got), bb.output(want)) and list(got.memory.log) == list(want.memory.log)


def test_fifo_operand_range_shortcut_only_for_a_narrower_pushed_type(fresh):
    """_FifoSrc.get skips its range reductions only for a chunk a plan pushed from a type
    whose range lies inside the operand's; int16 values pushed into an int8 operand's FIFO
    are still checked (out of range: the plan declines), and so are chunks the ordinary
    path wrote or sliced."""
    from tlm.ethos_u85.ops.common import OpState

    rng = np.random.default_rng(SEED)
    st = OpState()
    src = plan._FifoSrc(0, 4, (1, 1, 4), -128, 127)
    plan._FifoDst(0).put(None, st, rng.integers(-128, 128, 4).astype(np.int8))
    assert id(st.fifo[0][0]) in plan._PUSHED
    assert np.array_equal(src.get(None, st).reshape(-1), st.fifo[0][0])
    src.pop(st)
    assert st.fifo_count[0] == 0 and not plan._PUSHED
    for push in (lambda v: plan._FifoDst(0).put(None, st, v), lambda v: st.write_chaining_fifo(0, v)):
        push(np.array([1, -2, 300, 4], np.int16))        # 300: outside int8
        assert src.get(None, st) is None
        st.clear_fifos()
        push(np.array([1, -2, 30, 4], np.int16))
        assert src.get(None, st).reshape(-1).tolist() == [1, -2, 30, 4]
        st.clear_fifos()
    plan._FifoDst(0).put(None, st, np.array([5, 6, 7, 8, 9, 10], np.int8))
    src.pop(st)                                           # a partial pop: the rest is a slice
    st.fifo[0][0] = np.array([200, 1], np.int64)          # (as if the ordinary path wrote it)
    plan._FifoDst(0).put(None, st, np.array([2, 3], np.int8))
    assert plan._FifoSrc(0, 4, (4,), -128, 127).get(None, st) is None
