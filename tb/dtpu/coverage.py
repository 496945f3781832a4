"""Functional coverage of the DTPU bench (on the engine tb/core/coverage.py: CoverPoint/Cross/Coverage).

Every bin set comes from tlm/dtpu/contract.py and the configuration under test:

==================  ==========================================================================
``precision``       precision x signedness of every run (the configuration's built precisions)
``occupancy``       GROUP_ROWS (G) x groups output (NG) of every legal run: the array's rows
``weight_rows``     weight rows holding a non-zero weight (1..ROWS) of every legal run
``weight_columns``  weight columns holding a non-zero weight (1..COLUMNS)
``steps``           input vectors of a run: 0, 1, 2-15, 16+
``run_end``         CORE_ERRORS name of every run (NONE = legal)
``command``         every COMMANDS opcode x accepted/CMD_ERR x step/continuous mode
``fifo``            input arguments full (TREADY low with TVALID high) and emptied by a run,
                    output FIFO full (OARG0_STATUS.FULL) and empty, sink backpressure
``length_mode``     output packets cut by run end (hardware) or by OARG0_LENGTH (software)
==================  ==========================================================================
"""
from __future__ import annotations

import numpy as np

from tb.core.coverage import Coverage
from tlm.dtpu import contract as C


def _steps_bin(n: int) -> str:
    return "0" if n == 0 else "1" if n == 1 else "2-15" if n < 16 else "16+"


class DtpuCoverage(Coverage):
    def __init__(self, cfg: C.Config):
        super().__init__(f"dtpu-bench-{cfg.name}")
        self.cfg = cfg
        self.cross("precision", ([p.name for p in cfg.built], ("signed", "unsigned")),
                   "precision x SIGNED of every run")
        combos = [(g, ng) for g in range(1, cfg.rows + 1) for ng in range(1, cfg.rows // g + 1)]
        self.point("occupancy", (f"G{g}/NG{ng}" for g, ng in combos),
                   "GROUP_ROWS x groups output of every legal run")
        self.point("weight_rows", range(1, cfg.rows + 1), "rows with a non-zero weight")
        self.point("weight_columns", range(1, cfg.columns + 1), "columns with a non-zero weight")
        self.point("steps", ("0", "1", "2-15", "16+"), "input vectors of a run")
        reachable = [e.name for e in C.CORE_ERRORS
                     if not (e.name == "PRECISION_NOT_BUILT" and len(cfg.built) == len(C.PRECISIONS))
                     and not (e.name == "INPUT_TAIL" and all(cfg.words_per_vector(p) == 1 for p in cfg.built))]
        self.point("run_end", reachable, "how each run ended (errors this configuration can have)")
        self.cross("command", ([c.name for c in C.COMMANDS], ("ok", "cmd_err"), ("step", "continuous")),
                   "command x outcome x mode",
                   exclude=lambda c: (c[1] == "ok" and c[2] == "continuous"
                                      and c[0] in ("UPDATE_IN_ARG", "EXECUTE_STEP")))
        self.point("fifo", [f"{a.name}_full" for a in C.IN_ARGS] + ["INFIFO_emptied", "OUTFIFO_full",
                                                                    "OUTFIFO_empty", "sink_backpressure"],
                   "argument buffers and FIFOs full / empty")
        self.point("length_mode", ("hardware", "software"), "what ended each output packet")

    # ---- samplers
    def on_event(self, name: str, d: dict) -> None:
        if name == "command":
            self["command"].sample(d["name"], "cmd_err" if d["error"] else "ok",
                                   "continuous" if d["continuous"] else "step")
        elif name == "run":
            run, dec = d["run"], d["dec"]
            res = run.result
            self["run_end"].sample(C.CORE_ERRORS[res.error].name if res.error else
                                   C.CORE_ERRORS[dec.error].name)
            if dec.error:
                return
            self["precision"].sample(dec.precision.name, "signed" if dec.signed else "unsigned")
            self["occupancy"].sample(f"G{dec.groups}/NG{dec.out_groups}")
            self["steps"].sample(_steps_bin(res.steps))
            if res.steps and run.inputs:
                self["fifo"].sample("INFIFO_emptied")
            if res.weights is not None:
                self.on_weights(res.weights)

    def on_weights(self, wblock: np.ndarray) -> None:
        """(ROWS, COLUMNS) operands of a run's weight block."""
        nz = wblock != 0
        if nz.any():
            self["weight_rows"].sample(int(nz.any(axis=1).sum()))
            self["weight_columns"].sample(int(nz.any(axis=0).sum()))
