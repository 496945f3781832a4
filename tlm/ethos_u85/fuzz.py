"""The Ethos-U85's hostile-input fuzzing: stream generators and invariants, registered with
the device-neutral engine (tlm/core/fuzz.py) as `TARGET`.

Usage::

    python -m tlm.core.fuzz --cases 20000 [--seed S] [--jobs J]   # report; exit status 1 on violations
    python -m tlm.core.fuzz --seed S --case I                      # replay one case, verbosely
    make fuzz N=20000 [SEED=S] [JOBS=J]

Every case is a pure function of ``(seed, index)`` (and of the Vela corpus, whose
fingerprint the report prints): ``make_case(seed, index)`` builds it, ``run_case(case)``
runs it on a fresh `Device` and checks the invariants.

Generators (`GENERATORS`)
-------------------------
``random_words``   random 32-bit words, half of them with a cmd0/cmd1 header shape.
``isa``            random commands from the ISA table, field values weighted towards real
                   ranges (enum members, small sizes, aligned offsets) with some extremes.
``dma``            well-formed NPU_OP_DMA_START programs: 1D/2D/3D, strides (also negative),
                   gather/scatter, LUT destination, zero/huge sizes.
``wild``           DMA/ISA programs with wild BASEP values (0, near 2**40, overlapping the
                   command stream), random REGIONCFG/MEM_ATTR, offsets near 2**40.
``huge``           huge DMA LEN/SIZE0/SIZE1, OFM/IFM/kernel dimensions, weight/scale lengths.
``branch``         always-taken backwards BRANCH loops (some with a DMA inside), rf_true
                   branches, misaligned and out-of-range targets.
``queue``          QBASE/QSIZE edge cases: QSIZE 0, not a multiple of 4, > 16 MB, shorter
                   than the stream (cmd1 cut), QBASE misaligned or near the top of the
                   40-bit space (the stream wraps), odd QCONFIG.
``apb``            a stream with heavy APB traffic between small run() slices: CMD (RS,
                   clear_irq, stop_request), RESET, QBASE/QSIZE/QCONFIG/REGIONCFG while
                   running, BASEP/MEM_ATTR/PMU writes, random PPROT, unaligned, sub-word.
``fault``          SLVERR/DECERR injected on the stream, weights, scale, IFM/IFM2, OFM and
                   DMA source/destination/index ranges the stream names.
``vela``           real Vela streams (catalog networks x accelerator configs x memory modes,
                   via ``tests/nets``) with bit flips, word swaps, truncation, reserved
                   encodings, huge or random field values, deleted/duplicated commands,
                   inserted loops and STOPs.
Orthogonally, any case may get random configuration, pins (PORPL/PORSL, hashes, caps),
Policy choices, interleaved APB traffic, injected faults and Memory's per-transaction
reference path instead of its batched path. The Policy always has the fuzzer's tighter model
work budgets (`BASE_POLICY`: per-op elements, weights, DMA bytes/lines/pages; sized so the
slowest path of one op stays far inside ``cpu_limit``), each case may use `CASE_WORK` work
units over all its run() slices (run's max_work), and the memory keeps no log (as
tlm.ethos_u85.runner): the fuzzer listens instead.

Invariants (checked on every case; a failure is a *violation*)
--------------------------------------------------------------
* No Python exception escapes `Device` (constructor, run, apb_read, apb_write); no
  'internal_error' event (an unexpected exception inside an operation).
* Bounded: every run(max_steps=k, max_work=w) returns after at most k steps; BUDGET only
  while RUNNING, and only with k steps done or at least w work units used.
  The CPU time of the device calls of a case (including this fuzzer's transaction
  listener, which adds up to ~1/3 on transaction-heavy operations) is at most
  ``cpu_limit`` (5 s); watchdogs abort a case after ``abort_cpu`` (15 s) of CPU time in
  device calls or ``wall_limit`` (120 s) of wall time and report a hang. CPU time, not
  wall time, so that a loaded machine does not produce false reports. `main` also caps
  the address space (``--mem-limit``, 6 GiB): a stream that makes the model allocate more
  ends in a MemoryError inside an operation, i.e. an 'internal_error' violation.
* The executed commands are what an independent decode of the stream memory gives at
  their offsets; a cmd_parse_error for a reserved word / truncated cmd1 and a branch_fault
  are checked against the stream the same way.
* Stops: after a non-budget stop STATE=stopped, irq_raised=1 and the IRQ output is high
  (except a reset stop); END has cmd_end_reached and QREAD == QSIZE; ERROR sets exactly its
  own sticky bit (sticky bits = those before the run plus r.error); STOP/END set none.
  QREAD is a multiple of 4 and <= QSIZE after every run. StopReason.status == STATUS.
* Bus errors: every error response comes from an injected fault (or the end of the 40-bit
  space); the first one stops the NPU with bus_status, faulting_channel/faulting_interface
  equal to that transaction's channel and port group, and no AXI transaction follows it.
  No AXI transaction is made while STOPPED or in reset.
* AXI attributes: AxPROT == PROT; port inside the configured port group; length > 0 and
  the burst does not cross 2**40; the port group, AxCACHE and AxDOMAIN follow MEM_ATTR of
  the region that the operation names for that channel (QCONFIG for rd_cmd). Command
  fetches stay inside [QBASE, align_up(QBASE + QSIZE, 128)).
* Memory: every byte that differs after the case was written by an OKAY write
  transaction; every write transaction belongs to an operation that names it:
  wr_mem2mem only inside NPU_OP_DMA_START with an external destination, at exactly the
  addresses the TRM DMA pseudocode gives (independent oracle, which also checks the
  rd_mem2mem and rd_mem2mem_idx addresses, each channel's transactions as contiguous runs
  in their order, not interleaved with the other channels': the model may batch all line
  reads before all line writes; a failed DMA produces a prefix; a transfer of more than
  ORACLE_MAX_LINES lines is only bounded: its writes lie inside the box of its destination
  lines; a DMA cut by the model's budget moves nothing); wr_ofm only inside a kernel operation whose OFM
  storage is tile2x2/tile3x1, inside the window spanned by OFM_BASE0..3 + BASEP[OFM_REGION]
  and the OFM dimensions/strides. Control operations (STOP, IRQ, waits, PMU_MASK, BRANCH)
  and NPU_SET commands make no data transactions. So the command stream and every region
  no executed operation names as a write destination stay unchanged.
* RESET and PROT (the device's state and their APB read-back, outside a reset sequence)
  change only through permitted APB RESET writes (PROT at the end of the
  reset sequence: CPL = min(PPROT[0], pending_CPL), CSL = pending_CSL | PPROT[1]); a
  non-permitted, unaligned or sub-word APB access answers PSLVERR; APB never raises.
* After the case: ID reads over APB, a RESET write enters reset_status=1, STATUS polling
  reaches 0 (stopped, no IRQ, no fault) and a one-command stream then runs to its STOP.
"""
from __future__ import annotations

import functools
import os
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..core import fuzz as engine
from ..core.fuzz import CaseResult, norm, pick
from . import isa
from . import registers as R
from .config import CONFIGS, Policy
from .device import STICKY_FAULTS, Device, StopKind, StopReason
from .dma_reference import DmaParams, dma_lines, s40
from .memory import ADDR_MASK, PAGE_BITS, PAGE_SIZE, Channel, Memory, Resp, axcache
from .ops import KERNEL_OP_NAMES, KERNEL_OP_SPECS, KERNEL_OPS

__all__ = ["Case", "GENERATORS", "TARGET", "make_case", "run_case", "run", "main"]

OFF = R.OFFSET
_ST, _CMD, _MA, _RC = R.get("STATUS"), R.get("CMD"), R.get("MEM_ATTR0"), R.get("REGIONCFG")
CMD_KEEP = _CMD.encode(clock_q_enable=1, power_q_enable=1)
CMD_RUN = CMD_KEEP | _CMD.encode(transition_to_running_state=1)
ID, STATUS, CMD, RESET, PROT = OFF["ID"], OFF["STATUS"], OFF["CMD"], OFF["RESET"], OFF["PROT"]
QBASE_LO, QBASE_HI, QSIZE, QCONFIG, QREAD = (OFF[k] for k in ("QBASE_LO", "QBASE_HI", "QSIZE", "QCONFIG",
                                                               "QREAD"))
QREGS = (QBASE_LO, QBASE_HI, QSIZE, QCONFIG)
SP = 0b01                       # secure privileged: permitted whatever PROT is
TOP = 1 << 40
DEFAULT_BUDGET = 2000           # steps per case
ORACLE_MAX_LINES = 200_000      # DMA oracle: skip larger transfers
FOOTPRINT_LIMIT = 1 << 30       # sparse-memory pages a case may create (bytes)
# Model work budgets (config.Policy fields) for the fuzzer; the defaults are sized for real
# networks. Worst host costs (Memory's per-transaction path + this fuzzer's listener): ~13 us
# per AXI transaction, ~6 us per ELEMENTWISE element, ~2 us per pooling element-tap on the
# reference paths, ~1.5 M decoded weights/s: each budget keeps one op well under 1 s.
BASE_POLICY = dict(dma_max_bytes=1 << 22, dma_max_lines=1 << 15, dma_max_indexed_lines=1 << 13,
                   dma_max_pages=1 << 12, max_op_pages=1 << 12, max_op_elements=1 << 17,
                   max_op_work=1 << 19, max_op_macs=1 << 28, max_op_weights=1 << 20,
                   max_weight_bytes=1 << 20, max_weight_stream_entries=1 << 22)
CASE_WORK = 1 << 17             # run(max_work) budget of a whole case (Policy.default_max_work units)
DMA_CHANNELS = (Channel.rd_mem2mem, Channel.wr_mem2mem, Channel.rd_mem2mem_idx)
CONFIG_NAMES = tuple(CONFIGS)
STOP_WORD = isa.encode("NPU_OP_STOP")[0]


def _u(rng, lo: int, hi: int) -> int:
    """Uniform integer in [lo, hi]."""
    return int(rng.integers(lo, hi + 1)) if hi > lo else int(lo)


# ============================================================================================
# Vela corpus
# ============================================================================================
CORPUS_SPEC = (
    ("tinynet", "ethos-u85-256", "default"),
    ("tinynet", "ethos-u85-128", "sram_only"),
    ("tinynet", "ethos-u85-2048", "default"),
    ("tinynet", "ethos-u85-256", "separate_io"),
    ("mbv2_block", "ethos-u85-256", "default"),
    ("mbv2_block", "ethos-u85-512", "shared_sram"),
    ("classifier", "ethos-u85-256", "default"),
    ("unet_mini", "ethos-u85-1024", "default"),
    ("conv2d_deep_c200to64", "ethos-u85-256", "default"),
    ("dwconv_5x5_s2_c33", "ethos-u85-256", "default"),
    ("add_bcast_relu", "ethos-u85-256", "default"),
    ("avgpool_3x3_int16", "ethos-u85-256", "default"),
    ("resize_bilinear_4x5to16x20", "ethos-u85-256", "default"),
    ("concat_3way_c8_3_21", "ethos-u85-256", "default"),
    ("softmax_4x4x33", "ethos-u85-256", "default"),
    ("tanh", "ethos-u85-256", "default"),
    ("transpose_0321", "ethos-u85-256", "default"),
    ("conv2d_3x3_int16", "ethos-u85-2048", "sram_only"),
)


@dataclass(frozen=True)
class CorpusEntry:
    name: str
    accel: str
    words: tuple
    read_only: bytes
    tensors: tuple          # (region, offset, nbytes) of inputs and outputs
    scratch: int
    fast: int


@functools.lru_cache(maxsize=1)
def corpus() -> tuple:
    """The Vela streams of CORPUS_SPEC (compiled or taken from the tests/nets cache). Empty
    when neither tests/nets nor a cache is available: the 'vela' generator then falls back
    to 'isa', the report says EMPTY, and under CI (CI=true) `main` refuses to run."""
    from .vela import load

    paths = []
    root = Path(__file__).resolve().parents[2]
    try:
        import importlib
        nets = importlib.import_module("tests.nets")   # test-side catalog, optional
        for name, accel, mode in CORPUS_SPEC:
            try:
                paths.append((f"{name}/{accel}/{mode}", accel, nets.compiled(name, accel, mode)))
            except Exception:  # noqa: BLE001 - vela missing or failing: use what there is
                pass
    except Exception:  # noqa: BLE001
        pass
    if not paths:
        cache = Path(os.environ.get("NETS_VELA_CACHE") or root / "build" / "vela-cache")
        for p in sorted(cache.glob("*/*_vela.npz"))[:24]:
            paths.append((p.parent.name, None, p))
    out = []
    for label, accel, p in paths:
        try:
            m = load(p)
        except Exception:  # noqa: BLE001
            continue
        tensors = tuple((t.region, t.offset, t.nbytes) for t in m.inputs + m.outputs)
        out.append(CorpusEntry(label, accel or m.accelerator or "ethos-u85-256",
                               tuple(int(w) for w in m.command_words), bytes(m.read_only), tensors,
                               int(m.scratch_size), int(m.scratch_fast_size)))
    return tuple(out)


