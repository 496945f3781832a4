"""The Ethos-U85 stand-in's support claim over the whole Vela catalog, per simulator and
configuration (issue 17's "done when"): ``test_catalog_networks`` with ``KERNEL_NETS=all``
(every catalog network in the default and sram_only memory modes; claimed networks run to
their end with the scoreboard clean and outputs equal to the TLM's and LiteRT's, the others
stop with cmd_parse_error at exactly the operation rtl_support names), one run per
(simulator, configuration), ``--jobs`` of them at a time. Prints a table with the revision,
counts and times; the logs stay in ``--out``.

  python -m tools.sweep_rtl [--sims icarus,verilator] [--configs ethos-u85-128,ethos-u85-256]
                            [--jobs 2] [--nets all|name,name] [--out build/rtl-sweep]
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DONE = re.compile(r"(\d+) networks ran to their end, (\d+) refused as claimed \(([\w-]+), (\w+)\)")
SUMMARY = re.compile(r"tb\.run: (\d+) tests, (\d+) failed")


def cell(sim: str, config: str, nets: str, out: Path) -> dict:
    """One simulator run of test_catalog_networks; its log goes to out/<sim>-<config>.log."""
    log = out / f"{sim}-{config}.log"
    env = dict(os.environ, KERNEL_NETS=nets)
    cmd = [sys.executable, "-m", "tb.core.run", "--device", "ethos-u85", "--sim", sim, "--dut", "rtl",
           "--config", config, "--tests", "test_catalog_networks", "--waves", "0"]
    t0 = time.perf_counter()
    with log.open("w") as f:
        rc = subprocess.run(cmd, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT).returncode
    text = log.read_text(errors="replace")
    modes = {m.group(4): (int(m.group(1)), int(m.group(2))) for m in DONE.finditer(text)}
    s = SUMMARY.findall(text)
    tests, failed = (int(s[-1][0]), int(s[-1][1])) if s else (0, -1)
    return dict(sim=sim, config=config, rc=rc, modes=modes, tests=tests, failed=failed,
                minutes=(time.perf_counter() - t0) / 60, log=str(log))


def table(rows: list, rev: str) -> str:
    out = [f"Stand-in over the Vela catalog at {rev} (tools/sweep_rtl.py)", "",
           "| Simulator | Config | Mode | Ran clean | Stopped where claimed | Result | Minutes |",
           "|---|---|---|---:|---:|---|---:|"]
    for r in rows:
        ok = r["rc"] == 0 and r["failed"] == 0 and r["tests"] > 0
        for mode in ("default", "sram_only"):
            ran, refused = r["modes"].get(mode, ("-", "-"))
            out.append(f"| {r['sim']} | {r['config']} | {mode} | {ran} | {refused} | "
                       f"{'pass' if ok and mode in r['modes'] else 'FAIL'} | {r['minutes']:.0f} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", default="icarus,verilator")
    ap.add_argument("--configs", default="ethos-u85-128,ethos-u85-256")
    ap.add_argument("--jobs", type=int, default=2, help="cells run at the same time (default 2)")
    ap.add_argument("--nets", default="all", help="KERNEL_NETS: all, or comma-separated catalog names")
    ap.add_argument("--out", default=str(REPO / "build" / "rtl-sweep"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                         text=True).stdout.strip() or "?"
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "rtl_stub", "tb", "tlm"], cwd=REPO,
                           capture_output=True, text=True).stdout.strip()
    rev += " (+ uncommitted changes)" if dirty else ""
    cells = [(s, c) for s in args.sims.split(",") for c in args.configs.split(",")]
    with ThreadPoolExecutor(max(1, args.jobs)) as ex:
        rows = list(ex.map(lambda sc: cell(sc[0], sc[1], args.nets, out), cells))
    text = table(rows, rev)
    (out / "table.md").write_text(text + "\n")
    print(text)
    bad = [r for r in rows if not (r["rc"] == 0 and r["failed"] == 0 and r["tests"] > 0)]
    for r in bad:
        print(f"sweep_rtl: {r['sim']} {r['config']} failed (exit {r['rc']}); log {r['log']}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
