"""Shared pieces of the cocotb job tests: the memory map, region programming, DMA streams and
an independent Python model of the DMA copy (TRM 3.10.4 pseudocode, byte loops), the
list of features the RTL stand-in does not implement and of known bugs, and the helpers of
the hostile-input tests (pin monitor, reset-window sync of the scoreboard's reference,
sticky-fault checks, kernel-operation streams).

Not a test module (tb.run collects ``test_*.py`` only).
"""
from __future__ import annotations

import itertools
import os
import random
from dataclasses import dataclass, field

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge

from tb.axi import _pin
from tlm import isa
from tlm import registers as R
from tlm.memory import Channel

DUT = os.environ.get("TB_DUT", "rtl").lower()
TIMEOUT = dict(timeout_time=5, timeout_unit="ms")

OFF = {r.ident: r.offset for r in R.iter_registers()}
STATUS_F = R.get("STATUS")

# STATUS bits (TRM 3.3.1.2)
ST_RUN, ST_IRQ, ST_BUS, ST_PARSE, ST_END = 0x1, 0x2, 0x4, 0x10, 0x20
# pmu_axi_channel (TRM) and dma_fault_src (faulting_interface)
CH_RD_CMD, CH_RD_M2M, CH_RD_M2M_IDX, CH_WR_M2M = 0, 4, 6, 9
IF_SRAM, IF_EXT = 0, 1

# ---------------------------------------------------------------- RTL stand-in coverage
# What rtl_stub/ethosu85.v (phase 1: control plane + DMA, including indexed and LUT-RAM
# DMA) does not implement, from its header and npu_cmd_decode.v (rtl_stub/README.md when it
# exists). Tests of these
# features are expected to fail on DUT=rtl (cocotb xfail), so they report "failed as expected"
# until the stand-in grows the feature, and then fail loudly ("passed but we expected a
# failure") so that the marker is removed.
RTL_UNSUPPORTED = {
    "kernel_ops": "kernel operations the stand-in lacks (NPU_OP_RESIZE, and the CONV/DEPTHWISE, "
                  "POOL and ELEMENTWISE configurations of rtl_stub/README.md stop with "
                  "cmd_parse_error)",
    # One key per kernel operation, for tests of a single op: delete the key when the stand-in
    # implements that op, and its tests must then pass. (NPU_OP_CONV and NPU_OP_DEPTHWISE:
    # rtl_stub/npu_conv.v; NPU_OP_POOL and NPU_OP_ELEMENTWISE: rtl_stub/npu_kernel.v)
    "NPU_OP_RESIZE": "NPU_OP_RESIZE (stops with cmd_parse_error)",
}


def rtl_unsupported(feature: str, condition: bool = True):
    """cocotb.xfail for DUT=rtl when the stand-in lacks *feature* (RTL_UNSUPPORTED key).
    A key that is no longer in the table (the feature exists now) marks nothing."""
    if feature not in RTL_UNSUPPORTED:
        return cocotb.xfail(False)
    return cocotb.xfail(DUT == "rtl" and condition,
                        reason=f"RTL stand-in does not implement {RTL_UNSUPPORTED[feature]}")


# ---------------------------------------------------------------- known bugs
# Disagreements between the stand-in and the TLM that the bench found and that are bugs in
# one of them (not TRM freedom): id -> (DUT that has it, description with test and TRM
# section). A test that hits one is marked with ``known_bug(id)``: an expected failure on that
# DUT until the bug is fixed, then it fails loudly ("passed but we expected a failure") and
# the entry goes.
KNOWN_BUGS: dict = {
}


def known_bug(bug: str, condition: bool = True):
    """cocotb.xfail on the DUT that has *bug* (KNOWN_BUGS key)."""
    if bug not in KNOWN_BUGS:
        return cocotb.xfail(False)
    dut, what = KNOWN_BUGS[bug]
    return cocotb.xfail(DUT == dut and condition, reason=f"known bug {bug} ({dut}): {what}")


# ---------------------------------------------------------------- memory map
SRAM_BASE = 0x00_1000_0000            # SRAM port group window
EXT_BASE = 0x01_6000_0000             # EXT port group window (above 4 GB: 40-bit addresses)
STREAM_ADDR = EXT_BASE + 0x0F_0000    # command stream (QCONFIG -> MEM_ATTR2, EXT)

MEM_ATTR = R.get("MEM_ATTR0")
# MEM_ATTR0..3: two SRAM and two EXT entries with distinct memtype/domain, so AxCACHE and
# AxDOMAIN tell which entry an access used.
MEM_ATTRS = (MEM_ATTR.encode(axi_port=0, memtype=0x3, mem_domain=0),
             MEM_ATTR.encode(axi_port=0, memtype=0xB, mem_domain=1),
             MEM_ATTR.encode(axi_port=1, memtype=0x6, mem_domain=2),
             MEM_ATTR.encode(axi_port=1, memtype=0xF, mem_domain=0))
# region -> MEM_ATTR index; region n's BASEP
REGION_ATTR = {0: 3, 1: 2, 2: 1, 3: 0, 4: 2, 5: 0, 6: 3, 7: 1}
REGION_BASE = {0: EXT_BASE + 0x1_0000, 1: EXT_BASE + 0x4_0000, 2: SRAM_BASE,
               3: SRAM_BASE + 0x4_0000, 4: EXT_BASE + 0x8_0000, 5: SRAM_BASE + 0x8_0000,
               6: EXT_BASE + 0xC_0000, 7: SRAM_BASE + 0xC_0000}
