"""The device registry: every NPU of the project is one `DeviceInfo`.

A device package `tlm/<package>/__init__.py` defines `DEVICE = DeviceInfo(...)`; the registry
finds it by scanning the subpackages of `tlm` (nothing device-specific is listed here).
Heavy parts are named as "module:attribute" strings and imported only when used, so
listing the devices stays cheap and `tlm` never imports the bench.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any


class UnknownDevice(LookupError):
    pass


def resolve(ref: str) -> Any:
    """Import "package.module:attr" and return the attribute."""
    mod, _, attr = ref.partition(":")
    obj = importlib.import_module(mod)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class BenchInfo:
    """How the cocotb bench builds and runs a device (all paths relative to the repository)."""
    test_modules: tuple[str, ...]              # cocotb test modules ("tb.<device>.tests.test_x")
    tlm_toplevel: str                          # port-only shell with the TLM behind it (DUT=tlm)
    tlm_sources: tuple[str, ...]
    rtl_toplevel: "str | None" = None          # the open stand-in (DUT=rtl), if there is one
    rtl_sources: "str | None" = None           # folder of *.v, or a sources.f file list
    extra: dict = field(default_factory=dict)  # device-specific runner settings


@dataclass(frozen=True)
class DeviceInfo:
    name: str                                  # trace / CLI / make name: "ethos-u85", "ne16", ...
    title: str                                 # one line for listings
    configs: tuple[str, ...]
    default_config: str
    trace_target: str                          # "module:callable(config: str) -> TraceTarget"
    registers: "str | None" = None             # "module:attr" of the register table
    bench: "BenchInfo | None" = None
    package: str = ""                          # filled in by discovery

    def make_target(self, config: "str | None" = None):
        cfg = config or self.default_config
        if cfg not in self.configs:
            raise UnknownDevice(f"{self.name} has no configuration {cfg!r} (configurations: "
                                f"{', '.join(self.configs)})")
        return resolve(self.trace_target)(cfg)


_DEVICES: "dict[str, DeviceInfo] | None" = None


def devices() -> dict[str, DeviceInfo]:
    """Every registered device by name (discovered once)."""
    global _DEVICES
    if _DEVICES is None:
        import tlm
        found: dict[str, DeviceInfo] = {}
        for m in pkgutil.iter_modules(tlm.__path__):
            if not m.ispkg or m.name == "core":
                continue
            info = getattr(importlib.import_module(f"tlm.{m.name}"), "DEVICE", None)
            if isinstance(info, DeviceInfo):
                if info.name in found:
                    raise RuntimeError(f"device name {info.name!r} registered twice "
                                       f"(tlm.{m.name} and {found[info.name].package})")
                found[info.name] = DeviceInfo(**{**info.__dict__, "package": f"tlm.{m.name}"})
        _DEVICES = dict(sorted(found.items()))
    return _DEVICES


def get(name: str) -> DeviceInfo:
    d = devices()
    if name not in d:
        raise UnknownDevice(f"unknown device {name!r} (devices: {', '.join(d) or 'none'})")
    return d[name]