def corpus_fingerprint() -> str:
    h = 0
    for e in corpus():
        h = zlib.crc32(repr((e.name, e.words, len(e.read_only))).encode(), h)
    return f"{len(corpus())} streams, crc {h:08x}"


def load_kernel_ops() -> list[str]:
    """Import every tlm.ethos_u85.ops submodule (so that the kernel operations exist before the first
    case, as the Device would register them on first use). Returns import failures
    (module: error) for the report."""
    import importlib
    import pkgutil

    bad = []
    try:
        from . import ops
    except Exception as e:  # noqa: BLE001 - a half-written op must not stop the fuzzer
        return [f"tlm.ethos_u85.ops: {type(e).__name__}: {e}"]
    for m in pkgutil.iter_modules(ops.__path__):
        try:
            importlib.import_module(f"{ops.__name__}.{m.name}")
        except Exception as e:  # noqa: BLE001
            bad.append(f"tlm.ethos_u85.ops.{m.name}: {type(e).__name__}: {e}")
    try:
        Device()                                          # registers tlm.ethos_u85.ops.KERNEL_OPS
    except Exception as e:  # noqa: BLE001
        bad.append(f"Device(): {type(e).__name__}: {e}")
    return bad


# ============================================================================================
# Cases
# ============================================================================================
@dataclass
class Case:
    seed: int
    index: int
    gen: str
    notes: list = field(default_factory=list)
    config: str = "ethos-u85-256"
    pins: dict = field(default_factory=dict)
    policy_kw: dict = field(default_factory=lambda: dict(BASE_POLICY))
    setup: list = field(default_factory=list)      # (offset, data): APB writes with S+P before start
    qbase: int = 0x1000
    stream: list = field(default_factory=list)     # 32-bit words placed at QBASE (wrapping at 2**40)
    qsize: "int | None" = None                     # None: 4 * len(stream)
    qbase_hi_raw: "int | None" = None              # value written to QBASE_HI (default qbase >> 32)
    preload: list = field(default_factory=list)    # (addr, bytes), wrapping at 2**40
    faults: list = field(default_factory=list)     # (lo, hi, resp, kind)
    chunks: list = field(default_factory=lambda: [DEFAULT_BUDGET])   # run(max_steps) slices
    apb: list = field(default_factory=list)        # APB ops issued after slice i
    result_flag: int = 0
    per_txn_path: bool = False                     # disable Memory's batched path for this case

    @property
    def repro(self) -> str:
        return f"python -m tlm.core.fuzz --device ethos-u85 --seed {self.seed} --case {self.index}"


class _Stream:
    """Command-stream builder with late-bound branch targets."""

    def __init__(self):
        self.words: list[int] = []
        self.offsets: list[int] = []
        self._branches: list[tuple[int, str]] = []

    def add(self, words) -> None:
        self.offsets.append(4 * len(self.words))
        self.words += [int(w) & 0xFFFFFFFF for w in words]

    def cmd(self, name: str, **fields) -> None:
        self.add(isa.encode(name, **fields))

    def branch(self, cond: int, target: str) -> None:
        self._branches.append((len(self.words) + 1, target))
        self.add(isa.encode("NPU_OP_BRANCH", branch_cond=cond))

    def finish(self, rng) -> list[int]:
        size = 4 * len(self.words)
        for wi, spec in self._branches:
            here = 4 * (wi - 1)
            back = [o for o in self.offsets if o <= here] or [0]
            fwd = [o for o in self.offsets if o > here] or [size]
            t = {"back": lambda b=back: pick(rng, b), "fwd": lambda f=fwd: pick(rng, f),
                 "mis": lambda b=back: pick(rng, b) + _u(rng, 1, 3),
                 "end": lambda: size, "out": lambda: size + 4 * _u(rng, 1, 1 << 20),
                 "any": lambda: _u(rng, 0, 0xFFFFFFFF)}[spec]()
            self.words[wi] = t & 0xFFFFFFFF
        return self.words


# -------------------------------------------------------------------------- field values
def _rand_field(rng, f: isa.Field, huge: float = 0.1) -> int:
    lo, hi = f.range
    if f.untyped:
        lo = 0
    if f.enum is not None and rng.random() < 0.85:
        return int(pick(rng, [int(m) for m in f.enum]))
    if f.name == "region":
        return _u(rng, 0, 7) if rng.random() < 0.3 else _u(rng, 0, 4)
    p = rng.random()
    if p < 0.35:
        return _u(rng, max(lo, 0), min(hi, 16))
    if p < 0.6:
        v = _u(rng, max(lo, 0), min(hi, 4096))
        return v & ~15 if f.name == "addr" and rng.random() < 0.5 else v
    if p < 0.6 + huge:
        return hi - _u(rng, 0, min(3, hi - lo))
    if p < 0.75 + huge:
        return min(hi, 1 << _u(rng, 0, f.width - 1))
    if p < 0.85 + huge and lo < 0:
        return -_u(rng, 1, min(-lo, 1 << 16))
    return _u(rng, lo, hi)


def _rand_command(rng, cmd: isa.Command, reserved: float = 0.04, huge: float = 0.1) -> list[int]:
    vals = {f.name: _rand_field(rng, f, huge) for f in cmd.fields}
    raw = cmd.encode_raw(**vals)
    if rng.random() < reserved:
        raw |= (int(rng.integers(0, 1 << 32)) | int(rng.integers(0, 1 << 32)) << 32) & cmd.reserved_mask
    return [raw & 0xFFFFFFFF, raw >> 32] if cmd.kind else [raw]


_SETS = [c for c in isa.COMMANDS if not c.is_op]
_OP_WEIGHTS = {"NPU_OP_DMA_START": 5, **{n: op.fuzz_weight for n, op in KERNEL_OP_SPECS.items()},
               "NPU_OP_IRQ": 1, "NPU_OP_DMA_WAIT": 1, "NPU_OP_KERNEL_WAIT": 1, "NPU_OP_PMU_MASK": 0.5,
               "NPU_OP_STOP": 0.3, "NPU_OP_BRANCH": 0.7}
_OP_NAMES = list(_OP_WEIGHTS)
_OP_P = np.array(list(_OP_WEIGHTS.values())) / sum(_OP_WEIGHTS.values())


# -------------------------------------------------------------------------- layout
def _regions(rng, c: Case, hostile: float = 0.0) -> list[int]:
    """Program BASEP0..7 (and often MEM_ATTR/REGIONCFG/AXI_*) in the setup; returns BASEP."""
    basep = []
    for n in range(8):
        if rng.random() < hostile:
            v = pick(rng, [0, ADDR_MASK & ~0xF, TOP - 0x1000 * _u(rng, 1, 16), _u(rng, 0, ADDR_MASK),
                            c.qbase, 1 << 39, basep[-1] if basep else 0, TOP - _u(rng, 1, 64)])
        else:
            v = ((n + 1) << 28) + 0x1000 * _u(rng, 0, 0xFFF)
        v &= ADDR_MASK
        basep.append(v)
        c.setup += [(OFF[f"BASEP{n}_LO"], v & 0xFFFFFFFF), (OFF[f"BASEP{n}_HI"], v >> 32)]
    if rng.random() < 0.7:
        for k in range(4):
            c.setup.append((OFF[f"MEM_ATTR{k}"], _MA.encode(memtype=_u(rng, 0, 0xB), axi_port=_u(rng, 0, 1),
                                                         mem_domain=_u(rng, 0, 3))))
        c.setup.append((OFF["REGIONCFG"], _u(rng, 0, 0xFFFF)))
    if rng.random() < 0.3:
        c.setup.append((OFF["AXI_SRAM"], _u(rng, 0, 0xFFFFFFFF)))
        c.setup.append((OFF["AXI_EXT"], _u(rng, 0, 0xFFFFFFFF)))
    if rng.random() < 0.2:
        c.setup.append((QCONFIG, _u(rng, 0, 3)))
    return basep


def _fill(rng, c: Case, basep, n_max: int = 4096) -> None:
    """Random bytes at the start of every region, so reads see data."""
    for b in basep:
        c.preload.append((b, rng.bytes(_u(rng, 64, n_max))))


def _common(rng, c: Case) -> None:
    """Configuration, pins, policy and stream placement shared by all generators."""
    c.config = pick(rng, CONFIG_NAMES, p=[0.15, 0.4, 0.15, 0.15, 0.15])
    pins = {}
    if rng.random() < 0.3:
        pins["PORPL"] = _u(rng, 0, 1)
    if rng.random() < 0.3:
        pins["PORSL"] = _u(rng, 0, 1)
    if rng.random() < 0.3:
        for k in ("CFGSRAMHASH0", "CFGSRAMHASH1", "CFGEXTHASH0"):
            pins[k] = pick(rng, [1 << _u(rng, 6, 20), _u(rng, 0, ADDR_MASK) & ~0x3F, 0x40])
    if rng.random() < 0.15:
        pins["CFGSRAMCAP"] = _u(rng, 0, 0x3FFFF)
        pins["CFGEXTCAP"] = _u(rng, 0, 0x3FFFF)
    c.pins = pins
    if rng.random() < 0.25:
        c.policy_kw.update(
            parse_error_on_reserved=bool(rng.random() < 0.6),
            on_unpredictable=pick(rng, ["continue", "parse_error"]),
            on_model_limit=pick(rng, ["continue", "parse_error"]),
            on_unimplemented_op=pick(rng, ["continue", "parse_error"]),
            branch_misaligned=pick(rng, ["parse_error", "align", "branch_fault"]),
            fetch_block=pick(rng, [4, 16, 64, 256]),
            run_with_sticky_fault=pick(rng, ["ignore", "run"], p=[0.8, 0.2]),
            resume_after_stop_request=bool(rng.random() < 0.5),
            running_unpredictable=pick(rng, ["slverr", "ignore", "allow"]))
    c.qbase = 0x1000 * _u(rng, 1, 0x7FFF)
    c.result_flag = _u(rng, 0, 1)


# -------------------------------------------------------------------------- DMA programs
def _dma_len(rng, huge: float) -> int:
    p = rng.random()
    if p < huge:
        return pick(rng, [(1 << 22) + 1, 1 << 28, ADDR_MASK, _u(rng, 1 << 20, ADDR_MASK), 1 << 39])
    return pick(rng, [0, _u(rng, 1, 16), _u(rng, 17, 512), _u(rng, 513, 8192)], p=[0.05, 0.35, 0.4, 0.2])


def _dma_size(rng, huge: float) -> int:
    if rng.random() < huge:
        return pick(rng, [0xFFFF, _u(rng, 1024, 0xFFFF), 4096])
    return pick(rng, [0, _u(rng, 1, 8), _u(rng, 9, 64), _u(rng, 65, 300)], p=[0.08, 0.5, 0.3, 0.12])


def _stride(rng, length: int, huge: float) -> int:
    p = rng.random()
    if p < huge:
        return pick(rng, [(1 << 39) - 1, -(1 << 39), _u(rng, -(1 << 39), (1 << 39) - 1)])
    return pick(rng, [0, length, length + _u(rng, 1, 64), -max(length, 1), 16 * _u(rng, 0, 256),
                       -16 * _u(rng, 1, 256)], p=[0.1, 0.3, 0.2, 0.1, 0.2, 0.1])


