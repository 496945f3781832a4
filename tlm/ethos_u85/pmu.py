"""The Ethos-U85 PMU: PMU and PMU_COUNTERS register pages (TRM 3.3.4, 3.3.5).

Registers: PMCR, PMCNTENSET/CLR, PMOVSSET/CLR, PMINTSET/CLR, PMCCNTR (48-bit),
PMCCNTR_CFG, PMCAXI_CHAN, PMCLUT, PMEVCNTR0..7, PMEVTYPER0..7.

Time model
----------
The TLM has no clock. The device advances model time in *batches* (`Pmu.advance`): an
APB transfer is `Policy.apb_cycles` cycles; an executed command is
`Policy.cycles_per_command` cycles plus one cycle per 16-byte AXI beat it moved (a serial
bus). A batch carries its length in cycles, whether the NPU was RUNNING, the AXI
transactions the device made and any extra event counts an operation reports
(`Pmu.add_event`). Within a batch, per-cycle ("level") events occur in every cycle and
pulse events are taken to occur in the first cycles of the batch (this only matters to
the PMCLUT compound event and to the PMCCNTR_CFG start/stop gate).

Modelled events (pmu_event_t)
-----------------------------
======================================  ==============================================
event (value)                           TLM model
======================================  ==============================================
no_event (0)                            never
cycle (17)                              every model cycle
npu_idle (32)                           every model cycle with STATUS.state = stopped
npu_active (35)                         every model cycle with STATUS.state = running
{sram,ext}[p]_rd_trans_accepted (+0)    one per read transaction on the port(s)
{sram,ext}[p]_rd_trans_completed (+1)   one per read transaction (completes at once)
{sram,ext}[p]_rd_data_beat_received(+2) 16-byte beats of each read (address-aligned)
{sram,ext}[p]_wr_trans_accepted (+4)    one per write transaction
{sram,ext}[p]_wr_data_beat_written (+7) 16-byte beats of each write
{sram,ext}[p]_enabled_cycles (+12)      every model cycle, per present port (ACLKEN=1)
axi_latency_any (160)                   transactions of PMCAXI_CHAN.CH_SEL on AXI_SEL
axi_latency_32..1024 (161..166)         same, if Policy.axi_latency_cycles >= threshold
                                        (default latency 0: these read 0)
======================================  ==============================================

Not modelled: these read 0 for every real operation (not counted honestly, so not claimed)
======================================  ==============================================
mac_active, mac_dpu_active, ao_active,  0: the kernel operations do not report MAC, output
wd_active, wd_stalled                   stage or weight-decoder activity (``add_event``
                                        counts what an operation reports; none does yet)
*_stalled, *_stall_limit (+3,+8,+9,     0: the TLM has no back-pressure and no
+14, +15)                               outstanding-transaction limit stalls
ecc_* (176..181)                        0: no ECC model
Reserved values                         0
======================================  ==============================================

Sum-over-ports families (128.., 384..) add all ports of the group; per-port families
(512 + 16p, 640 + 16p) only port p. PMEVTYPERn.Dk (and PMCCNTR_CFG S/E bits for the
start/stop events) remove port k of the group from any AXI event. With
PMCAXI_CHAN.BW_CH_SEL_EN=1 the bandwidth events (offsets in Policy.pmu_bw_event_offsets,
default +2/+7) only count transactions of channel CH_SEL.

Counting rule: a counter advances when PMCR.cnt_en=1, its PMCNTEN bit is set and the
PMU is not masked by NPU_OP_PMU_MASK (mask applies only when PMCR.mask_en=1). Counter 0
counts the compound event of PMCLUT when PCM_LUT_EN_0=1 (TRM 3.3.4.11): the bit
k = 8*ev3 + 4*ev2 + 2*ev1 + ev0 of PMC_LUT_0, evaluated per cycle, with ev[n] the event of
PMEVTYPERn (counted even if counter n is disabled). PMCCNTR counts cycles; with
PMCCNTR_CFG.START != no_event it is gated: closed after a PMCCNTR_CFG write, a START event
in a batch opens it for that batch, a STOP event closes it after that batch.

Overflow: PMEVCNTRn wrapping past 2^32-1 or PMCCNTR past 2^48-1 sets its PMOVS bit. When
a bit of (PMOVS & PMINTEN) becomes set (by overflow, PMOVSSET or PMINTSET) the PMU calls
`on_irq`, which sets STATUS.pmu_irq_raised (cleared by CMD.clear_irq; PMOVS itself is
cleared only through PMOVSCLR).

TRM 3.3.4: "Register writes to the PMU, other than those that modify PMCR.cnt_en, are not
guaranteed to take effect unless PMCR.cnt_en=1" - the TLM applies them regardless.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable

from . import registers as R
from .config import NpuConfig, Policy, get_config
from ..core.memo import Memo

CNT_MASK = 0x8000_00FF            # PMCNTEN/PMOVS/PMINT bits: E0..E7, CC
CYCLE_BIT = 1 << 31
CCNT_BITS = 48

EV_NO_EVENT = 0
EV_CYCLE = 17
EV_NPU_IDLE = 32
EV_NPU_ACTIVE = 35
EV_AXI_LATENCY_ANY = 160
LATENCY_THRESHOLDS = {160: 0, 161: 32, 162: 64, 163: 128, 164: 256, 165: 512, 166: 1024}

# offsets inside a 16-event AXI family
RD_ACC, RD_CMPL, RD_BEAT, RD_STALL, WR_ACC, WR_BEAT, WR_STALL, WR_BSTALL, ENABLED, RD_LIM, WR_LIM = \
    0, 1, 2, 3, 4, 7, 8, 9, 12, 14, 15

_OFF = {r.ident: r.offset for r in R.iter_registers()}
PMCR, PMCNTENSET, PMCNTENCLR = _OFF["PMCR"], _OFF["PMCNTENSET"], _OFF["PMCNTENCLR"]
PMOVSSET, PMOVSCLR, PMINTSET, PMINTCLR = _OFF["PMOVSSET"], _OFF["PMOVSCLR"], _OFF["PMINTSET"], _OFF["PMINTCLR"]
PMCCNTR_LO, PMCCNTR_HI = _OFF["PMCCNTR_LO"], _OFF["PMCCNTR_HI"]
PMCCNTR_CFG, PMCAXI_CHAN, PMCLUT = _OFF["PMCCNTR_CFG"], _OFF["PMCAXI_CHAN"], _OFF["PMCLUT"]
PMEVCNTR0, PMEVTYPER0 = _OFF["PMEVCNTR0"], _OFF["PMEVTYPER0"]
_MASK = {r.offset: r.write_mask for r in R.iter_registers() if r.page in ("PMU", "PMU_COUNTERS")}


def axi_family(ev: int):
    """Decode an AXI event: (group 'sram'|'ext', port or None for sum, offset) or None."""
    if 128 <= ev < 144:
        return "sram", None, ev - 128
    if 384 <= ev < 400:
        return "ext", None, ev - 384
    if 512 <= ev < 576:
        return "sram", (ev - 512) >> 4, (ev - 512) & 15
    if 640 <= ev < 672:
        return "ext", (ev - 640) >> 4, (ev - 640) & 15
    return None


def beats(addr: int, length: int, width: int = 16) -> int:
    """Data beats of a transaction on a `width`-byte bus (address-aligned)."""
    if length <= 0:
        return 0
    return (addr + length - 1) // width - addr // width + 1


_PORT_CACHE: dict = {}


def _parse_port(port) -> tuple[str, int]:
    p = str(port).upper()
    grp = "ext" if p.startswith("EXT") else "sram"
    digits = "".join(ch for ch in p if ch.isdigit())
    return grp, int(digits) if digits else 0


def _port_of(txn) -> tuple[str, int]:
    port = txn.port
    try:
        return _PORT_CACHE[port]
    except (KeyError, TypeError):
        pass
    r = _parse_port(port)
    if isinstance(port, str) and len(_PORT_CACHE) < 1024:
        _PORT_CACHE[port] = r
    return r


def _channel(txn) -> int:
    return int(txn.channel)


def summarise(txns) -> dict:
    """{(group, port, write, channel): [transactions, 16-byte beats]} over `txns`: Transaction
    records and/or batches (tlm.ethos_u85.memory.TxnBatch: anything with ``per_port``)."""
    out: dict = {}
    for t in txns:
        per_port = getattr(t, "per_port", None)
        if per_port is not None:
            ch, w = int(t.channel), bool(t.write)
            for p, n, nb in per_port():
                grp, port = _port_of_name(t.ports[p])
                e = out.get((grp, port, w, ch))
                if e is None:
                    out[(grp, port, w, ch)] = [n, nb]
                else:
                    e[0] += n
                    e[1] += nb
            continue
        grp, port = _port_of(t)
        key = (grp, port, bool(t.write), _channel(t))
        e = out.get(key)
        nb = beats(t.addr, t.length)
        if e is None:
            out[key] = [1, nb]
        else:
            e[0] += 1
            e[1] += nb
    return out


def _port_of_name(name) -> tuple[str, int]:
    try:
        return _PORT_CACHE[name]
    except KeyError:
        r = _PORT_CACHE[name] = _parse_port(name)
        return r


_NO_EXTRA: Counter = Counter()
_IDLE_BATCHES = Memo(256)
_TOTAL_KEYS: dict = {}        # (group, port, write) -> the totals' transaction and beat keys


@dataclass
class Batch:
    """A stretch of model time and what happened in it.  `txns` holds Transaction records
    and/or tlm.ethos_u85.memory.TxnBatch objects; `summary` is their per (group, port, write, channel)
    transaction and beat counts (computed on first use)."""
    cycles: int
    running: bool
    txns: list = field(default_factory=list)
    extra: Counter = field(default_factory=Counter)
    _summary: "dict | None" = field(default=None, repr=False, compare=False)

    @property
    def summary(self) -> dict:
        if self._summary is None:
            self._summary = summarise(self.txns)
        return self._summary


def _total_keys(key: tuple) -> tuple:
    """The totals' transaction and beat names of a summary key (group, port, write, ...)."""
    kt = _TOTAL_KEYS.get(key[:3])
    if kt is None:
        grp, port, w = key[:3]
        kind = "wr" if w else "rd"
        kt = _TOTAL_KEYS[key[:3]] = (f"{grp}{port}_{kind}_trans", f"{grp}{port}_{kind}_beats")
    return kt


