"""Share of a cocotb bench run's time per bench component, from a ``TB_PROFILE`` file
(tb/core/profiling.py: cProfile, in CPU time, of the job phase inside the simulator process).

    python -m tools.sim_profile run.prof --wall 12.3 --cycles 40000

``--wall``: the phase's length in the profile's clock (the bench JSON's ``cpu_s``). Each
component is the time of its coroutines' resumes by cocotb's task loop (cProfile's cumulative
time of the coroutine called from ``coroutine.send``: the handle reads, writes and triggers it
makes are its own), with the work it hands to a listener (a burst to the scoreboard, the
scoreboard's to the coverage and its reference TLM, a lean subordinate's samples to the AXI
monitor it feeds) moved to the listener's component (``COMPONENTS``: by source file, first
match). The rest of cocotb's time (GPI callback entry,
scheduler, trigger dispatch) is split over the components in proportion to their resumes.
What cProfile does not see is the simulator itself (the phase minus all Python time). Also:
GPI callbacks (the simulator calling into Python: cocotb's ``GPITrigger._react``) and
coroutine resumes per simulated cycle. The profiler slows Python down by a factor of about
1.5-2.5, so read shares, not seconds.
"""
from __future__ import annotations

import argparse
import pstats
import sys

# (component, path fragments of the coroutine's source file); first match wins
COMPONENTS = (
    ("AXI monitors", ("tb/agents/axi/monitor.py",)),
    ("AXI channel models", ("tb/agents/axi/", "cocotbext/axi/", "cocotb_bus/")),
    ("APB agent", ("tb/agents/apb.py",)),
    ("scoreboard", ("tb/ethos_u85/scoreboard.py",)),
    ("coverage", ("tb/core/coverage.py", "tb/ethos_u85/coverage.py")),
    ("TLM behind the pins", ("tb/ethos_u85/tlm_pins.py",)),
    ("TLM (reference / DUT model)", ("/tlm/",)),
    ("driver, env, test", ("tb/ethos_u85/", "tb/core/")),
    ("clock (Python coroutine)", ("cocotb/clock.py",)),
)
SCHED = "cocotb scheduler (split by resumes)"
SIMULATOR = "simulator (outside Python)"
ORDER = [c for c, _ in COMPONENTS] + ["other Python", SIMULATOR]
# components whose functions another component's coroutine calls: their time is theirs (a fed
# AXI monitor is called by the lean subordinate's coroutine)
_LISTENERS = ("AXI monitors", "scoreboard", "coverage", "TLM (reference / DUT model)")
_RESUMERS = ("<method 'send' of 'coroutine' objects>", "<method 'throw' of 'coroutine' objects>")


def component_of(filename: str) -> str:
    f = filename.replace("\\", "/")
    for name, frags in COMPONENTS:
        if any(fr in f for fr in frags):
            return name
    return "other Python"


def shares(prof_path: str, wall_s: float, cycles: float = 0.0,
           plain_wall_s: "float | None" = None) -> dict:
    """Per component: its coroutines' time (cumulative time of every resume by cocotb's task
    loop, so the handle reads and triggers they make are theirs), plus a share of the rest of
    cocotb's time (scheduler, trigger dispatch) in proportion to its resumes; the simulator
    is *wall_s* (the profiled phase) minus all Python time. With *plain_wall_s* (the same
    phase without the profiler) the simulator time is taken as measured under the profiler
    and the Python time as the rest of *plain_wall_s* (the profiler slows only Python down),
    each component keeping its proportion of it.

    Returns {"rows": [(component, share of wall, seconds, resumes)], "gpi", "resumes",
    "gpi_per_cycle", "resumes_per_cycle", "python_s", "sim_s"}."""
    st = pstats.Stats(prof_path).stats          # (file, line, name) -> (cc, nc, tt, ct, callers)
    python = sum(v[2] for v in st.values())
    t_comp: dict = {}
    resumes: dict = {}
    gpi = 0
    for (fname, _line, func), (_cc, nc, _tt, _ct, callers) in st.items():
        if func == "_react" and fname.endswith("_gpi_triggers.py"):
            gpi += nc
        for (_cf, _cl, cfunc), (_c, n, _t, ct) in callers.items():
            if cfunc in _RESUMERS:
                comp = component_of(fname)
                t_comp[comp] = t_comp.get(comp, 0.0) + ct
                resumes[comp] = resumes.get(comp, 0) + n
    # work a coroutine hands to a listener (a burst to the scoreboard, the scoreboard to the
    # coverage and its reference TLM) belongs to the listener's component
    for (fname, _line, _func), (*_, callers) in st.items():
        comp = component_of(fname)
        if comp not in _LISTENERS:
            continue
        for (cf, _cl, cfunc), (_c, _n, _t, ct) in callers.items():
            src = component_of(cf)
            if src != comp and cfunc not in _RESUMERS and src in t_comp:
                t_comp[src] -= ct
                t_comp[comp] = t_comp.get(comp, 0.0) + ct
    # (a listener called from a coroutine nested in another component's task takes its time
    # from the caller's bucket, which did not get it: clamp at zero)
    t_comp = {c: max(0.0, t) for c, t in t_comp.items()}
    n_res = sum(resumes.values())
    sched = max(0.0, python - sum(t_comp.values()))
    sim = max(0.0, wall_s - python)
    scale, span = 1.0, max(wall_s, python)
    if plain_wall_s:
        py_plain = max(0.0, plain_wall_s - sim)
        scale, span = (py_plain / python if python else 1.0), max(plain_wall_s, sim)
    rows = []
    for comp in ORDER:
        if comp == SIMULATOR:
            rows.append((comp, sim / span, sim, 0))
            continue
        t = t_comp.get(comp, 0.0) + (sched * resumes.get(comp, 0) / n_res if n_res else 0.0)
        if comp == "other Python" and not n_res:
            t += sched
        if t:
            rows.append((comp, t * scale / span, t * scale, resumes.get(comp, 0)))
    return {"rows": rows, "gpi": gpi, "resumes": n_res, "python_s": python * scale, "sim_s": sim,
            "gpi_per_cycle": gpi / cycles if cycles else None,
            "resumes_per_cycle": n_res / cycles if cycles else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("prof")
    ap.add_argument("--wall", type=float, required=True, help="wall seconds of the profiled phase")
    ap.add_argument("--cycles", type=float, default=0.0)
    ap.add_argument("--plain-wall", type=float, default=None,
                    help="wall seconds of the same phase without the profiler")
    a = ap.parse_args(argv)
    s = shares(a.prof, a.wall, a.cycles, a.plain_wall)
    for comp, share, t, n in s["rows"]:
        print(f"{comp:36s} {100 * share:5.1f} %  {t:7.2f} s  resumes {n}")
    print(f"GPI callbacks {s['gpi']}, resumes {s['resumes']}, per cycle "
          f"{s['gpi_per_cycle'] or 0:.2f} / {s['resumes_per_cycle'] or 0:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
