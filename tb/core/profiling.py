"""Profile one phase of a cocotb run (device-neutral): ``TB_PROFILE=path.prof``.

``with profiled():`` runs its body under ``cProfile`` when ``TB_PROFILE`` names a file and
writes the ``pstats`` file there at the end (nothing otherwise). The profiler counts CPU time
(a busy shared machine stretches wall time, not CPU time). It sees the Python the simulator
calls back into (cocotb's scheduler, every agent's coroutine: each resume of a coroutine
counts as one call) but not the simulator's own time, so the process's CPU time minus the
profiled time is the simulator's share. ``tools/bench.py`` reads the file and prints the
share per bench component (tools/sim_profile.py).
"""
from __future__ import annotations

import contextlib
import cProfile
import os
import time


@contextlib.contextmanager
def profiled(env_var: str = "TB_PROFILE"):
    path = os.environ.get(env_var)
    if not path:
        yield None
        return
    prof = cProfile.Profile(time.process_time)
    prof.enable()
    try:
        yield prof
    finally:
        prof.disable()
        prof.dump_stats(path)
