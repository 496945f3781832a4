"""The Ethos-U85 device model: APB register access, security, reset, execution control.

`Device` is the control plane of the TLM (TRM 2.2, 2.3.5, 3.1, 3.3, 3.4, 3.5):

* APB: `apb_read(addr, pprot)` / `apb_write(addr, data, pprot, pstrb)` with the TRM 3.1.1
  bus-error rules, the 3.4 access classes and the reset-sequence rules.
* Reset: `reset()` is nRESET (PROT from PORPL/PORSL); a permitted RESET write is a soft
  reset. Both clear every register and the internal RAM (LUT) and hold
  STATUS.reset_status=1 for `Policy.reset_cycles` model cycles.
* Execution: `run(max_steps, max_work)` / `step()` fetch commands from QBASE+QREAD over the memory
  model (channel rd_cmd, attributes from MEM_ATTR[QCONFIG.cmd_region0]), keep the sticky
  NPU_SET state in an `isa.RegisterFile`, snapshot it at every NPU_OP and execute control
  operations, NPU_OP_DMA_START (ops.dma) and kernel operations (`KERNEL_OPS`).
* Errors: AXI errors, reserved encodings and branch faults set the TRM STATUS bits and
  raise the IRQ. Nothing raises out of `run`/`step`/APB for any stream content: every
  exception inside an operation becomes STATUS bits + IRQ (or is logged and skipped, per
  `Policy`); runaway streams end with StopKind.BUDGET: run() bounds the commands it
  executes (max_steps) and the work they do (max_work: transactions, bytes, pages written,
  kernel elements; see Policy.default_max_work), and each operation has the model work
  budgets of `Policy` (beyond one: errors.BudgetExceeded, event 'model_limit').

Model time is counted in cycles (`Device.cycle`): an APB transfer takes
`Policy.apb_cycles`; a command takes `Policy.cycles_per_command` plus one cycle per AXI
beat. The reset sequence and the PMU run on this clock (see pmu.py).

Kernel operations (CONV, DEPTHWISE, POOL, ELEMENTWISE, RESIZE) are dispatched through
`KERNEL_OPS[name](snapshot, dataport, device)`. An op without an entry is recorded as an
'op_unimplemented' event and, by default (`Policy.on_unimplemented_op='parse_error'`), the
NPU stops with cmd_parse_error + IRQ; with 'continue' it has no memory effect and
execution goes on.

TRM ambiguities resolved here are listed in `config.Policy`.
"""
from __future__ import annotations

import enum
import traceback
import weakref
from collections import Counter, deque
from dataclasses import dataclass, replace
from operator import itemgetter
from types import MethodType
from typing import Mapping

import numpy as np

from . import isa
from . import registers as R
from .arith import LUT_BYTES as LUT_RAM_SIZE
from .config import NpuConfig, Pins, Policy, get_config
from ..core.memo import Memo
from ..core.errors import BudgetExceeded, Unpredictable
from . import hazards as _hz
from .memory import ADDR_MASK, PAGE_BITS, BusFault, Channel, DataPort, Interface, Memory, RegionRoute, Transaction
from .ops import KERNEL_OP_NAMES, KERNEL_OPS
from .ops.common import OpState
from .ops import dma
from .ops import plan as _plans
from .pmu import Pmu, beats, summarise


# isa.decode_word results by command words (a pure function of the words; Decoded records
# are shared, never modified).  Bounded: cleared when full.
_DECODE_CACHE = Memo(1 << 14)
# Runs of NPU_SET commands in a fetch buffer: (buffer bytes, index) -> (register values,
# bytes, commands) (see Device._peek_run; a pure function of the bytes).
_SET_RUNS = Memo(1 << 14)


# Segments of the command loop: the run of NPU_SET commands from a QREAD to the next
# operation, with the command fetches it makes (see Device._segment).  Keyed by QREAD, the
# fetch buffer (its bytes) and the fetch signature (route, burst, block, QBASE, QSIZE,
# cycles per command); replayed only after the stream bytes it fetches compare equal.
_SEGMENTS = Memo(1 << 14)
_SEGMENT_MAX_COMMANDS = 4096
_FETCH_SIGS = Memo(1 << 12)          # fetch signature -> small int (segment keys stay cheap)
_ROUTES = Memo(1 << 12)              # RegionRoute.from_mem_attr arguments -> the route (frozen: shared)


class _Segment:
    """What executing a run of NPU_SET commands does (Device._replay): `blocks` the command
    fetches ((address, bytes) each; `lo`/`hi` their extent), `txns` their transactions in
    order, `values` the registers the run sets, `n` its commands, `end` the QREAD after it,
    `buf` the fetch buffer after it, `cycles`/`work` its model cycles and work units,
    `summary` its transactions' PMU summary, `op` the operation at `end` (decoded; None at
    the stream end or where the loop must decode) and `op_txns`/`op_buf`/`op_beats`/
    `op_work` the fetches of the operation's own words (they belong to the operation's
    command; `blocks`, `lo` and `hi` include them, so the replay checks them too)."""
    __slots__ = ("blocks", "txns", "values", "n", "end", "buf", "cycles", "work", "lo", "hi", "op", "summary",
                 "op_txns", "op_buf", "op_beats", "op_work")


class _DryMemory:
    """A front door that answers reads from the memory's back door and records the
    transactions (no log, listeners or faults): Device._build_segment fetches through it."""
    __slots__ = ("memory", "txns")

    def __init__(self, memory):
        self.memory = memory
        self.txns: list = []

    def access(self, txn, data=None):
        self.txns.append(txn)
        return txn, self.memory.read_array(txn.addr, txn.length)


# Traces: a whole run() as the segments and operations it executed (Device._play replays
# them in one loop, without the per-command lookups).  Keyed by what the run starts from
# (QREAD, fetch buffer, fetch signature, the registers, the chaining state, the plans'
# environment, the op implementations); replayed only after the command-stream bytes it
# fetches compare equal, and each planned operation still checks its own data.
_TRACES = Memo(64)
_HZ_FP: dict = {}                  # id(plan) -> (plan, its hazards.Footprint)
_T_KERNEL, _T_DMA, _T_WAIT, _T_ORDINARY, _T_END, _T_STOP = range(6)
_WAITS = ("NPU_OP_KERNEL_WAIT", "NPU_OP_DMA_WAIT")


def clear_warm_caches() -> None:
    """Forget every segment, run trace and operation plan (the next run is a cold run)."""
    _SEGMENTS.clear()
    _TRACES.clear()
    _plans.clear()


# device -> the run trace its last run() replayed whole (Device.replayed_program; kept
# outside the device's state: a record of how the run went, not of the device)
_PLAYED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class _Trace:
    """`steps`: (segment, op, snapshot, plan, kind, next QREAD, cycles, work, transactions,
    summary) per operation (kind _T_END: a segment that ends the stream); `blocks` the
    stream bytes its fetches read ((address, bytes), merged); `n` its commands; `work_last`
    the work units before its last command; `ftok` the fault-list token its fetches were
    found fault free for."""
    __slots__ = ("steps", "blocks", "n", "work_last", "ftok", "chunks", "checks", "prechecked", "hzst", "hzev")


def _buffered(buf, off: int) -> "int | None":
    """The stream word at offset *off* if the fetch buffer (lo, data, qbase) holds it."""
    if buf is None:
        return None
    i = ((buf[2] + off) & ADDR_MASK) - buf[0]
    if 0 <= i and i + 4 <= len(buf[1]):
        return int.from_bytes(buf[1][i:i + 4], "little")
    return None


def _decoded_at(data: bytes, i: int) -> "isa.Decoded | bool | None":
    """The command at byte i of a fetch buffer if it was decoded before (its _DECODE_CACHE
    entry); None if not; False if its words are not all in the buffer."""
    if i < 0 or i + 4 > len(data):
        return False
    w0 = int.from_bytes(data[i:i + 4], "little")
    if not isa.is_cmd1_header(w0):
        return _DECODE_CACHE.get(w0)
    if i + 8 > len(data):
        return False
    return _DECODE_CACHE.get((w0, int.from_bytes(data[i + 4:i + 8], "little")))


_O = R.OFFSET
ID, STATUS, CMD, RESET = _O["ID"], _O["STATUS"], _O["CMD"], _O["RESET"]
QBASE_LO, QBASE_HI, QREAD, QCONFIG, QSIZE = _O["QBASE_LO"], _O["QBASE_HI"], _O["QREAD"], _O["QCONFIG"], _O["QSIZE"]
PROT, CONFIG, COND_STATUS = _O["PROT"], _O["CONFIG"], _O["COND_STATUS"]
POWER_CTRL, REGIONCFG = _O["POWER_CTRL"], _O["REGIONCFG"]
MEM_ATTR0, AXI_SRAM, AXI_EXT = _O["MEM_ATTR0"], _O["AXI_SRAM"], _O["AXI_EXT"]
BASEP0 = _O["BASEP0_LO"]

# Register fields by TRM name (tlm/ethos_u85/registers.py): STATUS (TRM 3.3.1.2), CMD (3.3.1.3),
# COND_STATUS, REGIONCFG (3.3.1.13)
_STATUS, _CMD = R.REGS.STATUS, R.REGS.CMD
ST_STATE, ST_IRQ, ST_BUS, ST_RESET, ST_PARSE, ST_END, ST_PMU_IRQ, ST_ECC, ST_BRANCH, ST_ITF, ST_CHAN, ST_HIST = (
    getattr(_STATUS, n).lsb for n in ("state", "irq_raised", "bus_status", "reset_status", "cmd_parse_error",
                                       "cmd_end_reached", "pmu_irq_raised", "ecc_fault", "branch_fault",
                                       "faulting_interface", "faulting_channel", "irq_history_mask"))
_ST_CHAN_MASK = (1 << _STATUS.faulting_channel.width) - 1
_ST_HIST_MASK = (1 << _STATUS.irq_history_mask.width) - 1
_CMD_Q_ENABLES = _CMD.clock_q_enable.mask | _CMD.power_q_enable.mask
_CMD_START = _CMD.transition_to_running_state.mask
_COND_RESULT = R.REGS.COND_STATUS.result_flag
_REGION_BITS = R.REGS.REGIONCFG.region0.width     # REGIONCFG.region<n>: MEM_ATTR index of region n
STICKY_FAULTS = ("bus_status", "cmd_parse_error", "ecc_fault", "branch_fault")


def kernel_work(snap, name: str) -> int:
    """Work units of a kernel op beyond its transactions: OFM elements x kernel taps."""
    f = snap.field
    n = ((f("NPU_SET_OFM_HEIGHT_M1", "height_m1") + 1) * (f("NPU_SET_OFM_WIDTH_M1", "width_m1") + 1)
         * (f("NPU_SET_OFM_DEPTH_M1", "depth_m1") + 1))
    if name in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE", "NPU_OP_POOL"):
        n *= (f("NPU_SET_KERNEL_HEIGHT_M1", "height_m1") + 1) * (f("NPU_SET_KERNEL_WIDTH_M1", "width_m1") + 1)
    return n


class StopKind(enum.Enum):
    STOP = "npu_op_stop"            # NPU_OP_STOP executed
    END = "cmd_end_reached"         # QREAD reached QSIZE
    STOP_REQUEST = "stop_request"   # CMD.stop_request
    ERROR = "error"                 # bus_status / cmd_parse_error / branch_fault / ecc_fault
    BUDGET = "budget"               # step or work budget used up; the NPU is still RUNNING
    NOT_RUNNING = "not_running"     # run() called while STOPPED or in reset
    RESET = "reset"                 # a reset stopped the NPU (no IRQ)


