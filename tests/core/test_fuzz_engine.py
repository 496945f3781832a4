"""The device-neutral fuzz engine (tlm/core/fuzz.py) on a toy target: deterministic cases,
an exception escaping a device call is a violation, the watchdog turns a hang into one, the
CPU limit flags a slow case, and the summary counts it all (no device model involved)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from tlm.core import fuzz


@dataclass
class ToyCase:
    seed: int
    index: int
    gen: str
    value: int = 0
    notes: list = field(default_factory=list)


class ToySession:
    def __init__(self, case, res, guard):
        self.case, self.res, self.guard = case, res, guard

    def go(self):
        v = self.case.value
        if self.case.gen == "raise":
            self.guard.call("Toy.step", lambda: 1 // 0)
        elif self.case.gen == "hang":
            self.guard.call("Toy.spin", time.sleep, 10)
        elif self.case.gen == "slow":
            self.guard.call("Toy.busy", lambda: sum(range(3_000_000)))
        if v % 7 == 3:
            self.res.violation(f"toy invariant: value {v} is 3 mod 7")
        self.res.outcome = "STOP"

    def close(self):
        pass

    def where(self):
        return f" in toy case value {self.case.value}"


class ToyTarget:
    device = "toy"
    generators = {"plain": (lambda rng, c: setattr(c, "value", int(rng.integers(0, 1000))), 1.0)}

    def prepare(self):
        return []

    def notes(self):
        return ["toy target"]

    def new_case(self, seed, index, gen):
        return ToyCase(seed, index, gen)

    def extend_case(self, rng, case):
        case.notes.append(int(rng.integers(0, 10)))

    def session(self, case, res, guard):
        return ToySession(case, res, guard)

    def describe(self, case, res=None):
        return f"toy case {case.index}: {case.value}"

    def ci_problem(self):
        return None


TOY = ToyTarget()


def test_cases_are_pure_functions_of_seed_and_index():
    a, b = fuzz.make_case(TOY, 5, 3), fuzz.make_case(TOY, 5, 3)
    assert a == b and a.gen == "plain"
    assert [fuzz.make_case(TOY, 5, i).value for i in range(5)] != [fuzz.make_case(TOY, 6, i).value
                                                                   for i in range(5)]


def test_escaping_exception_is_a_violation_not_a_crash():
    r = fuzz.run_case(TOY, ToyCase(1, 0, "raise", value=1))
    assert r.outcome == "ABORTED" and len(r.violations) == 1
    assert r.violations[0].startswith("exception escaped Toy.step: ZeroDivisionError")


def test_wall_watchdog_reports_a_hang():
    t0 = time.perf_counter()
    r = fuzz.run_case(TOY, ToyCase(1, 0, "hang", value=1), wall_limit=0.3)
    assert time.perf_counter() - t0 < 5
    assert any(v.startswith("hang: case aborted") and "toy case value 1" in v for v in r.violations), r.violations


def test_cpu_limit_flags_a_slow_case():
    r = fuzz.run_case(TOY, ToyCase(1, 0, "slow", value=1), cpu_limit=1e-4)
    assert any(v.startswith("slow: the device took") for v in r.violations), r.violations


def test_run_and_report():
    s = fuzz.run("tests.core.test_fuzz_engine:TOY", seed=11, cases=200)
    bad = [fuzz.make_case(TOY, 11, i) for i in range(200)]
    want = sum(1 for c in bad if c.value % 7 == 3)
    assert s.cases == 200 and s.violating_cases == want > 0
    text = s.report()
    assert "toy target" in text and f"invariant violations: {want} in {want} cases" in text
    assert "reproduce: python -m tlm.core.fuzz --device tests.core.test_fuzz_engine:TOY --seed 11" in text