def _dma_program(rng, s: _Stream, c: Case, basep, huge: float = 0.05, wait: bool = True) -> dict:
    """SET_DMA0_* + NPU_OP_DMA_START (+ DMA_WAIT). Preloads source data and index arrays."""
    src_r, dst_r, idx_r = _u(rng, 0, 7), _u(rng, 0, 7), _u(rng, 0, 7)
    stride_mode = pick(rng, [0, 1, 2, 3], p=[0.38, 0.29, 0.29, 0.04])
    src_idx = rng.random() < 0.15
    dst_idx = rng.random() < (0.03 if src_idx else 0.12)
    internal = rng.random() < 0.12
    length = _dma_len(rng, huge)
    size0, size1 = _dma_size(rng, huge), _dma_size(rng, huge)
    src, dst = _u(rng, 0, 0x4000), _u(rng, 0, 0x40000)
    if internal:
        dst = 16 * _u(rng, 0, 127) + (_u(rng, 1, 15) if rng.random() < 0.1 else 0)
        if rng.random() < 0.85 and length < (1 << 20):
            length = 16 * _u(rng, 1, 32) + (_u(rng, 1, 15) if rng.random() < 0.1 else 0)
    if rng.random() < huge:
        src, dst = pick(rng, [ADDR_MASK - _u(rng, 0, 4096), _u(rng, 0, ADDR_MASK)]), \
            pick(rng, [ADDR_MASK - _u(rng, 0, 4096), _u(rng, 0, ADDR_MASK)])
    idx, idx_max = 16 * _u(rng, 0, 256), pick(rng, [_u(rng, 0, 16), _u(rng, 0, 300), 0x7FFFFFFF])
    s.cmd("NPU_SET_DMA0_SRC_REGION", region=src_r, region_mode=int(rng.random() < 0.04),
          stride_mode=stride_mode, idx_mode=int(src_idx))
    s.cmd("NPU_SET_DMA0_DST_REGION", region=dst_r, region_mode=int(internal), idx_mode=int(dst_idx))
    s.cmd("NPU_SET_DMA0_SRC", addr=src)
    s.cmd("NPU_SET_DMA0_DST", addr=dst)
    s.cmd("NPU_SET_DMA0_LEN", addr=length)
    if stride_mode or src_idx or dst_idx or rng.random() < 0.3:
        s.cmd("NPU_SET_DMA0_SIZE0", size=size0)
        s.cmd("NPU_SET_DMA0_SRC_STRIDE0", addr=s40(_stride(rng, length, huge)))
        s.cmd("NPU_SET_DMA0_DST_STRIDE0", addr=s40(_stride(rng, length, huge)))
    if stride_mode == 2 or rng.random() < 0.2:
        s.cmd("NPU_SET_DMA0_SIZE1", size=size1)
        s.cmd("NPU_SET_DMA0_SRC_STRIDE1", addr=s40(_stride(rng, length * max(size0, 1), huge)))
        s.cmd("NPU_SET_DMA0_DST_STRIDE1", addr=s40(_stride(rng, length * max(size0, 1), huge)))
    if src_idx or dst_idx:
        s.cmd("NPU_SET_DMA0_IDX_REGION", region=idx_r)
        s.cmd("NPU_SET_DMA0_IDX", addr=idx)
        s.cmd("NPU_SET_DMA0_IDX_MAX", idx_max=idx_max)
        s.cmd("NPU_SET_DMA0_IDX_SKIP1", addr=pick(rng, [0, 4 * _u(rng, 0, 64), -4 * _u(rng, 1, 64)]))
        n = min(max(size0, 1) * max(size1, 1), 4096)
        vals = rng.integers(-3, min(idx_max, 1 << 20) + 4, n).astype("<i4")
        c.preload.append(((basep[idx_r] + idx) & ADDR_MASK, vals.tobytes()))
    if length and length < (1 << 16):
        c.preload.append(((basep[src_r] + src) & ADDR_MASK, rng.bytes(min(length * 4, 1 << 16))))
    s.cmd("NPU_OP_DMA_START")
    if wait:
        s.cmd("NPU_OP_DMA_WAIT", k=_u(rng, 0, 3) if rng.random() < 0.2 else 0)
    return dict(src=(basep[src_r] + src) & ADDR_MASK, dst=(basep[dst_r] + dst) & ADDR_MASK,
                idx=(basep[idx_r] + idx) & ADDR_MASK, length=length, internal=internal)


# -------------------------------------------------------------------------- kernel op state
def _kernel_program(rng, s: _Stream, huge: float = 0.0) -> None:
    """A plausible full register state for a kernel operation, then the operation. With
    `huge`, some dimensions/lengths/strides take extreme values."""
    def big(v, lim):
        return lim if rng.random() < huge else v

    h, w, cin, cout = _u(rng, 1, 16), _u(rng, 1, 16), _u(rng, 1, 32), _u(rng, 1, 32)
    kh, kw = _u(rng, 1, 3), _u(rng, 1, 3)
    prec = pick(rng, [0, 1], p=[0.8, 0.2])
    es = 1 << prec
    for pre, ch in (("IFM", cin), ("IFM2", cin)):
        s.cmd(f"NPU_SET_{pre}_PRECISION", activation_type=1, activation_precision=prec,
              activation_format=_u(rng, 0, 1) if rng.random() < 0.2 else 0,
              activation_storage=pick(rng, [0, 1, 2, 3], p=[0.85, 0.05, 0.05, 0.05]))
        s.cmd(f"NPU_SET_{pre}_REGION", region=_u(rng, 0, 4))
        for t in range(4):
            s.cmd(f"NPU_SET_{pre}_BASE{t}", addr=big(64 * _u(rng, 0, 64), ADDR_MASK - 15))
        s.cmd(f"NPU_SET_{pre}_WIDTH0_M1", width_m1=big(w - 1, 0xFFFF))
        s.cmd(f"NPU_SET_{pre}_HEIGHT0_M1", height_m1=big(h - 1, 0xFFFF))
        s.cmd(f"NPU_SET_{pre}_HEIGHT1_M1", height_m1=big(h - 1, 0xFFFF))
        s.cmd(f"NPU_SET_{pre}_STRIDE_X", addr=big(ch * es, ADDR_MASK))
        s.cmd(f"NPU_SET_{pre}_STRIDE_Y", addr=big(w * ch * es, 1 << 39))
        s.cmd(f"NPU_SET_{pre}_STRIDE_C", addr=big(16 * es, ADDR_MASK))
        s.cmd(f"NPU_SET_{pre}_ZERO_POINT", zero_point=_u(rng, 0, 0xFFFF) if rng.random() < 0.3 else 0)
    s.cmd("NPU_SET_IFM_DEPTH_M1", depth_m1=big(cin - 1, 0xFFFF))
    for side in ("TOP", "LEFT"):
        s.cmd(f"NPU_SET_IFM_PAD_{side}", pad=big(_u(rng, 0, 1), 127))
    for side in ("RIGHT", "BOTTOM"):
        s.cmd(f"NPU_SET_IFM_PAD_{side}", pad=big(_u(rng, 0, 1), 255))
    s.cmd("NPU_SET_OFM_PRECISION", activation_type=1, activation_precision=prec,
          activation_format=_u(rng, 0, 1) if rng.random() < 0.2 else 0,
          activation_storage=pick(rng, [0, 1, 2, 3], p=[0.8, 0.08, 0.06, 0.06]),
          activation_reverse=_u(rng, 0, 3) if rng.random() < 0.1 else 0,
          activation_transpose=pick(rng, [0, 1, 2, 3, 6, 7]) if rng.random() < 0.1 else 0)
    s.cmd("NPU_SET_OFM_REGION", region=_u(rng, 0, 4))
    for t in range(4):
        s.cmd(f"NPU_SET_OFM_BASE{t}", addr=big(64 * _u(rng, 0, 64), ADDR_MASK - 15))
    s.cmd("NPU_SET_OFM_WIDTH_M1", width_m1=big(w - 1, 0xFFFF))
    s.cmd("NPU_SET_OFM_HEIGHT_M1", height_m1=big(h - 1, 0xFFFF))
    s.cmd("NPU_SET_OFM_DEPTH_M1", depth_m1=big(cout - 1, 0xFFFF))
    s.cmd("NPU_SET_OFM_WIDTH0_M1", width_m1=big(w - 1, 0xFFFF))
    s.cmd("NPU_SET_OFM_HEIGHT0_M1", height_m1=big(h - 1, 0xFFFF))
    s.cmd("NPU_SET_OFM_HEIGHT1_M1", height_m1=big(h - 1, 0xFFFF))
    s.cmd("NPU_SET_OFM_STRIDE_X", addr=big(cout * es, ADDR_MASK))
    s.cmd("NPU_SET_OFM_STRIDE_Y", addr=big(w * cout * es, ADDR_MASK))
    s.cmd("NPU_SET_OFM_STRIDE_C", addr=big(16 * es, ADDR_MASK))
    s.cmd("NPU_SET_OFM_BLK_WIDTH_M1", width_m1=big(min(w, 16) - 1, 127))
    s.cmd("NPU_SET_OFM_BLK_HEIGHT_M1", height_m1=big(min(h, 16) - 1, 127))
    s.cmd("NPU_SET_OFM_BLK_DEPTH_M1", depth_m1=big(min(cout, 16) - 1, 1023))
    s.cmd("NPU_SET_KERNEL_WIDTH_M1", width_m1=big(kw - 1, 0xFFFF))
    s.cmd("NPU_SET_KERNEL_HEIGHT_M1", height_m1=big(kh - 1, 0xFFFF))
    s.cmd("NPU_SET_KERNEL_STRIDE", stride_x_lsb=_u(rng, 0, 1), stride_y_lsb=_u(rng, 0, 1),
          stride_x_msb=int(rng.random() < huge), stride_y_msb=int(rng.random() < huge),
          weight_order=_u(rng, 0, 1), dilation_x=_u(rng, 0, 1) if rng.random() < 0.2 else 0)
    s.cmd("NPU_SET_WEIGHT_REGION", region=_u(rng, 0, 4))
    s.cmd("NPU_SET_WEIGHT_BASE", addr=big(16 * _u(rng, 0, 256), ADDR_MASK - 15))
    s.cmd("NPU_SET_WEIGHT_LENGTH", length=big(16 * _u(rng, 1, 256), 0xFFFFFFFF))
    s.cmd("NPU_SET_WEIGHT_FORMAT", weight_format=_u(rng, 0, 1) if rng.random() < 0.2 else 0,
          weight_sparsity=int(rng.random() < 0.1))
    s.cmd("NPU_SET_SCALE_REGION", region=_u(rng, 0, 4))
    s.cmd("NPU_SET_SCALE_BASE", addr=big(16 * _u(rng, 0, 256), ADDR_MASK - 15))
    s.cmd("NPU_SET_SCALE_LENGTH", length=big(10 * cout, 0xFFFFF))
    s.cmd("NPU_SET_OFM_SCALE", shift=_u(rng, 0, 63), scale=_u(rng, 0, 0x7FFFFFFF))
    s.cmd("NPU_SET_ACC_FORMAT", acc_format=_u(rng, 0, 1), microblock=_u(rng, 0, 5))
    s.cmd("NPU_SET_ACTIVATION", activation_function=0 if rng.random() < 0.8 else _u(rng, 0, 11),
          table=_u(rng, 0, 7))
    if rng.random() < 0.5:
        s.cmd("NPU_SET_ACTIVATION_MIN", clip_boundary=0x8000 if prec else 0xFF80)
        s.cmd("NPU_SET_ACTIVATION_MAX", clip_boundary=0x7FFF if prec else 0x7F)
    op = pick(rng, list(KERNEL_OP_NAMES))
    f = {"NPU_OP_CONV": dict(weights_ifm2=int(rng.random() < 0.1)),
         "NPU_OP_POOL": dict(pooling_mode=_u(rng, 0, 7)),
         "NPU_OP_ELEMENTWISE": dict(elementwise_mode=int(pick(rng, [int(m) for m in isa.elementwise_mode]))),
         "NPU_OP_RESIZE": dict(resize_mode=_u(rng, 0, 2))}.get(op, {})
    s.cmd(op, **f)


def _random_cmds(rng, s: _Stream, n: int, huge: float = 0.1) -> None:
    for _ in range(n):
        p = rng.random()
        if p < 0.65:
            s.add(_rand_command(rng, pick(rng, _SETS), huge=huge))
        else:
            name = pick(rng, _OP_NAMES, p=_OP_P)
            if name == "NPU_OP_BRANCH":
                s.branch(int(rng.random() < 0.2), pick(rng, ["back", "fwd", "mis", "end", "out", "any"],
                                                        p=[0.35, 0.35, 0.08, 0.08, 0.07, 0.07]))
            else:
                s.add(_rand_command(rng, isa.BY_NAME[name], huge=huge))


# -------------------------------------------------------------------------- generators
def gen_random_words(rng, c: Case) -> None:
    _common(rng, c)
    basep = _regions(rng, c, hostile=0.2)
    _fill(rng, c, basep)
    n = _u(rng, 0, 64)
    words = []
    for _ in range(n):
        if rng.random() < 0.5:
            words.append(_u(rng, 0, 0xFFFFFFFF))
        else:     # header-shaped: control 0/1 (sometimes 2/3), bits [13:10] mostly 0
            ctrl = pick(rng, [0, 1, 2, 3], p=[0.45, 0.45, 0.05, 0.05])
            mid = _u(rng, 1, 15) if rng.random() < 0.1 else 0
            words.append(_u(rng, 0, 0xFFFF) << 16 | ctrl << 14 | mid << 10 | _u(rng, 0, 0x3FF))
    c.stream = words
    c.notes.append(f"{n} random words")


def gen_isa(rng, c: Case) -> None:
    _common(rng, c)
    basep = _regions(rng, c, hostile=0.05)
    _fill(rng, c, basep)
    s = _Stream()
    for _ in range(_u(rng, 1, 6)):
        p = rng.random()
        if p < 0.3:
            _dma_program(rng, s, c, basep)
        elif p < 0.45:
            _kernel_program(rng, s)
        _random_cmds(rng, s, _u(rng, 0, 20))
    if rng.random() < 0.3:
        s.cmd("NPU_OP_STOP", mask=_u(rng, 0, 0xFFFF))
    c.stream = s.finish(rng)
    c.notes.append(f"{len(s.offsets)} random ISA commands")


def gen_dma(rng, c: Case) -> None:
    _common(rng, c)
    basep = _regions(rng, c, hostile=0.0)
    _fill(rng, c, basep)
    s = _Stream()
    n = _u(rng, 1, 4)
    for _ in range(n):
        _dma_program(rng, s, c, basep, huge=0.03, wait=rng.random() < 0.8)
        if rng.random() < 0.2:
            s.cmd("NPU_OP_KERNEL_WAIT", n=_u(rng, 0, 1))
    if rng.random() < 0.5:
        s.cmd("NPU_OP_STOP", mask=_u(rng, 0, 0xFFFF))
    c.stream = s.finish(rng)
    c.notes.append(f"{n} DMA programs")


