"""Unit tests of the Ethos-U85 bench's functional-coverage model (tb/ethos_u85/coverage.py) and
of the report that tb/core/run.py prints and writes; no simulator needed."""
from __future__ import annotations

import json
import types

from tb.core import coverage as C
from tb.core.coverage import Coverage
from tb.ethos_u85 import coverage as U
from tb.ethos_u85.coverage import BenchCoverage, JobRecorder
from tlm.ethos_u85 import isa
from tlm.ethos_u85 import registers as R
from tlm.ethos_u85.device import Device
from tlm.ethos_u85.memory import Memory, Resp


# ------------------------------------------------------------------ the bench's model
def test_bench_bins_come_from_the_tables():
    cov = BenchCoverage()
    assert set(cov.opcode.hits) == {c.name for c in isa.COMMANDS}
    assert set(cov.activation.hits) == {m.name for m in isa.activation_function}
    assert set(cov.ofm_round.hits) == {m.name for m in isa.round_mode_ofm}
    assert "NPU_OP_ELEMENTWISE.and_not" in cov.kernel_op_mode.hits
    assert "NPU_OP_CONV" in cov.kernel_op_mode.hits
    assert "uint16/nhcwb16" in cov.ifm.hits and cov.ifm.bins == 10   # no uint32 IFM
    assert cov.bus_fault.bins == 2 * 9


def test_sample_apb_and_burst():
    cov = BenchCoverage()
    cov.sample_apb(types.SimpleNamespace(prot=0b011, write=True, slverr=True))
    cov.sample_apb(types.SimpleNamespace(prot=0b001, write=False, slverr=False))
    cov.sample_apb(types.SimpleNamespace(prot=0b110, write=False, slverr=False))  # PPROT[2] ignored
    assert cov.apb.hits["nonsecure_priv/write/PSLVERR"] == 1
    assert cov.apb.hits["secure_priv/read/OKAY"] == 1
    assert cov.apb.hits["nonsecure_user/read/OKAY"] == 1

    def burst(port="SRAM0", write=False, len=0, size=4, prot=0b001, resp=Resp.OKAY):
        return types.SimpleNamespace(port=port, write=write, len=len, size=size, prot=prot, resp=resp)
    cov.sample_burst(burst(len=3))
    cov.sample_burst(burst(port="EXT0", write=True, len=15, resp=Resp.DECERR, prot=0b010))
    cov.sample_burst(burst(len=6, size=2))           # narrow beats: other
    cov.sample_burst(burst(len=31))                  # beyond 16 beats: other
    cov.sample_burst(burst(port="SRAM1"))            # a port the bench does not bin
    assert cov.burst_len.hits["SRAM0/read/3-4"] == 1
    assert cov.burst_len.hits["SRAM0/read/5-7"] == 1
    assert cov.burst_len.hits["EXT0/write/16"] == 1
    assert cov.burst_len.other == {"SRAM0/read/32": 1, "SRAM1/read/1": 1}
    assert cov.burst_size.other == {"SRAM0/read/4B": 1, "SRAM1/read/16B": 1}
    assert cov.resp.hits["EXT0/write/DECERR"] == 1
    assert cov.axi_prot.hits["EXT0/nonsecure_user"] == 1


def test_sample_burst_memo_counts_like_sampling_each_point():
    """sample_burst looks a burst shape's bins up once: the counts equal the four points'
    own sample() on every burst, repeated shapes and "other" values included."""
    import random
    seed = 20261126
    rng = random.Random(seed)
    memo, plain = BenchCoverage(), BenchCoverage()
    for _ in range(400):
        b = types.SimpleNamespace(port=rng.choice(("SRAM0", "EXT0", "SRAM3", "EXT9")),
                                  write=rng.random() < 0.5, len=rng.choice((0, 1, 3, 7, 15, 31)),
                                  size=rng.choice((2, 4)), prot=rng.randrange(8),
                                  resp=rng.choice(list(Resp)))
        memo.sample_burst(b)
        d = "write" if b.write else "read"
        n = b.len + 1
        plain.burst_len.sample(b.port, d, {1: "1", 2: "2", 4: "3-4", 8: "8", 16: "16"}.get(n, str(n)))
        plain.burst_size.sample(b.port, d, f"{1 << b.size}B")
        plain.resp.sample(b.port, d, b.resp.name)
        plain.axi_prot.sample(b.port, ("secure_user", "secure_priv", "nonsecure_user",
                                       "nonsecure_priv")[b.prot & 3])
    assert memo.to_dict() == plain.to_dict(), f"seed {seed}"
    assert len(memo._burst_memo) < 400, "shapes are memoised"


# ------------------------------------------------------------------ the job recorder
STREAM = 0x1000


def _device():
    dev = Device("ethos-u85-256", memory=Memory())
    dev.wait_reset()
    cov = BenchCoverage()
    dev.hooks.append(JobRecorder(dev, cov))
    return dev, cov


def _run(dev, words):
    dev.load_stream(STREAM, words)
    dev.start()
    return dev.run()


def _names(cov):
    return {k: v for k, v in cov.opcode.hits.items() if v}


