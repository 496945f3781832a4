"""Functional coverage engine of the benches (device-neutral): cover points, crosses,
per-process files, a merged report.

A small coverage model of our own (no dependency):

* ``CoverPoint`` - named bins (strings) with a hit count each; a bin is covered when its count
  reaches the point's ``goal``. A sampled value outside the bins is tallied under ``other``
  (reported, never counted as coverage), so an unexpected value is visible and does not inflate
  the percentage.
* ``Cross`` - a cover point whose bins are the product of axes (``"a/b/c"``), minus the
  combinations an ``exclude`` predicate rejects (illegal or impossible ones).
* ``Coverage`` - a collection of points; ``to_dict``/``from_dict`` (JSON), ``merge``, a
  one-line-per-point ``summary`` and a machine-readable ``report`` (per point: bins, hits,
  covered, percentage and the uncovered bins). The total is the mean of the points'
  percentages (every point weighs the same).

A device's coverage model is a ``Coverage`` subclass in its bench package (the Ethos-U85's:
tb/ethos_u85/coverage.py). Per process: ``current(factory)`` is the process's model (built by
*factory* at the first call). With ``TB_COVERAGE_DIR`` set (tb/core/run.py sets it), it is
written to ``$TB_COVERAGE_DIR/coverage-<pid>.json`` by ``flush()`` and at exit;
``merge_files`` (tb/core/run.py) merges the files of a run from their own point definitions,
so the runner needs no device model.

Pure Python: no cocotb import (tb/core/run.py and pytest use it outside a simulator).
"""
from __future__ import annotations

import atexit
import itertools
import json
import os
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable, Sequence

FORMAT = "tb-coverage/1"


# ============================================================================ the model
class CoverPoint:
    """Named bins with hit counts; values outside the bins go to ``other``."""
    kind = "point"

    def __init__(self, name: str, bins: Iterable, doc: str = "", goal: int = 1):
        if goal < 1:
            raise ValueError("goal must be >= 1")
        self.name = name
        self.doc = doc
        self.goal = goal
        self.hits: dict[str, int] = {str(b): 0 for b in bins}
        if not self.hits:
            raise ValueError(f"cover point {name}: no bins")
        self.other: Counter = Counter()

    def sample(self, value) -> None:
        key = str(value)
        if key in self.hits:
            self.hits[key] += 1
        else:
            self.other[key] += 1

    @property
    def bins(self) -> int:
        return len(self.hits)

    @property
    def covered(self) -> int:
        g = self.goal
        return sum(1 for h in self.hits.values() if h >= g)

    @property
    def samples(self) -> int:
        return sum(self.hits.values()) + sum(self.other.values())

    @property
    def percent(self) -> float:
        return 100.0 * self.covered / self.bins

    def uncovered(self) -> list[str]:
        return [b for b, h in self.hits.items() if h < self.goal]

    def to_dict(self) -> dict:
        return {"kind": self.kind, "doc": self.doc, "goal": self.goal, "bins": dict(self.hits),
                "other": dict(sorted(self.other.items()))}

    def merge_dict(self, d: dict) -> None:
        """Add the counts of a serialised point (bins unknown here are added)."""
        for b, h in d.get("bins", {}).items():
            self.hits[b] = self.hits.get(b, 0) + int(h)
        for b, h in d.get("other", {}).items():
            self.other[b] += int(h)


class Cross(CoverPoint):
    """Bins are the product of *axes* (each a sequence of bin names) joined with ``/``, minus
    the combinations for which *exclude(tuple)* is true. ``sample(a, b, ...)``."""
    kind = "cross"

    def __init__(self, name: str, axes: Sequence[Sequence], doc: str = "", goal: int = 1,
                 exclude: "Callable[[tuple], bool] | None" = None, axis_names: Sequence[str] = ()):
        combos = [tuple(str(v) for v in c) for c in itertools.product(*axes)]
        if exclude is not None:
            combos = [c for c in combos if not exclude(c)]
        super().__init__(name, ("/".join(c) for c in combos), doc, goal)
        self.axis_names = tuple(axis_names)

    def sample(self, *values) -> None:      # type: ignore[override]
        super().sample("/".join(map(str, values)))

    def to_dict(self) -> dict:
        d = super().to_dict()
        if self.axis_names:
            d["axes"] = list(self.axis_names)
        return d