SRAM_REGIONS = tuple(r for r, a in REGION_ATTR.items() if a < 2)
EXT_REGIONS = tuple(r for r, a in REGION_ATTR.items() if a >= 2)


def regioncfg() -> int:
    return R.get("REGIONCFG").encode(**{f"region{r}": a for r, a in REGION_ATTR.items()})


async def program_regions(env, max_beats: "tuple[int, int] | None" = None, qconfig: int = 2) -> None:
    """The bench's memory map through the host driver's AXI set-up: MEM_ATTR0..3, REGIONCFG,
    BASEP0..7, AXI_SRAM/AXI_EXT (max_beats for SRAM and EXT: 0 = 64 B, 1 = 128 B,
    2 = 256 B bursts), then QCONFIG."""
    mb_s, mb_e = max_beats if max_beats is not None else (2, 2)
    axi = R.get("AXI_SRAM")
    await env.driver.setup_axi(
        MEM_ATTRS, regioncfg(),
        axi_sram=axi.encode(max_outstanding_read_m1=7, max_outstanding_write_m1=7, max_beats=mb_s),
        axi_ext=axi.encode(max_outstanding_read_m1=15, max_outstanding_write_m1=15, max_beats=mb_e),
        basep=REGION_BASE)
    await env.write_ok(OFF["QCONFIG"], qconfig)


def enc(*cmds) -> list:
    """Command words from ("NAME", {fields}) pairs or bare names (tlm.isa.encode)."""
    words = []
    for c in cmds:
        name, kw = (c, {}) if isinstance(c, str) else c
        words += isa.encode(name, **kw)
    return words


STRIDE_MODE = {"1d": 0, "2d": 1, "3d": 2}


def fmap_cmds(p: str, prec: dict, region: int, bases, sx: int, sy: int, sc: int, w0m1: int,
              h0m1: int, h1m1: int, zp: int) -> list:
    """NPU_SET commands (for enc) of feature map *p* (IFM, IFM2 or OFM): precision fields,
    region, BASE0..3, strides, tile sizes and zero point."""
    c = [(f"NPU_SET_{p}_PRECISION", prec), (f"NPU_SET_{p}_REGION", dict(region=region))]
    c += [(f"NPU_SET_{p}_BASE{i}", dict(addr=b)) for i, b in enumerate(bases)]
    c += [(f"NPU_SET_{p}_STRIDE_X", dict(addr=sx)), (f"NPU_SET_{p}_STRIDE_Y", dict(addr=sy)),
          (f"NPU_SET_{p}_STRIDE_C", dict(addr=sc)),
          (f"NPU_SET_{p}_WIDTH0_M1", dict(width_m1=w0m1)),
          (f"NPU_SET_{p}_HEIGHT0_M1", dict(height_m1=h0m1)),
          (f"NPU_SET_{p}_HEIGHT1_M1", dict(height_m1=h1m1)),
          (f"NPU_SET_{p}_ZERO_POINT", dict(zero_point=zp & 0xFFFF))]
    return c


def dma_case(rng, mode: str, min_length: int = 1) -> dict:
    """Random DMA parameters (for dma_cmds/dma_expect): SRAM -> EXT or EXT -> SRAM,
    unaligned, strided; *mode* 1d, 2d or 3d."""
    if rng.random() < 0.5:
        src_region, dst_region = rng.choice(SRAM_REGIONS), rng.choice(EXT_REGIONS)
    else:
        src_region, dst_region = rng.choice(EXT_REGIONS), rng.choice(SRAM_REGIONS)
    p = dict(src_region=src_region, dst_region=dst_region, src=rng.randrange(0, 0x300),
             dst=rng.randrange(0, 0x300), length=rng.randrange(min_length, 300), mode=mode)
    if mode in ("2d", "3d"):
        p["size0"] = rng.randrange(2, 5)
        p["src_stride0"] = p["length"] + rng.randrange(0, 40)
        p["dst_stride0"] = p["length"] + rng.randrange(0, 40)
    if mode == "3d":
        p["size1"] = rng.randrange(2, 4)
        p["src_stride1"] = p["size0"] * p["src_stride0"] + rng.randrange(0, 64)
        p["dst_stride1"] = p["size0"] * p["dst_stride0"] + rng.randrange(0, 64)
    return p


def span(p: dict, side: str) -> tuple[int, int]:
    """Byte range a DMA side touches (for filling / checking)."""
    w = p.get("size0", 1) if p["mode"] != "1d" else 1
    h = p.get("size1", 1) if p["mode"] == "3d" else 1
    base = REGION_BASE[p[f"{side}_region"]] + p[side]
    s0, s1 = p.get(f"{side}_stride0", 0), p.get(f"{side}_stride1", 0)
    hi = base + (w - 1) * s0 + (h - 1) * s1 + p["length"]
    return base, hi


