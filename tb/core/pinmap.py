"""Bind the bench to a design by TRM signal names, through a name map.

Every signal the bench touches (APB agent, AXI subordinates, Env's clock/reset/config pins,
Q-Channels, IRQ, and the TLM-behind-pins adapter) is looked up by its TRM chapter 5 name
(``CLK``, ``nRESET``, ``PADDR``, ``IRQ``, ``ARVALIDSRAM0``) through a ``PinMap``, which turns
that name into the path of a handle below the cocotb toplevel (``dut``). The default map is
the identity: the design's top-level ports carry the TRM names (the RTL stand-in and the
DUT=tlm shell do). Another netlist needs only another map, no bench edits.

A map is three things, all optional:

* ``pattern``: the path of a plain pin; ``{name}`` is the TRM name, ``{lname}`` the same in
  lower case (``nRESET`` -> ``nreset``). Default ``"{name}"``.
* ``axi_pattern``: the path of an AXI manager-port pin (TRM 5.8 suffix naming); ``{name}`` /
  ``{lname}`` the channel signal (``ARVALID`` / ``arvalid``), ``{port}`` / ``{lport}`` the port
  (``SRAM0`` / ``sram0``). Default ``"{name}{port}"``.
* ``pins``: explicit ``{TRM name: path}`` overrides (AXI pins by their full TRM name,
  ``ARVALIDSRAM0``); they win over the patterns. A path of ``null``/``None`` says the design
  has no such pin.

A path is dot-separated from the toplevel (``u_npu.PADDR``); a component may end in an index
(``bus[3]``). Where a map comes from, first match wins:

1. ``Env(dut, pinmap=...)`` / the ``pinmap=`` argument of the agents (a ``PinMap``, a dict
   as above, or a file path);
2. ``TB_PINMAP=path``: a ``.json`` file holding the dict above, or a ``.py`` file defining
   ``PINMAP`` (a dict or a ``PinMap``);
3. the identity map.

Example (``tests/pinmap_fixture``: a wrapper whose ports are lower case, the AXI ports
``m_<port>_<signal>``, the clock and reset renamed)::

    {"pattern": "{lname}", "axi_pattern": "m_{lport}_{lname}",
     "pins": {"CLK": "aclk", "nRESET": "aresetn"}}
"""
from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
from pathlib import Path

DEFAULT_PATTERN = "{name}"
DEFAULT_AXI_PATTERN = "{name}{port}"
_MISSING = object()
_INDEX = re.compile(r"^(?P<name>[^\[\]]+)((?:\[\d+\])*)$")


class PinMapError(Exception):
    """A map file that cannot be loaded or has an unknown key."""


