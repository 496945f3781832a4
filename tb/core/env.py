"""What every device's bench env shares (device-neutral): the DUT and its pin map, which DUT
is under the pins (``TB_DUT``: rtl or tlm), the configuration (``NPU_CONFIG``), pins by name,
the clock, and the bounds of a wait for the DUT: ``stall_cycles`` (at most that many cycles
without bus activity while a device's driver waits for the DUT to finish; None: no bound but
the wait's own) and ``bus_activity()`` (one line about the last bus activity, for the report
of a hang).

A device's env (tb/<device>/env.py) subclasses ``EnvBase`` and adds its agents, reference
model and scoreboard; the runner (tb/core/run.py) sets ``TB_DEVICE``, ``TB_DUT`` and
``NPU_CONFIG`` for the tests.
"""
from __future__ import annotations

import logging
import os

from cocotb.clock import Clock

from tb.core.pinmap import PinMap


class EnvBase:
    # A wait for the DUT fails after this many cycles without a bus beat (a hang is a
    # verdict, not a stuck run); devices' drivers read it.
    stall_cycles: "int | None" = 100_000

    def __init__(self, dut, *, pinmap=None, dut_kind: "str | None" = None, config: "str | None" = None,
                 default_config: str = "", clk_period_ns: float = 10, log_name: str = "cocotb.tb.env"):
        self.dut = dut
        self.pinmap = PinMap.coerce(pinmap)
        self.log = logging.getLogger(log_name)
        self.dut_kind = (dut_kind or os.environ.get("TB_DUT", "rtl")).lower()
        self.config = config or os.environ.get("NPU_CONFIG") or default_config
        self.clk_period_ns = clk_period_ns
        self._pins: dict = {}
        self._clock_task = None

    def pin(self, name: str, required: bool = True):
        """The handle of pin *name* (a name of the device's port table) through the pin map;
        None if absent and not *required*."""
        h = self._pins.get(name)
        if h is None:
            h = self._pins[name] = self.pinmap.get(self.dut, name)
            if h is None:
                del self._pins[name]
        if h is None and required:
            return self.pinmap.get(self.dut, name, required=True)
        return h

    def drive(self, name: str, value: int) -> None:
        """Drive input pin *name* if the design has it."""
        h = self.pin(name, required=False)
        if h is not None:
            h.value = value

    def start_clock(self, handle) -> None:
        """Start a clock of ``clk_period_ns`` on *handle* (low first), toggled by cocotb's
        C++ clock in the GPI (``impl="gpi"``) on every simulator: no Python runs for the
        clock's edges (cocotb picks the Python coroutine clock on Icarus otherwise)."""
        self._clock_task = Clock(handle, self.clk_period_ns, unit="ns", impl="gpi").start(
            start_high=False)

    def bus_activity(self) -> str:
        """One line on the last bus activity (a device's env says more)."""
        return "no bus activity recorded"