def dma_cmds(src_region, src, dst_region, dst, length, mode="1d", size0=1, size1=1,
             src_stride0=0, src_stride1=0, dst_stride0=0, dst_stride1=0, wait=True) -> list:
    m40 = (1 << 40) - 1
    cmds = [("NPU_SET_DMA0_SRC_REGION", dict(region=src_region, stride_mode=STRIDE_MODE[mode])),
            ("NPU_SET_DMA0_DST_REGION", dict(region=dst_region)),
            ("NPU_SET_DMA0_SRC", dict(addr=src)), ("NPU_SET_DMA0_DST", dict(addr=dst)),
            ("NPU_SET_DMA0_LEN", dict(addr=length)),
            ("NPU_SET_DMA0_SIZE0", dict(size=size0)), ("NPU_SET_DMA0_SIZE1", dict(size=size1)),
            ("NPU_SET_DMA0_SRC_STRIDE0", dict(addr=src_stride0 & m40)),
            ("NPU_SET_DMA0_SRC_STRIDE1", dict(addr=src_stride1 & m40)),
            ("NPU_SET_DMA0_DST_STRIDE0", dict(addr=dst_stride0 & m40)),
            ("NPU_SET_DMA0_DST_STRIDE1", dict(addr=dst_stride1 & m40)),
            "NPU_OP_DMA_START"]
    if wait:
        cmds.append(("NPU_OP_DMA_WAIT", dict(k=0)))
    return enc(*cmds)


def dma_expect(mem: dict, src_region, src, dst_region, dst, length, mode="1d", size0=1,
               size1=1, src_stride0=0, src_stride1=0, dst_stride0=0, dst_stride1=0) -> dict:
    """The DMA copy as the TRM 3.10.4 pseudocode states it (STRIDE1 steps once per 2D
    slice), byte by byte on a dict address -> byte (*mem*, changed in place and returned).
    Written independently of tlm.ops.dma."""
    width = 1 if mode == "1d" else size0
    height = size1 if mode == "3d" else 1
    sb, db = REGION_BASE[src_region], REGION_BASE[dst_region]
    for _y in range(height):
        for x in range(width):
            s = sb + src + x * src_stride0
            d = db + dst + x * dst_stride0
            line = [mem.get(s + i, 0) for i in range(length)]
            for i, v in enumerate(line):
                mem[d + i] = v
        src += src_stride1
        dst += dst_stride1
    return mem


def fill_random(env, rng: random.Random, addr: int, n: int, shadow: dict) -> None:
    data = bytes(rng.getrandbits(8) for _ in range(n))
    env.memory.write(addr, data)
    for i, v in enumerate(data):
        shadow[addr + i] = v


def check_bytes(env, shadow: dict, lo: int, hi: int, what: str) -> None:
    got = env.memory.read(lo, hi - lo)
    for i, g in enumerate(got):
        w = shadow.get(lo + i, 0)
        assert g == w, (f"{what}: byte at 0x{lo + i:010x} is 0x{g:02x}, expected 0x{w:02x} "
                        "(hand model of the TRM DMA pseudocode)")


def status_fields(word: int) -> dict:
    return STATUS_F.decode(word)


def skip_now(reason: str) -> None:
    """Skip the running test. ``cocotb.test(skip=...)``/``cocotb.skipif`` are ignored for a
    test that a TESTS filter selects explicitly; this is not."""
    import pytest
    pytest.skip(reason)


def named(values, fmt=str) -> list:
    """cocotb.parametrize values named by *fmt* (cocotb numbers long strings instead)."""
    return [cocotb.Param(value=v, name=fmt(v)) for v in values]


def seeded_rng() -> random.Random:
    seed = random.getrandbits(32)
    cocotb.log.info("test seed %d", seed)
    return random.Random(seed)


# =====================================================================================
# Hostile-input helpers (tb/tests/test_faults.py): pin monitor, reset-window sync of the
# scoreboard's reference, jobs cut short by a reset, kernel-op streams, sticky-fault checks.
# =====================================================================================
PROT_SP = 0b001                         # secure privileged: permitted in every CPL/CSL state
REGS = tuple(R.iter_registers())
RW_REGS = tuple(r for r in REGS if r.access == R.RW)
ST_RESET = 0x8
CH_RD_IFM, CH_RD_WEIGHTS, CH_RD_SCALE, CH_RD_IFM_STREAM, CH_WR_OFM = (
    int(Channel.rd_ifm), int(Channel.rd_weights), int(Channel.rd_scale_bias),
    int(Channel.rd_ifm_stream), int(Channel.wr_ofm))


def permitted(pprot: int, cpl: int, csl: int) -> bool:
    """TRM 3.1.1: PPROT[0] >= CPL and PPROT[1] <= CSL (PPROT[2] is not used)."""
    return (pprot & 1) >= cpl and ((pprot >> 1) & 1) <= csl


def prot_after_reset_write(pending: int, pprot: int) -> int:
    """PROT after a permitted RESET write (TRM 3.3.1.4, 2.2): CPL = min(PPROT[0],
    pending_CPL); CSL = pending_CSL | PPROT[1] (a requester cannot raise the security level)."""
    cpl = min(pprot & 1, pending & 1)
    csl = ((pending >> 1) & 1) | ((pprot >> 1) & 1)
    return csl << 1 | cpl


def region_interface(region: int) -> int:
    """Port group (STATUS.faulting_interface) of a region in the bench's map."""
    return (MEM_ATTRS[REGION_ATTR[region]] >> 2) & 1


def qconfig_interface(qconfig: int) -> int:
    return (MEM_ATTRS[qconfig & 3] >> 2) & 1


async def start_env(dut, backpressure: "float | None" = None, seed: int = 0, **kw):
    """An Env with the scoreboard's reference model (for DUT=tlm too), out of reset."""
    from tb.env import Env
    env = Env(dut, reference_model=True, **kw)
    await env.start()
    ResetSync.attach(env)
    if backpressure:
        env.axi.random_backpressure(seed, backpressure)
    return env


