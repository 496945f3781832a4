"""Shape checks of the stand-in's AXI bursts (tb.agents.axi.AxiBurst), for the tests that hold
its loaders and writers to multi-beat INCR runs (tb/ethos_u85/tests/test_rtl_kernels.py
test_conv_ifm_runs / test_conv_ofm_runs, tb/ethos_u85/tests/test_random_ops.py test_ofm_bursts).

Not a test module (tb.run collects ``test_*.py`` only).
"""
from __future__ import annotations

from tlm.ethos_u85.memory import Resp

BEAT = 16                                  # bytes a beat (AxSIZE 4)


def burst_error(b, window: int = 256) -> "str | None":
    """Why burst *b* is not a legal stand-in burst, or None: INCR of 16-byte beats with an
    OKAY response, at most 16 beats, inside one *window*-byte max_beats window (TRM
    3.3.1.18-21); a write moves strobed bytes only inside its beats, and every beat of it
    carries at least one strobed byte (a run covers exactly the lines it writes)."""
    if b.size != 4 or b.burst != 1 or b.resp != Resp.OKAY or b.beats > 16:
        return f"not an OKAY INCR burst of <= 16 16-byte beats: {b}"
    a0 = b.addr & ~(BEAT - 1)
    a1 = a0 + BEAT * b.beats
    if a0 // window != (a1 - 1) // window:
        return f"crosses a {window}-byte window: {b}"
    if b.write:
        lines = set()
        for addr, data in b.runs:
            if addr < a0 or addr + len(data) > a1:
                return f"strobed bytes 0x{addr:x}+{len(data)} outside the burst: {b}"
            lines.update(range((addr - a0) // BEAT, (addr + len(data) - 1 - a0) // BEAT + 1))
        if lines != set(range(b.beats)):
            return f"beats without a strobed byte ({sorted(set(range(b.beats)) - lines)}): {b}"
    return None