def gen_wild(rng, c: Case) -> None:
    _common(rng, c)
    basep = _regions(rng, c, hostile=0.6)
    _fill(rng, c, basep, 1024)
    s = _Stream()
    for _ in range(_u(rng, 1, 4)):
        if rng.random() < 0.6:
            _dma_program(rng, s, c, basep, huge=0.3)
        elif rng.random() < 0.5:
            _kernel_program(rng, s, huge=0.3)
        else:
            _random_cmds(rng, s, _u(rng, 1, 12), huge=0.4)
    c.stream = s.finish(rng)
    c.notes.append("wild BASEP/regions/offsets: " + " ".join(f"{b:#x}" for b in basep))


def gen_huge(rng, c: Case) -> None:
    _common(rng, c)
    basep = _regions(rng, c, hostile=0.1)
    _fill(rng, c, basep, 1024)
    s = _Stream()
    for _ in range(_u(rng, 1, 3)):
        if rng.random() < 0.55:
            _dma_program(rng, s, c, basep, huge=0.7)
        else:
            _kernel_program(rng, s, huge=0.5)
    c.stream = s.finish(rng)
    c.notes.append("huge sizes")


def gen_branch(rng, c: Case) -> None:
    _common(rng, c)
    basep = _regions(rng, c)
    _fill(rng, c, basep)
    s = _Stream()
    _random_cmds(rng, s, _u(rng, 0, 4), huge=0.0)
    if rng.random() < 0.3:
        _dma_program(rng, s, c, basep, huge=0.0)
    p = rng.random()
    if p < 0.6:
        s.branch(0, "back")
    elif p < 0.75:
        s.branch(1, pick(rng, ["back", "fwd"]))
    else:
        s.branch(_u(rng, 0, 1), pick(rng, ["mis", "end", "out", "any"]))
    _random_cmds(rng, s, _u(rng, 0, 3), huge=0.0)
    c.stream = s.finish(rng)
    c.chunks = [pick(rng, [300, 1000])]
    c.notes.append("BRANCH loop / target edge case")


def gen_queue(rng, c: Case) -> None:
    gen_isa(rng, c) if rng.random() < 0.5 else gen_dma(rng, c)
    c.gen = "queue"
    n = 4 * len(c.stream)
    p = rng.random()
    if p < 0.15:
        c.qsize, what = 0, "QSIZE 0"
    elif p < 0.35:
        c.qsize, what = max(0, n + pick(rng, [-3, -2, -1, 1, 2, 3])), "QSIZE not a multiple of 4"
    elif p < 0.5:
        c.qsize, what = pick(rng, [(1 << 24) + 4, 0xFFFFFFFC, 0xFFFFFFFF, (1 << 24) + 2]), "QSIZE > 16 MB"
    elif p < 0.6:
        c.qsize, what = max(0, n - 4 * _u(rng, 1, 3)), "QSIZE shorter than the stream"
    elif p < 0.85:
        c.qbase = TOP - 4 * _u(rng, 1, max(1, len(c.stream) + 2))
        what = f"stream at the top of the 40-bit space (QBASE {c.qbase:#x}, wraps)"
    else:
        c.qbase = c.qbase + _u(rng, 1, 3)
        what = "QBASE not 4-byte aligned"
    if rng.random() < 0.2:
        c.qbase_hi_raw = (c.qbase >> 32) | _u(rng, 1, 0xFFFFFF) << 8
        what += ", QBASE_HI reserved bits"
    if rng.random() < 0.3:
        c.setup.append((QCONFIG, _u(rng, 0, 0xFFFFFFFF)))
    c.notes.append(what)


def _apb_ops(rng, n: int, reset_p: float = 0.02) -> list:
    ops = []
    regs = [r.offset for r in R.iter_registers()]
    for _ in range(n):
        p = rng.random()
        pprot = SP if rng.random() < 0.6 else _u(rng, 0, 7)
        if p < 0.25:
            ops.append(("r", pick(rng, [STATUS, QREAD, PROT, ID, CMD, RESET, QBASE_LO, QSIZE,
                                         OFF["COND_STATUS"], pick(rng, regs)]), pprot))
        elif p < 0.45:
            rs, cq, sq = (_CMD.field(f).mask for f in ("transition_to_running_state", "clear_irq", "stop_request"))
            data = (CMD_KEEP if rng.random() < 0.8 else _u(rng, 0, CMD_KEEP | rs | cq)) \
                | pick(rng, [0, rs, cq, sq, sq | rs, sq | cq, sq | rs | cq])
            if rng.random() < 0.2:
                data |= _CMD.field("clear_irq_history").put(0, _u(rng, 0, 0xFFFF))
            ops.append(("w", CMD, data, pprot, 0xF))
        elif p < 0.45 + reset_p:
            ops.append(("w", RESET, pick(rng, [0, 1, 2, 3, _u(rng, 0, 0xFFFFFFFF)]), pprot, 0xF))
        elif p < 0.62:
            ops.append(("w", pick(rng, list(QREGS)), pick(rng, [0, 4, _u(rng, 0, 0xFFFFFFFF), 0x1000]), pprot, 0xF))
        elif p < 0.75:
            reg = pick(rng, [OFF["REGIONCFG"], OFF[f"MEM_ATTR{_u(rng, 0, 3)}"], OFF[f"BASEP{_u(rng, 0, 7)}_LO"],
                              OFF[f"BASEP{_u(rng, 0, 7)}_HI"], OFF["POWER_CTRL"], OFF["AXI_EXT"]])
            ops.append(("w", reg, _u(rng, 0, 0xFFFFFFFF), pprot, 0xF))
        elif p < 0.85:
            reg = pick(rng, [r.offset for r in R.iter_registers("PMU")] + [OFF["PMEVTYPER0"], OFF["PMEVCNTR0"]])
            ops.append(("w", reg, _u(rng, 0, 0xFFFFFFFF), pprot, 0xF))
        else:
            addr = 4 * _u(rng, 0, 0x7FF) + (_u(rng, 1, 3) if rng.random() < 0.1 else 0)
            if rng.random() < 0.5:
                ops.append(("r", addr, pprot))
            else:
                ops.append(("w", addr, _u(rng, 0, 0xFFFFFFFF), pprot,
                            _u(rng, 0, 15) if rng.random() < 0.15 else 0xF))
    return ops


def _interleave(rng, c: Case, storm: bool) -> None:
    k = _u(rng, 3, 20) if storm else _u(rng, 1, 4)
    total = sum(c.chunks)
    small = [_u(rng, 1, 40) for _ in range(k)]
    c.chunks = small + [max(1, total - sum(small))]
    c.apb = [_apb_ops(rng, _u(rng, 1, 6 if storm else 3), reset_p=0.05 if storm else 0.01) for _ in small]


def gen_apb(rng, c: Case) -> None:
    pick(rng, [gen_isa, gen_dma, gen_branch, gen_vela_mutant], p=[0.3, 0.3, 0.2, 0.2])(rng, c)
    c.gen = "apb"
    _interleave(rng, c, storm=True)
    c.notes.append("APB storm")


def _targets(words, basep) -> list:
    """(what, addr, length, kind) of the memory the stream names, by a static replay."""
    out = []
    rf = isa.RegisterFile()
    try:
        for d in isa.iter_decode(words):
            if not d.cmd.is_op:
                rf.set(d)
                continue
            F = rf.field
            if d.name == "NPU_OP_DMA_START":
                n = max(1, min(F("NPU_SET_DMA0_LEN", "addr"), 1 << 16))
                for what, region, addr, size, kind in (("src", "SRC_REGION", "SRC", n, "r"),
                                                       ("dst", "DST_REGION", "DST", n, "w"),
                                                       ("idx", "IDX_REGION", "IDX", 64, "r")):
                    out.append((f"dma_{what}", basep[F(f"NPU_SET_DMA0_{region}", "region")]
                                + F(f"NPU_SET_DMA0_{addr}", "addr"), size, kind))
            elif d.name in KERNEL_OP_NAMES:
                out.append(("ifm", basep[F("NPU_SET_IFM_REGION", "region")] + F("NPU_SET_IFM_BASE0", "addr"), 256, "r"))
                out.append(("ifm2", basep[F("NPU_SET_IFM2_REGION", "region")] + F("NPU_SET_IFM2_BASE0", "addr"),
                            256, "r"))
                out.append(("weights", basep[F("NPU_SET_WEIGHT_REGION", "region")] + F("NPU_SET_WEIGHT_BASE", "addr"),
                            max(1, min(F("NPU_SET_WEIGHT_LENGTH", "length"), 1 << 16)), "r"))
                out.append(("scale", basep[F("NPU_SET_SCALE_REGION", "region")] + F("NPU_SET_SCALE_BASE", "addr"),
                            max(1, min(F("NPU_SET_SCALE_LENGTH", "length"), 1 << 16)), "r"))
                out.append(("ofm", basep[F("NPU_SET_OFM_REGION", "region")] + F("NPU_SET_OFM_BASE0", "addr"), 256, "w"))
    except isa.IsaError:
        pass
    return [(w, a & ADDR_MASK, n, k) for w, a, n, k in out]


def _basep_of(c: Case) -> list[int]:
    b = [0] * 8
    for off, v in c.setup:
        for n in range(8):
            if off == OFF[f"BASEP{n}_LO"]:
                b[n] = (b[n] & ~0xFFFFFFFF) | v
            elif off == OFF[f"BASEP{n}_HI"]:
                b[n] = (b[n] & 0xFFFFFFFF) | (v & 0xFF) << 32
    return b


def _add_faults(rng, c: Case, n: int) -> None:
    targets = _targets(c.stream, _basep_of(c))
    for _ in range(n):
        resp = pick(rng, [Resp.SLVERR, Resp.DECERR])
        if targets and rng.random() < 0.7:
            what, a, length, kind = pick(rng, targets)
            lo = (a + _u(rng, 0, max(0, min(length, 4096) - 1))) & ADDR_MASK
            kind = kind if rng.random() < 0.7 else "rw"
        else:
            what, kind = "stream", pick(rng, ["r", "rw"])
            lo = (c.qbase & ~3) + 4 * _u(rng, 0, max(0, len(c.stream) + 8))
            lo &= ADDR_MASK
        hi = min(lo + pick(rng, [1, 4, _u(rng, 1, 64), _u(rng, 64, 4096)]), TOP)
        c.faults.append((lo, hi, int(resp), kind))
        c.notes.append(f"fault {Resp(resp).name} {kind} on {what} [{lo:#x}, {hi:#x})")


def gen_fault(rng, c: Case) -> None:
    pick(rng, [gen_dma, gen_isa, gen_vela_mutant, gen_huge], p=[0.35, 0.2, 0.35, 0.1])(rng, c)
    c.gen = "fault"
    _add_faults(rng, c, _u(rng, 1, 3))


# -------------------------------------------------------------------------- Vela mutants
_HUGE_FIELDS = (
    ("NPU_SET_DMA0_LEN", "addr"), ("NPU_SET_DMA0_SIZE0", "size"), ("NPU_SET_DMA0_SIZE1", "size"),
    ("NPU_SET_DMA0_SRC", "addr"), ("NPU_SET_DMA0_DST", "addr"), ("NPU_SET_DMA0_SRC_STRIDE0", "addr"),
    ("NPU_SET_OFM_WIDTH_M1", "width_m1"), ("NPU_SET_OFM_HEIGHT_M1", "height_m1"),
    ("NPU_SET_OFM_DEPTH_M1", "depth_m1"), ("NPU_SET_IFM_DEPTH_M1", "depth_m1"),
    ("NPU_SET_IFM_WIDTH0_M1", "width_m1"), ("NPU_SET_IFM_HEIGHT0_M1", "height_m1"),
    ("NPU_SET_KERNEL_WIDTH_M1", "width_m1"), ("NPU_SET_KERNEL_HEIGHT_M1", "height_m1"),
    ("NPU_SET_WEIGHT_LENGTH", "length"), ("NPU_SET_SCALE_LENGTH", "length"),
    ("NPU_SET_WEIGHT_BASE", "addr"), ("NPU_SET_SCALE_BASE", "addr"), ("NPU_SET_IFM_BASE0", "addr"),
    ("NPU_SET_OFM_BASE0", "addr"), ("NPU_SET_OFM_STRIDE_Y", "addr"), ("NPU_SET_IFM_STRIDE_C", "addr"),
    ("NPU_SET_OFM_BLK_DEPTH_M1", "depth_m1"), ("NPU_SET_IFM_PAD_BOTTOM", "pad"),
    ("NPU_SET_OFM_REGION", "region"), ("NPU_SET_IFM_REGION", "region"), ("NPU_SET_WEIGHT_REGION", "region"),
)


def _set_field(rng, words: list, d: isa.Decoded, fname: str, value: int) -> None:
    f = d.cmd.field(fname)
    lo, hi = f.range
    value = max(lo if not f.untyped else 0, min(hi, value))
    raw = (d.raw & ~f.mask) | f.insert(value)
    i = d.offset // 4
    words[i] = raw & 0xFFFFFFFF
    if d.size == 8:
        words[i + 1] = raw >> 32