async def irq_pin(env) -> int:
    await FallingEdge(env.clock)
    return int(env.irq.value)


# ---------------------------------------------------------------- pin monitor
class PinMonitor:
    """The test_faults view of the Env's passive AXI monitors (``env.axi_monitors``,
    tb.axi.AxiMonitor: handshake counts and the VALID/payload-stability rule per port) plus
    a count of IRQ rising edges (sampled at falling edges of CLK from construction on).

    ``count`` is per port and channel (``ar``, ``r``, ``rlast``, ``aw``, ``w``, ``wlast``,
    ``b``) since construction or the last nRESET; ``outstanding()`` gives, per port, (reads without their last R beat, writes
    without their B response, AW without their WLAST); ``busy`` is true while anything is
    outstanding or a VALID is waiting; ``errors`` are the monitors' errors."""

    def __init__(self, env):
        self.env = env
        self.monitors = env.axi_monitors
        assert self.monitors or not env.axi_ports, "PinMonitor needs Env(axi_monitor=True)"
        self._base = {p: (m.resets, dict(m.count)) for p, m in self.monitors.items()}
        self.irq_rises = 0
        self._irq = 0
        self._task = cocotb.start_soon(self._run())

    @property
    def count(self) -> dict:
        """Handshakes per port and channel since construction (or the last nRESET)."""
        out = {}
        for p, m in self.monitors.items():
            resets, base = self._base[p]
            out[p] = {k: v - (base[k] if m.resets == resets else 0) for k, v in m.count.items()}
        return out

    @property
    def errors(self) -> list:
        return [e for m in self.monitors.values() for e in m.errors]

    def stop(self) -> None:
        self._task.cancel()

    async def _run(self) -> None:
        while True:
            await FallingEdge(self.env.clock)
            irq = _pin(self.env.irq, 0) if _pin(self.env.nreset, 0) == 1 else 0
            if irq and not self._irq:
                self.irq_rises += 1
            self._irq = irq

    def outstanding(self) -> dict:
        return {p: m.outstanding() for p, m in self.monitors.items()}

    @property
    def busy(self) -> bool:
        return any(m.busy for m in self.monitors.values())

    def handshakes(self) -> int:
        return sum(m.handshakes() for m in self.monitors.values())

    async def wait_idle(self, limit: int = 20_000, settle: int = 4) -> int:
        """Wait until nothing is outstanding for *settle* cycles; return the cycles waited."""
        quiet = 0
        for n in range(limit):
            await FallingEdge(self.env.clock)
            quiet = quiet + 1 if not self.busy else 0
            if quiet >= settle:
                return n
        raise TimeoutError(f"AXI still busy after {limit} cycles: {self.outstanding()}")

    async def wait_writes_sent(self, limit: int = 5000, settle: int = 16) -> None:
        """Wait until every AW handshake has its WLAST and no AW/W VALID waits, for *settle*
        cycles in a row (B responses may still be outstanding)."""
        quiet = 0
        for _ in range(limit):
            await FallingEdge(self.env.clock)
            quiet = quiet + 1 if not any(m.writes_sending for m in self.monitors.values()) else 0
            if quiet >= settle:
                return
        raise TimeoutError(f"write data still flowing after {limit} cycles: {self.outstanding()}")

    async def assert_silent(self, cycles: int, what: str) -> None:
        """No AXI handshake at all for *cycles* cycles (the NPU is stopped)."""
        before = self.handshakes()
        await ClockCycles(self.env.clock, cycles)
        assert self.handshakes() == before, (f"{what}: {self.handshakes() - before} AXI "
                                             "handshake(s) with the NPU stopped")

    def check(self) -> None:
        assert not self.errors, f"{len(self.errors)} AXI pin rule violation(s), first: {self.errors[0]}"
        assert not self.busy, f"AXI transactions left outstanding: {self.outstanding()}"


async def run_job_counting_irq(env, mon: "PinMonitor", settle: int = 32) -> int:
    """``Env.run_job`` for a job that can stop, and raise IRQ, before the scoreboard sees the
    start: the scoreboard opens a job when the CMD write completes on the APB manager's side,
    a cycle after the NPU acted on it (both DUTs perform a transfer at its setup phase), so an
    IRQ edge of a job that ends at once (QSIZE = 0) would not be counted. Here the job's
    edges are counted by the pin monitor from the CMD write on."""
    rises = mon.irq_rises
    await env.start_npu()
    await ClockCycles(env.clock, settle)
    job = env.scoreboard.job
    if job is not None and not job.closed:
        job.dut_irq_rises = mon.irq_rises - rises
    return await env.wait_stopped()


async def run_job_allowing(env, spans, max_cycles: int = 20_000) -> int:
    """``Env.run_job`` for a job that ends in a bus error, where the TRM leaves open how much
    of the faulting operation's output is written: the byte ranges *spans* may or may not be
    written by the DUT, so the scoreboard neither requires nor forbids writes there and does
    not compare them (the test checks them itself, see ``check_partial_output``)."""
    await env.start_npu()
    job = env.scoreboard.job
    assert job is not None and not job.closed
    for lo, hi in spans:
        job.ref_dontcare.add(lo, hi)
    return await env.wait_stopped(max_cycles)


