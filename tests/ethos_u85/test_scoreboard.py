"""tb.ethos_u85.scoreboard.Scoreboard reused by hand, without tb.ethos_u85.env.Env, as README "Reuse from another
bench" describes: pure Python, no simulator. The "DUT" is a second TLM Device on the bench
memory; its APB results (tb.agents.apb.ApbResult), its memory transactions as AXI bursts
(tb.agents.axi.AxiBurst) and its IRQ edges feed the scoreboard. A faithful DUT passes; a wrong
byte, a wrong AxPROT, a read outside the model's footprint or an IRQ that CMD.clear_irq does
not drop fail."""
import pytest

from tb.agents.apb import PROT_SECURE_PRIV, ApbResult
from tb.agents.axi import AxiBurst, BenchMemory
from tb.ethos_u85.scoreboard import Scoreboard
from tb.ethos_u85.tlm_pins import TlmAxiManager
from tlm.ethos_u85 import isa
from tlm.ethos_u85 import registers as R
from tlm.ethos_u85.device import Device
from tlm.ethos_u85.literal import literal_device

OFF = {r.ident: r.offset for r in R.iter_registers()}
SRC, DST, STREAM = 0x10_0000, 0x20_0000, 0x30_0000


class Bench:
    """A minimal other bench: APB, AXI and IRQ feeds of a Scoreboard by hand."""

    def __init__(self, bug: str = "", reference=Device, lines: int = 1):
        """*reference*: the scoreboard's model factory; *lines* > 1: a 2D DMA of that many
        32-byte lines 64 bytes apart (reads with gaps between them)."""
        self.bug = bug
        self.mem = BenchMemory()
        self.mem.write(SRC, bytes((5 * i + 1) & 0xFF for i in range(300)))
        words = []
        dma = (("NPU_SET_DMA0_LEN", dict(addr=300)),) if lines == 1 else (
            ("NPU_SET_DMA0_SRC_REGION", dict(region=1, stride_mode=1)), ("NPU_SET_DMA0_LEN", dict(addr=32)),
            ("NPU_SET_DMA0_SIZE0", dict(size=lines)), ("NPU_SET_DMA0_SRC_STRIDE0", dict(addr=64)),
            ("NPU_SET_DMA0_DST_STRIDE0", dict(addr=32)))
        for name, kw in (("NPU_SET_DMA0_SRC_REGION", dict(region=1)),
                         ("NPU_SET_DMA0_DST_REGION", dict(region=2)),
                         ("NPU_SET_DMA0_SRC", dict(addr=0x10)), ("NPU_SET_DMA0_DST", dict(addr=0x8)),
                         *dma, ("NPU_OP_DMA_START", {}),
                         ("NPU_OP_DMA_WAIT", dict(k=0)), ("NPU_OP_STOP", dict(mask=1))):
            words += isa.encode(name, **kw)
        self.mem.write(STREAM, b"".join(w.to_bytes(4, "little") for w in words))
        self.qsize = 4 * len(words)
        self.dut = Device(memory=self.mem, settle=True)
        self.irq = 0
        # the scoreboard: bench memory, IRQ pin level, a reference on a memory snapshot
        self.sb = Scoreboard(self.mem, irq_level=lambda: self.irq, coverage=None)
        self.sb.set_reference(reference(memory=self.mem.snapshot(), settle=True))
        self.dut.hooks.append(self._on_event)

    def _on_event(self, event, details):
        if event == "irq":
            level = int(details["level"])
            if self.bug == "irq_stuck" and self.irq and not level:
                return                                   # CMD.clear_irq does not drop it
            if level and not self.irq:
                self.sb.on_irq_rise()                    # rising edge feed
            self.irq = level

    def write(self, reg, data):
        err = self.dut.apb_write(OFF[reg], data, pprot=PROT_SECURE_PRIV)
        self.sb(ApbResult(OFF[reg], True, data, bool(err), PROT_SECURE_PRIV, 0xF, 0))

    def read(self, reg):
        data, err = self.dut.apb_read(OFF[reg], pprot=PROT_SECURE_PRIV)
        self.sb(ApbResult(OFF[reg], False, 0 if err else data, bool(err), PROT_SECURE_PRIV, 0, 0))
        return data

    def bursts(self, txns):
        """The DUT's memory transactions as the AXI monitor would report them."""
        for t in txns:
            for a, n in TlmAxiManager.split(t.addr, t.length, 64):
                beats = (a % 16 + n + 15) // 16
                prot = t.prot ^ 2 if self.bug == "wrong_prot" else t.prot
                yield AxiBurst(t.port, t.write, int(t.channel), a, beats - 1, 4, 1, prot, t.cache,
                               t.domain, t.resp, runs=[(a, self.mem.read(a, n))])
            if self.bug == "stray_read" and not t.write and t.addr == SRC + 0x10:
                yield AxiBurst(t.port, False, int(t.channel), SRC + 0x400, 3, 4, 1, t.prot,
                               t.cache, t.domain, t.resp, runs=[(SRC + 0x400, bytes(64))])
            if self.bug == "gap_read" and not t.write and t.addr == SRC + 0x10:   # between lines 0 and 1
                yield AxiBurst(t.port, False, int(t.channel), SRC + 0x30, 0, 4, 1, t.prot,
                               t.cache, t.domain, t.resp, runs=[(SRC + 0x30, self.mem.read(SRC + 0x30, 16))])

    def run(self):
        attr = R.get("MEM_ATTR0")
        self.write("MEM_ATTR0", attr.encode(axi_port=0, memtype=0x3, mem_domain=0))
        self.write("MEM_ATTR1", attr.encode(axi_port=1, memtype=0x6, mem_domain=2))
        self.write("REGIONCFG", R.get("REGIONCFG").encode(region1=0, region2=1))
        self.write("BASEP1_LO", SRC)
        self.write("BASEP2_LO", DST)
        self.write("QCONFIG", 1)                         # the stream on MEM_ATTR1 (EXT)
        self.write("QBASE_LO", STREAM)
        self.write("QSIZE", self.qsize)
        self.write("CMD", 1)                             # the scoreboard's job starts
        self.mem.log_enabled = True
        self.dut.run()
        if self.bug == "corrupt":
            self.mem.write(DST + 0x8 + 7, b"\xee")
        for b in self.bursts(self.mem.log):
            self.sb.on_burst(b)                          # AXI monitor feed
        assert self.read("STATUS") & 2                   # stopped: the job's checks run
        self.read("QREAD")
        self.write("CMD", 0xC | 2)                       # clear_irq
        self.read("STATUS")
        return self.sb