@dataclass(frozen=True)
class StopReason:
    kind: StopKind
    steps: int = 0                  # commands executed by this run()/step()
    qread: int = 0
    status: int = 0                 # STATUS word at return
    cycle: int = 0
    error: str = ""                 # STATUS bit name for kind ERROR
    detail: str = ""
    work: int = 0                   # work units used by this run() (see Policy.default_max_work)

    @property
    def running(self) -> bool:
        return bool(_STATUS.state.get(self.status))

    def __str__(self) -> str:
        s = f"{self.kind.value} after {self.steps} steps, QREAD=0x{self.qread:x}, STATUS=0x{self.status:08x}"
        if self.error:
            s += f" [{self.error}]"
        return s + (f": {self.detail}" if self.detail else "")


class StatusView(dict):
    """Decoded STATUS: dict with attribute access (`dev.status.irq_raised`)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class _HookError(Exception):
    """Wraps an exception raised by a bench hook so the device does not swallow it."""


class _Stop(Exception):
    """Internal: the current command ended execution (error already recorded)."""


class _TxnSink:
    """The device's memory listener: collects the AXI transactions of the executing command
    (one Transaction per call, or a whole tlm.ethos_u85.memory.TxnBatch through `on_batch`)."""
    __slots__ = ("dev",)

    def __init__(self, dev):
        self.dev = dev

    def __call__(self, txn) -> None:
        d = self.dev
        if d._executing:
            if txn.write and not txn.resp:
                d.note_pages(range(txn.addr >> PAGE_BITS, ((txn.addr + txn.length - 1) >> PAGE_BITS) + 1))
            d.command_txns.append(txn)

    def on_batch(self, batch) -> None:
        d = self.dev
        if d._executing:
            if batch.write:
                d.note_pages(batch.pages())            # memoised per batch
            d.command_txns.append(batch)


# Device.save_state / from_state: attributes shared (frozen, or the caller's) and rebuilt
_SHARED_STATE = frozenset(("config", "policy", "pins", "kernel_ops", "dma_op", "memory"))
_REBUILT_STATE = frozenset(("dataport", "txn_sink", "hooks"))
# types shared as they are (immutable); enum and numpy scalar types join on first sight
# (frozen records: a command's description, a register snapshot, a bus transaction)
_SHARE = {int, float, str, bytes, bool, type(None), NpuConfig, Pins, Policy, RegionRoute, StopReason,
          isa.Command, isa.RegisterSnapshot, Transaction}


class _DeviceMethod:
    """A saved state's method bound to the device (re-bound by Device.from_state)."""
    __slots__ = ("func",)

    def __init__(self, func):
        self.func = func


def _clone(v, src, dst):
    """A copy of state value *v* sharing nothing mutable; methods bound to device *src* are
    saved as _DeviceMethod and bound to *dst* on restore.  TypeError for an unknown type."""
    t = type(v)
    if t in _SHARE:
        return v
    c = _COPIERS.get(t)
    if c is not None:
        return c(v, src, dst)
    if isinstance(v, (enum.Enum, np.generic)):
        _SHARE.add(t)
        return v
    if src is not None and getattr(v, "__self__", None) is src and getattr(v, "__func__", None) is not None:
        return _DeviceMethod(v.__func__)
    raise TypeError(f"Device.save_state: no copy for {t.__name__}")


# (each copier first asks, in one C-level pass, whether every item is shared as it is)
def _clone_mapping(v, src, dst):
    t = type(v)
    c = t.__new__(t)                    # (Counter.__init__ is slow; a Counter is its dict)
    dict.update(c, v if _SHARE.issuperset(map(type, v.values())) else
                {k: x if type(x) in _SHARE else _clone(x, src, dst) for k, x in v.items()})
    return c


def _clone_object(v, src, dst):
    t = type(v)
    c = t.__new__(t)
    d = vars(v)
    c.__dict__.update(d if _SHARE.issuperset(map(type, d.values())) else
                      {k: x if type(x) in _SHARE else _clone(x, src, dst) for k, x in d.items()})
    return c


def _clone_list(v, src, dst):
    return v.copy() if _SHARE.issuperset(map(type, v)) else [x if type(x) in _SHARE else _clone(x, src, dst)
                                                              for x in v]


def _clone_registers(v, src, dst):
    c = isa.RegisterFile.__new__(isa.RegisterFile)
    c._raw = dict(v._raw)
    return c


_COPIERS = {
    list: _clone_list,
    tuple: lambda v, s, d: tuple(x if type(x) in _SHARE else _clone(x, s, d) for x in v),
    dict: _clone_mapping,
    Counter: _clone_mapping,
    set: lambda v, s, d: set(v),                   # (of page numbers)
    deque: lambda v, s, d: deque(v, v.maxlen),     # the event log: records are never modified once logged
    np.ndarray: lambda v, s, d: v.copy(),
    isa.RegisterFile: _clone_registers,
    Pmu: _clone_object,
    OpState: _clone_object,
    _DeviceMethod: lambda v, s, d: MethodType(v.func, d),
}


def _shared_tuple(v: tuple) -> bool:
    """A tuple of shared values and such tuples (e.g. the hazard tracker's state)."""
    return all(type(x) in _SHARE or type(x) is tuple and _shared_tuple(x) for x in v)


def _copier(v):
    """A function (x, dst) -> a copy of x, compiled from the structure of state value *v*
    (x has that structure: the same saved value), doing what _clone does with fewer type
    tests; None for a value shared as it is."""
    t = type(v)
    if t in _SHARE or isinstance(v, (enum.Enum, np.generic)):
        return None
    if t is tuple and _shared_tuple(v):
        return None                                         # immutable, every item shared
    if t is dict and _SHARE.issuperset(map(type, v.values())):
        return lambda x, d: x.copy()
    if t is Counter and _SHARE.issuperset(map(type, v.values())):
        def counter(x, d, _new=Counter.__new__, _up=dict.update):
            c = _new(Counter)
            _up(c, x)
            return c
        return counter
    if t is list and _SHARE.issuperset(map(type, v)):
        return lambda x, d: x.copy()
    if t is list and all(type(y) is list for y in v):       # (OpState.fifo: lists of arrays)
        return lambda x, d: [_clone_list(y, None, d) for y in x]
    if t in (Pmu, OpState):                                 # objects: their dict, mutable parts copied
        plain, subs = _split_copiers(vars(v))

        def obj(x, d, _t=t, _plain=plain, _subs=subs):
            c = _t.__new__(_t)
            cd, xd = c.__dict__, x.__dict__
            cd.update(xd)
            for k, f in _plain:
                cd[k] = f(xd[k])
            for k, f in _subs:
                cd[k] = f(xd[k], d)
            return c
        return obj
    c = _COPIERS.get(t)
    if c is not None:
        return lambda x, d, _c=c: _c(x, None, d)
    return lambda x, d: _clone(x, None, d)


def _plain_copier(v):
    """The C-level one-argument copy for a list or dict of shared values or an array (the
    commonest state values), else None."""
    t = type(v)
    if t is list and _SHARE.issuperset(map(type, v)):
        return list.copy
    if t is dict and _SHARE.issuperset(map(type, v.values())):
        return dict.copy
    if t is np.ndarray:
        return np.ndarray.copy
    return None


def _split_copiers(items) -> tuple:
    """((name, one-argument copy), ...), ((name, _copier), ...) for the values of *items*
    (a dict) that are copied, not shared."""
    plain, subs = [], []
    for k, a in items.items():
        f = _plain_copier(a)
        if f is not None:
            plain.append((k, f))
        else:
            f = _copier(a)
            if f is not None:
                subs.append((k, f))
    return tuple(plain), tuple(subs)


class _State(dict):
    """A saved state (Device.save_state): the attributes, and the copy plan from_state
    compiles on its first use (the state is not to be changed after that)."""
    __slots__ = ("plan",)


class ApbRecord:
    """What a sequence of APB accesses did to a device (Device.apb_memo): `pre`/`ppre` the
    device's and the PMU's immutable attributes before it (`get`/`pget` read them), `store`
    the storage registers, `n` the number of attributes, `post`/`ppost` the immutable
    attributes it changed, `events` the events it logged (`names` their kinds), `idle` the
    PMU's idle/stopped cycles it added, `value` what the sequence returned, `misses` the
    calls it did not apply to (after _APB_MEMO_RETRIES, the sequence is no longer recorded)."""
    __slots__ = ("get", "pre", "pget", "ppre", "store", "n", "post", "ppost", "events", "names", "idle", "value",
                 "misses")


_APB_MEMO_RETRIES = 4
_PMU_TALLIES = frozenset(("_idle", "_unsummed"))     # the PMU's running totals (not registers)


def _immutable(v) -> bool:
    """A value compared and restored as it is (nothing inside it can change)."""
    return type(v) in _SHARE or type(v) is tuple or isinstance(v, (enum.Enum, np.generic))


def _getter(keys: tuple):
    """keys -> a function returning their values from a dict, always as a tuple."""
    if not keys:
        return lambda d: ()
    g = itemgetter(*keys)
    return g if len(keys) > 1 else (lambda d: (g(d),))


def _hz_before(hzst: tuple, i: int) -> tuple:
    """The hazard tracker's state a replayed trace recorded before its step *i*."""
    return hzst[i - 1] if i else _hz.EMPTY