def check_partial_output(env, lo: int, before: bytes, correct: bytes, keep=(), what: str = "") -> int:
    """Each byte of [lo, lo + len(before)) is either unchanged or the value of a run without
    the fault (*correct*): an NPU stopped by a bus error may have written part of the
    faulting operation's output (TRM 3.6.8 raise_error completes the AXI transactions in
    flight; the TLM writes nothing of an operation whose read failed), never a wrong value.
    Bytes at offsets in *keep* (computed from data that came with an error response) must be
    unchanged. Returns the number of bytes written."""
    got = env.memory.read(lo, len(before))
    written = 0
    for i, (g, b, c) in enumerate(zip(got, before, correct)):
        if i in keep:
            assert g == b, (f"{what}: byte 0x{lo + i:010x} = 0x{g:02x} was written from data "
                            f"that came with an error response (before 0x{b:02x})")
            continue
        assert g in (b, c), (f"{what}: byte 0x{lo + i:010x} = 0x{g:02x}, neither the old "
                             f"0x{b:02x} nor the fault-free result 0x{c:02x}")
        written += g != b
    return written


def freeze_outstanding_limits(env):
    """Keep the subordinates' outstanding-burst limit at its current value (the scoreboard's
    reference would otherwise lower it to the reset value at a RESET write, while the
    transactions issued under the old limit drain). Returns a function that restores it."""
    sb = env.scoreboard
    lim = {(p, w): sb.outstanding_limit(p, w) for p in env.axi.ports for w in (False, True)}
    for sub in env.axi.ports.values():
        sub.outstanding_limit = lambda port, write: lim[(port, write)]

    def restore():
        for sub in env.axi.ports.values():
            sub.outstanding_limit = sb.outstanding_limit
    return restore


def hold_responses(env, hold: bool = True) -> None:
    """Withhold (or release) every R beat and B response of the bench's subordinates: the
    NPU's outstanding transactions stay outstanding as long as this lasts. While B is held
    the subordinates keep taking AW and W (their B queues have no limit), so a write burst
    already started sends all its W beats."""
    for sub in env.axi.ports.values():
        for ch in (sub.r, sub.b):
            ch.set_pause_generator(itertools.repeat(1) if hold else None)
            if not hold:
                ch.pause = False
        sub.b.queue_occupancy_limit = -1 if hold else 2


# ---------------------------------------------------------------- reset windows
class ResetSync:
    """Keeps the scoreboard's reference model (``env._ref``) inside its reset sequence
    exactly as long as the DUT is, as the DUT shows it on STATUS.reset_status.

    The reference leaves its sequence after Policy.reset_cycles model cycles, which APB
    transfers advance (Policy.apb_cycles each); the DUT's sequence is timed in CLK cycles and a
    soft reset first drains the AXI ports. So: at a RESET write (and with ``enter``) the
    reference stops advancing time (apb_cycles = 0); at the first STATUS read that shows the
    DUT out of its sequence, the reference finishes its own (``wait_reset``, which also applies
    the pending CPL/CSL) before the scoreboard compares that read. Every access in between is
    then compared with a reference that is itself in its reset sequence (TRM 3.1.1 rules as
    the TLM Policy defines them). Listener on ``env.apb`` ahead of the scoreboard."""

    def __init__(self, env):
        self.env = env
        self._saved = None
        env.apb.listeners.insert(0, self)

    @classmethod
    def attach(cls, env) -> "ResetSync":
        sync = getattr(env, "_reset_sync", None)
        if sync is None:
            sync = env._reset_sync = cls(env)
        return sync

    @property
    def ref(self):
        return self.env._ref if self.env.use_reference else None

    def _hold(self, ref) -> None:
        if self._saved is None or self._saved[0] is not ref:
            self._saved = (ref, ref.policy)
            ref.policy = ref.policy.replace(apb_cycles=0)

    def _release(self, ref) -> None:
        if ref.in_reset:
            ref.wait_reset()
        if self._saved is not None and self._saved[0] is ref:
            ref.policy = self._saved[1]
        self._saved = None

    def enter(self) -> None:
        """Put the reference back into its reset sequence (after ``Env.hard_reset``, which
        builds it with the sequence already over) and hold it there; compare from now on."""
        ref = self.ref
        if ref is None:
            return
        self._hold(ref)
        ref.reset_remaining = max(1, int(self._saved[1].reset_cycles))
        self.env.scoreboard.enabled = True

    def __call__(self, r) -> None:
        ref = self.ref
        if ref is None:
            return
        if r.write and r.addr == OFF["RESET"]:
            self._hold(ref)
        elif not r.write and r.addr == OFF["STATUS"] and not r.slverr and not r.data & ST_RESET:
            if ref.in_reset or self._saved is not None:
                self._release(ref)


async def wait_reset_clear(env, max_reads: int = 2000, prot: int = PROT_SP) -> list:
    """``HostDriver.wait_reset`` (strict: every read before the end is exactly 0x8) with the
    scoreboard's reference kept in step (``ResetSync``). Returns the values read."""
    ResetSync.attach(env)
    return await env.driver.wait_reset(max_reads, strict=True, prot=prot)


async def soft_reset(env, pending: int, prot: int = PROT_SP) -> list:
    """``HostDriver.soft_reset`` (strict) with the reference kept in step (``ResetSync``);
    returns the STATUS values read."""
    ResetSync.attach(env)
    return await env.driver.soft_reset(pending, prot, strict=True)


def expected_reset_value(reg, env, prot_word: int, reset_word: int = 0) -> int:
    """A register's value once a reset sequence is over (STATUS then reads 0, PROT the
    current CPL/CSL, RESET the pending bits last written)."""
    if reg.name == "STATUS":
        return 0
    if reg.name == "PROT":
        return prot_word
    if reg.name == "RESET":
        return reset_word
    return R.reset_word(reg, env.config, env.pins)


