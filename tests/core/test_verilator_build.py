"""tb/core/simtools.py's Verilator build settings (issue 18), checked on the commands the runner
would run (nothing is built here):

* ``test_build_command_visibility``: the build command carries the control file instead of
  cocotb's --public-flat-rw, and the file marks the top module's signals and every ``tlm_*``
  variable writable, every other signal readable;
* ``test_public_all_escape``: ``TB_VERILATOR_PUBLIC=all`` gives cocotb's own command back, and
  the build stamp differs (a build folder is rebuilt when the setting changes);
* ``test_makeflags``: the run-time library (VPI included) is optimised; a user's MAKEFLAGS is
  kept.
"""
from __future__ import annotations

import pytest

from tb.core import simtools
from tests.support import tool_missing


def _commands(monkeypatch, tmp_path, env_public: "str | None" = None) -> list:
    reason = simtools.sim_problem("verilator")
    if reason:
        tool_missing(reason)
    if env_public is None:
        monkeypatch.delenv("TB_VERILATOR_PUBLIC", raising=False)
    else:
        monkeypatch.setenv("TB_VERILATOR_PUBLIC", env_public)
    import os
    env = dict(os.environ)
    simtools.setup_verilator(env)
    monkeypatch.setenv("PATH", env["PATH"])
    runner = simtools.get_runner("verilator")
    seen = []
    monkeypatch.setattr(type(runner), "_execute", lambda self, cmds, cwd: seen.extend(cmds))
    src = tmp_path / "top.v"
    src.write_text("module top(input clk); endmodule\n")
    runner.build(sources=[src], hdl_toplevel="top", build_dir=tmp_path / "b", timescale=simtools.TIMESCALE)
    assert seen, "the runner ran no command"
    return seen


def test_build_command_visibility(monkeypatch, tmp_path):
    verilate = _commands(monkeypatch, tmp_path)[0]
    assert "--public-flat-rw" not in verilate
    vlt = tmp_path / "b" / "tb_public.vlt"
    assert str(vlt) in verilate and "--vpi" in verilate
    lines = vlt.read_text().splitlines()
    assert lines == ["`verilator_config",
                     'public_flat_rw -module "top" -var "*"',
                     'public_flat_rw -module "*" -var "tlm_*"',
                     'public_flat_rd -module "*" -var "*"']


def test_public_all_escape(monkeypatch, tmp_path):
    verilate = _commands(monkeypatch, tmp_path, "all")[0]
    assert "--public-flat-rw" in verilate
    assert not (tmp_path / "b" / "tb_public.vlt").exists()
    assert simtools.build_stamp("verilator", {"TB_VERILATOR_PUBLIC": "all"}) != \
        simtools.build_stamp("verilator", {})
    assert simtools.build_stamp("icarus", {}) == {}


@pytest.mark.parametrize("user", [None, "OPT_GLOBAL=-O0"])
def test_makeflags(monkeypatch, user):
    env = {"PATH": "/usr/bin:/bin"} if user is None else {"PATH": "/usr/bin:/bin", "MAKEFLAGS": user}
    simtools.verilator_makeflags(env)
    flags = env["MAKEFLAGS"].split()
    if user is None:
        assert "OPT_GLOBAL=-O2" in flags
    else:
        assert flags[0] == user and "OPT_GLOBAL=-O2" not in flags
