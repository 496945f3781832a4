"""The Ethos-U85 bench's functional-coverage model (on the engine of tb/core/coverage.py).


``BenchCoverage`` is the bench's coverage model; every bin set comes from the tables of
``tlm.ethos_u85.isa`` / ``tlm.ethos_u85.memory`` (never retyped):

==================  ==========================================================================
``opcode``          every cmd0/cmd1 command of tlm/isa.py executed by the NPU
``kernel_op_mode``  NPU_OP_POOL/ELEMENTWISE/RESIZE x their mode, CONV, DEPTHWISE
``ifm_precision x ifm_format``, ``ofm_precision x ofm_format``
                    activation type/precision (int8..uint32) x NHWC/NHCWB16 at each kernel op
``activation_function``  NPU_SET_ACTIVATION.activation_function at each kernel op
``ofm_round_mode``  NPU_SET_OFM_SCALE.round_mode at each kernel op
``ifm_round_mode``  NPU_SET_IFM_SCALE.round_mode at each NPU_OP_ELEMENTWISE
``acc_format``      NPU_SET_ACC_FORMAT.acc_format at each kernel op
``axi_burst_len``   port x direction x beats (AxLEN + 1, binned 1 2 3-4 5-7 8 9-15 16)
``axi_burst_size``  port x direction x AxSIZE (the NPU moves full 128-bit beats)
``axi_resp``        port x direction x OKAY/SLVERR/DECERR
``axi_prot``        port x AxPROT class (secure/non-secure x privileged/user)
``job_end``         how each job ended: npu_op_stop, cmd_end_reached, stop_request, or the
                    STATUS fault bit (bus_status, cmd_parse_error, branch_fault, ecc_fault)
``bus_fault``       STATUS.faulting_interface x faulting_channel of each bus_status
``apb_prot``        PPROT class x read/write x OKAY/PSLVERR of every APB transfer
==================  ==========================================================================

Sampling (cheap: a few dict increments per transfer or command):

* points about the DUT come from the pins and the DUT's status: the scoreboard
  (tb/ethos_u85/scoreboard.py) feeds every APB transfer and AXI burst the agents saw
  (``apb_prot``, ``axi_*``), and at the end of each job ``job_end`` and ``bus_fault`` from
  the STATUS word the DUT reported (its fault bits, faulting_interface/channel; a clean stop
  takes the reference's kind, npu_op_stop / cmd_end_reached / stop_request, only if the
  scoreboard found no mismatch in the job);
* points about intent (``opcode``, ``kernel_op_mode`` and the kernel settings) come from a
  ``JobRecorder`` on the scoreboard's reference ``tlm.ethos_u85.device.Device``: it listens
  to the device's events (``op``, ``branch``, ``state``) and decodes the NPU_SET commands
  between two operations from the stream in memory, so ``opcode`` counts exactly the
  commands executed (branches followed). The scoreboard's recorder is *deferred*: the
  samples of a job are kept and counted only when the job closes with no mismatch, and then
  not those of the operation a faulting job stopped at (the DUT did not complete it); a job
  cut short by a reset or never seen to end counts nothing;
* ``current()`` is the process's model (tb.core.coverage.current with ``BenchCoverage``);
  the scoreboard flushes it at the end of each test, tb/core/run.py merges the files.

Pure Python: no cocotb import.
"""
from __future__ import annotations

from tb.core import coverage as engine
from tb.core.coverage import Coverage, CoverPoint, Cross  # noqa: F401 - re-exported for tests
from tb.ethos_u85.ports import AXI_PORTS

# ============================================================================ the bench's model
# AXI manager ports of the bench's top (tb.ethos_u85.ports.AXI_PORTS); another port's bursts are
# tallied under "other".
DIRS = ("read", "write")
# Beats of a burst (AxLEN + 1): AXI_x.max_beats limits bursts to 64/128/256 bytes = 4/8/16
# beats of 16 bytes, so the edges 4, 8 and 16 have bins of their own.
BEAT_BINS = ("1", "2", "3-4", "5-7", "8", "9-15", "16")
_BEATS = {1: "1", 2: "2", 3: "3-4", 4: "3-4", 5: "5-7", 6: "5-7", 7: "5-7", 8: "8",
          **{n: "9-15" for n in range(9, 16)}, 16: "16"}
PROT_CLASSES = ("secure_user", "secure_priv", "nonsecure_user", "nonsecure_priv")  # by PROT[1:0]
PRECISIONS = ("int8", "uint8", "int16", "uint16", "int32", "uint32")   # b64 goes to "other"
# No kernel operation takes an unsigned 32-bit IFM (ELEMENTWISE b32 is signed, the others
# b8/b16), so uint32 is not an IFM bin: sampled, it lands in "other".
IFM_PRECISIONS = PRECISIONS[:-1]
JOB_ENDS = ("npu_op_stop", "cmd_end_reached", "stop_request", "bus_status", "cmd_parse_error",
            "branch_fault", "ecc_fault")