def test_recorder_follows_branches_and_counts_commands():
    dev, cov = _device()
    words = (isa.encode("NPU_SET_IFM_PRECISION", activation_type=1)        # 0x00
             + isa.encode("NPU_SET_DMA0_LEN", addr=4)                       # 0x04
             + isa.encode("NPU_OP_BRANCH", branch_cond=0, branch_target=0x18)  # 0x0c
             + isa.encode("NPU_OP_IRQ", mask=1)                             # 0x14 skipped
             + isa.encode("NPU_SET_OFM_REGION", region=1)                   # 0x18
             + isa.encode("NPU_OP_STOP", mask=2)                            # 0x1c
             + isa.encode("NPU_SET_IFM_REGION", region=2))                  # 0x20
    stop = _run(dev, words)
    assert stop.kind.value == "npu_op_stop"
    assert _names(cov) == {"NPU_SET_IFM_PRECISION": 1, "NPU_SET_DMA0_LEN": 1, "NPU_OP_BRANCH": 1,
                           "NPU_SET_OFM_REGION": 1, "NPU_OP_STOP": 1}
    assert cov.job_end.hits["npu_op_stop"] == 1
    # resume after STOP up to the end of the queue: the trailing SET counts
    dev.apb_write(R.OFFSET["CMD"], R.get("CMD").encode(clear_irq=1))
    dev.start()
    assert dev.run().kind.value == "cmd_end_reached"
    assert cov.opcode.hits["NPU_SET_IFM_REGION"] == 1 and cov.opcode.hits["NPU_OP_STOP"] == 1
    assert cov.opcode.hits["NPU_SET_IFM_PRECISION"] == 1
    assert cov.job_end.hits["cmd_end_reached"] == 1


def test_recorder_samples_kernel_op_configuration():
    dev, cov = _device()
    words = (isa.encode("NPU_SET_IFM_PRECISION", activation_type=1, activation_precision=1,
                        activation_format=1)
             + isa.encode("NPU_SET_OFM_PRECISION", activation_type=0, activation_precision=0)
             + isa.encode("NPU_SET_ACTIVATION", activation_function="lut_tanh")
             + isa.encode("NPU_SET_OFM_SCALE", round_mode="truncate_to_zero", scale=1)
             + isa.encode("NPU_SET_IFM_SCALE", round_mode="natural", scale=1)
             + isa.encode("NPU_SET_ACC_FORMAT", acc_format="i48")
             + isa.encode("NPU_OP_ELEMENTWISE", elementwise_mode="max")
             + isa.encode("NPU_OP_POOL", pooling_mode="average")
             + isa.encode("NPU_OP_STOP", mask=1))
    _run(dev, words)                                # the ops may fail: sampled at issue
    assert cov.kernel_op_mode.hits["NPU_OP_ELEMENTWISE.max"] == 1
    assert cov.ifm.hits["int16/nhcwb16"] >= 1
    assert cov.ofm.hits["uint8/nhwc"] >= 1
    assert cov.activation.hits["lut_tanh"] >= 1
    assert cov.ofm_round.hits["truncate_to_zero"] >= 1
    assert cov.ifm_round.hits["natural"] == 1       # elementwise only
    assert cov.acc_format.hits["i48"] >= 1
    assert sum(cov.job_end.hits.values()) == 1


def test_recorder_bus_fault_and_parse_error():
    dev, cov = _device()
    dev.memory.inject_fault(STREAM, STREAM + 0x1000, Resp.SLVERR)
    stop = _run(dev, isa.encode("NPU_OP_STOP", mask=1))
    assert stop.error == "bus_status"
    assert cov.job_end.hits["bus_status"] == 1
    assert sum(v for k, v in cov.bus_fault.hits.items() if k.endswith("/rd_cmd")) == 1
    assert not _names(cov)                          # nothing was executed
    dev2, cov2 = _device()
    stop = _run(dev2, isa.encode("NPU_SET_OFM_REGION", region=1) + [0x3FF])   # reserved opcode
    assert stop.error == "cmd_parse_error" and cov2.job_end.hits["cmd_parse_error"] == 1
    assert _names(cov2) == {"NPU_SET_OFM_REGION": 1}


# ------------------------------------------------------------------ files and the run report
def test_flush_writes_the_process_file(tmp_path, monkeypatch):
    monkeypatch.setenv(C.ENV_DIR, str(tmp_path / "cov"))
    C.reset()
    cov = U.current()
    cov.opcode.sample("NPU_OP_STOP")
    path = C.flush()
    assert path is not None and path.parent == tmp_path / "cov"
    assert Coverage.load(path)["opcode"].hits["NPU_OP_STOP"] == 1
    monkeypatch.delenv(C.ENV_DIR)
    assert C.flush() is None                        # no folder: nothing written


