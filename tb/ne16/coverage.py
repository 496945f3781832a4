"""Functional coverage of the NE16 bench (on the shared engine tb/core/coverage.py).

Points (bins from the register table and the job decode, never retyped):
* one point per CONFIG0 field of the seed (plus the EXT rounding bit), sampled at each job
  start the scoreboard's model sees: every value of the field (RIGHT_SHIFT binned; the
  reserved NORM_BITS/QUANT_BITS value is not a bin, so it shows up as "other");
* ``kind x quant_bits``: filter mode (3x3, 3x3 depthwise, 1x1, linear) x output width;
* ``job_outcome``: done / rejected / aborted / cleared;
* ``tcdm_access``: direction x enabled bytes (1-4, 5-8, 9-16, 17-32, 33-36);
* ``tcdm_stall``: grant stall of each access (0, 1, 2-3, 4+ cycles);
* ``periph``: read/write x register of every peripheral transfer.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from tb.core.coverage import Coverage
from tlm.ne16 import job as J
from tlm.ne16 import registers as R

CONFIG0 = R.by_name("CONFIG0")
KINDS = ("3x3", "3x3_dw", "1x1", "linear")
SHIFT_BINS = ("0", "1-7", "8-15", "16-23", "24-31")
BYTE_BINS = ((4, "1-4"), (8, "5-8"), (16, "9-16"), (32, "17-32"), (36, "33-36"))
STALL_BINS = ((0, "0"), (1, "1"), (3, "2-3"), (1 << 30, "4+"))


def _bins(f) -> list:
    if f.name == "RIGHT_SHIFT":
        return list(SHIFT_BINS)
    if f.name in ("NORM_BITS", "QUANT_BITS"):
        return [str(v) for v in J.WIDTH_BITS]
    return [str(v) for v in range(1 << f.width)]


def _binned(value: int, table) -> str:
    for top, name in table:
        if value <= top:
            return name
    return table[-1][1]


def kind_of(cfg: J.JobConfig) -> str:
    if cfg.linear:
        return "linear"
    return {J.MODE_3X3: "3x3", J.MODE_3X3_DW: "3x3_dw", J.MODE_1X1: "1x1"}.get(cfg.filter_mode, "other")


class Ne16Coverage(Coverage):
    def __init__(self):
        super().__init__("ne16")
        for f in CONFIG0.fields:
            self.point(f"CONFIG0.{f.name}", _bins(f), f.description)
        self.cross("kind_x_quant_bits", [KINDS, [str(b) for b in J.WIDTH_BITS.values()]])
        self.point("job_outcome", ["done", "rejected", "aborted", "cleared"])
        self.cross("tcdm_access", [["read", "write"], [b for _, b in BYTE_BINS]])
        self.point("tcdm_stall", [b for _, b in STALL_BINS])
        self.cross("periph", [["read", "write"], [r.name for r in R.REGISTERS]])

    def sample_job(self, cfg: J.JobConfig) -> None:
        word = cfg.regs[CONFIG0.index]
        for f in CONFIG0.fields:
            v = f.get(word)
            if f.name == "RIGHT_SHIFT":
                v = "0" if v == 0 else SHIFT_BINS[1 + v // 8]
            self[f"CONFIG0.{f.name}"].sample(str(v))
        if cfg.quant_code in J.WIDTH_BITS:
            self["kind_x_quant_bits"].sample(kind_of(cfg), str(cfg.quant_bits))

    def sample_outcome(self, outcome: str) -> None:
        self["job_outcome"].sample(outcome)

    def sample_tcdm(self, write: bool, nbytes: int, stall: int) -> None:
        self["tcdm_access"].sample("write" if write else "read", _binned(nbytes, BYTE_BINS))
        self["tcdm_stall"].sample(_binned(stall, STALL_BINS))

    def sample_periph(self, write: bool, offset: int) -> None:
        r = R.by_offset(offset & (R.WINDOW - 1) & ~3)
        self["periph"].sample("write" if write else "read", r.name if r else "unmapped")

    def flush(self) -> "Path | None":
        """Write the counts to $TB_COVERAGE_DIR/coverage-<pid>.json (when set), the file the
        runner merges (tb/core/run.py report_coverage)."""
        d = os.environ.get("TB_COVERAGE_DIR")
        if not d:
            return None
        p = Path(d) / f"coverage-{os.getpid()}.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(self.to_dict()))
        return p


_CURRENT: "Ne16Coverage | None" = None


def current() -> Ne16Coverage:
    """The process's coverage model (cocotb runs every test of a module in one process)."""
    global _CURRENT
    if _CURRENT is None:
        _CURRENT = Ne16Coverage()
    return _CURRENT
