"""tools/sim_profile.py: a bench run's wall time per component from a cProfile file.

A synthetic profile: an "AXI monitor" coroutine (code compiled under the file name
tb/agents/axi/monitor.py) resumed 50 times by ``send`` from a "cocotb task loop" (cocotb/task.py),
each resume handing work to a "scoreboard" function (tb/ethos_u85/scoreboard.py). Every share
must land where it belongs: the resumes counted, the listener's time moved to the scoreboard,
the simulator as the wall time Python did not use, and the shares summing to 100 %.
"""
from __future__ import annotations

import cProfile
import time

from tools import sim_profile


def _compile(src: str, filename: str, ns: dict) -> None:
    exec(compile(src, filename, "exec"), ns)  # noqa: S102 - test code with chosen file names


def test_component_of():
    assert sim_profile.component_of("/r/tb/agents/axi/monitor.py") == "AXI monitors"
    assert sim_profile.component_of("/r/tb/agents/axi/subordinate.py") == "AXI channel models"
    assert sim_profile.component_of("/v/site-packages/cocotbext/axi/stream.py") == "AXI channel models"
    assert sim_profile.component_of("/r/tb/ethos_u85/scoreboard.py") == "scoreboard"
    assert sim_profile.component_of("/r/tb/ethos_u85/coverage.py") == "coverage"
    assert sim_profile.component_of("/r/tb/ethos_u85/tlm_pins.py") == "TLM behind the pins"
    assert sim_profile.component_of("/r/tlm/ethos_u85/device.py") == "TLM (reference / DUT model)"
    assert sim_profile.component_of("/r/tb/agents/apb.py") == "APB agent"
    assert sim_profile.component_of("/elsewhere/x.py") == "other Python"


def test_shares_of_a_synthetic_run(tmp_path):
    ns: dict = {}
    _compile("def check(n):\n    return sum(range(n))\n", "/r/tb/ethos_u85/scoreboard.py", ns)
    _compile("import types\n"
             "@types.coroutine\n"
             "def _pause():\n    yield\n"
             "async def monitor(check):\n"
             "    while True:\n"
             "        sum(range(3000))\n"
             "        check(6000)\n"
             "        await _pause()\n", "/r/tb/agents/axi/monitor.py", ns)
    _compile("def loop(coro, n):\n"
             "    for _ in range(n):\n"
             "        coro.send(None)\n", "/v/cocotb/task.py", ns)
    coro = ns["monitor"](ns["check"])
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    ns["loop"](coro, 50)
    prof.disable()
    python = time.perf_counter() - t0
    coro.close()
    path = tmp_path / "run.prof"
    prof.dump_stats(path)
    s = sim_profile.shares(str(path), wall_s=2 * python, cycles=25)
    rows = {r[0]: r for r in s["rows"]}
    assert rows["AXI monitors"][3] == 50 and s["resumes"] == 50
    assert s["resumes_per_cycle"] == 2
    assert rows["scoreboard"][2] > rows["AXI monitors"][2] > 0      # check() does twice the work
    assert 0.3 < rows[sim_profile.SIMULATOR][1] < 0.7               # half the wall time
    assert abs(sum(r[1] for r in s["rows"]) - 1) < 0.02