def _precision(snap, cmd: str) -> str:
    signed = snap.field(cmd, "activation_type")
    bits = 8 << snap.field(cmd, "activation_precision")
    return f"{'' if signed else 'u'}int{bits}"


class BenchCoverage(Coverage):
    """The bench's coverage model (see the module docstring) and its samplers."""

    def __init__(self):
        super().__init__("ethos-u85-bench")
        from tlm.ethos_u85 import isa
        from tlm.ethos_u85.memory import Channel, Interface
        from tlm.ethos_u85.ops import KERNEL_OP_NAMES, KERNEL_OP_SPECS
        self._isa = isa
        self.kernel_ops = frozenset(KERNEL_OP_NAMES)
        self.opcode = self.point("opcode", (c.name for c in isa.COMMANDS),
                                 "every cmd0/cmd1 command of tlm/isa.py, as executed")
        modes = {n: op.mode_enum for n, op in KERNEL_OP_SPECS.items() if op.mode_enum is not None}
        self._mode_field = {n: op.mode_field for n, op in KERNEL_OP_SPECS.items() if op.mode_field}
        self.kernel_op_mode = self.point(
            "kernel_op_mode",
            [f"{op}.{m.name}" if op in modes else op
             for op in KERNEL_OP_NAMES for m in (modes.get(op) or [None])],
            "kernel operation (with its pooling/elementwise/resize mode)")
        fmts = [f.name for f in isa.activation_format]
        self.ifm = self.cross("ifm_precision x ifm_format", (IFM_PRECISIONS, fmts),
                              "IFM activation type/precision x format at each kernel op",
                              axis_names=("precision", "format"))
        self.ofm = self.cross("ofm_precision x ofm_format", (PRECISIONS, fmts),
                              "OFM activation type/precision x format at each kernel op",
                              axis_names=("precision", "format"))
        self.activation = self.point("activation_function", (f.name for f in isa.activation_function),
                                     "NPU_SET_ACTIVATION.activation_function at each kernel op")
        self.ofm_round = self.point("ofm_round_mode", (m.name for m in isa.round_mode_ofm),
                                    "NPU_SET_OFM_SCALE.round_mode at each kernel op")
        self.ifm_round = self.point("ifm_round_mode", (m.name for m in isa.round_mode_ifm),
                                    "NPU_SET_IFM_SCALE.round_mode at each NPU_OP_ELEMENTWISE")
        self.acc_format = self.point("acc_format", (m.name for m in isa.acc_format),
                                     "NPU_SET_ACC_FORMAT.acc_format at each kernel op")
        self.burst_len = self.cross("axi_burst_len", (AXI_PORTS, DIRS, BEAT_BINS),
                                    "AXI bursts: port x direction x beats (AxLEN+1)",
                                    axis_names=("port", "dir", "beats"))
        self.burst_size = self.cross("axi_burst_size", (AXI_PORTS, DIRS, ("16B",)),
                                     "AXI bursts: port x direction x bytes a beat (AxSIZE); the "
                                     "NPU moves full 128-bit beats, a narrow one shows as other",
                                     axis_names=("port", "dir", "size"))
        self.resp = self.cross("axi_resp", (AXI_PORTS, DIRS, ("OKAY", "SLVERR", "DECERR")),
                               "AXI bursts: port x direction x response (worst beat)",
                               axis_names=("port", "dir", "resp"))
        self.axi_prot = self.cross("axi_prot", (AXI_PORTS, PROT_CLASSES),
                                   "AXI bursts: port x AxPROT[1:0] class",
                                   axis_names=("port", "prot"))
        self.job_end = self.point("job_end", JOB_ENDS,
                                  "how each job ended (stop kind or STATUS fault bit)")
        self.bus_fault = self.cross("bus_fault", ([i.name for i in Interface], [c.name for c in Channel]),
                                    "bus_status: STATUS.faulting_interface x faulting_channel",
                                    axis_names=("interface", "channel"))
        self._burst_memo: dict = {}   # burst shape -> [(counts, bin)] (sample_burst)
        self.apb = self.cross("apb_prot", (PROT_CLASSES, DIRS, ("OKAY", "PSLVERR")),
                              "APB transfers: PPROT[1:0] class x direction x response",
                              axis_names=("prot", "dir", "resp"))

    # ---- samplers (called for every transfer: keep them cheap)
    def sample_apb(self, r) -> None:
        """*r*: tb.agents.apb.ApbResult (prot, write, slverr)."""
        self.apb.sample(PROT_CLASSES[r.prot & 3], "write" if r.write else "read",
                        "PSLVERR" if r.slverr else "OKAY")

    def sample_burst(self, b) -> None:
        """*b*: tb.agents.axi.AxiBurst (port, write, len, size, prot, resp). The bins a burst
        shape lands in are looked up once per shape (``_burst_bins``), then counted."""
        key = (b.port, b.write, b.len, b.size, b.resp, b.prot & 3)
        bins = self._burst_memo.get(key)
        if bins is None:
            bins = self._burst_memo[key] = self._burst_bins(b)
        for counts, k in bins:
            counts[k] += 1

    def _burst_bins(self, b) -> list:
        """[(hits or other dict, bin)] of the four AXI points for burst *b* (CoverPoint.sample's
        choice between a bin and "other", made once)."""
        d = "write" if b.write else "read"
        resp = getattr(b.resp, "name", b.resp)
        out = []
        for point, values in ((self.burst_len, (b.port, d, _BEATS.get(b.len + 1, f"{b.len + 1}"))),
                              (self.burst_size, (b.port, d, f"{1 << b.size}B")),
                              (self.resp, (b.port, d, resp)),
                              (self.axi_prot, (b.port, PROT_CLASSES[b.prot & 3]))):
            k = "/".join(map(str, values))
            out.append((point.hits if k in point.hits else point.other, k))
        return out

    def sample_command(self, name: str) -> None:
        self.opcode.sample(name)

    def sample_kernel_op(self, name: str, fields: dict, snap) -> None:
        mf = self._mode_field.get(name)
        if mf is not None:
            v = fields.get(mf)
            enum = getattr(self._isa, mf)
            try:
                mode = enum(v).name
            except ValueError:
                mode = str(v)
            self.kernel_op_mode.sample(f"{name}.{mode}")
        else:
            self.kernel_op_mode.sample(name)
        ifmt = self._isa.activation_format
        self.ifm.sample(_precision(snap, "NPU_SET_IFM_PRECISION"),
                        _enum_name(ifmt, snap.field("NPU_SET_IFM_PRECISION", "activation_format")))
        self.ofm.sample(_precision(snap, "NPU_SET_OFM_PRECISION"),
                        _enum_name(ifmt, snap.field("NPU_SET_OFM_PRECISION", "activation_format")))
        self.activation.sample(_enum_name(self._isa.activation_function,
                                          snap.field("NPU_SET_ACTIVATION", "activation_function")))
        self.ofm_round.sample(_enum_name(self._isa.round_mode_ofm,
                                         snap.field("NPU_SET_OFM_SCALE", "round_mode")))
        self.acc_format.sample(_enum_name(self._isa.acc_format,
                                          snap.field("NPU_SET_ACC_FORMAT", "acc_format")))
        if name == "NPU_OP_ELEMENTWISE":
            self.ifm_round.sample(_enum_name(self._isa.round_mode_ifm,
                                             snap.field("NPU_SET_IFM_SCALE", "round_mode")))

    def sample_job_end(self, kind: str) -> None:
        self.job_end.sample(kind)

    def sample_bus_fault(self, interface: str, channel: str) -> None:
        self.bus_fault.sample(interface, channel)