def _mutate(rng, words: list, notes: list) -> list:
    words = list(words)
    for _ in range(_u(rng, 1, 4)):
        try:
            dec = isa.decode(words)
        except isa.IsaError as e:
            dec = isa.decode(words[: e.offset // 4]) if e.offset else []
        m = pick(rng, ["bitflip", "swap", "truncate", "reserved", "huge", "random_field", "delete",
                        "duplicate", "loop", "stop"],
                  p=[0.18, 0.1, 0.08, 0.12, 0.16, 0.12, 0.07, 0.06, 0.06, 0.05])
        if not words:
            words = [STOP_WORD]
        n = len(words)
        if m == "bitflip":
            for _ in range(_u(rng, 1, 8)):
                i, b = _u(rng, 0, n - 1), _u(rng, 0, 31)
                words[i] ^= 1 << b
                notes.append(f"flip word {i} bit {b}")
        elif m == "swap":
            i = _u(rng, 0, n - 1)
            j = min(n - 1, i + 1) if rng.random() < 0.5 else _u(rng, 0, n - 1)
            words[i], words[j] = words[j], words[i]
            notes.append(f"swap words {i},{j}")
        elif m == "truncate":
            k = _u(rng, 0, n - 1)
            words = words[:k]
            notes.append(f"truncate to {k} words")
        elif m == "reserved":
            i = _u(rng, 0, n)
            w = pick(rng, [_u(rng, 0, 0xFFFF) << 16 | _u(rng, 1, 15) << 10 | _u(rng, 0, 0x3FF),
                            _u(rng, 0, 0xFFFF) << 16 | _u(rng, 2, 3) << 14 | _u(rng, 0, 0x3FF),
                            _u(rng, 0, 0xFFFF) << 16 | pick(rng, [0x004, 0x008, 0x00F, 0x014, 0x106, 0x1FF]),
                            _u(rng, 0, 0xFFFF) << 16 | 1 << 14 | pick(rng, [0x007, 0x040, 0x0FF, 0x101, 0x3FF])])
            words.insert(i, w)
            notes.append(f"insert reserved word {w:#010x} at {i}")
        elif m in ("huge", "random_field") and dec:
            if m == "huge":
                cands = [(d, f) for d in dec for (cn, f) in _HUGE_FIELDS if d.name == cn]
                if cands:
                    d, f = pick(rng, cands)
                    fld = d.cmd.field(f)
                    v = pick(rng, [fld.range[1], fld.range[1] - 1, 1 << (fld.width - 1), 0,
                                    _u(rng, 0, fld.range[1])])
                    _set_field(rng, words, d, f, v)
                    notes.append(f"{d.name}.{f} = {v:#x} at {d.offset:#x}")
            else:
                sets = [d for d in dec if d.cmd.fields and not d.cmd.is_op]
                if sets:
                    d = pick(rng, sets)
                    fld = pick(rng, list(d.cmd.fields))
                    v = _rand_field(rng, fld, 0.3)
                    _set_field(rng, words, d, fld.name, v)
                    notes.append(f"{d.name}.{fld.name} = {v} at {d.offset:#x}")
        elif m == "delete" and dec:
            d = pick(rng, dec)
            del words[d.offset // 4: d.offset // 4 + d.size // 4]
            notes.append(f"delete {d.name} at {d.offset:#x}")
        elif m == "duplicate" and dec:
            a = pick(rng, dec)
            k = _u(rng, 1, 20)
            seg = [x for d in dec if a.offset <= d.offset < a.offset + 4 * k for x in d.words]
            words[a.offset // 4: a.offset // 4] = seg
            notes.append(f"duplicate {len(seg)} words at {a.offset:#x}")
        elif m == "loop" and dec:
            d = pick(rng, dec)
            tgt = pick(rng, [x.offset for x in dec if x.offset <= d.offset])
            at = d.offset // 4 + d.size // 4
            words[at:at] = isa.encode("NPU_OP_BRANCH", branch_cond=int(rng.random() < 0.2), branch_target=tgt)
            notes.append(f"insert BRANCH -> {tgt:#x} after {d.offset:#x}")
        elif m == "stop" and dec:
            d = pick(rng, dec)
            words[d.offset // 4: d.offset // 4] = isa.encode("NPU_OP_STOP", mask=_u(rng, 0, 0xFFFF))
            notes.append(f"insert STOP at {d.offset:#x}")
    return words


def gen_vela_mutant(rng, c: Case) -> None:
    entries = corpus()
    if not entries:
        gen_isa(rng, c)
        c.notes.append("(no Vela corpus: isa instead)")
        return
    _common(rng, c)
    e = pick(rng, entries)
    c.gen = "vela"
    if rng.random() < 0.8:
        c.config = e.accel
    hostile = 0.0 if rng.random() < 0.8 else 0.5
    basep = _regions(rng, c, hostile=hostile)
    if rng.random() < 0.5:                 # leave MEM_ATTR/REGIONCFG random or at reset
        c.setup = [(o, v) for o, v in c.setup if o not in (OFF["REGIONCFG"],)]
    c.preload.append((basep[0], e.read_only))
    for region, offset, nbytes in e.tensors[:1]:
        c.preload.append(((basep[region] + offset) & ADDR_MASK, rng.bytes(min(nbytes, 1 << 16))))
    notes = []
    c.stream = _mutate(rng, e.words, notes) if rng.random() < 0.9 else list(e.words)
    if rng.random() < 0.5:
        c.policy_kw["on_unimplemented_op"] = "continue"
    c.notes.append(f"Vela {e.name} ({len(e.words)} words)")
    c.notes += notes[:12]


GENERATORS = {
    "random_words": (gen_random_words, 0.08),
    "isa": (gen_isa, 0.16),
    "dma": (gen_dma, 0.10),
    "wild": (gen_wild, 0.07),
    "huge": (gen_huge, 0.08),
    "branch": (gen_branch, 0.06),
    "queue": (gen_queue, 0.07),
    "apb": (gen_apb, 0.10),
    "fault": (gen_fault, 0.12),
    "vela": (gen_vela_mutant, 0.16),
}


def extend_case(rng, c: Case) -> None:
    """Orthogonal extras of any case: APB traffic, a fault, Memory's per-transaction path."""
    if rng.random() < 0.15 and not c.apb:
        _interleave(rng, c, storm=False)
        c.notes.append("APB traffic")
    if rng.random() < 0.15 and not c.faults:
        _add_faults(rng, c, 1)
    c.per_txn_path = bool(rng.random() < 0.1)


# ============================================================================================
# Running and checking
# ============================================================================================
@dataclass
class _Op:
    name: str
    offset: int
    snap: object
    basep: tuple
    attrs: tuple             # MEM_ATTR index -> value
    regioncfg: int
    txns: list = field(default_factory=list)
    idx_raw: bytearray = field(default_factory=bytearray)   # bytes read on rd_mem2mem_idx, in order
    failed: str = ""         # event that ended the op early
    attr_ok: dict = field(default_factory=dict)     # (channel, write) -> allowed attributes


def _route(op: _Op, region: int) -> tuple[int, int, int]:
    """(interface, memtype, domain) of a region at the op's issue."""
    a = op.attrs[_RC.field(f"region{region}").get(op.regioncfg)]
    return _MA.field("axi_port").get(a), _MA.field("memtype").get(a), _MA.field("mem_domain").get(a)


_KERNEL_CHANNEL_REGIONS = {
    Channel.rd_ifm: ("NPU_SET_IFM_REGION", "NPU_SET_IFM2_REGION"),
    Channel.rd_ifm_stream: ("NPU_SET_IFM_REGION", "NPU_SET_IFM2_REGION"),
    Channel.rd_weights: ("NPU_SET_WEIGHT_REGION",),
    Channel.rd_scale_bias: ("NPU_SET_SCALE_REGION",),
    Channel.wr_ofm: ("NPU_SET_OFM_REGION",),
}
_DMA_CHANNEL_REGIONS = {
    Channel.rd_mem2mem: ("NPU_SET_DMA0_SRC_REGION",),
    Channel.wr_mem2mem: ("NPU_SET_DMA0_DST_REGION",),
    Channel.rd_mem2mem_idx: ("NPU_SET_DMA0_IDX_REGION",),
}


def dma_write_box(snap, basep) -> "tuple | None":
    """[lo, hi) (lo < 2**40, unwrapped hi) that bounds every wr_mem2mem byte of the DMA
    (dma_reference.DmaParams.write_box), for a transfer too large for `dma_oracle`; None: no
    write may be made (LUT destination or UNPREDICTABLE)."""
    p = DmaParams.from_snapshot(snap)
    return None if p is None else p.write_box(basep)


def dma_oracle(snap, basep) -> "tuple | None":
    """Independent NPU_OP_DMA_START address generator (the one DMA reference,
    tlm/ethos_u85/dma_reference.py). Returns a generator function of the index values, or
    None when the transfer is too large to enumerate (`dma_write_box` then bounds its
    writes). The function returns (src reads, dst writes, idx reads, complete) as lists of
    (addr, length)."""
    p = DmaParams.from_snapshot(snap)
    if p is None:
        return lambda idx_values: ([], [], [], True)          # UNPREDICTABLE: nothing may move
    if p.lines > ORACLE_MAX_LINES:
        return None

    def gen(idx_values):
        rd, wr, ix = [], [], []
        values = iter(idx_values)
        complete = True

        def idx_at(_addr):
            nonlocal complete
            v = next(values, None)
            complete = complete and v is not None
            return v
        for ln in dma_lines(p, basep, idx_at):
            if ln.idx is not None:
                ix.append((ln.idx, 4))
            if ln.src is None or ln.length == 0:
                continue
            rd.append((ln.src, ln.length))
            if ln.dst is not None:
                wr.append((ln.dst, ln.length))
        return rd, wr, ix, complete
    return gen


def _runs(pieces) -> list:
    """Merge consecutive contiguous (addr, length) pieces (modulo 2**40)."""
    out = []
    for a, n in pieces:
        if n <= 0:
            continue
        if out and (out[-1][0] + out[-1][1]) & ADDR_MASK == a:
            out[-1] = (out[-1][0], out[-1][1] + n)
        else:
            out.append((a, n))
    return out


def _is_prefix(obs: list, exp: list) -> bool:
    if len(obs) > len(exp):
        return False
    if not obs:
        return True
    k = len(obs) - 1
    return obs[:k] == exp[:k] and obs[k][0] == exp[k][0] and obs[k][1] <= exp[k][1]


def ofm_window(snap, basep) -> "tuple | None":
    """[lo, hi) (unwrapped) that bounds every OFM byte a kernel op may write, or None if
    the OFM storage is chained/none (no memory writes at all)."""
    F = snap.field
    storage = F("NPU_SET_OFM_PRECISION", "activation_storage")
    if storage in (2, 3):
        return None
    es = 1 << F("NPU_SET_OFM_PRECISION", "activation_precision")
    dims = (F("NPU_SET_OFM_HEIGHT_M1", "height_m1") + 1, F("NPU_SET_OFM_WIDTH_M1", "width_m1") + 1,
            F("NPU_SET_OFM_DEPTH_M1", "depth_m1") + 1)
    D = max(dims)
    sy, sx, sc = (F(f"NPU_SET_OFM_STRIDE_{a}", "addr") for a in "YXC")
    region = F("NPU_SET_OFM_REGION", "region")
    bases = [basep[region] + F(f"NPU_SET_OFM_BASE{i}", "addr") for i in range(4)]
    return min(bases), max(bases) + D * (sy + sx + sc) + (16 * D + 16) * es + 64


def _in_window_v(addr: np.ndarray, n: np.ndarray, win) -> np.ndarray:
    """Per transaction: [addr, addr + n) lies in the (unwrapped) window, modulo 2**40."""
    lo, hi = win
    hi = min(hi, 1 << 62)
    ok = np.zeros(addr.shape, bool)
    for k in range(0, (hi >> 40) + 2):
        a = addr + np.int64(k << 40)
        ok |= (a >= lo) & (a + n <= hi)
    return ok


def _pieces(txns, ch) -> list:
    """(addr, length) of the transactions (Transaction or TxnBatch items) on channel ch."""
    out = []
    for t in txns:
        if t.channel != ch:
            continue
        if isinstance(t.addr, np.ndarray):
            out += zip(t.addr.tolist(), t.length.tolist())
        else:
            out.append((t.addr, t.length))
    return out


def _op_summary(op: _Op) -> str:
    """'NPU_OP_X at 0x..' with the sizes that drive its work."""
    F = op.snap.field
    s = f"{op.name} at {op.offset:#x}"
    try:
        if op.name == "NPU_OP_DMA_START":
            mode = F("NPU_SET_DMA0_SRC_REGION", "stride_mode")
            idx = F("NPU_SET_DMA0_SRC_REGION", "idx_mode") or F("NPU_SET_DMA0_DST_REGION", "idx_mode")
            s += (f" (LEN {F('NPU_SET_DMA0_LEN', 'addr')} x SIZE0 {F('NPU_SET_DMA0_SIZE0', 'size')} x SIZE1 "
                  f"{F('NPU_SET_DMA0_SIZE1', 'size')}, stride_mode {mode}{', indexed' if idx else ''})")
        elif op.name in KERNEL_OP_NAMES:
            s += (f" (OFM {F('NPU_SET_OFM_HEIGHT_M1', 'height_m1') + 1}x{F('NPU_SET_OFM_WIDTH_M1', 'width_m1') + 1}"
                  f"x{F('NPU_SET_OFM_DEPTH_M1', 'depth_m1') + 1}, transpose "
                  f"{F('NPU_SET_OFM_PRECISION', 'activation_transpose')}, kernel "
                  f"{F('NPU_SET_KERNEL_HEIGHT_M1', 'height_m1') + 1}x{F('NPU_SET_KERNEL_WIDTH_M1', 'width_m1') + 1}, "
                  f"IFM depth {F('NPU_SET_IFM_DEPTH_M1', 'depth_m1') + 1}, WEIGHT_LENGTH "
                  f"{F('NPU_SET_WEIGHT_LENGTH', 'length')})")
    except Exception:  # noqa: BLE001
        pass
    return s


class _Tracker:
    """Memory listener + device hook: attributes every transaction to the command that made
    it and checks the per-transaction and per-event invariants."""

    def __init__(self, runner: "Session"):
        self.r = runner
        self.d = runner.d
        self.res = runner.res
        self.ops: list[_Op] = []
        self.cur: "_Op | None" = None
        self.err_txn = None
        self.writes: list[tuple] = []       # (addr, length) of OKAY writes: ints or int64 arrays
        self._said = set()
        self.op_t0 = None            # process time when the current command's data phase began
        self.slowest = (0.0, "")     # (CPU seconds, description) of the slowest operation
        cfg = self.d.config
        self.ports = frozenset([f"SRAM{i}" for i in range(cfg.sram_ports)] + [f"EXT{i}" for i in range(cfg.ext_ports)])
        self.prot_word = self.d.prot_word

    def once(self, key: str, msg: str) -> None:
        if key not in self._said:
            self._said.add(key)
            self.res.violation(msg)

    # ---------------------------------------------------------------- transactions
    def txn(self, t) -> None:
        try:
            self._txn(t)
        except Exception as e:  # noqa: BLE001 - a checker bug must not look like a device bug
            self.once("checker", f"fuzzer checker crashed on a transaction: {e!r}")

    @staticmethod
    def _desc(t) -> str:
        return f"{t.channel.name} {t.port} {'W' if t.write else 'R'} {t.addr:#x}+{t.length}"

    def _txn(self, t) -> None:
        d = self.d
        if not d.running or d.reset_remaining > 0:
            self.once("stopped_txn", f"AXI transaction while {'in reset' if d.in_reset else 'STOPPED'}: "
                                     f"{self._desc(t)}")
        if t.length <= 0 or t.addr < 0 or t.addr + t.length > TOP:
            self.once("len", f"AXI transaction of length {t.length} or crossing 2**40: {self._desc(t)}")
        if t.prot != self.prot_word:
            self.once("prot", f"AxPROT {t.prot:#x} != PROT {d.prot_word:#x}: {self._desc(t)}")
        if t.port not in self.ports:
            self.once("port", f"port {t.port} not present in {d.config.name}: {self._desc(t)}")
        if t.resp:
            legit = any(f.hits(t.addr, t.length, t.write) for f in d.memory.faults) or t.addr + t.length > TOP
            if not legit:
                self.once("bad_resp", f"{t.resp.name} without an injected fault: {self._desc(t)}")
            if self.err_txn is None:
                self.err_txn = t
        elif self.err_txn is not None:
            self.once("after_err", f"AXI transaction {self._desc(t)} after the error response to "
                                   f"{self.err_txn.channel.name} @{self.err_txn.addr:#x}")
        ch = t.channel
        if ch == 0:                                   # rd_cmd
            if self.cur is not None:
                self.close_op()
            self.cur = None
            self._check_fetch(t)
            return
        op = self.cur
        if op is None:
            self.once("orphan", f"data transaction outside any operation: {self._desc(t)}")
            return
        if (t.addr & 0xFFF) + t.length > 0x1000 and ch not in self.res.crossing:
            self.res.crossing.add(ch)
            self.res.events[f"note: {ch.name} transactions cross 4 KB boundaries (not split into AXI bursts)"] += 1
        op.txns.append(t)
        if t.write and not t.resp:
            self.writes.append((t.addr, t.length))
        if ch == Channel.rd_mem2mem_idx and not t.resp:      # an index may come in pieces
            op.idx_raw += d.memory.read(t.addr, t.length)
        ok = op.attr_ok.get((ch, t.write))
        if ok is None:
            regs = (_DMA_CHANNEL_REGIONS if op.name == "NPU_OP_DMA_START" else _KERNEL_CHANNEL_REGIONS).get(ch)
            if regs is None:
                self.once(f"chan_{op.name}_{ch}", f"{op.name} at {op.offset:#x} used channel {self._desc(t)}")
                ok = op.attr_ok[(ch, t.write)] = frozenset()
            else:
                ok = op.attr_ok[(ch, t.write)] = frozenset(
                    (i, axcache(m, t.write), dom) for i, m, dom in
                    (_route(op, op.snap.field(r, "region")) for r in regs))
        if (t.interface, t.cache, t.domain) not in ok and ok:
            self.once(f"attr_{ch}", f"{op.name} at {op.offset:#x}: {self._desc(t)} (interface, AxCACHE, "
                                    f"AxDOMAIN) ({t.interface.name}, {t.cache:#x}, {t.domain}) not from MEM_ATTR "
                                    f"of its region(s): {sorted(ok)}")

    def batch(self, b) -> None:
        try:
            self._batch(b)
        except Exception as e:  # noqa: BLE001
            self.once("checker_b", f"fuzzer checker crashed on a transaction batch: {e!r}")

    def _batch(self, b) -> None:
        """A tlm.ethos_u85.memory.TxnBatch (every transaction OKAY; an erroring one comes through txn())."""
        n = len(b)
        if not n:
            return
        d = self.d
        addr, ln = b.addr, b.length
        desc = f"batch of {n} {b.channel.name} {'W' if b.write else 'R'} from {int(addr[0]):#x}"
        if not d.running or d.reset_remaining > 0:
            self.once("stopped_txn", f"AXI transactions while {'in reset' if d.in_reset else 'STOPPED'}: {desc}")
        if int(ln.min()) <= 0 or int(addr.min()) < 0 or int((addr + ln).max()) > TOP:
            self.once("len", f"AXI transaction of length <= 0 or crossing 2**40 in {desc}")
        if b.prot != self.prot_word:
            self.once("prot", f"AxPROT {b.prot:#x} != PROT {d.prot_word:#x}: {desc}")
        used = {0} if b.port_idx is None else set(np.unique(b.port_idx).tolist())
        if not {b.ports[i] for i in used} <= self.ports:
            self.once("port", f"ports {sorted(b.ports[i] for i in used)} not all present in {d.config.name}: {desc}")
        if b.resp:
            self.once("batch_resp", f"a batch offered with response {b.resp.name}: {desc}")
        if self.err_txn is not None:
            self.once("after_err", f"AXI transactions ({desc}) after the error response to "
                                   f"{self.err_txn.channel.name} @{self.err_txn.addr:#x}")
        ch = b.channel
        if ch == 0:
            if self.cur is not None:
                self.close_op()
            self.cur = None
            for t in b:
                self._check_fetch(t)
            return
        op = self.cur
        if op is None:
            self.once("orphan", f"data transactions outside any operation: {desc}")
            return
        op.txns.append(b)
        if b.write:
            self.writes.append((addr.copy(), ln.copy()))
        if ch == Channel.rd_mem2mem_idx:
            for a, k in zip(addr.tolist(), ln.tolist()):
                op.idx_raw += d.memory.read(a, k)
        if ch not in self.res.crossing and bool((((addr & 0xFFF) + ln) > 0x1000).any()):
            self.res.crossing.add(ch)
            self.res.events[f"note: {ch.name} transactions cross 4 KB boundaries (not split into AXI bursts)"] += 1
        ok = op.attr_ok.get((ch, b.write))
        if ok is None:
            regs = (_DMA_CHANNEL_REGIONS if op.name == "NPU_OP_DMA_START" else _KERNEL_CHANNEL_REGIONS).get(ch)
            if regs is None:
                self.once(f"chan_{op.name}_{ch}", f"{op.name} at {op.offset:#x} used channel {desc}")
                ok = op.attr_ok[(ch, b.write)] = frozenset()
            else:
                ok = op.attr_ok[(ch, b.write)] = frozenset(
                    (i, axcache(m, b.write), dom) for i, m, dom in
                    (_route(op, op.snap.field(r, "region")) for r in regs))
        if ok and (b.interface, b.cache, b.domain) not in ok:
            self.once(f"attr_{ch}", f"{op.name} at {op.offset:#x}: {desc} (interface, AxCACHE, AxDOMAIN) "
                                    f"({b.interface.name}, {b.cache:#x}, {b.domain}) not from MEM_ATTR of its "
                                    f"region(s): {sorted(ok)}")

    def _check_fetch(self, t) -> None:
        tdesc = self._desc(t)
        d = self.d
        attr = d.mem_attr(d.qconfig)
        if t.interface != _MA.field("axi_port").get(attr) or t.cache != axcache(_MA.field("memtype").get(attr), False) \
                or t.domain != _MA.field("mem_domain").get(attr):
            self.once("fetch_attr", f"command fetch {tdesc} does not follow MEM_ATTR[QCONFIG={d.qconfig}]={attr:#x}")
        qb = d.qbase & ~3
        end = d.qbase + (d.qsize & ~3)
        limit = -(-end // 128) * 128
        off = (t.addr - qb) % TOP
        if t.write or off + t.length > limit - qb:
            self.once("fetch_range", f"command fetch {tdesc} outside [QBASE {qb:#x}, align_up(QBASE+QSIZE, 128) "
                                     f"{limit:#x})")

    # ---------------------------------------------------------------- events
    def event(self, ev: str, det: dict) -> None:
        try:
            self._event(ev, det)
        except Exception as e:  # noqa: BLE001
            self.once("checker_ev", f"fuzzer checker crashed on event {ev}: {e!r}")

    def _event(self, ev: str, det: dict) -> None:
        res, d = self.res, self.d
        if ev == "apb":
            # The model of RESET/PROT: updated here, between the access and the APB cycles
            # (during which a reset sequence can finish).
            if det["write"] and det["addr"] == RESET and not det["pslverr"] \
                    and d.policy.reset_write == "trm_3_1_1":
                data, pprot = det["data"], det["pprot"]
                cpl = min(pprot & 1, data & 1)
                csl = (data >> 1) & 1 | ((pprot >> 1) & 1 if d.policy.csl_rule == "or_requester" else 0)
                self.r.reset_word = data & 3
                if d.policy.prot_update_at_end:
                    self.r.pending_prot = (cpl, csl)
                else:
                    self.r.prot, self.r.pending_prot = (cpl, csl), None
                    self.prot_word = cpl | csl << 1
            return
        if ev == "irq":
            return
        if ev == "op":
            self.close_op()
            self.cur = _Op(det["name"], det["offset"], det["snapshot"], tuple(d.basep(n) for n in range(8)),
                           tuple(d.mem_attr(k) for k in range(4)), d.regioncfg)
            self.ops.append(self.cur)
            self._check_decode(det)
            self.op_t0 = time.process_time()
            return
        off = det.get("offset")
        if self.cur is not None and off == self.cur.offset and ev in ("fault", "model_limit", "unpredictable",
                                                                         "internal_error", "op_unimplemented"):
            self.cur.failed = self.cur.failed or ev
        if ev == "fault":
            bit = det["bit"]
            if bit == "bus_status":
                res.faults[f"bus_status {det.get('channel')} {det.get('interface')} "
                           f"{Resp(det.get('resp', 0)).name}"] += 1
                t = self.err_txn
                if t is None:
                    self.once("bus_no_txn", "bus_status raised without an error response")
                elif (d.faulting_channel != int(t.channel) & 0xF or d.faulting_interface != int(t.interface)):
                    self.once("bus_chan", f"faulting_channel/interface {d.faulting_channel}/{d.faulting_interface} "
                                          f"!= faulting transaction {t.channel.name}/{t.interface.name}")
            else:
                res.faults[f"{bit}: {norm(det.get('detail', ''), 60)}"] += 1
                self._check_fault_cause(bit, det)
                if self.err_txn is not None:
                    t = self.err_txn
                    self.once("bus_swallowed", f"{t.resp.name} on {t.channel.name} @{t.addr:#x} ended as {bit}, "
                                               f"not bus_status ({det.get('detail', '')[:80]})")
            self.err_txn = None
        elif ev == "model_limit":
            res.events[f"model_limit: {norm(det.get('error', ''))}"] += 1
            if str(det.get("error", "")).startswith("MemoryError"):     # the host, not a model budget
                self.once("model_oom", f"memory: an operation ran the host out of memory (address space capped at "
                                       f"--mem-limit in the fuzzer) at offset {off}: {det.get('error')}")
        elif ev == "unpredictable":
            res.events[f"unpredictable: {norm(det.get('what', ''))}"] += 1
        elif ev == "internal_error":
            tb = [ln.strip() for ln in str(det.get("tb", "")).strip().splitlines() if ln.strip()]
            where = next((ln for ln in reversed(tb) if ln.startswith("File ")), "")
            self.once(f"internal_{norm(det.get('error', ''), 40)}",
                      f"internal_error ({det.get('where', 'op')} at offset {off}): {det.get('error')} [{where[:160]}]")
            res.events[f"internal_error: {norm(det.get('error', ''))}"] += 1
        elif ev == "op_unimplemented":
            res.events[f"op_unimplemented: {det.get('name')}"] += 1
        elif ev == "reset":
            self.cur = None
            self.err_txn = None
            res.events[f"reset: {det.get('kind')}"] += 1
        elif ev == "reset_done":
            want = self.r.pending_prot or self.r.prot
            if (det["cpl"], det["csl"]) != want:
                self.once("prot_reset", f"PROT after the reset sequence is (CPL, CSL)=({det['cpl']}, {det['csl']}), "
                                        f"expected {want}")
            self.r.prot, self.r.pending_prot = want, None
            self.prot_word = want[0] | want[1] << 1
        elif ev in ("apb_error", "reset_prot_update", "state", "branch", "pmu_irq"):
            return
        else:
            res.events[ev] += 1

    def _words_at(self, off: int, n: int = 2) -> list[int]:
        """The stream words at byte offset `off` (backdoor, wrapping at 2**40)."""
        d = self.d
        base = d.qbase & ~3
        return [int.from_bytes(d.memory.read((base + off + 4 * i) & ADDR_MASK, 4), "little") for i in range(n)]

    def _check_decode(self, det: dict) -> None:
        """The executed operation is what the ISA table decodes from memory at its offset."""
        try:
            want = isa.decode_word(self._words_at(det["offset"]), 0)
        except isa.IsaError as e:
            self.once("decode_op", f"executed {det['name']} at {det['offset']:#x}, but the stream word there is "
                                   f"reserved ({e.reason})")
            return
        if want.name != det["name"] or dict(want.fields) != dict(det["fields"]):
            self.once("decode_op", f"executed {det['name']} {det['fields']} at {det['offset']:#x}, the stream "
                                   f"holds {want.name} {want.fields}")

    def _check_fault_cause(self, bit: str, det: dict) -> None:
        """cmd_parse_error for a reserved word / truncated cmd1 and branch_fault: the stream
        really holds that at the offset (an independent decode)."""
        d, off = self.d, det.get("offset")
        if off is None:
            return
        words = self._words_at(off)
        detail = det.get("detail", "")
        if bit == "branch_fault":
            try:
                b = isa.decode_word(words, 0)
            except isa.IsaError:
                b = None
            t = b.fields.get("branch_target", 0) if b is not None else 0
            mis = t & 3 and d.policy.branch_misaligned == "branch_fault"
            if b is None or b.name != "NPU_OP_BRANCH" or not (t >= d.qsize or mis):
                self.once("branch_cause", f"branch_fault at {off:#x} but the stream holds "
                                          f"{b.name if b else 'a reserved word'} (target {t:#x}, QSIZE {d.qsize:#x})")
        elif bit == "cmd_parse_error" and "word" in det:
            if "truncated" in detail:
                if off + 8 <= (d.qsize & ~3):
                    self.once("trunc_cause", f"cmd1 at {off:#x} reported truncated with QSIZE {d.qsize:#x}")
            else:
                try:
                    got = isa.decode_word(words, 0)
                    self.once("parse_cause", f"cmd_parse_error ({detail}) at {off:#x} for a valid {got.name}")
                except isa.IsaError:
                    pass

    def close_op(self) -> None:
        """End the CPU-time measurement of the current operation (at the next fetch, the next
        operation or the return of run())."""
        if self.op_t0 is None or self.cur is None:
            self.op_t0 = None
            return
        dt = time.process_time() - self.op_t0
        self.op_t0 = None
        if dt > self.slowest[0]:
            self.slowest = (dt, _op_summary(self.cur))

    def finish(self) -> None:
        for op in self.ops:
            if op.name == "NPU_OP_DMA_START":
                self._check_dma(op)
            elif op.name in KERNEL_OP_NAMES:
                self._check_kernel(op)
            elif op.txns:
                t = op.txns[0]
                self.once(f"ctl_{op.name}", f"{op.name} at {op.offset:#x} made data transactions "
                                            f"({t.channel.name} @{int(np.min(t.addr)):#x})")

    def _check_dma(self, op: _Op) -> None:
        if op.failed == "model_limit" and op.txns:
            self.once("dma_limit", f"DMA at {op.offset:#x} cut by the model budget moved data first "
                                   f"({len(op.txns)} transactions)")
        gen = dma_oracle(op.snap, op.basep)
        if gen is None:
            self.res.events["oracle: DMA too large to enumerate (writes checked against a bounding box)"] += 1
            self._check_dma_box(op)
            return
        raw = bytes(op.idx_raw[: len(op.idx_raw) & ~3])
        rd, wr, ix, complete = gen(np.frombuffer(raw, "<i4").tolist())
        got = {ch: _runs(_pieces(op.txns, ch)) for ch in DMA_CHANNELS}
        want = {Channel.rd_mem2mem: _runs(rd), Channel.wr_mem2mem: _runs(wr), Channel.rd_mem2mem_idx: _runs(ix)}
        for ch in DMA_CHANNELS:
            g, w = got[ch], want[ch]
            ok = g == w if (not op.failed and complete) else _is_prefix(g, w)
            if not ok:
                k = next((i for i, (a, b) in enumerate(zip(g, w)) if a != b), min(len(g), len(w)))
                gi = f"{g[k][0]:#x}+{g[k][1]}" if k < len(g) else "none"
                wi = f"{w[k][0]:#x}+{w[k][1]}" if k < len(w) else "none"
                self.once(f"dma_{ch}", f"DMA at {op.offset:#x} ({'failed: ' + op.failed if op.failed else 'completed'})"
                                       f": {ch.name} run {k} is {gi}, TRM pseudocode gives {wi} "
                                       f"({len(g)} vs {len(w)} runs)")

    def _check_dma_box(self, op: _Op) -> None:
        """A DMA too large for the oracle: its writes lie inside `dma_write_box`."""
        box = dma_write_box(op.snap, op.basep)
        for a, n in _pieces(op.txns, Channel.wr_mem2mem):
            if box is None or not _in_window_v(np.array([a], np.int64), np.array([n], np.int64), box)[0]:
                where = "none allowed (LUT destination)" if box is None else f"[{box[0]:#x}, {box[1]:#x})"
                self.once("dma_box", f"DMA at {op.offset:#x} wrote @{a:#x}+{n} outside the destination's bounding "
                                     f"box (BASEP[DST_REGION] + DST + strides): {where}")
                return

    def _check_kernel(self, op: _Op) -> None:
        win = ofm_window(op.snap, op.basep)
        for t in op.txns:
            if not t.write:
                continue
            addr = np.atleast_1d(np.asarray(t.addr, dtype=np.int64))
            ln = np.atleast_1d(np.asarray(t.length, dtype=np.int64))
            if t.channel != Channel.wr_ofm:
                self.once(f"kw_{op.name}", f"{op.name} at {op.offset:#x} wrote on {t.channel.name}")
            elif win is None:
                self.once(f"kw_chain_{op.name}", f"{op.name} at {op.offset:#x} wrote memory @{int(addr[0]):#x} with "
                                                 f"OFM storage chained/none")
            else:
                bad = ~_in_window_v(addr, ln, win)
                if bad.any():
                    i = int(np.argmax(bad))
                    self.once(f"kw_win_{op.name}", f"{op.name} at {op.offset:#x} wrote @{int(addr[i]):#x}+{int(ln[i])} "
                                                   f"outside the OFM window [{win[0]:#x}, {win[1]:#x})")


class _Listener:
    """Memory listener: one Transaction per call, or a TxnBatch through on_batch (so the
    memory's batched path stays enabled)."""
    __slots__ = ("tr",)

    def __init__(self, tr: "_Tracker"):
        self.tr = tr

    def __call__(self, t) -> None:
        self.tr.txn(t)

    def on_batch(self, b) -> None:
        self.tr.batch(b)


def _put(mem: Memory, addr: int, data: bytes) -> None:
    """Backdoor write that wraps at 2**40."""
    addr &= ADDR_MASK
    n = min(len(data), TOP - addr)
    mem.write(addr, data[:n])
    if n < len(data):
        _put(mem, 0, data[n:])


def _pages(mem: Memory) -> dict:
    return mem.copy_pages()


def _uncovered_changes(before: dict, mem: Memory, writes: list) -> "tuple | None":
    """(first address, count) of bytes that changed without an OKAY write transaction."""
    changed = []
    for p, arr in mem.page_items():
        b = before.get(p)
        diff = (arr != b) if b is not None else (arr != 0)
        if diff.any():
            changed.append((p, diff))
    if not changed:
        return None
    if writes:
        A = np.concatenate([np.atleast_1d(np.asarray(a, dtype=np.int64)) for a, _ in writes])
        L = np.concatenate([np.atleast_1d(np.asarray(n, dtype=np.int64)) for _, n in writes])
    else:
        A = L = np.zeros(0, np.int64)
    E = A + L
    first, total = None, 0
    for p, diff in sorted(changed, key=lambda x: x[0]):
        lo = p << PAGE_BITS
        sel = (A < lo + PAGE_SIZE) & (E > lo)
        delta = np.zeros(PAGE_SIZE + 1, np.int64)
        np.add.at(delta, np.clip(A[sel] - lo, 0, PAGE_SIZE), 1)
        np.add.at(delta, np.clip(E[sel] - lo, 0, PAGE_SIZE), -1)
        bad = diff & ~(np.cumsum(delta)[:PAGE_SIZE] > 0)
        if bad.any():
            total += int(bad.sum())
            if first is None:
                first = lo + int(np.argmax(bad))
    return None if first is None else (first, total)


class Session:
    """One case on a fresh Device (engine `FuzzTarget.session`): device calls through the
    engine's `Guard`."""

    def __init__(self, case: Case, res: CaseResult, guard: engine.Guard, kernel_ops=None):
        self.c = case
        self.res = res
        self.call = guard.call
        self.kernel_ops = kernel_ops
        self.d: "Device | None" = None
        self.tr: "_Tracker | None" = None
        self.prot = (0, 0)
        self.pending_prot = None
        self.reset_word = 0
        self.q_unpred = False    # an UNPREDICTABLE QBASE/QSIZE write took effect while RUNNING
        self.work_left = CASE_WORK

    def close(self) -> None:
        tr = self.tr
        if tr is not None:
            if tr.cur is not None and tr.op_t0 is not None:        # aborted inside an operation
                tr.close_op()
            self.res.slowest_op = tr.slowest

    def where(self) -> str:
        tr = self.tr
        op = f" in {_op_summary(tr.cur)}" if tr is not None and tr.cur is not None else ""
        return f"{op} (QREAD {getattr(self.d, 'qread', -1):#x})"

    def permitted(self, pprot: int) -> bool:
        cpl, csl = self.prot
        return (pprot & 1) >= cpl and ((pprot >> 1) & 1) <= csl

    def sticky(self) -> set:
        return {n for n in STICKY_FAULTS if getattr(self.d, n)}

    def check_regs(self, where: str, qread: bool = True) -> None:
        d = self.d
        if (d.cpl, d.csl) != self.prot:
            self.res.violation(f"PROT changed {where}: (CPL, CSL)=({d.cpl}, {d.csl}), expected {self.prot}")
            self.prot = (d.cpl, d.csl)
        if d.reset_word != self.reset_word:
            self.res.violation(f"RESET changed {where}: {d.reset_word:#x}, expected {self.reset_word:#x}")
            self.reset_word = d.reset_word
        if not d.in_reset:                    # the registers as software sees them (reads give 0 in reset)
            prot = self.prot[0] | self.prot[1] << 1
            for off, name, want in ((PROT, "PROT", prot), (RESET, "RESET", self.reset_word)):
                data, err = self.call("Device.apb_read", d.apb_read, off, SP)
                if err or data != want:
                    self.res.violation(f"APB read of {name} {where} gave {data:#x} (PSLVERR={err}), expected {want:#x}")
        q, qs = d.qread, d.qsize
        if qread and not self.q_unpred and (q & 3 or q > qs):
            self.res.violation(f"QREAD {q:#x} not a multiple of 4 or > QSIZE {qs:#x} {where}")

    def note_stop(self, kind: str) -> None:
        if not self.res.outcome:
            self.res.outcome = kind

    # ---------------------------------------------------------------- run slices
    def run_slice(self, budget: int) -> None:
        d, res = self.d, self.res
        was_running = d.running
        sticky = self.sticky()
        max_work = max(0, self.work_left)
        try:
            r = self.call("Device.run", d.run, max_steps=budget, max_work=max_work)
        finally:
            self.tr.close_op()
        if not isinstance(r, StopReason):
            res.violation(f"run() returned {r!r}")
            return
        res.steps += r.steps
        self.work_left -= r.work
        if r.steps > budget:
            res.violation(f"run(max_steps={budget}) executed {r.steps} steps")
        if r.status != d.status_word:
            res.violation(f"StopReason.status {r.status:#x} != STATUS {d.status_word:#x}")
        st = d.status_word
        if self.tr.err_txn is not None:
            t = self.tr.err_txn
            res.violation(f"{t.resp.name} on {t.channel.name} @{t.addr:#x} did not stop the NPU with bus_status "
                          f"(run returned {r.kind.value})")
            self.tr.err_txn = None
        if r.kind == StopKind.BUDGET:
            if not d.running or not (r.steps == budget or r.work >= max_work):
                res.violation(f"BUDGET stop with running={d.running}, steps={r.steps}/{budget}, "
                              f"work={r.work}/{max_work}")
        elif r.kind == StopKind.NOT_RUNNING:
            if was_running:
                res.violation("run() of a RUNNING NPU returned not_running")
        else:
            self.note_stop("ERROR/" + r.error if r.kind == StopKind.ERROR else r.kind.name)
            if d.running or _ST.field("state").get(st):
                res.violation(f"{r.kind.value} stop but STATUS.state is running")
            if r.kind != StopKind.RESET and not (d.irq_raised and d.irq):
                res.violation(f"{r.kind.value} stop without irq_raised/IRQ (STATUS {st:#010x})")
            now = self.sticky()
            if r.kind == StopKind.ERROR:
                if r.error not in STICKY_FAULTS or now != sticky | {r.error}:
                    res.violation(f"ERROR stop [{r.error}]: sticky bits {sorted(now)}, expected "
                                  f"{sorted(sticky | {r.error})}")
            elif now != sticky:
                res.violation(f"{r.kind.value} stop changed sticky bits {sorted(sticky)} -> {sorted(now)}")
            if r.kind == StopKind.END and not (d.cmd_end_reached and (self.q_unpred or d.qread == d.qsize & ~3)):
                res.violation(f"END stop with cmd_end_reached={d.cmd_end_reached}, QREAD {d.qread:#x}, "
                              f"QSIZE {d.qsize:#x}")
        self.check_regs(f"after run ({r.kind.value})", qread=was_running)

    # ---------------------------------------------------------------- APB
    def apb(self, op) -> None:
        d, res = self.d, self.res
        was_running, in_reset = d.running, d.in_reset
        perm = self.permitted(op[2] if op[0] == "r" else op[3])
        addr = op[1]
        if op[0] == "r":
            _, addr, pprot = op
            data, err = self.call("Device.apb_read", d.apb_read, addr, pprot)
            if err not in (0, 1) or not isinstance(data, int) or not 0 <= data < 1 << 32 or (err and data):
                res.violation(f"apb_read({addr:#x}, pprot={pprot}) -> ({data!r}, {err!r})")
            if (not perm or addr & 3) and err != 1:
                res.violation(f"apb_read({addr:#x}, pprot={pprot}) not permitted/unaligned but PSLVERR=0")
        else:
            _, addr, data, pprot, pstrb = op
            q_before = (d.qbase, d.qsize, d.qconfig, d.stored(QBASE_LO))
            err = self.call("Device.apb_write", d.apb_write, addr, data, pprot, pstrb)
            if err not in (0, 1):
                res.violation(f"apb_write returned {err!r}")
            if (not perm or addr & 3 or pstrb != 0xF) and err != 1:
                res.violation(f"apb_write({addr:#x}, {data:#x}, pprot={pprot}, pstrb={pstrb:#x}) not permitted/"
                              f"unaligned/sub-word but PSLVERR=0")
            a = addr & (R.APB_WINDOW - 1)
            if a == RESET and err == 0 and not in_reset and not (d.in_reset and not d.running):
                res.violation("permitted RESET write did not start a reset sequence")
            q_changed = (d.qbase, d.qsize, d.qconfig, d.stored(QBASE_LO)) != q_before
            if was_running and a in QREGS and q_changed:
                if d.policy.running_unpredictable != "allow":
                    res.violation(f"APB write {a:#x} while RUNNING changed QBASE/QSIZE/QCONFIG "
                                  f"(policy {d.policy.running_unpredictable})")
                self.q_unpred = True
        if was_running and not d.running:
            if d.in_reset:
                self.note_stop("RESET")
            else:
                self.note_stop(d.last_stop.kind.name if d.last_stop else "?")
                if not d.irq_raised:
                    res.violation(f"stop through APB ({addr:#x}) without irq_raised")
        self.check_regs(f"after APB {op[0]} {addr:#x}", qread=False)

    # ---------------------------------------------------------------- the case
    def go(self) -> None:
        c, res = self.c, self.res
        policy = Policy(**c.policy_kw)
        mem = Memory(log=False)                  # as tlm.ethos_u85.runner: the listeners see every transaction
        kw = {} if self.kernel_ops is None else {"kernel_ops": self.kernel_ops}
        self.d = d = self.call("Device()", Device, c.config, memory=mem, pins=c.pins, policy=policy,
                               settle=True, **kw)
        self.prot = (d.cpl, d.csl)
        self.tr = tr = _Tracker(self)
        mem.listeners.append(_Listener(tr))
        if c.per_txn_path:                        # a listener without on_batch: the reference path
            mem.listeners.append(lambda t: None)
        d.hooks.append(tr.event)
        for off, val in c.setup:
            if self.call("Device.apb_write", d.apb_write, off, val, SP) != 0:
                res.violation(f"setup write {off:#x} <- {val:#x} (S+P, STOPPED) got PSLVERR")
        data = b"".join(w.to_bytes(4, "little") for w in c.stream)
        for addr, blob in c.preload:
            _put(mem, addr, blob)
        _put(mem, c.qbase, data)
        qhi = (c.qbase >> 32) if c.qbase_hi_raw is None else c.qbase_hi_raw
        for off, val in ((QBASE_LO, c.qbase & 0xFFFFFFFF), (QBASE_HI, qhi), (QSIZE, len(data) if c.qsize is None
                                                                               else c.qsize)):
            self.call("Device.apb_write", d.apb_write, off, val, SP)
        for lo, hi, resp, kind in c.faults:
            mem.inject_fault(lo, hi, Resp(resp), kind)
        before = _pages(mem)
        d.set_result_flag(c.result_flag)
        self.check_regs("before start")
        if self.call("Device.apb_write", d.apb_write, CMD, CMD_RUN, SP) != 0 or not d.running:
            res.violation("CMD.transition_to_running_state=1 did not start a fresh NPU")
        for i, budget in enumerate(c.chunks):
            if d.running:
                self.run_slice(budget)
            for op in (c.apb[i] if i < len(c.apb) else ()):
                self.apb(op)
        if d.running:
            self.note_stop("BUDGET")
        elif not res.outcome:
            self.note_stop("NOT_RUNNING")
        tr.finish()
        pages = mem.page_count
        bad = None
        if pages * PAGE_SIZE > FOOTPRINT_LIMIT:
            res.violation(f"memory: the case grew the sparse memory to {pages * PAGE_SIZE / (1 << 30):.1f} GiB "
                          f"({pages} pages of {PAGE_SIZE // 1024} KiB); memory not compared")
        else:
            bad = _uncovered_changes(before, mem, tr.writes)
        if bad:
            res.violation(f"{bad[1]} memory bytes changed without a write transaction (first @{bad[0]:#x})")
        self.final_reset()

    def final_reset(self) -> None:
        d, res = self.d, self.res
        d.memory.clear_faults()
        for _ in range(1000):                 # a reset the case started may still be running
            st, err = self.call("Device.apb_read", d.apb_read, STATUS, SP)
            if err or not _ST.field("reset_status").get(st):
                break
        data, err = self.call("Device.apb_read", d.apb_read, ID, SP)
        if err or data != R.get("ID").reset:
            res.violation(f"APB read of ID after the case gave ({data:#x}, {err}), STATUS {d.status_word:#x}")
        word = (self.pending_prot or self.prot)
        err = self.call("Device.apb_write", d.apb_write, RESET, word[0] | word[1] << 1, SP)
        if err != 0 or not d.in_reset or d.running:
            res.violation(f"RESET write after the case: PSLVERR={err}, in_reset={d.in_reset}, running={d.running}")
        seen_reset = False
        for _ in range(1000):
            st, err = self.call("Device.apb_read", d.apb_read, STATUS, SP)
            seen_reset |= bool(_ST.field("reset_status").get(st))
            if not _ST.field("reset_status").get(st):
                break
        else:
            res.violation("STATUS.reset_status still 1 after 1000 APB polls")
            return
        if not seen_reset or st != 0 or d.irq:
            res.violation(f"after RESET: STATUS {st:#010x} (reset_status seen: {seen_reset}), IRQ={d.irq}; "
                          f"expected reset_status then 0")
        self.check_regs("after the final reset")
        addr = 0x40
        d.memory.write(addr, STOP_WORD.to_bytes(4, "little"))
        self.call("Device.apb_write", d.apb_write, QBASE_LO, addr, SP)
        self.call("Device.apb_write", d.apb_write, QSIZE, 4, SP)
        self.call("Device.apb_write", d.apb_write, CMD, CMD_RUN, SP)
        r = self.call("Device.run", d.run, max_steps=10)
        if r.kind != StopKind.STOP:
            res.violation(f"after the final reset a one-command STOP stream ended {r}")


def describe(case: Case, res: "CaseResult | None" = None, max_lines: int = 80) -> str:
    lines = [f"case {case.index} of seed {case.seed}: generator {case.gen}, config {case.config}"]
    lines += [f"  note: {n}" for n in case.notes]
    if case.pins:
        lines.append(f"  pins: {case.pins}")
    if case.policy_kw != BASE_POLICY:
        lines.append(f"  policy: {case.policy_kw}")
    if case.per_txn_path:
        lines.append("  memory: per-transaction reference path (a listener without on_batch)")
    lines.append(f"  QBASE {case.qbase:#x}, QSIZE {4 * len(case.stream) if case.qsize is None else case.qsize:#x}, "
                 f"{len(case.stream)} words, budget {case.chunks}")
    names = {r.offset: r.ident for r in R.iter_registers()}
    lines += [f"  setup {names.get(o, hex(o))} <- {v:#x}" for o, v in case.setup]
    for i, ops in enumerate(case.apb):
        lines.append(f"  APB after slice {i}: " + ", ".join(
            f"R {names.get(o[1], hex(o[1]))} pprot={o[2]}" if o[0] == "r" else
            f"W {names.get(o[1], hex(o[1]))}={o[2]:#x} pprot={o[3]} pstrb={o[4]:#x}" for o in ops))
    words = case.stream
    i, n = 0, 0
    while i < len(words) and n < max_lines:
        try:
            d = isa.decode_word(words, i)
            lines.append("  " + isa.format_decoded(d))
            i += d.size // 4
        except isa.IsaError as e:
            lines.append(f"  0x{4 * i:06x}: {words[i]:08x}           ?? {e.reason}")
            i += 1
        n += 1
    if i < len(words):
        lines.append(f"  ... {len(words) - i} more words")
    if res is not None:
        lines.append(f"outcome: {res.outcome}, {res.steps} steps, {res.cpu:.3f} s device CPU")
        for k, v in sorted((res.faults + res.events).items()):
            lines.append(f"  {v:5d}  {k}")
        lines.append(f"violations: {len(res.violations)}")
        lines += [f"  {v}" for v in res.violations]
    return "\n".join(lines)


class U85FuzzTarget:
    """The Ethos-U85 as a target of the fuzz engine (tlm/core/fuzz.py)."""
    device = "ethos-u85"
    generators = GENERATORS

    def prepare(self) -> list:
        corpus()
        return load_kernel_ops()

    def notes(self) -> list:
        return [f"Vela corpus: {corpus_fingerprint()}{' (EMPTY: vela cases run isa)' if not corpus() else ''}; "
                f"kernel ops registered: {', '.join(sorted(KERNEL_OPS)) or 'none'}"]

    def new_case(self, seed: int, index: int, gen: str) -> "Case":
        return Case(seed, index, gen)

    def extend_case(self, rng, case: "Case") -> None:
        extend_case(rng, case)

    def session(self, case: "Case", res: CaseResult, guard: engine.Guard, kernel_ops=None) -> "Session":
        return Session(case, res, guard, kernel_ops)

    def describe(self, case: "Case", res: "CaseResult | None" = None) -> str:
        return describe(case, res)

    def ci_problem(self) -> "str | None":
        return None if corpus() else ("the Vela corpus is empty (ethos-u-vela missing or failing); CI needs the "
                                      "'vela' generator")


TARGET = U85FuzzTarget()


def make_case(seed: int, index: int, gen: "str | None" = None) -> "Case":
    """The case (seed, index): deterministic."""
    return engine.make_case(TARGET, seed, index, gen)


def run_case(case: "Case", cpu_limit: float = 5.0, abort_cpu: float = 15.0, wall_limit: float = 120.0,
             kernel_ops=None) -> CaseResult:
    """One case on a fresh Device with every invariant checked (engine.run_case)."""
    return engine.run_case(TARGET, case, cpu_limit, abort_cpu, wall_limit, kernel_ops=kernel_ops)


def run(seed: int, cases: int, start: int = 0, jobs: int = 1, **kw) -> engine.Summary:
    return engine.run(TARGET.device, seed, cases, start, jobs, **kw)


def main(argv: "list[str] | None" = None) -> int:
    return engine.main(argv, device=TARGET.device)


if __name__ == "__main__":
    import sys
    sys.exit(main())