class Device:
    """Ethos-U85 control plane and command-stream executor."""

    def __init__(self, config: "str | int | NpuConfig" = "ethos-u85-256", memory: "Memory | None" = None,
                 pins: "Pins | Mapping[str, int] | None" = None, policy: "Policy | None" = None,
                 kernel_ops: "Mapping | None" = None, settle: bool = False, reference_paths: bool = False,
                 segments: bool = True, plans: bool = True, traces: bool = True, dma_op=None):
        self.config = get_config(config)
        # the warm paths (docs/architecture.md "Warm paths"), each bit-identical to the
        # command-by-command path: segments (NPU_SET runs at once), operation plans
        # (tlm.ethos_u85.ops.plan) and run traces (a whole run replayed; needs the other two)
        self.segments, self.plans, self.traces = bool(segments), bool(plans), bool(traces)
        # reference_paths: the ops take their literal reference paths (fmap's gather/scatter);
        # with a Memory(batching=False) the tests compare them with the fast paths
        self.reference_paths = bool(reference_paths)
        self.memory = memory if memory is not None else Memory()
        self.pins = Pins.make(pins)
        self.policy = policy or Policy()
        self.kernel_ops = KERNEL_OPS if kernel_ops is None else kernel_ops
        # NPU_OP_DMA_START: (rf, dataport, lut=, policy=) -> bytes; the literal model passes
        # tlm.ethos_u85.dma_reference.dma_start
        self.dma_op = dma.dma_start if dma_op is None else dma_op
        self.op_fields: dict = {}        # payload fields of the NPU_OP being executed
        self.events: deque = deque(maxlen=self.policy.max_events)   # (event, details), newest last
        # hooks: callables (event, details); one with a true attribute `passive` only records
        # (it reads and changes nothing of the device while the run goes on); one with an
        # attribute `hook_events` (a container of event names, fixed while it is a hook) is
        # called for those events only
        self.hooks: list = []
        self.log_events = True
        self.cycle = 0
        self.work = 0                    # work units used by the current/last run()
        self.rf = isa.RegisterFile()
        self.lut = np.zeros(LUT_RAM_SIZE, np.uint8)
        self.pmu = Pmu(self.config, self.policy, on_irq=self._pmu_irq)
        self.dataport = DataPort(self.memory, self.route, reference=self.reference_paths)
        self.op_counts: Counter = Counter()
        self.chain_length = 0            # g_chain_length, maintained by kernel ops
        self.hz_state = _hz.EMPTY        # outstanding DMAs / remaining kernel ops (hazards.py)
        self._hz_op = None               # the current command's (kind, offset, snapshot, chained)
        self._hz_last = ()               # the hazard events the last command reported
        self._irq_level = False
        self._executing = False
        self.command_txns: list = []
        self.route_cache: dict = {}
        self.txn_sink = _TxnSink(self)
        self.memory.listeners.append(self.txn_sink)
        self.reset()
        if settle:
            self.wait_reset()

    # ================================================================== state copies
    def save_state(self) -> "dict | None":
        """A copy of the device's whole state between commands (registers, PMU, LUT, chaining
        state, event log, cycle count...) that `from_state` makes into a device as if it
        had the same history; None when an attribute has a type the copy does not know
        (the caller then builds the device the ordinary way).  The configuration, Policy,
        pins, kernel-op table, DMA op and memory are shared (frozen or the caller's); hooks are not
        part of the state.  runner.Session keeps the state after the driver's programming."""
        if self._executing:
            return None
        try:
            st = _State({k: (v if k in _SHARED_STATE else dict(v) if k == "route_cache" else _clone(v, self, None))
                         for k, v in vars(self).items() if k not in _REBUILT_STATE})
            st.plan = None
            return st
        except TypeError:
            return None

    def prime_caches(self) -> None:
        """Fill the route cache for the command fetch and the plans' environment (the routes
        of regions 0..7): values that are functions of the registers, kept until a register
        write or reset clears the cache, so that a saved state carries them."""
        try:
            self._fetch_sig()
            _plans.env_token(self)
        except Exception:                              # noqa: BLE001 - computed when needed then
            pass

    @classmethod
    def from_state(cls, state: dict, memory: "Memory | None" = None) -> "Device":
        """A device in the state `save_state` copied (on `memory`, else the saved device's
        memory; the device becomes its listener as __init__ does), without hooks.  What to
        copy is compiled from the state on its first use (`_copier`): a saved state is not
        to be changed after that."""
        dev = cls.__new__(cls)
        d = dev.__dict__
        d.update(state)                                # shared and immutable values as they are
        plan = getattr(state, "plan", None)
        if plan is None:                               # (what to copy, compiled from the saved values)
            plain, subs = _split_copiers({k: v for k, v in state.items() if k not in _SHARED_STATE
                                          and k != "route_cache"})
            plan = (plain + (("route_cache", dict),), subs)
            if isinstance(state, _State):
                state.plan = plan
        for k, f in plan[0]:
            d[k] = f(state[k])
        for k, f in plan[1]:
            d[k] = f(state[k], dev)
        if memory is not None:
            dev.memory = memory
        dev.hooks = []
        dev.dataport = DataPort(dev.memory, dev.route, reference=dev.reference_paths)
        dev.txn_sink = _TxnSink(dev)
        dev.memory.listeners.append(dev.txn_sink)
        return dev

    # ================================================================== recorded APB sequences
    def apb_memo(self, memo: dict, name: str, fn):
        """``fn(self)``, a sequence of APB accesses (runner: the driver's closing STATUS read
        and CMD write; *name* stands for that one sequence in *memo*), or the effect it had
        when recorded in *memo* under *name*, applied without making the accesses: only when
        the device's and the PMU's immutable attributes, the PMU's counter registers and the
        storage registers equal those the record started from (an APB access reads nothing
        else: its effect is a function of these), no hook takes the events it logs and no
        PMU counter counts.  What a replay leaves equals what the accesses leave (events,
        cycles, PMU, STATUS, IRQ line); a recording is kept only when the accesses changed
        nothing but immutable attributes, the event log and the PMU's idle cycles."""
        rec = memo.get(name)
        if rec is not None:
            d = self.__dict__
            try:
                hit = (len(d) == rec.n and rec.get(d) == rec.pre and rec.pget(self.pmu.__dict__) == rec.ppre
                       and self._store == rec.store and self.pmu.totals_only)
            except KeyError:
                hit = False
            if hit:
                for h in self.hooks:
                    kinds = getattr(h, "hook_events", None)
                    if kinds is None or not rec.names.isdisjoint(kinds):
                        hit = False
                        break
            if not hit:
                rec.misses += 1
                if rec.misses > _APB_MEMO_RETRIES:           # (a device that keeps differing: no more
                    return fn(self)                          #  recordings, each costs a few copies)
            else:
                d.update(rec.post)
                self.pmu.__dict__.update(rec.ppost)
                idle = self.pmu._idle
                idle[0] += rec.idle[0]
                idle[1] += rec.idle[1]
                self.events.extend(rec.events)
                return rec.value
        old, rec = rec, None
        d, pmu = self.__dict__, self.pmu
        if self._executing or self.policy.auto_run or not self.log_events or not pmu.totals_only:
            memo.pop(name, None)
            return fn(self)
        pd = pmu.__dict__
        before, pbefore = dict(d), dict(pd)
        keys = tuple(k for k, v in before.items() if _immutable(v))
        pkeys = tuple(k for k, v in pbefore.items() if _immutable(v))
        # the PMU's registers held in lists (event counters and types) are compared too
        pregs = tuple(k for k, v in pbefore.items() if type(v) is list and k not in _PMU_TALLIES)
        copies = (dict(self._store), dict(self.rf._raw), dict(self.route_cache), dict(self.op_counts),
                  self.lut.tobytes(), [list(x) if isinstance(x, list) else dict(x) if isinstance(x, dict) else x
                                       for x in pbefore.values()])
        n0, idle0 = len(self.events), list(pmu._idle)
        value = fn(self)
        new = len(self.events) - n0
        ok = (d.keys() == before.keys() and pd.keys() == pbefore.keys() and pmu.totals_only
              and len(self.events) < self.events.maxlen and new >= 0
              and all(d[k] is v for k, v in before.items() if k not in keys)
              and all(_immutable(d[k]) for k in keys)
              and all(pd[k] is v for k, v in pbefore.items() if k not in pkeys)
              and (dict(self._store), dict(self.rf._raw), dict(self.route_cache), dict(self.op_counts),
                   self.lut.tobytes()) == copies[:5]
              and [x if k != "_idle" else idle0 for k, x in pd.items()] == copies[5])
        if ok:
            events = tuple(self.events)[n0:]
            names = frozenset(e for e, _ in events)
            if all(getattr(h, "hook_events", None) is not None and names.isdisjoint(h.hook_events)
                   for h in self.hooks):
                rec = ApbRecord()
                rec.get, pget, lget = _getter(keys), _getter(pkeys), _getter(pregs)
                rec.pget = lambda x: pget(x) + tuple(map(tuple, lget(x)))
                rec.pre, rec.ppre = rec.get(before), rec.pget(pbefore)
                rec.store, rec.n = copies[0], len(before)
                rec.post = {k: d[k] for k in keys if d[k] is not before[k]}
                rec.ppost = {k: pd[k] for k in pkeys if pd[k] is not pbefore[k]}
                rec.events, rec.names = events, names
                rec.idle = (pmu._idle[0] - idle0[0], pmu._idle[1] - idle0[1])
                rec.value = value
                rec.misses = old.misses if old is not None else 0
        if rec is None:
            memo.pop(name, None)
        else:
            memo[name] = rec
        return value

    # ================================================================== events / irq
    def _event(self, event: str, /, **details) -> None:
        details["cycle"] = self.cycle
        if self.log_events:
            self.events.append((event, details))
        for h in self.hooks:
            kinds = getattr(h, "hook_events", None)
            if kinds is not None and event not in kinds:
                continue
            try:
                h(event, details)
            except Exception as e:          # noqa: BLE001 - bench code, re-raised below
                raise _HookError(e) from e

    def _op_hooks(self) -> list:
        """The hooks that see 'op' events (see __init__: a hook's `hook_events`)."""
        return [h for h in self.hooks if "op" in getattr(h, "hook_events", ("op",))]

    @property
    def irq(self) -> bool:
        """Level of the IRQ output (TRM 5.3): irq_raised | pmu_irq_raised."""
        return bool(self.irq_raised or self.pmu_irq_raised)

    def _update_irq(self) -> None:
        lvl = self.irq
        if lvl != self._irq_level:
            self._irq_level = lvl
            self._event("irq", level=int(lvl), status=self.status_word)

    def _pmu_irq(self) -> None:
        self.pmu_irq_raised = 1
        self._event("pmu_irq", ovs=self.pmu.ovs)

    def _on_txn(self, txn) -> None:
        if self._executing:
            self.command_txns.append(txn)

    # ================================================================== reset
    def _clear_state(self) -> None:
        """Every register and internal RAM to its reset value (TRM 2.2: "at any reset, all
        registers and memories in the NPU are cleared")."""
        self.running = False
        self.irq_raised = 0
        self.bus_status = 0
        self.cmd_parse_error = 0
        self.cmd_end_reached = 0
        self.pmu_irq_raised = 0
        self.ecc_fault = 0
        self.branch_fault = 0
        self.faulting_interface = 0
        self.faulting_channel = 0
        self.irq_history_mask = 0
        self.cmd_word = 0x0000000C
        self.reset_word = 0
        self.qread = 0
        self.cond_status = 0
        self._store = {r.offset: (r.reset or 0) for r in R.iter_registers() if r.behaviour == "store"
                       and r.page in ("BASE", "BASE_POINTERS")}
        self.route_cache = {}
        self.resume_ok = False
        self.stop_requested = False
        self.chain_length = 0
        self.hz_state = _hz.EMPTY
        self.op_state = OpState()        # chaining FIFOs, g_* chain state, accumulator storage
        self.rf.reset()
        self._snap = None
        self.lut[:] = 0
        self.pmu.reset()
        self._fetch_buf = None
        self._last_stop: "StopReason | None" = None

    def _sample_pins(self) -> None:
        p = self.pins
        hmask = 0xFF_FFFF_FFC0
        self.cfg_sram_cap = p.CFGSRAMCAP & R.get("CFG_SRAM_CAP").defined_mask
        self.cfg_ext_cap = p.CFGEXTCAP & R.get("CFG_EXT_CAP").defined_mask
        self.cfg_sram_hash0 = p.CFGSRAMHASH0 & hmask
        self.cfg_sram_hash1 = (p.CFGSRAMHASH1 & hmask) if self.config.sram_hash1_mirrors_pins else 0
        self.cfg_ext_hash0 = p.CFGEXTHASH0 & hmask
        self.route_cache = {}

    def reset(self, wait: bool = False) -> None:
        """Hard reset (nRESET): clear everything, CPL/CSL from PORPL/PORSL, start the reset
        sequence (STATUS.reset_status=1 for Policy.reset_cycles cycles). No IRQ."""
        was_running = getattr(self, "running", False)
        self._clear_state()
        self.cpl = self.pins.PORPL & 1
        self.csl = self.pins.PORSL & 1
        self._pending_prot = None
        self.power_masked = False
        self._sample_pins()
        self.reset_remaining = max(1, int(self.policy.reset_cycles))
        self._event("reset", kind="hard", was_running=was_running, cpl=self.cpl, csl=self.csl)
        self._update_irq()
        if wait:
            self.wait_reset()

    def _soft_reset(self, data: int, pprot: int) -> None:
        """A permitted RESET write (TRM 3.3.1.4, 2.2, 2.3.5)."""
        was_running = self.running
        self._clear_state()
        self.reset_word = data & 3
        self._pending_prot = self._new_prot(data, pprot)
        if not self.policy.prot_update_at_end:
            self.cpl, self.csl = self._pending_prot
            self._pending_prot = None
        self.power_masked = True
        self._sample_pins()
        self.reset_remaining = max(1, int(self.policy.reset_cycles))
        self._event("reset", kind="soft", was_running=was_running, pending_CPL=data & 1,
                    pending_CSL=(data >> 1) & 1, pprot=pprot)
        self._update_irq()

    def _new_prot(self, data: int, pprot: int) -> tuple[int, int]:
        cpl = min(pprot & 1, data & 1)
        csl = (data >> 1) & 1
        if self.policy.csl_rule == "or_requester":
            csl |= (pprot >> 1) & 1
        return cpl, csl

    @property
    def last_stop(self) -> "StopReason | None":
        """Why the NPU last went RUNNING -> STOPPED (None after reset)."""
        return self._last_stop

    @property
    def in_reset(self) -> bool:
        return self.reset_remaining > 0

    def _finish_reset(self) -> None:
        self.reset_remaining = 0
        if self._pending_prot is not None:
            self.cpl, self.csl = self._pending_prot
            self._pending_prot = None
        self._event("reset_done", cpl=self.cpl, csl=self.csl)

    def tick(self, cycles: int = 1) -> None:
        """Advance model time while no command executes (APB traffic, idle, reset)."""
        cycles = int(cycles)
        if cycles <= 0:
            return
        self.cycle += cycles
        if self.reset_remaining > 0:
            self.reset_remaining -= cycles
            if self.reset_remaining <= 0:
                self._finish_reset()
        self.pmu.advance(cycles, self.running)
        self._update_irq()

    def wait_reset(self, max_cycles: int = 1 << 20) -> int:
        """Advance time until the reset sequence has finished; returns the cycles waited."""
        waited = 0
        while self.in_reset and waited < max_cycles:
            n = self.reset_remaining
            self.tick(n)
            waited += n
        return waited

    # ================================================================== register views
    @property
    def status_word(self) -> int:
        w = ((bool(self.running) << ST_STATE) | (bool(self.irq_raised) << ST_IRQ) | (bool(self.bus_status) << ST_BUS)
             | (bool(self.in_reset) << ST_RESET) | (bool(self.cmd_parse_error) << ST_PARSE)
             | (bool(self.cmd_end_reached) << ST_END) | (bool(self.pmu_irq_raised) << ST_PMU_IRQ)
             | (bool(self.ecc_fault) << ST_ECC) | (bool(self.branch_fault) << ST_BRANCH)
             | (bool(self.faulting_interface) << ST_ITF))
        return (w | (self.faulting_channel & _ST_CHAN_MASK) << ST_CHAN
                | (self.irq_history_mask & _ST_HIST_MASK) << ST_HIST)

    @property
    def status(self) -> StatusView:
        return StatusView(R.get("STATUS").decode(self.status_word))

    @property
    def prot_word(self) -> int:
        return (self.csl & 1) << 1 | (self.cpl & 1)

    def stored(self, offset: int) -> "int | None":
        """The value held by a plain storage register at *offset* (None if that offset is not
        one): no side effects, no access check (tools such as the fuzzer's invariants)."""
        return self._store.get(offset)

    def _reg64(self, lo: int) -> int:
        return self._store[lo] | self._store[lo + 4] << 32

    @property
    def qbase(self) -> int:
        return self._reg64(QBASE_LO) & ADDR_MASK

    @property
    def qsize(self) -> int:
        return self._store[QSIZE]

    @property
    def qconfig(self) -> int:
        return self._store[QCONFIG] & 3

    def basep(self, n: int) -> int:
        return self._reg64(BASEP0 + 8 * n) & ADDR_MASK

    def mem_attr(self, n: int) -> int:
        return self._store[MEM_ATTR0 + 4 * n]

    @property
    def regioncfg(self) -> int:
        return self._store[REGIONCFG]

    @property
    def clock_q_enable(self) -> int:
        return _CMD.clock_q_enable.get(self.cmd_word)

    @property
    def power_q_enable(self) -> int:
        return _CMD.power_q_enable.get(self.cmd_word)

    @property
    def clock_off_permitted(self) -> bool:
        """The NPU would accept a clock Q-channel request (TRM 2.3.5, 3.3.1.3) [model rule]."""
        return not self.running and not self.in_reset and bool(self.clock_q_enable)

    @property
    def power_off_permitted(self) -> bool:
        """The NPU would accept a power Q-channel request: stopped, power_q_enable=1, not
        masked by a RESET write, all interrupts cleared (TRM 3.1.4, 3.3.1.4)."""
        return (not self.running and not self.in_reset and bool(self.power_q_enable)
                and not self.power_masked and not self.irq)

    def inject_ecc_error(self, ram: str = "ecc_dma", corrected: bool = False) -> None:
        """Bench hook for the ECC path (the TLM has no RAM ECC model). Counts the PMU ECC event
        (`ram` is its name, e.g. 'ecc_ao_lut'); an uncorrected error sets STATUS.ecc_fault,
        stops the NPU and raises the IRQ (TRM 3.3.1.2); corrected errors do not fault."""
        self.pmu.add_event(ram, 1)
        if not corrected:
            self._raise_error("ecc_fault", f"uncorrected ECC error in {ram}", ram=ram)
        self.pmu.advance(0, self.running)
        self._update_irq()

    def set_result_flag(self, value: int) -> None:
        """COND_STATUS.result_flag (for kernel ops writing a single-element OFM)."""
        self.cond_status = value & 1

    def add_cycles(self, cycles: int) -> None:
        """Kernel ops: extra model cycles spent by the current command."""
        self._extra_cycles += max(0, int(cycles))

    def read_register(self, offset: int) -> int:
        """Backdoor read of a register word (no permission check, no side effects, ignores
        the reset-sequence read rule)."""
        reg = R.by_offset(offset)
        return 0 if reg is None else self._read_reg(reg)

    def _read_reg(self, reg) -> int:
        off = reg.offset
        if reg.behaviour == "const":
            return reg.reset
        if off == STATUS:
            return self.status_word
        if off == CMD:
            return self.cmd_word & self.policy.cmd_readback_mask
        if off == RESET:
            return self.reset_word
        if off == QREAD:
            return self.qread & 0xFFFFFFFF
        if off == PROT:
            return self.prot_word
        if off == CONFIG:
            return self.config.config_word
        if off == COND_STATUS:
            return _COND_RESULT.put(0, self.cond_status)
        if reg.name == "CFG_SRAM_CAP":
            return self.cfg_sram_cap
        if reg.name == "CFG_EXT_CAP":
            return self.cfg_ext_cap
        if reg.name.startswith("CFG_") and "HASH" in reg.name:
            v = {"CFG_SRAM_HASH0": self.cfg_sram_hash0, "CFG_SRAM_HASH1": self.cfg_sram_hash1,
                 "CFG_EXT_HASH0": self.cfg_ext_hash0}[reg.name]
            return (v & 0xFFFFFFFF) if reg.word == 0 else (v >> 32) & 0xFF
        if self.pmu.owns(off):
            return self.pmu.read(off) & reg.read_mask
        return self._store.get(off, 0) & reg.read_mask

    # ================================================================== APB
    def apb_read(self, addr: int, pprot: int = 0b01) -> tuple[int, int]:
        """One APB read transfer. Returns (PRDATA, PSLVERR)."""
        try:
            data, err = self._apb(False, addr, 0, pprot, 0)
        except _HookError as e:
            raise e.__cause__ from None
        return data, err

    def apb_write(self, addr: int, data: int, pprot: int = 0b01, pstrb: int = 0xF) -> int:
        """One APB write transfer. Returns PSLVERR."""
        try:
            _, err = self._apb(True, addr, data & 0xFFFFFFFF, pprot, pstrb)
        except _HookError as e:
            raise e.__cause__ from None
        if self.policy.auto_run and self.running:
            self.run()
        return err

    def _apb(self, write: bool, addr: int, data: int, pprot: int, pstrb: int) -> tuple[int, int]:
        addr &= R.APB_WINDOW - 1
        pprot &= 7
        try:
            rdata, err = self._apb_access(write, addr, data, pprot, pstrb)
        except _HookError:
            raise
        except Exception as e:                       # noqa: BLE001 - never raise out
            self._event("internal_error", where="apb", error=repr(e), tb=traceback.format_exc())
            rdata, err = 0, 1
        if err:
            rdata = 0
        self._event("apb", write=int(write), addr=addr, data=data if write else rdata,
                    pprot=pprot, pstrb=pstrb, pslverr=int(err))
        self.tick(self.policy.apb_cycles)
        return rdata, int(bool(err))

    def permitted(self, pprot: int) -> bool:
        """TRM 3.1.1 / 2.3.5: PPROT[0] >= CPL and PPROT[1] <= CSL."""
        return (pprot & 1) >= self.cpl and ((pprot >> 1) & 1) <= self.csl

    def _apb_access(self, write, addr, data, pprot, pstrb):
        if addr & 3:
            self._event("apb_error", reason="unaligned", addr=addr, write=int(write))
            return 0, 1
        if write and pstrb & 0xF != 0xF:
            self._event("apb_error", reason="subword_write", addr=addr, pstrb=pstrb)
            return 0, 1
        if not self.permitted(pprot):
            self._event("apb_error", reason="protection", addr=addr, write=int(write), pprot=pprot,
                        cpl=self.cpl, csl=self.csl)
            return 0, 1
        if self.in_reset:
            rule = self.policy.reset_read if not write else self.policy.reset_write
            if rule == "stall":
                self._event("apb_stall", addr=addr, cycles=self.reset_remaining)
                self.tick(self.reset_remaining)
            elif not write:
                return (self.status_word if addr == STATUS else 0), 0
            else:
                if addr == CMD:
                    if rule == "trm_3_1_1":
                        self.cmd_word = (self.cmd_word & ~0xC) | (data & 0xC)
                        if self.policy.cmd_write_in_reset_unmasks_power:
                            self.power_masked = False
                    return 0, 0
                if addr == RESET:
                    if rule == "trm_3_1_1":
                        self.reset_word = data & 3
                        new = self._new_prot(data, pprot)
                        if self.policy.prot_update_at_end:
                            self._pending_prot = new
                        else:
                            self.cpl, self.csl = new
                        self._event("reset_prot_update", cpl=new[0], csl=new[1])
                    return 0, 0
                self._event("apb_error", reason="write_in_reset", addr=addr)
                return 0, 1
        reg = R.by_offset(addr)
        if reg is None:
            if self.policy.reserved_offset_slverr:
                self._event("apb_error", reason="reserved", addr=addr, write=int(write))
                return 0, 1
            return 0, 0
        if self.running and (reg.stopped_only == "rw" or (reg.stopped_only == "w" and write)):
            mode = self.policy.running_unpredictable
            self._event("unpredictable", what=f"APB {'write' if write else 'read'} of {reg.ident} "
                                              f"in RUNNING state", addr=addr)
            if mode == "slverr":
                return 0, 1
            if mode == "ignore":
                return 0, 0
        if not write:
            return self._read_reg(reg), 0
        if reg.access == R.RO:
            return 0, 0                               # ignored, no error (TRM 3.4.1)
        self._write_reg(reg, data, pprot)
        return 0, 0

    def _write_reg(self, reg, data: int, pprot: int) -> None:
        off = reg.offset
        if off == CMD:
            self._write_cmd(data)
        elif off == RESET:
            self._soft_reset(data, pprot)
        elif self.pmu.owns(off):
            self.pmu.write(off, data)
        elif off in self._store:
            self._store[off] = data & reg.write_mask
            self.route_cache.clear()                # BASEP / REGIONCFG / MEM_ATTR / AXI_* may change
            if off in (QBASE_LO, QBASE_HI, QSIZE):
                self.resume_ok = False
                self._fetch_buf = None
                if not self.running:
                    self.cmd_end_reached = 0

    def _write_cmd(self, data: int) -> None:
        """TRM 3.3.1.3."""
        self.cmd_word = data
        self.power_masked = False
        clr_hist = (data >> 16) & 0xFFFF
        if clr_hist:
            self.irq_history_mask &= ~clr_hist
        if data & 2:
            self.irq_raised = 0
            self.pmu_irq_raised = 0
        was_running = self.running
        if data & 0x10 and was_running:
            self.stop_requested = True
            self._event("stop_request", qread=self.qread)
            self._check_stop()
        if data & 1 and not was_running:
            self._start()
        self._update_irq()

    def _start(self) -> None:
        faults = [n for n in STICKY_FAULTS if getattr(self, n)]
        if faults and self.policy.run_with_sticky_fault == "ignore":
            self._event("start_ignored", faults=faults)
            return
        if self.qbase & 3 or self.qsize & 3 or self.qsize > 1 << 24:
            self._event("unpredictable", what=f"QBASE 0x{self.qbase:x} / QSIZE 0x{self.qsize:x} not 4-byte "
                                              f"aligned or above 16 MB (TRM 3.3.1.5, 3.3.1.8)")
        resume = self.resume_ok
        if not resume:
            self.qread = 0
        self.resume_ok = False
        self.stop_requested = False
        self._fetch_buf = None
        self.running = True
        self._event("state", state="running", qread=self.qread, resume=resume, qbase=self.qbase,
                    qsize=self.qsize)

    # ================================================================== routing
    def _attr_route(self, attr_index: int, base: int) -> RegionRoute:
        key = (self.mem_attr(attr_index & 3), base, self.prot_word, self.cfg_sram_hash0, self.cfg_sram_hash1,
               self.cfg_ext_hash0, self.config.sram_ports, self.config.ext_ports)
        r = _ROUTES.get(key)
        if r is None:                                 # (a RegionRoute is frozen: shared)
            r = _ROUTES.put(key, RegionRoute.from_mem_attr(key[0], base, key[2], key[3:5], *key[5:]))
        return r

    def route(self, region: int) -> RegionRoute:
        """Region n -> BASEP[n], MEM_ATTR[REGIONCFG.region<n>] (TRM 3.3.1.13-14, 3.3.2, 2.3.3);
        AxPROT from PROT (TRM 2.2).

        Cached per (region, CPL, CSL); the cache is emptied by every write to the stored
        registers (BASEP, REGIONCFG, MEM_ATTR, ...), by reset and by a pin resample."""
        key = (region, self.cpl, self.csl)
        r = self.route_cache.get(key)
        if r is not None:
            return r
        if not 0 <= int(region) < 8:
            raise Unpredictable(f"memory region {region} outside 0..7")
        r = self._attr_route((self.regioncfg >> (_REGION_BITS * region)) & ((1 << _REGION_BITS) - 1),
                             self.basep(region))
        self.route_cache[key] = r
        return r

    def burst_boundary(self, interface: Interface) -> int:
        """Bytes at which bursts are split: 64 << min(AXI_x.max_beats, CFG_x_CAP.max_beats)."""
        reg = self._store[AXI_EXT if interface == Interface.ext else AXI_SRAM]
        cap = self.cfg_ext_cap if interface == Interface.ext else self.cfg_sram_cap
        mb = min((reg >> 16) & 3, (cap >> 16) & 3, 2)
        return 64 << mb

    def max_outstanding(self, interface: Interface) -> tuple[int, int]:
        """Effective (reads, writes) outstanding per port: min(register, pins) + 1, capped by
        the hardware maxima (TRM 2.3.3, 3.3.1.18-21)."""
        ext = interface == Interface.ext
        reg = self._store[AXI_EXT if ext else AXI_SRAM]
        cap = self.cfg_ext_cap if ext else self.cfg_sram_cap
        hw_r, hw_w = self.config.max_outstanding("ext" if ext else "sram")
        rd = min(reg & 0x3F, cap & 0x3F) + 1
        wr = min((reg >> 8) & 0x1F, (cap >> 8) & 0x1F) + 1
        return min(rd, hw_r), min(wr, hw_w)

    # ================================================================== fetch
    def _fetch_word(self, off: int) -> int:
        w = _buffered(self._fetch_buf, off)           # (lo, data, qbase): cleared when QBASE changes
        if w is not None:
            return w
        self._fetch_buf = buf = self._fetch_block(off, self.dataport)
        return _buffered(buf, off)

    def _fetch_route(self) -> RegionRoute:
        key = ("cmd", self.qconfig, self.cpl, self.csl)
        r = self.route_cache.get(key)
        if r is None:
            r = self.route_cache[key] = self._attr_route(self.qconfig, 0)
        return r

    def _fetch_block(self, off: int, port) -> tuple:
        """Read the fetch block holding the stream word at *off* through *port* (channel
        rd_cmd, split at burst boundaries); returns the new fetch buffer (lo, data, qbase)."""
        qbase = self.qbase & ~3
        addr = (qbase + off) & ADDR_MASK
        r = self._fetch_route()
        blk = max(4, int(self.policy.fetch_block))
        lo = addr - addr % blk
        end = qbase + (self.qsize & ~3)
        hi = min(lo + blk, -(-end // 128) * 128, 1 << 40)
        if lo < qbase <= addr:
            lo = qbase
        if hi < addr + 4 or end > ADDR_MASK:             # wrapping stream: word by word
            lo, hi = addr, addr + 4
        data = bytearray()
        bb = self.burst_boundary(r.interface)
        a = lo
        while a < hi:
            n = min(hi - a, bb - a % bb)
            data += port.read_abs(r, a, n, Channel.rd_cmd).tobytes()
            a += n
        return (lo, bytes(data), qbase)

    # ================================================================== segments
    def _fetch_sig(self) -> int:
        """A small int naming everything a segment's fetches depend on besides the stream
        bytes and QREAD (memoised in the route cache, which register writes and resets clear)."""
        key = ("fetch", self.cpl, self.csl)
        e = self.route_cache.get(key)
        if e is not None and e[0] is self.policy:
            return e[1]
        r = self._fetch_route()
        sig = (r, self.burst_boundary(r.interface), int(self.policy.fetch_block), self.qbase & ~3,
               self.qsize & ~3, self.policy.cycles_per_command)
        sid = _FETCH_SIGS.get(sig)
        if sid is None:
            sid = _FETCH_SIGS.put(sig, object())
        self.route_cache[key] = (self.policy, sid)             # (a Policy assigned later: recomputed)
        return sid

    def _segment(self) -> "_Segment | None":
        """The segment starting at QREAD with the current fetch buffer (built on first use;
        None when there is no NPU_SET command to run at once, or the stream needs the
        command-by-command path: a decode error, a truncated cmd1)."""
        key = (self.qread, self._fetch_buf, self._fetch_sig())
        seg = _SEGMENTS.get(key, False)
        if seg is False:
            seg = _SEGMENTS.put(key, self._build_segment())
        return seg

    def _build_segment(self) -> "_Segment | None":
        """Follow the stream from QREAD as the loop would, fetching through a _DryMemory:
        the NPU_SET commands up to the next operation (whose own fetches stay with it) or
        the stream end."""
        qsize = self.qsize & ~3
        off = self.qread
        buf = self._fetch_buf
        dry = _DryMemory(self.memory)
        port = DataPort(dry, self.route, reference=self.reference_paths)
        blocks, txns, values, n, op, op_fetch = [], [], {}, 0, None, []

        def fetch(o):
            k = len(dry.txns)
            b = self._fetch_block(o, port)
            pending.append((b, dry.txns[k:]))
            return b
        while n < _SEGMENT_MAX_COMMANDS and off < qsize:
            pending, tmp = [], buf
            w0 = _buffered(tmp, off)
            if w0 is None:
                tmp = fetch(off)
                w0 = _buffered(tmp, off)
            key = w0
            if isa.is_cmd1_header(w0):
                if off + 8 > qsize:
                    break                                  # truncated cmd1: the loop reports it
                w1 = _buffered(tmp, off + 4)
                if w1 is None:
                    tmp = fetch(off + 4)
                    w1 = _buffered(tmp, off + 4)
                key = (w0, w1)
            d = _DECODE_CACHE.get(key)
            if d is None:
                try:
                    d = isa.decode_word([w0] if key is w0 else list(key), 0)
                except isa.IsaError:
                    break
                _DECODE_CACHE.put(key, d)
            if d.cmd.is_op:
                op, op_fetch = d, pending                  # (the op's own fetches stay with it)
                break
            for b, t in pending:
                blocks.append(b)
                txns += t
            buf = tmp
            values[d.cmd.name] = isa.register_value(d)
            n += 1
            off += d.size
        if n == 0 and op is None:
            return None
        seg = _Segment()
        seg.n, seg.end, seg.buf, seg.values, seg.op = n, off, buf, values, op
        seg.txns = tuple(txns)
        seg.op_txns = tuple(t for _, ts in op_fetch for t in ts)
        seg.op_buf = op_fetch[-1][0] if op_fetch else None
        seg.op_beats = sum(beats(t.addr, t.length) for t in seg.op_txns)
        seg.op_work = sum(1 + (t.length >> 6) for t in seg.op_txns)
        every = blocks + [b for b, _ in op_fetch]
        seg.blocks = tuple((b[0], b[1]) for b in every)
        seg.lo = min((b[0] for b in every), default=0)
        seg.hi = max((b[0] + len(b[1]) for b in every), default=0)
        cpc = self.policy.cycles_per_command
        seg.cycles = n * cpc + sum(beats(t.addr, t.length) for t in seg.txns)
        seg.work = n + sum(1 + (t.length >> 6) for t in seg.txns)
        seg.summary = Pmu.increments(summarise(seg.txns))
        return seg

    def _replay(self, seg: _Segment) -> bool:
        """Execute a segment at once: the same fetch transactions, registers, QREAD, fetch
        buffer, cycles, work and PMU totals as the commands one by one (run() calls it only
        when no PMU counter counts and the budgets leave room for the whole segment).
        False, with nothing done, when the stream bytes differ from the segment's or a fetch
        could meet a bus fault (the loop then runs the commands itself)."""
        mem = self.memory
        if seg.blocks:
            if not mem.fault_free(seg.lo, seg.hi, False):
                return False
            for lo, data in seg.blocks:
                if not mem.equals(lo, data):
                    return False
            if seg.txns:
                if mem.log_enabled:
                    mem.log.extend(seg.txns)
                self._fetch_buf = seg.buf
        if seg.n:
            self.rf._raw.update(seg.values)
            self._snap = None
            self.qread = seg.end
            self.cycle += seg.cycles
            self.work += seg.work
            self.pmu.tally(seg.cycles, True, seg.txns, seg.summary)
        return True

    # ================================================================== execution
    def _snapshot_stop(self, kind: StopKind, steps: int, error: str = "", detail: str = "") -> StopReason:
        return StopReason(kind, steps, self.qread, self.status_word, self.cycle, error, detail)

    def _stop(self, kind: StopKind, irq: bool = True, error: str = "", detail: str = "") -> None:
        self.running = False
        self.hz_state = _hz.EMPTY        # a stopped NPU has nothing outstanding
        self.stop_requested = False
        if irq:
            self.irq_raised = 1
        self._last_stop = self._snapshot_stop(kind, 0, error, detail)
        self._event("state", state="stopped", reason=kind.value, qread=self.qread, error=error,
                    detail=detail)

    def _raise_error(self, bit: str, detail: str = "", **info) -> None:
        """TRM 3.6.8 raise_error(): set the sticky bit, stop, IRQ."""
        setattr(self, bit, 1)
        self._event("fault", bit=bit, detail=detail, qread=self.qread, **info)
        self._stop(StopKind.ERROR, error=bit, detail=detail)

    def _check_stop(self) -> bool:
        """Stop conditions at a command boundary. Returns True if the NPU stopped."""
        if not self.running:
            return True
        if self.stop_requested and self.chain_length == 0:
            self.resume_ok = bool(self.policy.resume_after_stop_request)
            self._stop(StopKind.STOP_REQUEST)
            return True
        if self.qread >= (self.qsize & ~3):
            self.cmd_end_reached = 1
            self._stop(StopKind.END)
            return True
        return False

    def _policy_error(self, choice: str, what: str, **info) -> None:
        """Apply a 'continue' / 'parse_error' policy to a non-architectural condition."""
        if choice == "parse_error":
            self._raise_error("cmd_parse_error", what, **info)
            raise _Stop()

    def step(self) -> "StopReason | None":
        """Execute one command. Returns the StopReason if the NPU is stopped afterwards."""
        try:
            if not self.running:
                return self._snapshot_stop(StopKind.NOT_RUNNING, 0)
            if not self._check_stop():
                self._exec_one()
                self._check_stop()
            self._update_irq()
        except _HookError as e:
            raise e.__cause__ from None
        if self.running:
            return None
        return self._last_stop

    def run(self, max_steps: "int | None" = None, max_work: "int | None" = None) -> StopReason:
        """Execute while RUNNING, at most `max_steps` commands (Policy.default_max_steps if
        None) and, at command boundaries, until `max_work` work units are used
        (Policy.default_max_work if None; units as documented there). Either budget ends
        the run with StopKind.BUDGET, the NPU still RUNNING: run() again resumes. Never
        raises for any stream content."""
        budget = self.policy.default_max_steps if max_steps is None else int(max_steps)
        work_budget = self.policy.default_max_work if max_work is None else int(max_work)
        if not self.running or self.in_reset:
            return self._snapshot_stop(StopKind.NOT_RUNNING, 0)
        steps = 0
        self.work = 0
        if _PLAYED:
            _PLAYED.pop(self, None)
        cpc = self.policy.cycles_per_command
        mem = self.memory
        listeners = mem.listeners
        # segments need the plain front door with the device as its only listener (a bench
        # memory or listener sees every transaction as the loop makes it)
        fast = (self.segments and mem.batching and type(mem).access is Memory.access and listeners
                and listeners[0] is self.txn_sink)
        rec = tkey = None
        hzrec: list = []                           # per recorded step: (hazard state after, events)
        if (fast and self.traces and self.plans and not self.reference_paths and not self.stop_requested
                and not (self.pmu.cnten and self.pmu.counting) and not (self.hz_state[0] or self.hz_state[1])):
            tkey = self._trace_key()
            tr = _TRACES.get(tkey)
            if tr is None:
                rec = []                           # this run is recorded (see _store_trace)
            else:
                try:
                    n = self._play(tr, budget, work_budget)
                except _HookError as e:
                    raise e.__cause__ from None
                if n is not None:
                    steps += n
                    self._update_irq()
        try:
            while True:
                if self._check_stop():
                    break
                if steps >= budget or (work_budget is not None and self.work >= work_budget):
                    what = f"{budget} steps" if steps >= budget else f"{work_budget} work units"
                    self._event("budget", steps=steps, work=self.work, qread=self.qread)
                    self._update_irq()
                    r = self._snapshot_stop(StopKind.BUDGET, steps, detail=f"budget of {what}")
                    return replace(r, work=self.work)
                if fast and not self.stop_requested and len(listeners) == 1 and not (
                        self.pmu.cnten and self.pmu.counting):
                    # the run of NPU_SET commands up to the next operation at once (a PMU
                    # counter that counts sees every command: the loop below then)
                    seg = self._segment()
                    if (seg is not None and steps + seg.n < budget
                            and (work_budget is None or self.work + seg.work < work_budget)
                            and self._replay(seg)):
                        steps += seg.n
                        if seg.op is not None:             # the operation after it, decoded
                            w0 = self.work
                            self._exec_one(seg.op, seg)
                            steps += 1
                            self._update_irq()
                            if rec is not None:
                                if self._record(rec, seg, w0):
                                    hzrec.append((self.hz_state, self._hz_last))
                                else:
                                    rec = None
                        elif rec is not None:
                            rec.append((seg, None, None, None, _T_END, seg.end, 0, 0, (), ()))
                            hzrec.append((self.hz_state, ()))
                        continue
                rec = None                                 # a command by command stretch
                d = self._peek_set()
                if d is None:
                    self._exec_one()
                    steps += 1
                else:
                    # a run of NPU_SET commands inside QSIZE, as _exec_one would execute them
                    # one by one: they access no memory and raise no event, so no stop
                    # condition changes inside the run; their cycles pass in one PMU batch
                    # (one command at a time while PMU counters count: overflow IRQ timing)
                    room = budget - steps
                    if work_budget is not None:
                        room = min(room, work_budget - self.work)
                    if self.pmu.cnten and self.pmu.counting:
                        room = 1                   # a counter may overflow (IRQ) at any command
                    run = self._peek_run()
                    if run is not None and run[2] <= room:    # the fetch buffer's whole run at once
                        self.rf.set_values(run[0])
                        self._snap = None
                        self.qread += run[1]
                        n = run[2]
                    else:
                        n = 0
                        while d is not None and n < room:
                            self._apply_set(d)
                            n += 1
                            d = self._peek_set()
                    self.cycle += n * cpc
                    self.work += n
                    self.pmu.advance(n * cpc, True, ())
                    steps += n
                self._update_irq()
            self._update_irq()
        except _HookError as e:
            raise e.__cause__ from None
        last = self._last_stop or self._snapshot_stop(StopKind.NOT_RUNNING, steps)
        if rec and last.kind in (StopKind.STOP, StopKind.END) and not self.running:
            self._store_trace(tkey, rec, steps, hzrec)
        return StopReason(last.kind, steps, self.qread, self.status_word, self.cycle, last.error, last.detail,
                          self.work)

    # ================================================================== traces
    def _trace_key(self) -> tuple:
        st = self.op_state
        return (self.qread, self._fetch_buf, self._fetch_sig(), tuple(self.rf._raw.values()), st.chain_length,
                st.num_ifm, tuple(st.fifo_valid), tuple(st.fifo_count), _plans.env_token(self),
                tuple(self.kernel_ops.items()), self.dma_op)

    def _record(self, rec: list, seg: "_Segment", w0: int) -> bool:
        """Add the operation just executed after *seg* to a trace being recorded; False when
        the run cannot be a trace (an operation built a plan, left the straight path, or an
        ordinary step whose effects a replay could not foresee)."""
        d = seg.op
        name = d.cmd.name
        nxt = seg.end + d.size
        if self.plan_built or not self.running and name != "NPU_OP_STOP":
            return False
        if self.running and self.qread != nxt:
            return False
        plan = self.plan_done
        txns = seg.op_txns + (plan.txns if plan is not None else ())
        summary = Pmu.increments(summarise(txns))
        cpc = self.policy.cycles_per_command
        if plan is not None:
            kind = _T_DMA if name == "NPU_OP_DMA_START" else _T_KERNEL
            cyc = cpc + seg.op_beats + plan.beats
            wk = 1 + plan.op_work + 64 * len(plan.pages) + seg.op_work + plan.twork
        elif name in _WAITS:
            kind, cyc, wk = _T_WAIT, cpc + seg.op_beats, 1 + seg.op_work
        elif (name == "NPU_OP_STOP" and not self.running and self._last_stop is not None
              and self._last_stop.kind is StopKind.STOP and self.work - w0 == 1 + seg.op_work):
            kind, cyc, wk = _T_STOP, cpc + seg.op_beats, 1 + seg.op_work      # (_stop_step)
        else:
            if name == "NPU_OP_DMA_START" or name == "NPU_OP_BRANCH":
                return False                       # data-dependent addresses or control flow
            # an ordinary step: its writes (register-determined for kernel ops) must stay
            # out of the command stream (checked when the trace is stored)
            writes = tuple((t.addr, t.length) for t in self._last_txns if t.write and not hasattr(t, "per_port"))
            writes += tuple(p for t in self._last_txns if t.write and hasattr(t, "per_port")
                            for p in zip(t.addr.tolist(), t.length.tolist()))
            kind, cyc, wk, txns = _T_ORDINARY, 0, self.work - w0, writes
        rec.append((seg, d, self._last_snap, plan, kind, nxt, cyc, wk, txns, summary))
        return True

    def _store_trace(self, key, rec: list, steps: int, hzrec: list) -> None:
        """Keep a recorded run as a trace (if nothing it does writes its command stream);
        *hzrec*: per step the hazard tracker's state after it and the hazard events it
        reported (found once, when recorded: they depend only on the stream and addresses)."""
        blocks: dict = {}
        for step in rec:
            for lo, data in step[0].blocks:
                if blocks.get(lo, data) != data:
                    return
                blocks[lo] = data
        merged: list = []
        for lo in sorted(blocks):
            data = blocks[lo]
            if merged and lo <= merged[-1][0] + len(merged[-1][1]):
                plo, pdata = merged[-1]
                cut = lo - plo
                if pdata[cut:cut + len(data)] != data[:len(pdata) - cut]:
                    return
                merged[-1] = (plo, pdata[:cut] + data if cut + len(data) > len(pdata) else pdata)
            else:
                merged.append((lo, data))
        writes = []
        for step in rec:                           # writes stay out of the stream
            plan, kind = step[3], step[4]
            if plan is not None:
                spans = plan.wint
            elif kind == _T_ORDINARY:
                spans = [(a, a + n) for a, n in step[8]]
            else:
                continue
            for wlo, whi in spans:
                if any(wlo < lo + len(data) and lo < whi for lo, data in merged):
                    return
            writes += spans
        # the planned operations' stream checks (weights, scale/bias) that no write of the
        # trace can touch: compared once when a replay starts (each distinct block once)
        checks: dict = {}
        pre = set()
        for i, step in enumerate(rec):
            plan = step[3]
            if plan is None or not plan.checks:
                continue
            if all(not (wlo < a + len(b) and a < whi) for a, b in plan.checks for wlo, whi in writes):
                pre.add(i)
                for a, b in plan.checks:
                    checks[a, b] = None
        tr = _Trace()
        tr.checks = tuple(checks)
        tr.prechecked = frozenset(pre)
        tr.steps = tuple(rec)
        tr.hzst = tuple(h[0] for h in hzrec)
        tr.hzev = {i: h[1] for i, h in enumerate(hzrec) if h[1]}
        tr.blocks = tuple(merged)
        tr.n = steps
        tr.work_last = sum(s[0].work + s[7] for s in rec) - (rec[-1][7] if rec[-1][1] is not None else 0)
        tr.ftok = None
        # PMU totals per chunk: the steps from the start or an ordinary step's successor up
        # to the next ordinary step's segment (or the end): start -> (steps, last pend entry,
        # cycles, increments), as _play_steps defers them when nothing declines
        tr.chunks = {}
        start, cycles, total = 0, 0, Counter()
        for j, st in enumerate(rec):
            seg, kind = st[0], st[4]
            if seg.n:
                cycles += seg.cycles
                for k, v in seg.summary:
                    total[k] += v
            if kind not in (_T_END, _T_ORDINARY, _T_STOP):
                cycles += st[6]
                for k, v in st[9]:
                    total[k] += v
            if kind == _T_ORDINARY or kind == _T_STOP or j == len(rec) - 1:
                last = j if kind not in (_T_END, _T_ORDINARY, _T_STOP) else ~j
                tr.chunks[start] = (j + 1 - start, last, cycles, tuple(total.items()))
                start, cycles, total = j + 1, 0, Counter()
        _TRACES.put(key, tr)

    def _play(self, tr: _Trace, budget: int, work_budget: "int | None") -> "int | None":
        """Replay a trace from the start of run(): the commands it executes (None: nothing
        done - the budgets do not leave room, or the stream or faults differ).  Each planned
        operation checks its own data; where one declines, or an ordinary step goes another
        way, the replay stops after that command and the loop goes on."""
        if tr.n > budget or (work_budget is not None and self.work + tr.work_last >= work_budget):
            return None
        mem = self.memory
        if mem.faults.token != tr.ftok:
            for lo, data in tr.blocks:
                if not mem.fault_free(lo, lo + len(data), False):
                    return None
            tr.ftok = mem.faults.token
        for lo, data in tr.blocks:
            if not mem.equals(lo, data):
                return None
        # PMU totals: while every hook only observes (``passive``) nothing can read them or
        # start a counter before the replay ends, so the planned steps' totals are added
        # once at the end (_flush_tallies; before any step that runs the ordinary way)
        passive = all(getattr(h, "passive", False) for h in self.hooks)
        pend = [] if passive else None
        # the operations' stream checks made here (no hook can write memory meanwhile)
        pre = tr.prechecked if passive and all(mem.equals(a, b) for a, b in tr.checks) else ()
        try:
            return self._play_steps(tr, mem, pend, pre)
        finally:
            if pend:
                self._flush_tallies(tr, pend)

    def _flush_tallies(self, tr: _Trace, pend: list) -> None:
        """Add the deferred PMU totals of replayed steps (indices into tr.steps in order: ~i
        for a step whose segment only was replayed, i for segment and planned operation):
        a whole chunk (see _store_trace) at once, else step by step."""
        pmu = self.pmu
        first = pend[0] if pend[0] >= 0 else ~pend[0]
        c = tr.chunks.get(first)
        if c is not None and len(pend) == c[0] and pend[-1] == c[1] and pmu.totals_only:
            pmu.tally(c[2], True, (), c[3])
        else:
            steps = tr.steps
            for i in pend:
                st = steps[i if i >= 0 else ~i]
                seg = st[0]
                if seg.n:
                    pmu.tally(seg.cycles, True, seg.txns, seg.summary)
                if i >= 0:
                    pmu.tally(st[6], True, st[8], st[9])
        pend.clear()

    def _play_steps(self, tr: _Trace, mem, pend: "list | None", pre) -> int:
        log = mem.log if mem.log_enabled else None
        raw = self.rf._raw
        counts = self.op_counts
        pmu = self.pmu
        event = self._event
        hooks, n_hooks, op_hooks = None, 0, ()
        stats = _plans.STATS
        done = 0
        listeners = mem.listeners
        hzst, hzev = tr.hzst, tr.hzev
        whole = True                               # every operation by its plan so far
        i = -1
        for seg, d, snap, plan, kind, nxt, cyc, wk, txns, summary in tr.steps:
            i += 1
            if len(listeners) != 1:                # a hook added a listener: command by command
                self.hz_state = _hz_before(hzst, i)
                return done
            if seg.n:
                raw.update(seg.values)
                self._snap = None
                self.qread = seg.end
                self.cycle += seg.cycles
                self.work += seg.work
                if pend is None:
                    pmu.tally(seg.cycles, True, seg.txns, seg.summary)
                if seg.txns:
                    if log is not None:
                        log.extend(seg.txns)
                    self._fetch_buf = seg.buf
                done += seg.n
            if kind == _T_END:
                if pend is not None:
                    pend.append(~i)
                continue
            if kind == _T_ORDINARY or kind == _T_STOP:
                if pend is not None:
                    pend.append(~i)
                    self._flush_tallies(tr, pend)
                self._snap = snap
                self.hz_state = _hz_before(hzst, i)     # the recorded hazard state
                if kind == _T_STOP and (self.hooks is hooks and len(hooks) == n_hooks and not op_hooks
                                        or not self._op_hooks()):
                    self._stop_step(d, seg, snap, nxt, cyc, wk, txns, summary)
                else:
                    self._exec_one(d, seg)
                done += 1
                self._update_irq()
                if not self.running or self.qread != nxt or self.stop_requested or (pmu.cnten and pmu.counting):
                    if whole and kind == _T_STOP and i == len(tr.steps) - 1:
                        _PLAYED[self] = tr
                    return done
                continue
            off = self.qread
            if seg.op_txns:
                if log is not None:
                    log.extend(seg.op_txns)
                self._fetch_buf = seg.op_buf
            name = d.cmd.name
            counts[name] += 1
            self._snap = snap
            # the 'op' event as _event makes it, without the call: to the event log and the
            # hooks that take 'op' events (the list is made again when self.hooks changes)
            if self.hooks is not hooks or len(hooks) != n_hooks:
                hooks = self.hooks
                n_hooks, op_hooks = len(hooks), self._op_hooks()
            if op_hooks:
                event("op", name=name, offset=off, fields=dict(d.fields), snapshot=snap)
            elif self.log_events:
                self.events.append(("op", {"name": name, "offset": off, "fields": dict(d.fields),
                                       "snapshot": snap, "cycle": self.cycle}))
            if kind == _T_WAIT:
                self.qread = nxt
            else:
                self._fetch_buf = None
                if kind == _T_KERNEL:
                    self._snap = None
                    self.op_fields = dict(d.fields)
                if len(listeners) != 1 or not plan.exec(self, i in pre):    # (a hook added a listener) or
                    # declined: the ordinary op, in a command of its own
                    whole = False
                    if pend is not None:
                        pend.append(~i)
                        self._flush_tallies(tr, pend)
                    self.hz_state = _hz_before(hzst, i)
                    self._command_after_event(name, d, snap, off, nxt, seg, kind)
                    done += 1
                    self._update_irq()
                    if not self.running or self.qread != nxt:
                        return done
                    continue
                self.qread = nxt
                stats[name, "planned"] += 1
                if hzev and i in hzev:             # the races found when it was recorded
                    for details in hzev[i]:
                        event("unpredictable", **details)
            self.cycle += cyc
            self.work += wk
            if pend is None:
                pmu.tally(cyc, True, txns, summary)
            else:
                pend.append(i)
            done += 1
        if hzst:
            self.hz_state = hzst[-1]
        if whole:
            _PLAYED[self] = tr
        return done

    def replayed_program(self) -> "tuple | None":
        """The last run() when it was one run trace replayed whole: every operation of the
        trace by its plan, no ordinary step but the closing NPU_OP_STOP (nothing else
        executed when the run's StopReason counts `n` steps): ((operation name, plan or
        None for a wait or the STOP), ...) in order, the command-stream blocks its fetches
        read ((address, bytes), ...) and `n`.  None otherwise."""
        tr = _PLAYED.get(self)
        if tr is None:
            return None
        ops = []
        for st in tr.steps:
            kind = st[4]
            if kind == _T_END:
                continue
            if kind == _T_ORDINARY:
                return None
            ops.append((st[1].cmd.name, st[3]))
        if not ops or tr.steps[-1][4] != _T_STOP:
            return None
        return tuple(ops), tr.blocks, tr.n

    def _stop_step(self, d, seg, snap, nxt, cycles, work, txns, summary) -> None:
        """A replayed NPU_OP_STOP (no hook takes 'op' events): what _exec_one does for it -
        the command's set-up, the 'op' event, the stop, the command's cycles and work - with
        the fetch transactions' PMU totals the trace recorded (*txns*, *summary*)."""
        self._begin_command(seg)
        name = d.cmd.name
        self._cur_next, self._cur_op = nxt, d.cmd
        self.op_counts[name] += 1
        self._last_snap = snap
        off = self.qread
        if self.log_events:
            self.events.append(("op", {"name": name, "offset": off, "fields": dict(d.fields), "snapshot": snap,
                                       "cycle": self.cycle}))
        try:
            self._op_stop(d.fields["mask"], nxt)   # (a hook's exception: the command still ends)
        finally:
            self._executing = False
            t = self._last_txns = self.command_txns
            if t:
                self.command_txns = []
            self.cycle += cycles
            self.work += work
            self.pmu.tally(cycles, True, txns, summary)

    def _op_stop(self, mask: int, nxt: int) -> None:
        """TRM 3.10 NPU_OP_STOP's effect (the command path and the replayed STOP step)."""
        self.irq_history_mask |= mask & 0xFFFF
        self.qread = nxt
        self.resume_ok = True
        self._stop(StopKind.STOP)

    def _command_after_event(self, name, d, snap, off, nxt, seg, kind) -> None:
        """An operation whose 'op' event and count are done, as _exec_one would finish it."""
        self._begin_command(seg, logged=True)
        self._cur_next, self._cur_op = nxt, d.cmd
        try:
            if kind == _T_KERNEL:
                self._kernel_op(name, d, snap, off, nxt)
            else:
                self._hz_op = ("dma", off, snap, False)
                _plans.execute_dma(self, d, snap, self.dma_op)
                self.qread = nxt
        except _Stop:
            pass
        except _HookError:
            raise
        except Exception as e:                       # noqa: BLE001 - mapped as in _exec_one
            self._command_failed(e, off)
        finally:
            self._end_command()

    def _exec_one(self, d: "isa.Decoded | None" = None, seg: "_Segment | None" = None) -> None:
        """Execute the command at QREAD (*d*: its decoding, when the caller has it - the
        operation a segment ends with; *seg*: that segment, whose fetches of the operation's
        own words, if any, belong to this command)."""
        off = self.qread
        self._begin_command(seg)
        try:
            self._exec_at(off, d)
        except _Stop:
            pass
        except _HookError:
            raise
        except Exception as e:                       # noqa: BLE001 - mapped to STATUS / events
            self._command_failed(e, off)
        finally:
            self._end_command()

    def _begin_command(self, seg: "_Segment | None" = None, logged: bool = False) -> None:
        self._executing = True
        self.command_txns = []
        self._extra_cycles = 0
        self.command_work = 0
        self._pages_written = set()
        self._page_limit = None
        self._cur_next = None
        self._cur_op = None
        self.plan_done = None
        self.plan_built = False
        self._hz_op = None
        self._hz_last = ()
        if seg is not None and seg.op_txns:
            # the fetches of the operation's words, checked with the segment: made (logged and
            # counted) as part of this command, as _fetch_word would make them
            self.command_txns = list(seg.op_txns)
            if not logged and self.memory.log_enabled:
                self.memory.log.extend(seg.op_txns)
            self._fetch_buf = seg.op_buf

    def _command_failed(self, e: Exception, off: int) -> None:
        """An exception out of a command: STATUS bits, events and Policy (module doc)."""
        if isinstance(e, BusFault):
            self.faulting_interface = int(e.interface)
            self.faulting_channel = int(e.channel) & 0xF
            self._raise_error("bus_status", str(e), offset=off, channel=e.channel.name,
                              interface=Interface(int(e.interface)).name, addr=e.addr, resp=int(e.resp))
            return
        if isinstance(e, Unpredictable):
            self._event("unpredictable", what=e.what, offset=off)
            choice, what = self.policy.on_unpredictable, e.what
        elif isinstance(e, NotImplementedError):     # an op mode the model does not cover
            self._event("op_unimplemented", name=getattr(self._cur_op, "name", "?"), offset=off, reason=str(e))
            choice, what = self.policy.on_unimplemented_op, f"not implemented: {e}"
        else:                                        # BudgetExceeded, model bugs
            kind = "model_limit" if isinstance(e, (BudgetExceeded, MemoryError)) else "internal_error"
            self._event(kind, error=repr(e), offset=off, tb=traceback.format_exc())
            choice, what = self.policy.on_model_limit, f"{kind}: {e!r}"
        try:
            self._policy_error(choice, what, offset=off)
            self._skip_current()
        except _Stop:
            pass

    def _end_command(self) -> None:
        self._executing = False
        txns = self._last_txns = self.command_txns
        if self.command_work is None:                        # a kernel op's OFM element-taps
            self.command_work = kernel_work(*self.op_of)
        cycles = self.policy.cycles_per_command + self._extra_cycles
        work = 1 + self.command_work + 64 * len(self._pages_written)
        if txns:
            self.command_txns = []
            for t in txns:
                tb = getattr(t, "total_beats", None)
                if tb is not None:                       # a TxnBatch
                    cycles += tb()
                    work += len(t) + (t.total_bytes() >> 6)
                else:
                    cycles += beats(t.addr, t.length)
                    work += 1 + (t.length >> 6)
        plan = self.plan_done
        if plan is not None:                             # a plan's transactions, summed once
            cycles += plan.beats
            work += plan.twork
            if txns:
                txns = txns + list(plan.txns)
        self.cycle += cycles
        self.work += work
        if plan is not None and not txns:
            self.pmu.tally(cycles, True, plan.txns, plan.summary)
        else:
            self.pmu.advance(cycles, True, txns)
        if self._hz_op is not None:
            self._hazards(self._last_txns, plan)

    def _hazards(self, txns, plan) -> None:
        """The races the DMA or kernel op just executed starts with what is outstanding
        (hazards.py), reported as 'unpredictable' events; the op then joins the tracker."""
        kind, off, snap, chained = self._hz_op
        self._hz_op = None
        fp = None
        if plan is not None and all(t.channel == Channel.rd_cmd for t in txns):
            c = _HZ_FP.get(id(plan))                     # a plan's footprint, made once
            if c is not None and c[0] is plan:
                fp = c[1]
            else:
                txns = plan.txns
        if fp is None:
            if plan is not None and txns is not plan.txns:
                txns = list(txns) + list(plan.txns)
            if kind == "dma":
                fp = _hz.footprint(txns, lut_w=_hz.lut_writes(snap))
            else:
                fp = _hz.footprint(txns, lut_r=_hz.lut_reads(snap))
            if plan is not None and txns is plan.txns:
                if len(_HZ_FP) > 8192:
                    _HZ_FP.clear()
                _HZ_FP[id(plan)] = (plan, fp)
        name = self._cur_op.name if self._cur_op is not None else "?"
        if kind == "dma":
            self.hz_state, found = _hz.dma(self.hz_state, off, name, fp)
        else:
            self.hz_state, found = _hz.kernel(self.hz_state, off, name, fp, chained)
        self._hz_last = tuple(found)
        for details in found:
            self._event("unpredictable", **details)

    def note_pages(self, written) -> None:
        """Count the distinct memory pages (numbers *written*) the current command writes
        (work units); a kernel op beyond Policy.max_op_pages fails before the write that
        crosses it is made (raised from the memory's listener, ahead of the write)."""
        pages = self._pages_written
        pages.update(written)
        limit = self._page_limit
        if limit is not None and len(pages) > limit:
            raise BudgetExceeded(f"{getattr(self._cur_op, 'name', 'operation')}: writes touch more than {limit} "
                                 f"memory pages of {1 << PAGE_BITS} bytes (the model's budget)")

    def _skip_current(self) -> None:
        """'continue' policy: the failed command completes without further effect."""
        if self.running and self._cur_next is not None:
            self.qread = self._cur_next

    def _peek_set(self) -> "isa.Decoded | None":
        """The NPU_SET command at QREAD when its words are in the fetch buffer and were
        decoded before, else None. Such a command reads no memory and cannot fail, so run()
        applies it without _exec_one's per-command set-up (a fast path; same effect)."""
        buf = self._fetch_buf
        if buf is None:
            return None
        lo, data, qbase = buf
        off = self.qread
        d = _decoded_at(data, ((qbase + off) & ADDR_MASK) - lo)
        if not d or d.cmd.is_op or off + d.size > (self.qsize & ~3):
            return None                            # (past QSIZE: end of stream or truncated)
        return d

    def _peek_run(self) -> "tuple[dict, int, int] | None":
        """The run of NPU_SET commands from QREAD to the next operation or the end of the
        fetch buffer, each decoded before, as (register values, bytes, commands); None when
        the run would pass QSIZE (the command-by-command path then stops there)."""
        lo, data, qbase = self._fetch_buf             # _peek_set returned a command: a buffer
        i = ((qbase + self.qread) & ADDR_MASK) - lo
        run = _SET_RUNS.get((data, i))
        if run is None:
            values, j, n = {}, i, 0
            d = _decoded_at(data, j)
            while d and not d.cmd.is_op:
                values[d.cmd.name] = isa.register_value(d)
                j += d.size
                n += 1
                d = _decoded_at(data, j)
            run = (values, j - i, n)
            if d is not None:                  # complete: an op or the buffer's end (no cache miss)
                _SET_RUNS.put((data, i), run)
        if self.qread + run[1] > (self.qsize & ~3):
            return None
        return run

    def _apply_set(self, d: "isa.Decoded") -> None:
        """Execute the NPU_SET command *d* at QREAD."""
        self.rf.set(d)
        self._snap = None
        self.qread += d.size

    def _fetch_decode(self, off: int) -> "isa.Decoded | None":
        """Fetch and decode the command at stream offset *off*; None when it cannot execute
        (a truncated cmd1 or a reserved encoding: the error is raised here)."""
        qsize = self.qsize & ~3
        w0 = self._fetch_word(off)
        words = [w0]
        if isa.is_cmd1_header(w0):
            # a valid cmd1 header: fetch payload_1 unless it lies past the stream end
            if off + 8 > qsize:
                self._event("truncated_cmd1", offset=off, word=w0)
                self._raise_error("cmd_parse_error", f"cmd1 at 0x{off:x} truncated by QSIZE", offset=off,
                                  word=w0)
                return None
            words.append(self._fetch_word(off + 4))
        key = w0 if len(words) == 1 else (w0, words[1])
        d = _DECODE_CACHE.get(key)
        try:
            if d is None:
                d = isa.decode_word(words, 0)
                _DECODE_CACHE.put(key, d)
        except isa.IsaError as e:
            if self.policy.parse_error_on_reserved:
                self._raise_error("cmd_parse_error", e.reason, offset=off, word=w0)
            else:
                self._event("unpredictable", what=f"reserved encoding: {e.reason}", offset=off, word=w0)
                self.qread = off + 4
            return None
        return d

    def _exec_at(self, off: int, d: "isa.Decoded | None" = None) -> None:
        if d is None:
            d = self._fetch_decode(off)
            if d is None:
                return
        nxt = off + d.size
        self._cur_next = nxt
        self._cur_op = d.cmd
        name = d.cmd.name
        if not d.cmd.is_op:
            self._apply_set(d)
            return
        self.op_counts[name] += 1
        if self._snap is None:                     # shared while no NPU_SET intervenes
            self._snap = self.rf.snapshot()
        snap = self._last_snap = self._snap
        self._event("op", name=name, offset=off, fields=dict(d.fields), snapshot=snap)
        f = d.fields
        if name == "NPU_OP_STOP":
            self._op_stop(f["mask"], nxt)
        elif name == "NPU_OP_IRQ":
            self.irq_history_mask |= f["mask"] & 0xFFFF
            self.irq_raised = 1
            self.qread = nxt
        elif name == "NPU_OP_PMU_MASK":
            took = self.pmu.set_mask(f["enable"])
            if not took:
                self._event("pmu_mask_ignored", enable=f["enable"])
            self.qread = nxt
        elif name in ("NPU_OP_KERNEL_WAIT", "NPU_OP_DMA_WAIT"):
            # barriers: no-ops for the data of a sequential model; they retire the hazard
            # tracker's outstanding DMAs / remaining kernel operations
            if name == "NPU_OP_DMA_WAIT":
                self.hz_state = _hz.dma_wait(self.hz_state, f["k"])
            else:
                self.hz_state = _hz.kernel_wait(self.hz_state, f["n"])
            self.qread = nxt
        elif name == "NPU_OP_DMA_START":
            self._fetch_buf = None
            self._hz_op = ("dma", off, snap, False)
            _plans.execute_dma(self, d, snap, self.dma_op)
            self.qread = nxt
        elif name == "NPU_OP_BRANCH":
            self._branch(f["branch_cond"], f["branch_target"], off, nxt)
        elif name in KERNEL_OP_NAMES or name in self.kernel_ops:
            self._kernel_op(name, d, snap, off, nxt)
        else:                                      # an op the ISA knows but the device does not
            self._event("op_unimplemented", name=name, offset=off)
            self._policy_error(self.policy.on_unimplemented_op, f"{name} not implemented", offset=off)
            self.qread = nxt

    def _kernel_op(self, name: str, d: "isa.Decoded", snap, off: int, nxt: int) -> None:
        fn = self.kernel_ops.get(name)
        if fn is None:
            self._event("op_unimplemented", name=name, offset=off)
            self._policy_error(self.policy.on_unimplemented_op, f"{name} not implemented", offset=off)
            self.qread = nxt
            return
        self._fetch_buf = None
        self._snap = None                      # an op may change the state (chaining)
        self.op_fields = dict(d.fields)
        self.command_work = None                   # kernel_work(snap, name), unless a plan knows it
        self.op_of = (snap, name)
        self._page_limit = self.policy.max_op_pages
        self._hz_op = ("kernel", off, snap, self.chain_length > 0)
        _plans.execute_kernel(self, name, d, snap, fn)
        self.qread = nxt

    def _branch(self, cond: int, target: int, off: int, nxt: int) -> None:
        """TRM 3.11.2 NPU_OP_BRANCH."""
        # branch_cond == rf_true first waits for all kernels (KERNEL_WAIT n=0): no data
        # effect here; it retires the remaining kernel operations (hazards.py)
        if cond == isa.branch_cond.rf_true:
            self.hz_state = _hz.kernel_wait(self.hz_state, 0)
        if target & 3:
            choice = self.policy.branch_misaligned
            self._event("unpredictable", what=f"branch_target 0x{target:x} not 4-byte aligned", offset=off)
            if choice == "branch_fault":
                self._raise_error("branch_fault", f"misaligned branch_target 0x{target:x}", offset=off,
                                  target=target)
                return
            if choice == "parse_error":
                self._raise_error("cmd_parse_error", f"misaligned branch_target 0x{target:x}", offset=off,
                                  target=target)
                return
            target &= ~3
        if target >= self.qsize:
            self._raise_error("branch_fault", f"branch_target 0x{target:x} >= QSIZE 0x{self.qsize:x}",
                              offset=off, target=target)
            return
        taken = cond == 0 or (cond == 1 and bool(self.cond_status))
        self._event("branch", offset=off, cond=cond, target=target, taken=bool(taken))
        self.qread = target if taken else nxt

    # ================================================================== convenience
    def load_stream(self, addr: int, words, qconfig: "int | None" = None, pprot: int = 0b01) -> None:
        """Write a command stream into memory (backdoor) and program QBASE/QSIZE over APB."""
        data = b"".join((int(w) & 0xFFFFFFFF).to_bytes(4, "little") for w in words)
        self.memory.write(addr, data)
        self.apb_write(QBASE_LO, addr & 0xFFFFFFFF, pprot)
        self.apb_write(QBASE_HI, (addr >> 32) & 0xFF, pprot)
        self.apb_write(QSIZE, len(data), pprot)
        if qconfig is not None:
            self.apb_write(QCONFIG, qconfig, pprot)

    def start(self, pprot: int = 0b01) -> int:
        """CMD write with transition_to_running_state, keeping the Q-enable bits."""
        return self.apb_write(CMD, (self.cmd_word & _CMD_Q_ENABLES) | _CMD_START, pprot)
