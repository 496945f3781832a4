"""A synchronous model run in lock step with the simulator (device-neutral): the model's
thread runs only while the simulator side waits, so every run interleaves the same way.

Used by the TLM-behind-pins adapters (tb/<device>/tlm_pins.py): each memory access of the
model suspends its thread until the bus agent has performed it on the pins.
"""
from __future__ import annotations

import threading
from typing import Callable


class Abort(BaseException):
    """Thrown into the device's thread to abandon the operation in flight. A BaseException,
    so the device's own error handling (``except Exception``) does not turn it into STATUS."""


class LockstepThread:
    """Runs a blocking callable in a thread that only ever runs while the simulator waits.

    ``start()`` runs the callable until it calls ``call(request)`` (from inside the thread)
    or returns, and gives back ``("call", request)``, ``("done", result)``,
    ``("error", exception)`` or ``("aborted", None)``. ``reply(value)`` makes the pending
    ``call`` return *value* and runs the thread to its next stop; ``abort()`` makes it raise
    ``Abort`` instead. The simulator side blocks while the thread runs, so no code runs in
    parallel with the simulation and the interleaving is the same on every run.
    """

    def __init__(self, fn: Callable[[], object], name: str = "tlm"):
        self.fn = fn
        self._go = threading.Event()
        self._back = threading.Event()
        self._reply = None
        self._msg = None
        self.done = False
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)

    def _main(self) -> None:
        try:
            msg = ("done", self.fn())
        except Abort:
            msg = ("aborted", None)
        except BaseException as e:  # noqa: BLE001 - handed to the simulator side
            msg = ("error", e)
        self.done = True
        self._msg = msg
        self._back.set()

    def _wait(self):
        self._back.wait()
        self._back.clear()
        return self._msg

    def start(self):
        self.thread.start()
        return self._wait()

    def call(self, request):
        """From inside the thread: hand *request* to the simulator side and wait."""
        self._msg = ("call", request)
        self._back.set()
        self._go.wait()
        self._go.clear()
        kind, value = self._reply
        if kind == "abort":
            raise Abort()
        return value

    def reply(self, value):
        self._reply = ("value", value)
        self._go.set()
        return self._wait()

    def abort(self) -> None:
        if self.done or not self.thread.is_alive():
            return
        msg = None
        while not self.done:
            self._reply = ("abort", None)
            self._go.set()
            msg = self._wait()
            if msg[0] != "call":
                break
