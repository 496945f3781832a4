"""Profile one phase of a cocotb run (device-neutral): ``TB_PROFILE=path.prof``.

``with profiled():`` runs its body under ``cProfile`` when ``TB_PROFILE`` names a file and
writes the ``pstats`` file there at the end (nothing otherwise). cProfile sees the Python
the simulator calls back into (cocotb's scheduler, every agent's coroutine: each resume
of a coroutine counts as one call) but not the simulator's own time, so wall time minus the
profiled time is the simulator's share. ``tools/bench.py`` reads the file and prints the
share of wall time per bench component.
"""
from __future__ import annotations

import contextlib
import cProfile
import os


@contextlib.contextmanager
def profiled(env_var: str = "TB_PROFILE"):
    path = os.environ.get(env_var)
    if not path:
        yield None
        return
    prof = cProfile.Profile()
    prof.enable()
    try:
        yield prof
    finally:
        prof.disable()
        prof.dump_stats(path)
