"""Test marks of the Ethos-U85 cocotb tests: which DUT runs (TB_DUT), timeouts, features the RTL
stand-in lacks (``rtl_unsupported``: checked expected failures), known bugs, skipping, parameter names, seeded RNGs."""
from __future__ import annotations

import functools
import os
import random

import cocotb

DUT = os.environ.get("TB_DUT", "rtl").lower()

TIMEOUT = dict(timeout_time=5, timeout_unit="ms")

# ---------------------------------------------------------------- RTL stand-in coverage
def rtl_unsupported(fn):
    """Decorator (below ``@cocotb.test``) of a test that may reach an operation the RTL
    stand-in does not claim. On DUT=rtl the test is an expected failure only if it raised
    ``rtl_support.Refused`` (the DUT stopped with cmd_parse_error) at exactly the operation
    ``rtl_support.first_unsupported`` names for the stream it ran, with the scoreboard clean
    (``rtl_support.judge``); it is then recorded as such (tb/core/expect.py: skipped with
    reason, marked in the JUnit XML, counted by tb.run). Any other failure, mismatch, timeout
    or fault fails the test; a pass is a pass (the operation is claimed now)."""
    from tb.core.expect import expected_failure
    from tb.ethos_u85.testlib.rtl_support import Refused, judge

    @functools.wraps(fn)
    async def wrapper(*args, **kwargs):
        try:
            await fn(*args, **kwargs)
        except Refused as e:
            if DUT != "rtl":
                raise
            expected_failure(judge(e))
    return wrapper


# ---------------------------------------------------------------- known bugs
# Disagreements between the stand-in and the TLM that the bench found and that are bugs in
# one of them (not TRM freedom): id -> (DUT that has it, description with test and TRM
# section, the text the failure message must contain). A test that hits one is marked with
# ``known_bug(id)``: on that DUT it is an expected failure only if it fails with that text
# (recorded by tb/core/expect.py); once the bug is fixed it fails loudly ("passed but a known
# bug was expected") and the entry goes.
KNOWN_BUGS: dict = {
}

def known_bug(bug: str, condition: bool = True):
    """Decorator (below ``@cocotb.test``) for a test that hits KNOWN_BUGS[*bug*]."""
    from tb.core.expect import expected_failure

    def deco(fn):
        if bug not in KNOWN_BUGS:
            return fn
        dut, what, text = KNOWN_BUGS[bug]

        @functools.wraps(fn)
        async def wrapper(*args, **kwargs):
            if DUT != dut or not condition:
                return await fn(*args, **kwargs)
            try:
                await fn(*args, **kwargs)
            except AssertionError as e:
                if text not in str(e):
                    raise
                expected_failure(f"known bug {bug} ({dut}): {what}")
            raise AssertionError(f"passed but known bug {bug} was expected: delete it from KNOWN_BUGS")
        return wrapper
    return deco

def skip_now(reason: str) -> None:
    """Skip the running test. ``cocotb.test(skip=...)``/``cocotb.skipif`` are ignored for a
    test that a TESTS filter selects explicitly; this is not."""
    import pytest
    pytest.skip(reason)

def named(values, fmt=str) -> list:
    """cocotb.parametrize values named by *fmt* (cocotb numbers long strings instead)."""
    return [cocotb.Param(value=v, name=fmt(v)) for v in values]

def seeded_rng() -> random.Random:
    seed = random.getrandbits(32)
    cocotb.log.info("test seed %d", seed)
    return random.Random(seed)
