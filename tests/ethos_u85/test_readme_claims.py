"""README claims whose truth is in the code or the catalog (docs/claims.md lists every claim
and its test): each test reads the README sentence and checks its numbers against the
source they describe, so changing either alone fails."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_model_limits_are_the_policy_defaults():
    from tlm.ethos_u85.config import Policy
    p = Policy()
    m = re.search(r"by default (\d+)M OFM/IFM elements and 2\^(\d+) MACs per operation, (\d+) MiB of weight "
                  r"streams, (\d+) lines \((\d+) indexed\), (\d+) MiB and (\d+) 64-KiB pages per DMA, (\d+) "
                  r"pages written per kernel operation", _flat(README))
    assert m, "the README's model-limits sentence changed: update this test and docs/claims.md"
    elems, macs, wbytes, lines, ilines, dbytes, dpages, opages = map(int, m.groups())
    assert (elems << 20, 1 << macs, wbytes << 20) == (p.max_op_elements, p.max_op_macs, p.max_weight_bytes)
    assert (lines, ilines, dbytes << 20, dpages) == (p.dma_max_lines, p.dma_max_indexed_lines, p.dma_max_bytes,
                                                     p.dma_max_pages)
    assert opages == p.max_op_pages
    from tlm.ethos_u85.memory import PAGE_BITS
    assert 1 << PAGE_BITS == 64 << 10


def test_make_defaults_and_bounded_waits():
    make = (REPO / "Makefile").read_text()
    n = int(re.search(r"N=(\d+) streams by default", README).group(1))
    assert re.search(rf"^N\s*\?=\s*{n}$", make, re.M)
    mutants = int(re.search(r"MUTANTS=(\d+) sampled", README).group(1))
    assert re.search(rf"^MUTANTS\s*\?=\s*{mutants}$", make, re.M)
    from tb.core.env import EnvBase
    stall = int(re.search(r"`env\.stall_cycles` \(([\d,]+)\)", README).group(1).replace(",", ""))
    assert EnvBase.stall_cycles == stall


def test_sources_f_replaces_the_folder_scan(tmp_path, monkeypatch):
    """"put your design's file list in `sources.f` to run the same tests against it": DUT=rtl
    compiles exactly the listed files (comments skipped), not the folder's *.v."""
    from dataclasses import replace

    from tb.core import simtools
    from tlm.core import registry
    info = registry.get("ethos-u85")
    rtl = tmp_path / "rtl"
    rtl.mkdir()
    for name in ("ethosu85.v", "mine.v", "ignored.v"):
        (rtl / name).write_text("// stub\n")
    (rtl / "sources.f").write_text("# my design\nmine.v\n// the top last\nethosu85.v\n")
    fake = replace(info, bench=replace(info.bench, rtl_sources=str(rtl)))
    monkeypatch.setattr(simtools, "bench_of", lambda device: fake.bench)
    assert simtools.dut_sources("ethos-u85", "rtl") == [rtl / "mine.v", rtl / "ethosu85.v"]
    (rtl / "sources.f").unlink()                     # without it: the folder scan, the top last
    assert simtools.dut_sources("ethos-u85", "rtl") == [rtl / "ignored.v", rtl / "mine.v", rtl / "ethosu85.v"]


@pytest.mark.vela
def test_standin_claims_the_stated_share_of_the_catalog(vela_cache_dir):
    """"112 of the 124 catalog networks are claimed for ethos-u85-128 and -256": the networks whose every
    operation rtl_support claims (the bench's test_catalog_networks holds the stand-in to
    that claim on each)."""
    from tb.ethos_u85.testlib.rtl_support import first_unsupported
    from tests import nets
    from tests.nets import catalog
    from tlm.ethos_u85.config import get_config
    from tlm.ethos_u85.vela import load
    m = re.search(r"(\d+) of the (\d+) catalog networks (?:are claimed )?for ethos-u85-128 and -256", _flat(README))
    assert m, "the README's stand-in catalog figure changed"
    claimed, total = map(int, m.groups())
    assert len(catalog.NAMES) == total
    for accel in ("ethos-u85-128", "ethos-u85-256"):
        macs = get_config(accel).macs
        ok = sum(first_unsupported(load(nets.compiled(n, accel, "default", "raw", vela_cache_dir)).command_words,
                                   macs) is None for n in catalog.NAMES)
        assert ok == claimed, f"{accel}: the stand-in claims {ok} of {total} catalog networks"


def test_published_model_counts():
    """"the 17 real int8 and 16x8 models ... x 5 configurations ... = 85 cases ... 80
    bit-exact. The other 5 are tflm_dtln_noise_suppression on every configuration":
    test_published_model asserts each case (exact, or the documented disagreement)."""
    from tests.ethos_u85 import test_published_models as pm
    pm.require_models()
    m = re.search(r"the (\d+) real int8 and 16x8 models .*? x (\d+) configurations ethos-u85-128\.\.2048 = (\d+) "
                  r"cases, .*?\*\*(\d+) bit-exact\*\*\. The other (\d+) are `(\w+)` on every configuration",
                  _flat(README))
    assert m, "the README's published-model sentence changed"
    models, configs, cases, exact, other, name = m.groups()
    assert (int(models), int(configs)) == (len(pm.NAMES), len(pm.ACCELS))
    assert int(cases) == len(pm.NAMES) * len(pm.ACCELS) == int(exact) + int(other)
    assert set(pm.DISAGREEMENTS) == {name} and int(other) == len(pm.ACCELS)


def test_ci_script_and_make_test():
    """".ci/run installs iverilog, yosys and ccache with apt-get if they are missing, then runs
    make test"; "make test runs pytest with pytest-xdist on every core (TEST_JOBS=n ...),
    tests that read each other's files run on one worker (xdist_group)"."""
    ci = (REPO / ".ci" / "run").read_text()
    for tool in ("iverilog", "yosys", "ccache"):
        assert re.search(rf"command -v {tool} .*\|\| need\+=\({tool}\)", ci), tool
    assert 'apt-get install -y -qq "${need[@]}"' in ci and ci.rstrip().endswith("make test")
    make = (REPO / "Makefile").read_text()
    assert re.search(r"^TEST_JOBS \?= auto$", make, re.M)
    assert "pytest -q -n $(TEST_JOBS) --dist loadgroup tests" in make


def test_claims_table_names_existing_tests():
    """docs/claims.md: every `path::test` names a test function of that file and every path
    (or glob) exists, so the table cannot point at a renamed or deleted test."""
    text = (REPO / "docs" / "claims.md").read_text()
    rows = [ln for ln in text.splitlines() if re.match(r"\| \d+ \|", ln)]
    assert len(rows) >= 100
    refs = re.findall(r"((?:tests|tb)/[\w/*]+\.py)(?:::(test_\w+))?", "\n".join(rows))
    assert len(refs) > 150
    bad = []
    for path, name in refs:
        files = sorted(REPO.glob(path))
        if not files:
            bad.append(path)
        elif name and not re.search(rf"^(async )?def {name}\b", files[0].read_text(), re.M):
            bad.append(f"{path}::{name}")
    assert not bad, bad
    kinds = [ln.split("|")[3].strip() for ln in rows]
    assert set(kinds) <= {"T", "N", "C", "M", "N + T", "T + N", "N + C", "T + M"}, set(kinds)
