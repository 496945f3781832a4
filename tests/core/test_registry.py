"""The device registry (tlm/core/registry.py): discovery, look-ups, one clear error."""
import pytest

from tlm.core import registry


def test_discovery_and_lookup():
    devs = registry.devices()
    assert devs and all(d.package == f"tlm.{d.package.split('.')[1]}" for d in devs.values())
    for name, info in devs.items():
        assert registry.get(name) is info
        assert info.check_config(None) == info.default_config
    with pytest.raises(registry.UnknownDevice, match="unknown device 'nope' \\(devices: "):
        registry.get("nope")


def test_resolve_and_models():
    assert registry.resolve("tlm.core.registry:get") is registry.get
    for info in registry.devices().values():
        if info.tlm_factory:
            assert info.make_model() is not None


def test_default_device_needs_a_single_candidate():
    names = [n for n, d in registry.devices().items() if d.bench]
    if len(names) == 1:
        assert registry.default_device("bench") == names[0]
    else:
        with pytest.raises(registry.UnknownDevice, match="name a device"):
            registry.default_device("bench")


def test_bench_coverage_models_are_named_once():
    """BenchInfo.coverage names an importable module, and a bench whose package has a
    coverage module names it (the runner's "no coverage model" note would be wrong else)."""
    import importlib
    import importlib.util
    for name, info in registry.devices().items():
        if info.bench is None:
            continue
        pkg = f"tb.{info.package.split('.')[1]}"
        has = importlib.util.find_spec(f"{pkg}.coverage") is not None
        assert (info.bench.coverage is not None) == has, f"{name}: coverage={info.bench.coverage}"
        if info.bench.coverage:
            importlib.import_module(info.bench.coverage)