def test_good_run_passes():
    sb = Bench().run()
    sb.check()
    job = sb.jobs[-1]
    assert job.closed and job.mismatches_in_job == 0 and job.dut_irq_rises == 1
    assert sb.checked > 10


@pytest.mark.parametrize("bug, words", [
    ("corrupt", "NPU_OP_DMA_START at command offset 0x"),
    ("wrong_prot", "AxPROT 010, PROT gives 000"),
    ("stray_read", "outside the model's read footprint"),
    ("irq_stuck", "IRQ pin 1"),
])
def test_bad_run_fails(bug, words):
    sb = Bench(bug).run()
    with pytest.raises(AssertionError):
        sb.check()
    assert any(words in m for m in sb.mismatches), sb.mismatches


def test_literal_reference_reads_count_as_spans():
    """A reference on the literal paths (tlm.ethos_u85.literal) reads one transaction per run:
    the scoreboard takes one operation's reads on one channel as one span (READ_GAP), so a
    DUT that reads the gap between two DMA lines in one burst passes with it and fails with
    the ordinary reference; a read beyond every span fails with both."""
    good = Bench(reference=literal_device, lines=4).run()
    good.check()
    assert good.read_gap and good.jobs[-1].mismatches_in_job == 0
    gap = Bench("gap_read", reference=literal_device, lines=4).run()
    gap.check()
    plain = Bench("gap_read", lines=4).run()
    assert plain.read_gap == 0 and any("outside the model's read footprint" in m for m in plain.mismatches)
    stray = Bench("stray_read", reference=literal_device, lines=4).run()
    assert any("outside the model's read footprint" in m for m in stray.mismatches), stray.mismatches


def test_interval_set_from_ranges_equals_adding_one_by_one():
    """IntervalSet.from_ranges (the DUT's write runs merged at the end of a job) gives the set
    that adding the same ranges one at a time gives; random cases, seed printed on failure."""
    import random
    from tb.ethos_u85.scoreboard import IntervalSet
    for seed in range(50):
        rng = random.Random(seed)
        ranges = []
        for _ in range(rng.randrange(0, 60)):
            lo = rng.randrange(0, 512)
            ranges.append((lo, lo + rng.randrange(-2, 40)))    # empty and inverted ones too
        one = IntervalSet()
        for lo, hi in ranges:
            one.add(lo, hi)
        assert list(IntervalSet.from_ranges(ranges)) == list(one), f"seed {seed}: {ranges}"
