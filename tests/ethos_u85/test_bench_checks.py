"""The bench's checks of its own verdicts, without a simulator (issue 19):

* ``rtl_support.judge``: a refusal is an expected failure only at exactly the operation
  ``first_unsupported`` names, with a clean scoreboard;
* ``tb.core.expect``: expected failures recorded by the tests are marked in the JUnit XML
  and told apart from passes and plain skips;
* ``run_options.check_model_ref``: NPU_MODEL_REF keys, shapes and dtypes.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from tb.core import expect
from tb.ethos_u85.run_options import DEFAULT_NET, DEFAULT_NET_REF, check_model_ref
from tb.ethos_u85.testlib.rtl_support import Refused, first_unsupported, judge
from tb.ethos_u85.testlib.streams import dma_cmds, enc
from tlm.ethos_u85 import isa

MACS = 256
# a DMA (claimed) then an elementwise div (not claimed: rtl_support says so) then a stop
DIV = (dma_cmds(2, 0x10, 1, 0x30, 16)
       + enc(("NPU_OP_ELEMENTWISE", dict(elementwise_mode=int(isa.elementwise_mode.div))),
             ("NPU_OP_STOP", dict(mask=1))))
CLAIMED = dma_cmds(2, 0x10, 1, 0x30, 16) + enc(("NPU_OP_STOP", dict(mask=1)))


def _div_offset() -> int:
    return next(d.offset for d in isa.iter_decode(DIV) if d.cmd.name == "NPU_OP_ELEMENTWISE")


def _refused(words=DIV, offset=None, op="NPU_OP_ELEMENTWISE", mismatches=0) -> Refused:
    offset = _div_offset() if offset is None else offset
    return Refused(f"x: stopped with cmd_parse_error at {op} (command offset 0x{offset:x})", words=words,
                   macs=MACS, offset=offset, op=op, status=0, mismatches=mismatches)


def test_judge_accepts_only_the_named_operation():
    off, op, why = first_unsupported(DIV, MACS)
    assert (off, op) == (_div_offset(), "NPU_OP_ELEMENTWISE") and "div" in why
    assert f"0x{off:x}" in judge(_refused()) and "div" in judge(_refused())
    with pytest.raises(AssertionError, match="first operation the stand-in does not claim"):
        judge(_refused(offset=off - 4))
    with pytest.raises(AssertionError, match="first operation the stand-in does not claim"):
        judge(_refused(op="NPU_OP_POOL"))
    with pytest.raises(AssertionError, match="3 scoreboard mismatch"):
        judge(_refused(mismatches=3))
    with pytest.raises(AssertionError, match="no scoreboard"):
        judge(_refused(mismatches=None))
    with pytest.raises(AssertionError, match="claims every operation"):
        judge(_refused(words=CLAIMED, offset=0, op="NPU_OP_DMA_START"))


def _junit(path, cases) -> None:
    body = "".join(f'<testcase classname="m" name="{n}">{extra}</testcase>' for n, extra in cases)
    path.write_text(f'<?xml version="1.0"?><testsuites><testsuite name="s">{body}</testsuite></testsuites>')


def test_expected_failures_are_marked_and_not_passes(tmp_path):
    res, rec = tmp_path / "results.xml", tmp_path / "xf.jsonl"
    _junit(res, [("t_pass", ""), ("t_skip", '<skipped message="no"/>'), ("t_xf", "<skipped/>"),
                 ("t_fail", '<failure message="boom&#10;second line"/>')])
    rec.write_text(json.dumps({"test": "m.t_xf", "reason": "stopped at NPU_OP_CONV"}) + "\nnot json\n")
    assert expect.read_records(rec) == {"m.t_xf": "stopped at NPU_OP_CONV"}
    assert expect.mark_results(res, expect.read_records(rec)) == 1
    assert expect.outcomes(res) == {"m.t_pass": "passed", "m.t_skip": "skipped", "m.t_xf": "xfail",
                                    "m.t_fail": "failed"}
    assert expect.expected_failures(res) == [("m.t_xf", "expected failure: stopped at NPU_OP_CONV")]
    assert expect.failures(res) == [("m.t_fail", "boom")]
    assert expect.read_records(tmp_path / "none.jsonl") == {}


def test_expected_failure_records_and_skips(tmp_path, monkeypatch):
    rec = tmp_path / "xf.jsonl"
    monkeypatch.setenv(expect.XFAIL_ENV, str(rec))
    with pytest.raises(pytest.skip.Exception, match="expected failure: why"):
        expect.expected_failure("why")
    assert [json.loads(ln)["reason"] for ln in rec.read_text().splitlines()] == ["why"]


def test_model_ref_checked(tmp_path):
    from tlm.ethos_u85.vela import load

    model = load(DEFAULT_NET)
    good = check_model_ref(model, DEFAULT_NET_REF)
    assert sorted(good) == ["input0", "input1", "output0", "output1"]

    def bad(match, **arrays):
        p = tmp_path / "r.npz"
        np.savez(p, **arrays)
        with pytest.raises(ValueError, match=match) as e:
            check_model_ref(model, p)
        assert "\n" not in str(e.value)

    bad(r"missing \['output1'\]", **{k: v for k, v in good.items() if k != "output1"})
    bad(r"unknown \['output2'\]", **good, output2=good["output0"])
    bad(r"unknown \['in0'\]", **{("in0" if k == "input0" else k): v for k, v in good.items()})
    bad("output0 is int8 \\[7\\]", **dict(good, output0=np.zeros(7, np.int8)))
    bad("input1 is uint8", **dict(good, input1=good["input1"].astype(np.uint8)))
    p = tmp_path / "junk.npz"
    p.write_bytes(b"junk")
    with pytest.raises(ValueError, match="not a readable .npz"):
        check_model_ref(model, p)