def _table_name(table, value: int) -> str:
    return dict(table).get(value, str(value))


def _enum_name(enum, value: int) -> str:
    try:
        return enum(value).name
    except ValueError:
        return str(value)


# ============================================================================ job recorder
class JobRecorder:
    """A ``tlm.ethos_u85.device.Device`` hook (``device.hooks.append(rec)``) that samples what the
    device executes into a ``BenchCoverage``.

    Operations come from ``op`` events (with the register snapshot the op ran with); the
    NPU_SET commands between two operations are decoded from the stream in the device's
    memory (QBASE + offset) - a straight run of commands, since only an operation
    (NPU_OP_BRANCH) changes the flow. ``state stopped`` ends the job (``job_end``) and
    ``fault`` events with an interface/channel feed ``bus_fault``. After *max_ops*
    operations in one job (a runaway loop) the recorder stops sampling until the next job.
    """

    def __init__(self, device, cov: "BenchCoverage | None" = None, max_ops: int = 100_000,
                 deferred: bool = False):
        self.device = device
        self.cov = cov if cov is not None else current()
        self.max_ops = max_ops
        # deferred: intent samples go to ``pending`` as (command offset, sampler, args) for the
        # scoreboard to commit; job_end / bus_fault are then the scoreboard's (from the DUT)
        self.deferred = deferred
        self.pending: list = []
        self._pos: "int | None" = None      # offset of the next command not yet sampled
        self._ops = 0
        self._segments: dict = {}          # (qbase, lo, hi) -> command names
        self._skip_next = False             # a branch event follows its op event

    def __call__(self, event: str, details: dict) -> None:
        try:
            if event == "op":
                self._on_op(details)
            elif event == "branch":
                if self._pos is not None and details.get("taken"):
                    self._pos = details.get("target", self._pos) & ~3
            elif event == "fault" and not self.deferred:
                if details.get("bit") == "bus_status" and "interface" in details:
                    self.cov.sample_bus_fault(details["interface"], details.get("channel", "?"))
            elif event == "state":
                if details.get("state") == "running":
                    self._pos = int(details.get("qread", 0))
                    self._ops = 0
                    self._segments.clear()
                elif details.get("state") == "stopped":
                    self._on_stop(details)
        except Exception:  # noqa: BLE001 - coverage must never break the reference model
            self._pos = None

    def _commands(self, lo: int, hi: int) -> tuple:
        """Names of the commands in [lo, hi) of the stream (decoded from memory)."""
        dev = self.device
        qbase = dev.qbase
        key = (qbase, lo, hi)
        names = self._segments.get(key)
        if names is None:
            isa = self.cov._isa
            raw = dev.memory.read(qbase + lo, hi - lo + 4)   # a cmd1 may end past hi
            words = [int.from_bytes(raw[i:i + 4], "little") for i in range(0, len(raw) - 3, 4)]
            out = []
            i, n = 0, (hi - lo) // 4
            while i < n:
                try:
                    d = isa.decode_word(words, i)
                except isa.IsaError:
                    break
                out.append(d.cmd.name)
                i += d.size >> 2
            names = self._segments[key] = tuple(out)
        return names

    def _emit(self, offset: int, fn, *args) -> None:
        if self.deferred:
            self.pending.append((offset, fn, args))
        else:
            fn(*args)

    def _sample_range(self, lo: int, hi: int) -> None:
        if hi > lo:
            for name in self._commands(lo, hi):
                self._emit(lo, self.cov.opcode.sample, name)

    def _on_op(self, d: dict) -> None:
        if self._pos is None:
            return
        self._ops += 1
        if self._ops > self.max_ops:
            self._pos = None
            return
        off, name = int(d["offset"]), d["name"]
        self._sample_range(self._pos, off)
        self._emit(off, self.cov.opcode.sample, name)
        self._pos = off + (8 if name == "NPU_OP_BRANCH" else 4)
        if name in self.cov.kernel_ops and d.get("snapshot") is not None:
            self._emit(off, self.cov.sample_kernel_op, name, d.get("fields") or {}, d["snapshot"])

    def _on_stop(self, d: dict) -> None:
        if self._pos is not None:
            self._sample_range(self._pos, int(d.get("qread", self._pos)))
        self._pos = None
        if not self.deferred:
            self.cov.sample_job_end(d.get("error") or d.get("reason", "?"))

    def take(self) -> list:
        """The pending samples (deferred mode), emptied."""
        out, self.pending = self.pending, []
        return out

    def commit(self, pending: list, status: int, ref_stop, mismatches: int) -> None:
        """Count a closed job: *status* the STATUS word the DUT stopped with (None: not seen),
        *ref_stop* the reference's StopReason, *pending* its ``take()``. job_end / bus_fault
        from the DUT's fault bits (a clean stop: the reference's kind if *mismatches* is 0);
        the intent samples only with no mismatch, without those of the operation a faulting
        job stopped at."""
        from tlm.ethos_u85 import registers as R
        cov = self.cov
        faults = []
        if status is not None:
            f = R.get("STATUS").decode(status)
            faults = [b for b in JOB_ENDS[3:] if f.get(b)]
            if faults:
                cov.sample_job_end(faults[0])
                if f.get("bus_status"):
                    cov.sample_bus_fault(_table_name(R.DMA_FAULT_SRC_T, f["faulting_interface"]),
                                         _table_name(R.PMU_AXI_CHANNEL_T, f["faulting_channel"]))
            elif mismatches == 0 and ref_stop is not None and ref_stop.kind.value in JOB_ENDS[:3]:
                cov.sample_job_end(ref_stop.kind.value)
        if mismatches or status is None:
            return
        stop_at = ref_stop.qread if faults and ref_stop is not None else None
        for off, fn, args in pending:
            if off != stop_at:
                fn(*args)


def current() -> "BenchCoverage":
    """This process's bench coverage model."""
    return engine.current(BenchCoverage)
