"""Expected failures that say what was verified (device-neutral).

cocotb's own ``xfail`` turns any AssertionError into "failed as expected" and writes a plain
pass into the JUnit XML. The benches use this instead: a test that has *checked* that the
DUT failed in exactly the expected way calls ``expected_failure(reason)``, which

* appends ``{"test": full name, "reason": ...}`` to the file ``TB_XFAIL_FILE`` (the runner,
  tb/core/run.py, sets it next to results.xml), and
* skips the test with the message ``expected failure: <reason>``,

and the runner then marks those test cases in the JUnit XML (``<skipped type="expected
failure" message=...>`` and a property ``expected_failure``) and counts them in its summary
line (``N tests, M failed, K skipped (X expected failures)``). A test that fails in any other
way is a plain failure.
"""
from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

XFAIL_ENV = "TB_XFAIL_FILE"
XFAIL_TYPE = "expected failure"


def current_test() -> str:
    """Full cocotb name of the running test ('' outside a regression)."""
    try:
        import cocotb.regression as reg
        return reg._manager_inst._test.fullname          # noqa: SLF001 - no public accessor
    except AttributeError:
        return ""


def expected_failure(reason: str):
    """Record the running test as a verified expected failure and end it (skipped)."""
    import pytest

    path = os.environ.get(XFAIL_ENV)
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"test": current_test(), "reason": reason}) + "\n")
    pytest.skip(f"{XFAIL_TYPE}: {reason}")


def read_records(path: Path) -> dict:
    """full test name -> reason, from an expected-failure file (missing: empty)."""
    out = {}
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return out
    for ln in lines:
        try:
            rec = json.loads(ln)
            out[rec["test"]] = rec["reason"]
        except (ValueError, KeyError, TypeError):
            continue
    return out


def mark_results(results: Path, records: dict) -> int:
    """Mark the skipped test cases of the JUnit file *results* that *records* names (full name
    ``classname.name``) as expected failures; return how many were marked."""
    if not records:
        return 0
    tree = ET.parse(results)
    n = 0
    for tc in tree.iter("testcase"):
        reason = records.get(f"{tc.get('classname')}.{tc.get('name')}")
        sk = tc.find("skipped")
        if reason is None or sk is None:
            continue
        sk.set("type", XFAIL_TYPE)
        sk.set("message", f"{XFAIL_TYPE}: {reason}")
        props = tc.find("properties")
        if props is None:
            props = ET.SubElement(tc, "properties")
        ET.SubElement(props, "property", name="expected_failure", value=reason)
        n += 1
    tree.write(results, encoding="utf-8", xml_declaration=True)
    return n


def expected_failures(results: Path) -> list:
    """[(full name, reason)] of the test cases marked as expected failures in *results*."""
    try:
        root = ET.parse(results)
    except (OSError, ET.ParseError):
        return []
    return [(f"{tc.get('classname')}.{tc.get('name')}", sk.get("message", ""))
            for tc in root.iter("testcase")
            for sk in [tc.find("skipped")] if sk is not None and sk.get("type") == XFAIL_TYPE]


def failures(results: Path) -> list:
    """[(full name, first line of the failure message)] of the failed test cases."""
    try:
        root = ET.parse(results)
    except (OSError, ET.ParseError):
        return []
    out = []
    for tc in root.iter("testcase"):
        f = tc.find("failure")
        if f is None:
            f = tc.find("error")
        if f is not None:
            msg = (f.get("message") or f.text or "").strip().splitlines()
            out.append((f"{tc.get('classname')}.{tc.get('name')}", msg[0] if msg else ""))
    return out


def outcomes(results: Path) -> dict:
    """full name -> 'passed' | 'failed' | 'skipped' | 'xfail' of every test case."""
    try:
        root = ET.parse(results)
    except (OSError, ET.ParseError):
        return {}
    out = {}
    for tc in root.iter("testcase"):
        sk = tc.find("skipped")
        if tc.find("failure") is not None or tc.find("error") is not None:
            kind = "failed"
        elif sk is not None:
            kind = "xfail" if sk.get("type") == XFAIL_TYPE else "skipped"
        else:
            kind = "passed"
        out[f"{tc.get('classname')}.{tc.get('name')}"] = kind
    return out