async def check_reset_values(env, prot_word: int, reset_word: int = 0, what: str = "") -> None:
    """Every register of the map (tlm.registers) reads its reset value (secure privileged)."""
    for reg in REGS:
        want = expected_reset_value(reg, env, prot_word, reset_word)
        got = await env.read_ok(reg.offset, PROT_SP)
        assert got == want, (f"{what}: {reg.ident} (0x{reg.offset:04x}) reads 0x{got:08x}, "
                             f"reset value 0x{want:08x}")


# ---------------------------------------------------------------- sticky faults
async def check_sticky_fault(env, mon: "PinMonitor", status: int, iface: int, channels,
                             what: str, pending: int = 0b01) -> None:
    """After a job that ended in an AXI error response: STATUS.bus_status with
    faulting_interface *iface* and faulting_channel in *channels*, irq_raised, state
    STOPPED, the IRQ pin high, no further AXI traffic (TRM 3.3.1.2, 3.6.8); the fault stays
    across CMD.clear_irq and a start request (which is ignored, TLM Policy
    run_with_sticky_fault='ignore'), and only a soft reset clears it (TRM 3.3.1.2: sticky
    until reset). Ends with the NPU out of its reset sequence, PROT from *pending*."""
    channels = (channels,) if isinstance(channels, int) else tuple(channels)
    f = status_fields(status)
    assert f["bus_status"] and f["irq_raised"] and f["state"] == 0, f"{what}: STATUS 0x{status:08x}"
    assert not f["cmd_parse_error"] and not f["branch_fault"], f"{what}: STATUS 0x{status:08x}"
    assert f["faulting_interface"] == iface, (f"{what}: faulting_interface "
                                              f"{f['faulting_interface']}, expected {iface}")
    assert f["faulting_channel"] in channels, (f"{what}: faulting_channel {f['faulting_channel']}, "
                                               f"expected {channels}")
    assert await irq_pin(env) == 1, f"{what}: IRQ pin low after the bus error"
    await mon.wait_idle()
    await mon.assert_silent(64, what)
    sticky = status & ~0x42            # clear_irq clears irq_raised and pmu_irq_raised only
    # CMD.clear_irq: the IRQ drops, the fault stays
    await env.driver.clear_irq()
    await ClockCycles(env.clock, 2)
    assert await irq_pin(env) == 0, f"{what}: IRQ pin still high after CMD.clear_irq"
    st = await env.read_ok(OFF["STATUS"])
    assert st == sticky, f"{what}: STATUS 0x{st:08x} after clear_irq, expected 0x{sticky:08x}"
    # a start request is ignored while the fault is set: no fetch, state stays STOPPED
    before = mon.handshakes()
    await env.write_ok(OFF["CMD"], 0xC | 0x1)
    for _ in range(4):
        st = await env.read_ok(OFF["STATUS"])
        assert st == sticky, f"{what}: STATUS 0x{st:08x} after a start with the fault set"
    await ClockCycles(env.clock, 32)
    assert mon.handshakes() == before, f"{what}: AXI traffic after a start with bus_status set"
    assert await irq_pin(env) == 0, f"{what}: IRQ after a start request with the fault set"
    # only a reset clears it
    seen = await soft_reset(env, pending)
    assert seen[-1] == 0, f"{what}: STATUS 0x{seen[-1]:08x} after the soft reset"
    assert await env.read_ok(OFF["PROT"]) == prot_after_reset_write(pending, PROT_SP)
    assert await irq_pin(env) == 0
    mon.check()


# ---------------------------------------------------------------- TLM runs of a stream
def tlm_run(words, image: dict, faults=(), qconfig: int = 2, stream_addr: int = STREAM_ADDR):
    """Run *words* on a plain tlm.device.Device with the bench's memory map (MEM_ATTRS,
    REGIONCFG, BASEPs) over a fresh memory holding *image* ({addr: bytes}); *faults* are
    (lo, hi, resp, kind). Returns (device, StopReason); ``device.memory.log`` holds every
    transaction. For checking that a test's stream does what the test needs, before the run
    on the pins."""
    from tlm.device import Device
    from tlm.memory import Memory
    mem = Memory()
    for a, d in image.items():
        mem.write(a, d)
    for lo, hi, resp, kind in faults:
        mem.inject_fault(lo, hi, resp, kind)
    dev = Device(os.environ.get("NPU_CONFIG", "ethos-u85-256"), mem, pins=dict(PORPL=1), settle=True)
    for n, v in enumerate(MEM_ATTRS):
        dev.apb_write(OFF[f"MEM_ATTR{n}"], v)
    dev.apb_write(OFF["REGIONCFG"], regioncfg())
    for r, b in REGION_BASE.items():
        dev.apb_write(OFF[f"BASEP{r}_LO"], b & 0xFFFFFFFF)
        dev.apb_write(OFF[f"BASEP{r}_HI"], b >> 32)
    mem.log_enabled = True
    dev.load_stream(stream_addr, words, qconfig=qconfig)
    dev.start()
    return dev, dev.run()


