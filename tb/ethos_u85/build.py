"""What the bench runner (tb/core/run.py) needs to build the Ethos-U85 in a configuration.

DUT=rtl: the stand-in (rtl_stub/ethos_u85/ethosu85.v) is built for the configuration's MACS
(its CONFIG word, weight decoders and datapath width); the registry entry's
``BenchInfo.parameters`` names ``parameters`` below. The DUT=tlm shell has no parameters (the
TLM behind it takes the configuration from NPU_CONFIG)."""
from __future__ import annotations

from tlm.ethos_u85.config import get_config


def parameters(config: str, dut: str) -> dict:
    """Top-level parameters of module ethosu85 for *config* on *dut*."""
    return {"MACS": get_config(config).macs} if dut == "rtl" else {}