class Coverage:
    """A set of cover points and crosses."""

    def __init__(self, name: str = "coverage"):
        self.name = name
        self.points: dict[str, CoverPoint] = {}

    def add(self, point: CoverPoint) -> CoverPoint:
        if point.name in self.points:
            raise ValueError(f"cover point {point.name} defined twice")
        self.points[point.name] = point
        return point

    def point(self, name: str, bins: Iterable, doc: str = "", goal: int = 1) -> CoverPoint:
        return self.add(CoverPoint(name, bins, doc, goal))

    def cross(self, name: str, axes: Sequence[Sequence], doc: str = "", goal: int = 1,
              exclude=None, axis_names: Sequence[str] = ()) -> Cross:
        return self.add(Cross(name, axes, doc, goal, exclude, axis_names))  # type: ignore[return-value]

    def __getitem__(self, name: str) -> CoverPoint:
        return self.points[name]

    def __iter__(self):
        return iter(self.points.values())

    # ---- serialisation / merge
    def to_dict(self) -> dict:
        return {"format": FORMAT, "name": self.name,
                "points": {p.name: p.to_dict() for p in self}}

    @classmethod
    def from_dict(cls, d: dict) -> "Coverage":
        if d.get("format") != FORMAT:
            raise ValueError(f"not a coverage file of format {FORMAT}: {d.get('format')!r}")
        cov = cls(d.get("name", "coverage"))
        for name, pd in d["points"].items():
            cov.add(point_from_dict(name, pd))
        return cov

    def merge(self, other: "Coverage | dict") -> "Coverage":
        """Add *other*'s counts into this model (points unknown here are added)."""
        if isinstance(other, Coverage):
            other = other.to_dict()
        for name, pd in other["points"].items():
            if name in self.points:
                self.points[name].merge_dict(pd)
            else:
                self.add(point_from_dict(name, pd))
        return self

    def save(self, path: "str | os.PathLike", indent: "int | None" = None) -> Path:
        """Write the JSON atomically (a reader never sees half a file)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=indent))
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: "str | os.PathLike") -> "Coverage":
        return cls.from_dict(json.loads(Path(path).read_text()))

    # ---- results
    @property
    def total_percent(self) -> float:
        pts = list(self)
        return sum(p.percent for p in pts) / len(pts) if pts else 0.0

    def report(self, **extra) -> dict:
        """Machine-readable report: per point the bins with hits, covered/bins, percentage,
        the uncovered bins and values seen outside the bins."""
        pts = {}
        for p in self:
            pts[p.name] = {"kind": p.kind, "doc": p.doc, "goal": p.goal, "bins": p.bins,
                           "covered": p.covered, "percent": round(p.percent, 2),
                           "samples": p.samples, "hits": dict(p.hits),
                           "uncovered": p.uncovered(), "other": dict(sorted(p.other.items()))}
            if getattr(p, "axis_names", ()):
                pts[p.name]["axes"] = list(p.axis_names)
        return {"format": FORMAT + "-report", "name": self.name, **extra,
                "total_percent": round(self.total_percent, 2),
                "bins": sum(p.bins for p in self), "covered": sum(p.covered for p in self),
                "points": pts}

    def summary(self) -> list[str]:
        """One line a point: name, covered/bins, percentage, samples; then the total."""
        w = max([len(p.name) for p in self] + [5])
        lines = [f"{p.name:<{w}}  {p.covered:>4}/{p.bins:<4} {p.percent:6.1f}%  "
                 f"({p.samples} samples{', %d other' % sum(p.other.values()) if p.other else ''})"
                 for p in self]
        lines.append(f"{'total':<{w}}  {sum(p.covered for p in self):>4}/"
                     f"{sum(p.bins for p in self):<4} {self.total_percent:6.1f}%  (mean of the points)")
        return lines


def point_from_dict(name: str, d: dict) -> CoverPoint:
    """A point (or cross) rebuilt from its serialised form, bins in the stored order."""
    bins = list(d.get("bins", {})) or ["?"]
    if d.get("kind") == "cross":
        p: CoverPoint = Cross(name, (bins,), d.get("doc", ""), int(d.get("goal", 1)),
                              axis_names=d.get("axes", ()))
    else:
        p = CoverPoint(name, bins, d.get("doc", ""), int(d.get("goal", 1)))
    p.hits = dict.fromkeys(d.get("bins", {}), 0)
    p.merge_dict(d)
    return p


# ============================================================================ per process
_CURRENT: "Coverage | None" = None
ENV_DIR = "TB_COVERAGE_DIR"


def current(factory: "Callable[[], Coverage] | None" = None) -> Coverage:
    """This process's coverage model, built by *factory* at the first call (written at exit
    when TB_COVERAGE_DIR is set)."""
    global _CURRENT
    if _CURRENT is None:
        if factory is None:
            raise RuntimeError("no coverage model yet: the first current() call names its factory")
        _CURRENT = factory()
        if os.environ.get(ENV_DIR):
            atexit.register(flush)
    return _CURRENT


def reset() -> None:
    """Forget this process's model (the next ``current(factory)`` builds a new one)."""
    global _CURRENT
    _CURRENT = None


def flush() -> "Path | None":
    """Write this process's coverage to $TB_COVERAGE_DIR/coverage-<pid>.json (cumulative:
    each call rewrites the file)."""
    folder = os.environ.get(ENV_DIR)
    if not folder or _CURRENT is None:
        return None
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        return _CURRENT.save(Path(folder) / f"coverage-{os.getpid()}.json")
    except OSError:
        return None


def merge_files(paths: Iterable["str | os.PathLike"]) -> Coverage:
    """The points of the first coverage file in *paths* with the counts of every file added
    (each file holds its points' definitions: bins in order, docs, goals)."""
    cov = None
    for p in paths:
        d = json.loads(Path(p).read_text())
        if cov is None:
            cov = Coverage.from_dict(d)
        else:
            cov.merge(d)
    if cov is None:
        raise ValueError("no coverage file")
    return cov
