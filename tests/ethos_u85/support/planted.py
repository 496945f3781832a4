"""A TLM with a bug planted in a fast path, for ``TB_DEVICE_FACTORY``
(tests/ethos_u85/test_literal_model.py): NPU_OP_ELEMENTWISE ``shr`` rounds one too high in the
vectorised ``tlm.ethos_u85.ops.elementwise.compute`` (what the fast path, its lookup tables
and its plans evaluate). The literal ``elementwise_ref`` never calls it, so on DUT=tlm the
random kernel tests, whose scoreboard is the literal model, must fail; with the TLM as its
own reference the bug would be invisible."""
from __future__ import annotations

from tlm.ethos_u85.config import Policy
from tlm.ethos_u85.device import Device
from tlm.ethos_u85.ops import elementwise

_compute = elementwise.compute


def _shr_off_by_one(ctx, p, a, b):
    acc, rm = _compute(ctx, p, a, b)
    if p.mode == elementwise.SHR:
        acc = acc + 1
    return acc, rm


def shr_off_by_one(**kw) -> Device:
    """The device behind the pins with the planted bug (the pins' policy, as tb.ethos_u85.tlm_pins
    gives tlm.ethos_u85.device.Device)."""
    elementwise.compute = _shr_off_by_one
    kw.setdefault("policy", Policy().replace(apb_cycles=0))
    return Device(**kw)
