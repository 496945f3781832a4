"""Generated files kept in the repository: which are out of date, and the ``--check`` / write
command line every generator (tools/gen_rtl_regs.py, tools/gen_dtpu_rtl.py) shares."""
from __future__ import annotations

import argparse
import filecmp
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def stale(files: "dict[Path, str]") -> list[Path]:
    """Files of ``{path: text}`` that are missing or differ from *text*."""
    return [p for p, text in files.items() if not p.is_file() or p.read_text() != text]


def main(tool: str, description: str, generate, argv=None) -> int:
    """``tool [--check]``: write the files ``generate()`` returns that changed, or with
    ``--check`` only list the stale ones on stderr (exit 1 if any)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--check", action="store_true", help="only check that the files are current")
    args = ap.parse_args(argv)
    files = generate()
    bad = stale(files)
    if args.check:
        for p in bad:
            print(f"{tool}: {p.relative_to(REPO)} is out of date (run python -m tools.{tool})", file=sys.stderr)
        return 1 if bad else 0
    for p in bad:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(files[p])
        print(f"{tool}: wrote {p.relative_to(REPO)}")
    return 0


def same_tree(a: Path, b: Path, ignore: "tuple[str, ...]" = ()) -> bool:
    """Folders `a` and `b` hold the same files, byte for byte (names in `ignore` left out)."""
    cmp = filecmp.dircmp(a, b, ignore=list(ignore))
    if cmp.left_only or cmp.right_only or cmp.diff_files or cmp.funny_files:
        return False
    same = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    return not (same[1] or same[2]) and all(same_tree(a / d, b / d, ignore) for d in cmp.common_dirs)
