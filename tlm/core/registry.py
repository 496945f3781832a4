"""The device registry: every NPU of the project is one `DeviceInfo`.

A device package `tlm/<package>/__init__.py` defines `DEVICE = DeviceInfo(...)`; the registry
finds it by scanning the subpackages of `tlm` (nothing device-specific is listed here).
Heavy parts are named as "module:attribute" strings and imported only when used, so
listing the devices stays cheap and `tlm` never imports the bench (`BenchInfo` names bench
modules; only `tb` resolves them).

What a device provides (docs/architecture.md, "How to add a device"):

* `DeviceInfo`: name (the trace / CLI / `make sim DEVICE=` name), title, configurations and
  the default one, the trace target (its TLM behind `tlm.core.trace.TraceTarget`), the
  register table, the TLM factory, its fuzz target (optional), and `bench` if it has a cocotb
  bench;
* `BenchInfo`: the cocotb test modules, the HDL top level and sources of the port-only shell
  (DUT=tlm) and of the open stand-in (DUT=rtl, optional), include folders, Verilog macros per
  configuration (optional), the bench env, the pin-level trace adapter (`make sim TRACE=`)
  and optional runner options.

"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field, replace
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
    """How the cocotb bench builds and runs a device; paths are relative to the repository.

    `test_modules` are cocotb test modules; an entry ending in ".*" ("tb.ne16.tests.*")
    stands for every `test_*.py` module of that package. The shell (DUT=tlm) is the device's
    port list with the TLM driven from Python behind it; the stand-in (DUT=rtl) is optional.
    `rtl_sources` is a folder (every *.v/*.sv in it except the shell's files, the file named
    after the top level last) or a file list (`.f`: one path a line, relative to its folder);
    a `sources.f` inside the folder overrides the folder scan. `includes` default to the
    folders of the sources.

    `defines` ("module:callable(config) -> dict") gives the Verilog macros of a configuration
    (compiled into both tops, e.g. parameter defaults) and `parameters` ("module:callable(config,
    dut) -> dict") the top level's parameters for DUT=rtl or tlm; a configuration whose macros or
    parameters are not empty builds in its own folder (the default configuration in the plain
    one).

    `env` ("module:Class") is the bench env the device's tests build; `trace_adapter`
    ("module:callable(dut, config) -> adapter") drives a trace through the pins
    (tb/core/trace_player.py says what an adapter offers); `options` ("module:attr") adds
    device-specific runner options (tb/core/run.py, `RunOptions`). `coverage` names the module
    of the bench's functional-coverage model (None: the bench has none, and `make sim` says so
    instead of reporting coverage)."""
    test_modules: tuple[str, ...]
    tlm_toplevel: str
    tlm_sources: tuple[str, ...]
    rtl_toplevel: "str | None" = None
    rtl_sources: "str | None" = None
    includes: tuple[str, ...] = ()
    defines: "str | None" = None
    parameters: "str | None" = None
    env: "str | None" = None
    trace_adapter: "str | None" = None
    options: "str | None" = None
    coverage: "str | None" = None
    extra: dict = field(default_factory=dict)   # device-specific runner settings


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
    tlm_factory: "str | None" = None           # "module:callable(config, **kw)": the device model
    fuzz: "str | None" = None                  # "module:attr" of its FuzzTarget (tlm/core/fuzz.py)
    cli: "str | None" = None                   # "module:attr" of its npu-tlm Commands (tlm/core/cli.py)
    disasm: "str | None" = None                # "module:attr" of its `npu-tlm disasm` Disassembler (same)

    def check_config(self, config: "str | None") -> str:
        """`config` (default: the default configuration) if this device has it."""
        cfg = config or self.default_config
        if cfg not in self.configs:
            raise UnknownDevice(f"{self.name} has no configuration {cfg!r} (configurations: "
                                f"{', '.join(self.configs)})")
        return cfg

    def make_target(self, config: "str | None" = None):
        return resolve(self.trace_target)(self.check_config(config))

    def make_model(self, config: "str | None" = None, **kw):
        """The device's TLM (`tlm_factory`) in configuration `config`."""
        if self.tlm_factory is None:
            raise UnknownDevice(f"{self.name} registers no TLM factory")
        return resolve(self.tlm_factory)(self.check_config(config), **kw)


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
                found[info.name] = replace(info, package=f"tlm.{m.name}")
        _DEVICES = dict(sorted(found.items()))
    return _DEVICES


def default_device(need: str = "") -> str:
    """The device to use when none is named: the only registered one (with attribute `need`
    set, e.g. "bench" or "fuzz"); UnknownDevice when there is a choice to make."""
    names = [n for n, d in devices().items() if not need or getattr(d, need)]
    if len(names) != 1:
        raise UnknownDevice(f"name a device ({', '.join(names) or 'none registered'})")
    return names[0]


def get(name: str) -> DeviceInfo:
    d = devices()
    if name not in d:
        raise UnknownDevice(f"unknown device {name!r} (devices: {', '.join(d) or 'none'})")
    return d[name]