class Pmu:
    """PMU state and register access. Offsets are absolute APB offsets."""

    def __init__(self, config: "NpuConfig | str | None" = None, policy: "Policy | None" = None,
                 on_irq: "Callable[[], None] | None" = None):
        self.config = get_config(config)
        self.policy = policy or Policy()
        self.on_irq = on_irq
        self._totals: Counter = Counter()     # model-wide event totals (ungated), for the bench
        self._idle = [0, 0]                   # pending (active, idle) cycles of the fast path
        self._unsummed: list = []             # batches whose transactions are not in _totals yet
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        self.cnt_en = 0
        self.mask_en = 0
        self.cnten = 0
        self.ovs = 0
        self.inten = 0
        self.ccnt = 0
        self.ccnt_cfg = 0
        self.axi_chan = 0
        self.lut = 0
        self.evcnt = [0] * 8
        self.evtype = [0] * 8
        self.op_enable = 1            # NPU_OP_PMU_MASK state (1 = counting allowed)
        self.cc_gate = True
        self._pending_extra: Counter = Counter()
        self._totals.clear()
        self._idle = [0, 0]
        self._unsummed.clear()

    @property
    def totals(self) -> Counter:
        """Model-wide event totals (ungated, for the bench): a Counter of event name ->
        occurrences ('cycle', 'npu_active', 'npu_idle', '<group><port>_<rd|wr>_<trans|beats>',
        reported events)."""
        self._sum_batches()
        a, i = self._idle
        if a or i:
            t = self._totals
            t["cycle"] += a + i
            if a:
                t["npu_active"] += a
            if i:
                t["npu_idle"] += i
            self._idle = [0, 0]
        return self._totals

    def _sum_batches(self) -> None:
        """Add the transactions of the batches not summed yet to the totals (summarising a
        batch's transactions costs more than the rest of advance(); nothing but `totals`
        needs them when no counter counts)."""
        totals = self._totals
        for b in self._unsummed:
            for key, (n, nb) in b.summary.items():
                kt = _total_keys(key)
                totals[kt[0]] += n
                totals[kt[1]] += nb
        self._unsummed.clear()

    @property
    def counting(self) -> bool:
        """Global counting condition (before the per-counter enables)."""
        return bool(self.cnt_en) and not (self.mask_en and not self.op_enable)

    def set_mask(self, enable: int) -> bool:
        """NPU_OP_PMU_MASK. Returns whether it took effect."""
        if self.policy.pmu_mask_needs_mask_en and not self.mask_en:
            return False
        self.op_enable = 1 if enable else 0
        return True

    def add_event(self, event: "int | str", count: int = 1) -> None:
        """Report `count` occurrences of an event; counted in the next advance()."""
        ev = R.PMU_EVENT_BY_NAME[event] if isinstance(event, str) else int(event)
        self._pending_extra[ev] += int(count)

    # ------------------------------------------------------------------ overflow / irq
    def _set_ovs(self, bits: int) -> None:
        before = self.ovs & self.inten
        self.ovs |= bits & CNT_MASK
        self._check_irq(before)

    def _check_irq(self, before: int) -> None:
        if (self.ovs & self.inten) & ~before and self.on_irq is not None:
            self.on_irq()

    # ------------------------------------------------------------------ registers
    def owns(self, offset: int) -> bool:
        return offset in _MASK

    def read(self, offset: int) -> int:
        if offset == PMCR:
            return self.cnt_en | self.mask_en << 3 | 8 << 11
        if offset in (PMCNTENSET, PMCNTENCLR):
            return self.cnten
        if offset in (PMOVSSET, PMOVSCLR):
            return self.ovs
        if offset in (PMINTSET, PMINTCLR):
            return self.inten
        if offset == PMCCNTR_LO:
            return self.ccnt & 0xFFFFFFFF
        if offset == PMCCNTR_HI:
            return (self.ccnt >> 32) & 0xFFFF
        if offset == PMCCNTR_CFG:
            return self.ccnt_cfg
        if offset == PMCAXI_CHAN:
            return self.axi_chan
        if offset == PMCLUT:
            return self.lut
        if PMEVCNTR0 <= offset < PMEVCNTR0 + 32:
            return self.evcnt[(offset - PMEVCNTR0) >> 2]
        if PMEVTYPER0 <= offset < PMEVTYPER0 + 32:
            return self.evtype[(offset - PMEVTYPER0) >> 2]
        return 0

    def write(self, offset: int, value: int) -> None:
        value &= 0xFFFFFFFF
        m = _MASK.get(offset, 0)
        if offset == PMCR:
            self.cnt_en = value & 1
            self.mask_en = (value >> 3) & 1
            if value & 2:                                  # event_cnt_rst (wo)
                self.evcnt = [0] * 8
            if value & 4:                                  # cycle_cnt_rst (wo)
                self.ccnt = 0
        elif offset == PMCNTENSET:
            self.cnten |= value & m
        elif offset == PMCNTENCLR:
            self.cnten &= ~(value & m)
        elif offset == PMOVSSET:
            self._set_ovs(value & m)
        elif offset == PMOVSCLR:
            self.ovs &= ~(value & m)
        elif offset == PMINTSET:
            before = self.ovs & self.inten
            self.inten |= value & m
            self._check_irq(before)
        elif offset == PMINTCLR:
            self.inten &= ~(value & m)
        elif offset == PMCCNTR_LO:
            self.ccnt = (self.ccnt & ~0xFFFFFFFF) | value
        elif offset == PMCCNTR_HI:
            self.ccnt = (self.ccnt & 0xFFFFFFFF) | (value & m) << 32
        elif offset == PMCCNTR_CFG:
            self.ccnt_cfg = value & m
            self.cc_gate = (self.ccnt_cfg & 0x3FF) == EV_NO_EVENT
        elif offset == PMCAXI_CHAN:
            self.axi_chan = value & m
        elif offset == PMCLUT:
            self.lut = value & m
        elif PMEVCNTR0 <= offset < PMEVCNTR0 + 32:
            self.evcnt[(offset - PMEVCNTR0) >> 2] = value
        elif PMEVTYPER0 <= offset < PMEVTYPER0 + 32:
            self.evtype[(offset - PMEVTYPER0) >> 2] = value & m

    # ------------------------------------------------------------------ event model
    def _nports(self, grp: str) -> int:
        return self.config.ports(grp)

    def count(self, ev: int, port_disable: int, b: Batch) -> int:
        """Occurrences of event `ev` in batch `b`, with port-disable bits [3:0]."""
        if ev == EV_CYCLE:
            return b.cycles
        if ev == EV_NPU_IDLE:
            return 0 if b.running else b.cycles
        if ev == EV_NPU_ACTIVE:
            return b.cycles if b.running else 0
        fam = axi_family(ev)
        if fam is not None:
            grp, port, off = fam
            nports = self._nports(grp)
            if port is not None and port >= nports:
                return 0
            ports = [port] if port is not None else list(range(nports))
            ports = [p for p in ports if not (port_disable >> p) & 1]
            if off == ENABLED:
                return b.cycles * len(ports)
            if off not in (RD_ACC, RD_CMPL, RD_BEAT, WR_ACC, WR_BEAT):
                return 0
            ch_filter = None
            if (self.axi_chan >> 10) & 1 and off in self.policy.pmu_bw_event_offsets:
                ch_filter = self.axi_chan & 0xF
            n = 0
            want_w = off >= WR_ACC
            idx = 1 if off in (RD_BEAT, WR_BEAT) else 0
            for (tg, tp, tw, tc), v in b.summary.items():
                if tg != grp or tp not in ports or tw != want_w:
                    continue
                if ch_filter is not None and tc != ch_filter:
                    continue
                n += v[idx]
            return n
        if ev in LATENCY_THRESHOLDS:
            if self.policy.axi_latency_cycles < LATENCY_THRESHOLDS[ev]:
                return 0
            grp = "ext" if (self.axi_chan >> 8) & 1 else "sram"
            ch = self.axi_chan & 0xF
            n = 0
            for (tg, tp, _tw, tc), v in b.summary.items():
                if tg == grp and tc == ch and not (port_disable >> tp) & 1:
                    n += v[0]
            return n
        return b.extra.get(ev, 0)

    @staticmethod
    def _is_level(ev: int) -> bool:
        fam = axi_family(ev)
        return ev in (EV_CYCLE, EV_NPU_IDLE, EV_NPU_ACTIVE) or (fam is not None and fam[2] == ENABLED)

    def _occupancy(self, n: int, b: Batch) -> int:
        """Cycles of the batch in which event counter n's event occurs (front-loaded)."""
        ev = self.evtype[n] & 0x3FF
        c = self.count(ev, (self.evtype[n] >> 12) & 0xF, b)
        return min(c, b.cycles)

    def lut_count(self, b: Batch) -> int:
        """Cycles of the batch in which the PMCLUT compound event is true."""
        occ = [self._occupancy(n, b) for n in range(4)]
        table = (self.lut >> 16) & 0xFFFF
        points = sorted({0, b.cycles, *occ})
        total = 0
        for lo, hi in zip(points, points[1:]):
            k = sum(1 << n for n in range(4) if lo < occ[n])
            if (table >> k) & 1:
                total += hi - lo
        return total

    @staticmethod
    def increments(summary: dict) -> tuple:
        """The model-wide totals a summary (``summarise(txns)``) adds: ((name, count), ...)."""
        out = []
        for key, (n, nb) in summary.items():
            kt = _total_keys(key)
            out += [(kt[0], n), (kt[1], nb)]
        return tuple(out)

    @property
    def totals_only(self) -> bool:
        """True while a batch changes only the model-wide totals (no counter counts, no
        event pending): what ``tally`` relies on to skip the transactions."""
        return not self._pending_extra and not (self.cnten and self.counting)

    def tally(self, cycles: int, running: bool, txns, increments: tuple) -> "Batch | None":
        """advance() for transactions whose totals (``increments(summarise(txns))``) the
        caller already has (a replayed segment or operation plan): while no counter counts
        and no event is pending, only the model-wide totals change."""
        if self._pending_extra or (self.cnten and self.counting):
            return self.advance(cycles, running, txns)
        if cycles > 0:
            self._idle[0 if running else 1] += cycles
        totals = self._totals
        for k, v in increments:
            totals[k] += v
        return None

    def advance(self, cycles: int, running: bool, txns: Iterable = ()) -> Batch:
        """Advance model time by a batch and count its events."""
        if type(cycles) is not int:
            cycles = int(cycles)
        if running is not True and running is not False:
            running = bool(running)
        extra = self._pending_extra
        if not txns and not extra:
            # fast path (e.g. an NPU_SET command): nothing but time passes (added to the
            # totals lazily, see `totals`).  When nothing counts, the returned batch is a
            # shared record per (cycles, running) (a batch is a record: nothing writes to
            # it; its `extra` is a shared empty Counter)
            if cycles > 0:
                self._idle[0 if running else 1] += cycles
                counting = self.cnten and self.counting
            else:
                counting = False
            if not counting:
                b = _IDLE_BATCHES.get((cycles, running))
                if b is None:
                    b = _IDLE_BATCHES.put((cycles, running), Batch(cycles, running, [], _NO_EXTRA, {}))
                return b
            b = Batch(cycles, running, [], _NO_EXTRA, {})
        else:
            txns = list(txns)
            if extra:
                self._pending_extra = Counter()
            else:
                extra = _NO_EXTRA
            b = Batch(cycles, running, txns, extra)
            # model-wide totals (for the bench; independent of enables)
            if cycles > 0:
                self._idle[0 if running else 1] += cycles
            if txns:
                self._unsummed.append(b)          # its transactions join the totals lazily
                if len(self._unsummed) >= 256:
                    self._sum_batches()
            for ev, c in extra.items():
                self._totals[R.PMU_EVENTS.get(ev, (f"event_{ev}",))[0]] += c
            if not self.counting:
                return b
        new_ovs = 0
        for n in range(8):
            if not (self.cnten >> n) & 1:
                continue
            if n == 0 and self.lut & 1:
                inc = self.lut_count(b)
            else:
                inc = self.count(self.evtype[n] & 0x3FF, (self.evtype[n] >> 12) & 0xF, b)
            if inc:
                v = self.evcnt[n] + inc
                if v >> 32:
                    new_ovs |= 1 << n
                self.evcnt[n] = v & 0xFFFFFFFF
        if self.cnten & CYCLE_BIT:
            start = self.ccnt_cfg & 0x3FF
            stop = (self.ccnt_cfg >> 16) & 0x3FF
            if not self.cc_gate and start != EV_NO_EVENT and \
                    self.count(start, (self.ccnt_cfg >> 12) & 0xF, b):
                self.cc_gate = True
            if self.cc_gate:
                v = self.ccnt + b.cycles
                if v >> CCNT_BITS:
                    new_ovs |= CYCLE_BIT
                self.ccnt = v & ((1 << CCNT_BITS) - 1)
                if stop != EV_NO_EVENT and self.count(stop, (self.ccnt_cfg >> 28) & 0xF, b):
                    self.cc_gate = False
        if new_ovs:
            self._set_ovs(new_ovs)
        return b
