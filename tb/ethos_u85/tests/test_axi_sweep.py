"""AXI subordinate latency / backpressure / read-reordering sweep (issue 6: "backpressure and
latency sweeps").

Each sweep point configures the bench's AXI memories (tb/axi.py ``AxiMemory.configure``:
fixed or random per-burst response latency, random READY/VALID backpressure, reads of
different ARIDs served out of order) and runs two jobs through the pins with the scoreboard
on (reference TLM, every AXI write, STATUS, QREAD, IRQ):

* ``dma``: two random 2D DMA copies SRAM <-> EXT; destination bytes against the TRM
  pseudocode (tlm/ethos_u85/dma_reference.py);
* ``net``: a Vela network (catalog ``add_bcast_relu``: ELEMENTWISE with two IFMs, so the RTL
  stand-in reads on two ARIDs at once), every output byte against the reference TLM.

Besides the job's own checks, each point checks that the setting took effect on the pins
(from the subordinates' burst records): every read burst took at least the configured
minimum latency from AR to its last beat and every write at least the write latency from AW
to B; bursts of one ARID completed in AR order; without reordering no burst overtook an older
one; with reordering, when the DUT had reads of two ARIDs pending often enough (8 picks),
some burst overtook an older one. The
DUT=tlm adapter issues one transaction with one ID at a time, so reordering has no
opportunity there (the test says so in its log).

``AXI_SWEEP=all`` adds more points (longer latencies, backpressure 0.6).
"""
from __future__ import annotations

import os

import cocotb

from tb.ethos_u85.env import Env
from tb.ethos_u85.testlib.marks import named, seeded_rng
from tb.ethos_u85.testlib.memmap import STREAM_ADDR, program_regions
from tb.ethos_u85.testlib.netjob import run_network, vela_model
from tb.ethos_u85.testlib.regs import ST_BUS, ST_PARSE, status_fields
from tb.ethos_u85.testlib.streams import check_bytes, dma_case, dma_cmds, dma_expect, enc, fill_random, span

SWEEP_NET = os.environ.get("AXI_SWEEP_NET", "add_bcast_relu")

# name -> AxiMemory.configure arguments
POINTS = {
    "lat8": dict(latency=8, write_latency=8),
    "lat_rand": dict(latency=(4, 40), write_latency=(2, 12)),
    "reorder": dict(latency=(1, 24), write_latency=0, reorder=True),
    "bp_lat_reorder": dict(latency=(2, 16), write_latency=(0, 6), reorder=True, backpressure=0.3),
}
if os.environ.get("AXI_SWEEP", "") == "all":
    POINTS.update({
        "lat64": dict(latency=64, write_latency=32),
        "bp60_reorder": dict(latency=(0, 8), reorder=True, backpressure=0.6),
        "reorder_only": dict(latency=0, reorder=True),
    })


def _min_latency(spec) -> int:
    if spec is None:
        return 0
    if isinstance(spec, int):
        return spec
    return int(spec[0])


def check_bursts(env, point: dict) -> dict:
    """Pin-level evidence that the sweep point was applied; returns counts for the log."""
    T = env.clk_period_ns
    rd_min = _min_latency(point.get("latency"))
    wr_spec = point.get("write_latency", point.get("latency"))
    wr_min = _min_latency(wr_spec)
    bursts = env.axi.bursts()
    reads = [b for b in bursts if not b.write]
    writes = [b for b in bursts if b.write]
    assert reads and writes, f"{len(reads)} read and {len(writes)} write bursts seen"
    for b in reads:                     # whole cycles: sim times in ns carry float error
        took = round((b.end_ns - b.start_ns) / T)
        assert took >= rd_min, (f"read burst took {took:.0f} cycles from AR to its last "
                                        f"beat, the latency is >= {rd_min}: {b}")
    for b in writes:
        took = round((b.end_ns - b.start_ns) / T)
        assert took >= wr_min, f"write burst took {took:.0f} cycles from AW to B, latency >= {wr_min}: {b}"
    # same ARID: completion order == AR order; count overtakes across IDs
    overtakes = 0
    by_port: dict = {}
    for b in reads:                                # in completion order
        by_port.setdefault(b.port, []).append(b)
    for port, seq in by_port.items():
        last_start: dict = {}
        for i, b in enumerate(seq):
            assert b.start_ns >= last_start.get(b.id, -1.0), \
                f"{port}: reads of ARID {b.id} completed out of AR order ({b})"
            last_start[b.id] = b.start_ns
            overtakes += any(o.start_ns > b.start_ns and o.id != b.id for o in seq[max(0, i - 16):i])
    stats = env.axi.stats
    if point.get("reorder"):
        if stats["multi_id_picks"] >= 8:
            assert stats["reordered"] > 0 and overtakes > 0, \
                f"{stats['multi_id_picks']} picks among several ARIDs but no read overtook another: {stats}"
    else:
        assert stats["reordered"] == 0 and overtakes == 0, f"reads reordered without reordering: {stats}"
    return dict(reads=len(reads), writes=len(writes), overtakes=overtakes, **stats)


async def sweep_env(dut, point: dict, seed: int) -> Env:
    env = Env(dut, reference_model=True)
    await env.start()
    env.axi.configure(seed=seed, **point)
    return env


@cocotb.parametrize(point=named(list(POINTS)), job=named(["dma", "net"]))
@cocotb.test(timeout_time=2000, timeout_unit="ms")
async def test_axi_sweep(dut, point, job):
    """One sweep point (latency / backpressure / reordering) x one job (DMA or a Vela
    network); scoreboard, hand-expected DMA bytes or TLM outputs, and pin-level evidence of
    the setting (see the module docstring)."""
    cfg = POINTS[point]
    rng = seeded_rng()
    env = await sweep_env(dut, cfg, rng.getrandbits(16))
    if job == "dma":
        await program_regions(env, (rng.randrange(3), rng.randrange(3)))
        shadow: dict = {}
        cases = [dma_case(rng, "2d", min_length=40) for _ in range(2)]
        words = []
        for p in cases:
            lo, hi = span(p, "src")
            fill_random(env, rng, lo, hi - lo, shadow)
        for p in cases:
            words += dma_cmds(**p)
            dma_expect(shadow, **p)
        words += enc(("NPU_OP_STOP", dict(mask=0x1)))
        await env.load_stream(STREAM_ADDR, words)
        status = await env.run_job(max_cycles=200_000)
        assert status_fields(status)["irq_raised"] and not status & (ST_BUS | ST_PARSE), \
            f"STATUS 0x{status:08x}"
        for p in cases:
            lo, hi = span(p, "dst")
            check_bytes(env, shadow, lo - 16, hi + 16, f"DMA {p} under {point}")
    else:
        res = await run_network(env, vela_model(SWEEP_NET), rng)
        cocotb.log.info("%s: %d output bytes match the TLM; %d AXI beats; ops %s", res.name,
                        res.output_bytes, res.beats, res.ops)
    counts = check_bursts(env, cfg)
    cocotb.log.info("sweep %s/%s: %s%s", point, job, counts,
                    "" if counts["multi_id_picks"] or not cfg.get("reorder") else
                    " (the DUT never had reads of two ARIDs outstanding: nothing to reorder)")
    env.finish()