# ---------------------------------------------------------------- kernel-operation streams
def _fmap_cmds(which: str, shape, region: int, base: int) -> list:
    """NPU_SET_<IFM|IFM2|OFM>_* for a dense int8 NHWC [H, W, C] map at region + base."""
    H, W, C = shape
    cmds = []
    if which == "OFM":
        cmds += [("NPU_SET_OFM_PRECISION", dict(activation_type=1, activation_precision=0,
                                                activation_format=0, scale_mode=1)),
                 ("NPU_SET_OFM_HEIGHT_M1", dict(height_m1=H - 1)),
                 ("NPU_SET_OFM_WIDTH_M1", dict(width_m1=W - 1)),
                 ("NPU_SET_OFM_DEPTH_M1", dict(depth_m1=C - 1)),
                 ("NPU_SET_OFM_BLK_HEIGHT_M1", dict(height_m1=H - 1)),
                 ("NPU_SET_OFM_BLK_WIDTH_M1", dict(width_m1=W - 1)),
                 ("NPU_SET_OFM_BLK_DEPTH_M1", dict(depth_m1=C - 1)),
                 ("NPU_SET_ACTIVATION", dict(activation_function=0, table=0, activation_clip_range=0)),
                 ("NPU_SET_ACTIVATION_MIN", dict(clip_boundary=(-128) & 0xFFFF)),
                 ("NPU_SET_ACTIVATION_MAX", dict(clip_boundary=127))]
    else:
        cmds += [(f"NPU_SET_{which}_PRECISION", dict(activation_type=1, activation_precision=0,
                                                      activation_format=0, activation_storage=0)),
                 (f"NPU_SET_{which}_ZERO_POINT", dict(zero_point=0))]
        if which == "IFM":
            cmds.append(("NPU_SET_IFM_DEPTH_M1", dict(depth_m1=C - 1)))
    cmds.append((f"NPU_SET_{which}_REGION", dict(region=region)))
    cmds += [(f"NPU_SET_{which}_BASE{t}", dict(addr=base)) for t in range(4)]
    cmds += [(f"NPU_SET_{which}_STRIDE_X", dict(addr=C)), (f"NPU_SET_{which}_STRIDE_Y", dict(addr=W * C)),
             (f"NPU_SET_{which}_STRIDE_C", dict(addr=1)),
             (f"NPU_SET_{which}_WIDTH0_M1", dict(width_m1=W - 1)),
             (f"NPU_SET_{which}_HEIGHT0_M1", dict(height_m1=H - 1)),
             (f"NPU_SET_{which}_HEIGHT1_M1", dict(height_m1=H - 1))]
    return enc(*cmds)


def _kernel_cmds(kh: int, kw: int, stride: int = 1) -> list:
    s = stride - 1
    return enc(("NPU_SET_KERNEL_HEIGHT_M1", dict(height_m1=kh - 1)),
               ("NPU_SET_KERNEL_WIDTH_M1", dict(width_m1=kw - 1)),
               ("NPU_SET_KERNEL_STRIDE", dict(stride_x_lsb=s & 1, stride_y_lsb=s & 1,
                                              stride_x_msb=s >> 1, stride_y_msb=s >> 1)),
               *[(f"NPU_SET_IFM_PAD_{p}", dict(pad=0)) for p in ("TOP", "LEFT", "BOTTOM", "RIGHT")])


# operand -> (TRM pmu_axi_channel of its accesses, read or write); the IFM of an ELEMENTWISE
# op may come on rd_ifm or rd_ifm_stream (TRM 2.3.4: "IFMS reads IFMs for the AO unit
# (elementwise operands) ... twice for binary ones"; the TLM reads it on rd_ifm).
KERNEL_OPERANDS = {"ifm": ((CH_RD_IFM,), "r"), "ifm2": ((CH_RD_IFM_STREAM,), "r"),
                   "weights": ((CH_RD_WEIGHTS,), "r"), "scale": ((CH_RD_SCALE,), "r"),
                   "ofm": ((CH_WR_OFM,), "w")}


@dataclass
class KernelCase:
    """A small kernel operation: its command words (without the final STOP), the memory
    image it reads, and where each operand lives (region, byte range)."""
    op: str
    words: list
    image: dict
    operands: dict = field(default_factory=dict)      # name -> (region, lo, hi)
    op_offset: int = 0                                # byte offset of the NPU_OP in words

    def channels(self, operand: str) -> tuple:
        chans = KERNEL_OPERANDS[operand][0]
        if self.op == "elementwise" and operand == "ifm":
            chans = (CH_RD_IFM, CH_RD_IFM_STREAM)
        return chans