def test_run_merges_prints_and_writes_report(tmp_path, capsys):
    from tb.core.run import report_coverage
    folder = tmp_path / "coverage"
    folder.mkdir()
    for i, (op, port) in enumerate((("NPU_OP_STOP", "SRAM0"), ("NPU_OP_IRQ", "EXT0"))):
        cov = BenchCoverage()
        cov.opcode.sample(op)
        cov.sample_burst(types.SimpleNamespace(port=port, write=False, len=0, size=4, prot=1,
                                               resp=Resp.OKAY))
        cov.save(folder / f"coverage-{100 + i}.json")
    out = tmp_path / "coverage.json"
    assert report_coverage(folder, out, {"sim": "icarus", "dut": "tlm"}) == out
    text = capsys.readouterr().out
    assert "functional coverage (2 process file(s)" in text
    assert "coverage report:" in text
    lines = [ln for ln in text.splitlines() if ln.startswith("  ")]
    assert len(lines) == len(BenchCoverage().points) + 1     # one a point, and the total
    rep = json.loads(out.read_text())
    assert rep["dut"] == "tlm"
    assert rep["points"]["opcode"]["covered"] == 2
    assert rep["points"]["axi_burst_len"]["hits"]["SRAM0/read/1"] == 1
    assert "NPU_OP_CONV" in rep["points"]["opcode"]["uncovered"]
    # no file at all: a note, no report
    empty = tmp_path / "none"
    empty.mkdir()
    assert report_coverage(empty, tmp_path / "c2.json", {"device": "ethos-u85"}, "tb.ethos_u85.coverage") is None
    assert capsys.readouterr().out.strip() == ("tb.run: functional coverage: no test sampled the ethos-u85 "
                                               "coverage model (tb.ethos_u85.coverage): no coverage file")
    # a device without a coverage model (k210-kpu): said so, no guess about scoreboards
    assert report_coverage(empty, tmp_path / "c3.json", {"device": "k210-kpu"}, None) is None
    assert capsys.readouterr().out.strip() == \
        "tb.run: functional coverage: none, the k210-kpu bench has no coverage model"


# ------------------------------------------------------------------ deferred (the scoreboard's)
def _deferred():
    dev = Device("ethos-u85-256", memory=Memory())
    dev.wait_reset()
    cov = BenchCoverage()
    rec = JobRecorder(dev, cov, deferred=True)
    dev.hooks.append(rec)
    return dev, cov, rec


ST = R.get("STATUS")
POOL_THEN_STOP = (isa.encode("NPU_SET_OFM_REGION", region=1) + isa.encode("NPU_OP_POOL", pooling_mode="max")
                  + isa.encode("NPU_OP_STOP", mask=1))


def test_deferred_counts_nothing_until_committed_and_nothing_with_a_mismatch():
    dev, cov, rec = _deferred()
    stop = _run(dev, POOL_THEN_STOP)
    assert not _names(cov) and not sum(cov.job_end.hits.values())
    pending = rec.take()
    assert pending and not rec.pending
    # the DUT stopped with cmd_parse_error where the model ran on: a mismatch, so no intent
    # point counts; job_end is the DUT's fault bit
    rec.commit(pending, ST.encode(cmd_parse_error=1, irq_raised=1), stop, mismatches=2)
    assert not _names(cov) and not sum(cov.kernel_op_mode.hits.values())
    assert cov.job_end.hits == {**{k: 0 for k in U.JOB_ENDS}, "cmd_parse_error": 1}
    # a clean job: every command, the op's mode, the reference's kind of stop
    rec.commit(pending, ST.encode(cmd_end_reached=0, irq_raised=1), stop, mismatches=0)
    assert cov.kernel_op_mode.hits["NPU_OP_POOL.max"] == 1 and cov.opcode.hits["NPU_OP_STOP"] == 1
    assert cov.job_end.hits["npu_op_stop"] == 1
    # no STATUS seen from the DUT: nothing
    before = dict(cov.opcode.hits)
    rec.commit(pending, None, stop, mismatches=0)
    assert cov.opcode.hits == before


def test_deferred_drops_the_operation_a_faulting_job_stopped_at():
    dev, cov, rec = _deferred()
    pool = next(d.offset for d in isa.iter_decode(POOL_THEN_STOP) if d.cmd.name == "NPU_OP_POOL")
    ops = dev.kernel_ops
    dev.kernel_ops = {k: (lambda *a: (_ for _ in ()).throw(NotImplementedError("refused"))) for k in ops}
    stop = _run(dev, POOL_THEN_STOP)
    assert stop.error == "cmd_parse_error" and stop.qread == pool
    status = ST.encode(cmd_parse_error=1, irq_raised=1, bus_status=0)
    pending = rec.take()
    assert any(off == pool for off, _, _ in pending)        # sampled at issue, then dropped
    rec.commit(pending, status, stop, mismatches=0)
    assert cov.opcode.hits["NPU_SET_OFM_REGION"] == 1
    assert cov.opcode.hits["NPU_OP_POOL"] == 0 and not sum(cov.kernel_op_mode.hits.values())
    assert cov.job_end.hits["cmd_parse_error"] == 1 and cov.job_end.hits["npu_op_stop"] == 0
    # a bus fault the DUT reported: interface x channel from its STATUS
    rec.commit([], ST.encode(bus_status=1, faulting_interface=1, faulting_channel=8), stop, mismatches=1)
    assert cov.bus_fault.hits["ext/wr_ofm"] == 1 and cov.job_end.hits["bus_status"] == 1
