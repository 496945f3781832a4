"""Replay a trace (docs/trace-format.md) through the K210 bench's pins: the device-neutral
player (tb/core/trace_player.py) on the K210 adapter (tb/k210_kpu/trace_adapter.py), for the
K210 tests that drive an env of their own."""
from __future__ import annotations

from tb.core.trace_player import play as core_play
from tb.k210_kpu.trace_adapter import K210PinTarget
from tlm.core.trace import ReplayResult, Trace


async def play(env, trace: Trace) -> ReplayResult:
    return await core_play(trace, K210PinTarget.of(env))