class PinMap:
    """TRM signal name -> handle path below the toplevel (see the module docstring)."""

    def __init__(self, pattern: str = DEFAULT_PATTERN, axi_pattern: str = DEFAULT_AXI_PATTERN,
                 pins: "dict | None" = None, source: str = "identity"):
        self.pattern = pattern or DEFAULT_PATTERN
        self._warned: set = set()
        self.axi_pattern = axi_pattern or DEFAULT_AXI_PATTERN
        self.pins = dict(pins or {})
        self.source = source
        for pat in (self.pattern, self.axi_pattern):
            try:
                pat.format(name="N", lname="n", port="P", lport="p")
            except (KeyError, IndexError, ValueError) as e:
                raise PinMapError(f"pin map {source}: bad pattern {pat!r} ({e})") from None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, d: dict, source: str = "dict") -> "PinMap":
        unknown = set(d) - {"pattern", "axi_pattern", "pins", "comment"}
        if unknown:
            raise PinMapError(f"pin map {source}: unknown key(s) {sorted(unknown)} "
                              "(pattern, axi_pattern, pins)")
        pins = d.get("pins") or {}
        if not isinstance(pins, dict):
            raise PinMapError(f"pin map {source}: 'pins' must be an object of name: path")
        return cls(d.get("pattern") or DEFAULT_PATTERN, d.get("axi_pattern") or DEFAULT_AXI_PATTERN,
                   pins, source)

    @classmethod
    def load(cls, path) -> "PinMap":
        """A map from a ``.json`` file or a ``.py`` file defining ``PINMAP``."""
        p = Path(path).expanduser()
        if not p.is_file():
            raise PinMapError(f"pin map {path}: no such file")
        if p.suffix == ".py":
            spec = importlib.util.spec_from_file_location(f"_tb_pinmap_{abs(hash(str(p)))}", p)
            mod = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(mod)
            except Exception as e:  # noqa: BLE001 - reported as a map problem
                raise PinMapError(f"pin map {path}: {type(e).__name__}: {e}") from None
            obj = getattr(mod, "PINMAP", None)
            if isinstance(obj, PinMap):
                return obj
            if isinstance(obj, dict):
                return cls.from_dict(obj, str(p))
            raise PinMapError(f"pin map {path}: defines no PINMAP (dict or tb.core.pinmap.PinMap)")
        try:
            d = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            raise PinMapError(f"pin map {path}: {e}") from None
        if not isinstance(d, dict):
            raise PinMapError(f"pin map {path}: the file must hold one JSON object")
        return cls.from_dict(d, str(p))

    @classmethod
    def coerce(cls, spec) -> "PinMap":
        """A PinMap from a PinMap, a dict, a file path, or None (``current()``)."""
        if spec is None:
            return current()
        if isinstance(spec, PinMap):
            return spec
        if isinstance(spec, dict):
            return cls.from_dict(spec)
        return cls.load(spec)

    @property
    def is_identity(self) -> bool:
        return (self.pattern == DEFAULT_PATTERN and self.axi_pattern == DEFAULT_AXI_PATTERN
                and not self.pins)

    def __repr__(self) -> str:
        return (f"PinMap(pattern={self.pattern!r}, axi_pattern={self.axi_pattern!r}, "
                f"{len(self.pins)} override(s), source={self.source!r})")

    # ------------------------------------------------------------------ names -> paths
    def path(self, name: str) -> "str | None":
        """Path of plain pin *name* (``PADDR``), or None if the map says it does not exist."""
        if name in self.pins:
            return self.pins[name]
        return self.pattern.format(name=name, lname=name.lower(), port="", lport="")

    def axi_path(self, signal: str, port: str) -> "str | None":
        """Path of AXI pin *signal* of manager port *port* (``ARVALID``, ``SRAM0``)."""
        full = signal + port
        if full in self.pins:
            return self.pins[full]
        return self.axi_pattern.format(name=signal, lname=signal.lower(), port=port,
                                       lport=port.lower())

    # ------------------------------------------------------------------ paths -> handles
    @staticmethod
    def resolve(root, path: "str | None"):
        """The handle at dot-separated *path* below *root*, or None."""
        if not path:
            return None
        h = root
        for part in path.split("."):
            m = _INDEX.match(part)
            if m is None:
                return None
            h = getattr(h, m.group("name"), None) if _has(h, m.group("name")) else None
            if h is None:
                return None
            for idx in re.findall(r"\[(\d+)\]", part):
                try:
                    h = h[int(idx)]
                except (IndexError, KeyError, TypeError):
                    return None
        return h

    def get(self, dut, name: str, required: bool = False):
        """Handle of plain pin *name*; None if absent (``required``: AttributeError)."""
        path = self.path(name)
        h = self.resolve(dut, path)
        if h is None and required:
            raise AttributeError(self._missing(dut, name, path))
        if h is not None and "." in path:
            self._inside(name, path)
        return h

    def axi(self, dut, signal: str, port: str, required: bool = False):
        """Handle of AXI pin *signal* of *port*; None if absent."""
        path = self.axi_path(signal, port)
        h = self.resolve(dut, path)
        if h is None and required:
            raise AttributeError(self._missing(dut, signal + port, path))
        if h is not None and "." in path:
            self._inside(signal + port, path)
        return h

    def _inside(self, name: str, path: str) -> None:
        """A pin mapped inside the design: on a Verilator build where only the top level is
        writable (tb.core.simtools VISIBILITY) a bench write to it would be dropped without an
        error, so say so once per pin (reading it is fine)."""
        import cocotb
        from tb.core.simtools import restricted_visibility
        if name in self._warned or "verilator" not in (getattr(cocotb, "SIM_NAME", None) or "").lower() \
                or not restricted_visibility(os.environ):
            return
        self._warned.add(name)
        logging.getLogger("cocotb.tb.pinmap").warning(
            "pin %s maps inside the design (%s): this Verilator build makes only the top level "
            "writable, so if the bench drives it, rebuild with TB_VERILATOR_PUBLIC=all", name, path)

    def has(self, dut, name: str) -> bool:
        return self.get(dut, name) is not None

    def driver(self, dut, name: str):
        """What the TLM-behind-pins adapter writes to drive output *name*: the variable
        ``tlm_<leaf>`` next to the pin (the DUT=tlm shell copies each output from one, since
        Verilator does not keep VPI writes to a top-level output), else the pin itself."""
        path = self.path(name)
        return self._driver_at(dut, path)

    def axi_driver(self, dut, signal: str, port: str):
        return self._driver_at(dut, self.axi_path(signal, port))

    def _driver_at(self, dut, path):
        if not path:
            return None
        scope, _, leaf = path.rpartition(".")
        base = self.resolve(dut, scope) if scope else dut
        if base is not None:
            h = self.resolve(base, f"tlm_{leaf}")
            if h is not None:
                return h
        return self.resolve(dut, path)

    def _missing(self, dut, name, path) -> str:
        top = getattr(dut, "_name", type(dut).__name__)
        how = "" if self.is_identity else f" (pin map {self.source})"
        if path is None:
            return f"{top}: the pin map says there is no {name}{how}"
        return f"{top}: no signal {name} at {path!r}{how}"


def _has(h, name: str) -> bool:
    try:
        return hasattr(h, name)
    except Exception:  # noqa: BLE001 - a simulator lookup error is "absent"
        return False


_CURRENT: "dict[str, PinMap]" = {}


def current() -> PinMap:
    """The map named by ``TB_PINMAP`` (loaded once per path), else the identity."""
    spec = os.environ.get("TB_PINMAP", "").strip()
    if spec not in _CURRENT:
        _CURRENT[spec] = PinMap.load(spec) if spec else PinMap()
    return _CURRENT[spec]


IDENTITY = PinMap()