def kernel_case(op: str, rng: random.Random) -> KernelCase:
    """CONV or DEPTHWISE (1x1, SWD weights, per-channel scale/bias stream), POOL (2x2 max,
    stride 2) or ELEMENTWISE (add) on int8 NHWC 4x4x8 maps, operands in distinct regions
    picked by *rng* (SRAM and EXT)."""
    import numpy as np
    nrng = np.random.default_rng(rng.getrandbits(32))
    H, W, C = 4, 4, 8
    regions = rng.sample(range(8), 4)
    ifm_r, ofm_r, x_r = regions[0], regions[1], regions[2]
    offs = [0x40 * rng.randrange(1, 16) for _ in range(3)]
    image, operands, words = {}, {}, []
    ifm = nrng.integers(-128, 128, (H, W, C), dtype=np.int8).tobytes()
    image[REGION_BASE[ifm_r] + offs[0]] = ifm
    operands["ifm"] = (ifm_r, REGION_BASE[ifm_r] + offs[0], REGION_BASE[ifm_r] + offs[0] + len(ifm))
    words += _fmap_cmds("IFM", (H, W, C), ifm_r, offs[0])
    if op == "pool":
        oshape = (H // 2, W // 2, C)
        words += _fmap_cmds("OFM", oshape, ofm_r, offs[1]) + _kernel_cmds(2, 2, 2)
        words += enc(("NPU_SET_OFM_SCALE", dict(scale=1, shift=0, round_mode=1)),
                     ("NPU_SET_ACC_FORMAT", dict(acc_format=0, acc_input=0, acc_output=0, microblock=1)))
        opw = enc(("NPU_OP_POOL", dict(pooling_mode=0)))
    elif op == "elementwise":
        oshape = (H, W, C)
        ifm2 = nrng.integers(-128, 128, (H, W, C), dtype=np.int8).tobytes()
        image[REGION_BASE[x_r] + offs[2]] = ifm2
        operands["ifm2"] = (x_r, REGION_BASE[x_r] + offs[2], REGION_BASE[x_r] + offs[2] + len(ifm2))
        words += _fmap_cmds("IFM2", (H, W, C), x_r, offs[2]) + _fmap_cmds("OFM", oshape, ofm_r, offs[1])
        words += enc(("NPU_SET_IFM_SCALE", dict(scale=1, shift=0)),
                     ("NPU_SET_IFM2_SCALE", dict(scale=1, shift=0)),
                     ("NPU_SET_OFM_SCALE", dict(scale=1, shift=0, round_mode=1)),
                     ("NPU_SET_IFM_BROADCAST", dict(broadcast_mode=0)),
                     ("NPU_SET_IFM2_BROADCAST", dict(broadcast_mode=0)),
                     ("NPU_SET_ACC_FORMAT", dict(acc_format=0, acc_input=0, acc_output=0, microblock=1)))
        opw = enc(("NPU_OP_ELEMENTWISE", dict(elementwise_mode=0)))          # add
    elif op in ("conv", "depthwise"):
        from tlm.config import get_config
        from tlm.scale_bias import channels_in_set, encode_scale_bias
        from tlm.weights import WeightOrder, encode_swd, streams_from_weights
        dw = op == "depthwise"
        od = 8
        oshape = (H, W, od)
        macs = get_config(os.environ.get("NPU_CONFIG", "ethos-u85-256")).macs
        mb = 1 if macs == 128 else 3                  # u1x2 / u2x2: every configuration takes it
        wts = nrng.integers(-20, 21, (od, 1, 1, 1 if dw else C), dtype=np.int8)
        order = WeightOrder(macs=macs, microblock=mb, depthwise=dw, part_kernel_first=False,
                            sparse=False, ifm16bit=False, ofm_depth=od, ifm_depth=C,
                            ofm_block_depth=od, kernel_height=1, kernel_width=1, dilation_x=0,
                            dilation_y=0, stride_x=1, stride_y=1, d8x8=True)
        # one stream per weight decoder (num_wd), back to back (multiples of 16 bytes)
        wcmds, a = [], offs[2]
        for n, blob in enumerate(bytes(encode_swd(s)) for s in streams_from_weights(order, wts)):
            image[REGION_BASE[x_r] + a] = blob
            wcmds += [(f"NPU_SET_WEIGHT{n or ''}_BASE", dict(addr=a)),
                      (f"NPU_SET_WEIGHT{n or ''}_LENGTH", dict(length=len(blob)))]
            a += len(blob)
        operands["weights"] = (x_r, REGION_BASE[x_r] + offs[2], REGION_BASE[x_r] + a)
        # per-channel scale/bias stream (TRM 3.7) in the fourth region
        s_r, s_off = regions[3], 0x40 * rng.randrange(1, 16)
        sb = encode_scale_bias(nrng.integers(-64, 65, od), nrng.integers(1 << 14, 1 << 15, od),
                               nrng.integers(18, 21, od), acc48=False,
                               set_channels=channels_in_set(macs, mb))
        image[REGION_BASE[s_r] + s_off] = sb
        operands["scale"] = (s_r, REGION_BASE[s_r] + s_off, REGION_BASE[s_r] + s_off + len(sb))
        words += _fmap_cmds("OFM", oshape, ofm_r, offs[1]) + _kernel_cmds(1, 1)
        words += enc(("NPU_SET_OFM_PRECISION", dict(activation_type=1, activation_precision=0,
                                                    activation_format=0, scale_mode=0)),
                     ("NPU_SET_SCALE_REGION", dict(region=s_r)),
                     ("NPU_SET_SCALE_BASE", dict(addr=s_off)),
                     ("NPU_SET_SCALE_LENGTH", dict(length=len(sb))),
                     ("NPU_SET_OFM_SCALE", dict(scale=1, shift=4, round_mode=1)),
                     ("NPU_SET_ACC_FORMAT", dict(acc_format=0, acc_input=0, acc_output=0, microblock=mb)),
                     ("NPU_SET_WEIGHT_FORMAT", dict(weight_format=0, weight_sparsity=0)),
                     ("NPU_SET_WEIGHT_REGION", dict(region=x_r)), *wcmds)
        opw = enc(("NPU_OP_DEPTHWISE", {})) if dw else enc(("NPU_OP_CONV", dict(weights_ifm2=0)))
    else:
        raise ValueError(op)
    n_ofm = oshape[0] * oshape[1] * oshape[2]
    operands["ofm"] = (ofm_r, REGION_BASE[ofm_r] + offs[1], REGION_BASE[ofm_r] + offs[1] + n_ofm)
    case = KernelCase(op, words + opw, image, operands, op_offset=4 * len(words))
    return case
