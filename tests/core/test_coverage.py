"""The coverage engine (tb/core/coverage.py): points, crosses, files, merge, report."""
from __future__ import annotations

import json

import pytest

from tb.core import coverage as C
from tb.core.coverage import Coverage, CoverPoint, Cross


# ------------------------------------------------------------------ points and crosses
def test_point_bins_goal_other():
    p = CoverPoint("p", ["a", "b", "c"], goal=2)
    for v in ("a", "a", "b", "zz", "zz"):
        p.sample(v)
    assert p.hits == {"a": 2, "b": 1, "c": 0}
    assert p.other == {"zz": 2}                      # tallied, never covered
    assert p.covered == 1 and p.bins == 3 and p.samples == 5
    assert p.percent == pytest.approx(100 / 3)
    assert p.uncovered() == ["b", "c"]
    with pytest.raises(ValueError):
        CoverPoint("empty", [])
    with pytest.raises(ValueError):
        CoverPoint("nogoal", ["a"], goal=0)


def test_cross_product_and_exclude():
    x = Cross("x", (("s8", "s16"), ("nhwc", "nhcwb16"), (1, 2)),
              exclude=lambda c: c == ("s16", "nhwc", "2"), axis_names=("p", "f", "n"))
    assert x.bins == 7 and "s16/nhwc/2" not in x.hits
    x.sample("s8", "nhcwb16", 1)
    x.sample("s16", "nhwc", 2)                        # excluded: other
    assert x.hits["s8/nhcwb16/1"] == 1 and x.other == {"s16/nhwc/2": 1}
    assert x.covered == 1
    assert x.to_dict()["axes"] == ["p", "f", "n"] and x.to_dict()["kind"] == "cross"


def _model() -> Coverage:
    cov = Coverage("m")
    cov.point("p", ["a", "b"])
    cov.cross("x", (("0", "1"), ("r", "w")))
    return cov


def test_roundtrip_and_merge(tmp_path):
    a, b = _model(), _model()
    a["p"].sample("a")
    a["x"].sample(0, "r")
    b["p"].sample("a")
    b["p"].sample("q")
    b["x"].sample(1, "w")
    pa = a.save(tmp_path / "a.json")
    assert not list(tmp_path.glob("*.tmp"))          # written atomically
    back = Coverage.load(pa)
    assert back.to_dict() == a.to_dict()
    assert isinstance(back["x"], Cross)
    back.merge(b)
    assert back["p"].hits == {"a": 2, "b": 0} and back["p"].other == {"q": 1}
    assert back["x"].hits == {"0/r": 1, "0/w": 0, "1/r": 0, "1/w": 1}
    assert back["x"].covered == 2
    # a point only the other side knows is added
    c = Coverage("m")
    c.point("new", ["z"]).sample("z")
    back.merge(c.to_dict())
    assert back["new"].covered == 1
    with pytest.raises(ValueError):
        Coverage.from_dict({"format": "something-else", "points": {}})
    with pytest.raises(ValueError):
        back.point("p", ["a"])                       # defined twice


def test_report_and_summary():
    cov = _model()
    cov["p"].sample("a")
    cov["x"].sample(0, "r")
    cov["x"].sample(0, "bogus")
    rep = cov.report(sim="icarus")
    json.dumps(rep)                                  # machine-readable
    assert rep["sim"] == "icarus" and rep["format"] == C.FORMAT + "-report"
    assert rep["bins"] == 6 and rep["covered"] == 2
    assert rep["total_percent"] == pytest.approx((50 + 25) / 2)
    assert rep["points"]["p"]["uncovered"] == ["b"]
    assert rep["points"]["x"]["uncovered"] == ["0/w", "1/r", "1/w"]
    assert rep["points"]["x"]["other"] == {"0/bogus": 1}
    lines = cov.summary()
    assert len(lines) == 3
    assert lines[0].split()[:3] == ["p", "1/2", "50.0%"]
    assert "1 other" in lines[1]
    assert lines[-1].startswith("total") and "37.5%" in lines[-1]
