"""Product configurations of the Ethos-U85 and the TLM's policy knobs.

Configurations (TRM Table 2-2, 3-13, 3-21, 3-23, 3-90)
------------------------------------------------------

==============  ==========  =====  =====  ======  ================  ================  ==========
name            MACs/cycle  SRAM   EXT    SWDs    SRAM rd/wr max    EXT rd/wr max     CONFIG
==============  ==========  =====  =====  ======  ================  ================  ==========
ethos-u85-128   128         2      1      1       12 / 16           32 / 32           0x20000117
ethos-u85-256   256         2      1      1       12 / 16           32 / 32           0x20000118
ethos-u85-512   512         2      1      2       12 / 16           64 / 32           0x20001119
ethos-u85-1024  1024        2      2      4       12 / 16           64 / 32           0x2000251A
ethos-u85-2048  2048        4      2      4       12 / 16           64 / 32           0x2000261B
==============  ==========  =====  =====  ======  ================  ================  ==========

The CONFIG word is assembled from the TRM 3.3.1.10 field layout: macs_per_cc [3:0] (log2),
cmd_stream_version [7:4] = 1, num_axi_sram [9:8] (log2), num_axi_ext [10] (log2),
num_wd [13:12] (log2), custom_dma [27] = 0, product [31:28] = 2.

`Policy` collects every choice the TLM makes where the TRM is ambiguous, leaves the
behaviour IMPLEMENTATION DEFINED or UNPREDICTABLE. Each field names the TRM section.
"""
from __future__ import annotations

import numbers
import re
from dataclasses import dataclass, field, replace
from typing import Mapping


@dataclass(frozen=True)
class NpuConfig:
    """One RTL configuration of the NPU (ETHOSU85_<macs>)."""
    name: str
    macs: int                    # MACs per cycle
    sram_ports: int              # AXI_SRAM ports (SRAM0..)
    ext_ports: int               # AXI_EXT ports (EXT0..)
    num_wd: int                  # standard weight decoders
    sram_max_reads: int          # hardware max outstanding reads per SRAM port (Table 3-21)
    sram_max_writes: int
    ext_max_reads: int           # ... per EXT port (Table 3-23)
    ext_max_writes: int
    dw8_pad_k: int               # Table 3-90 (depthwise weight padding), informative
    dw16_pad_k: int
    cmd_stream_version: int = 1  # CONFIG.cmd_stream_version (IMPLEMENTATION DEFINED)
    custom_dma: int = 0          # CONFIG.custom_dma (IMPLEMENTATION DEFINED)
    product: int = 2             # CONFIG.product (IMPLEMENTATION DEFINED)
    sram_hash1_mirrors_pins: bool = False   # CFG_SRAM_HASH1 reflects the pins (TRM 3.3.1.23)

    @staticmethod
    def _log2(n: int) -> int:
        assert n > 0 and n & (n - 1) == 0, n
        return n.bit_length() - 1

    @property
    def macs_per_cc(self) -> int:
        return self._log2(self.macs)

    @property
    def num_axi_sram_log2(self) -> int:
        return self._log2(self.sram_ports)

    @property
    def num_axi_ext_log2(self) -> int:
        return self._log2(self.ext_ports)

    @property
    def num_wd_log2(self) -> int:
        return self._log2(self.num_wd)

    @property
    def config_word(self) -> int:
        """Reset value of the CONFIG register (TRM 3.3.1.10)."""
        return ((self.macs_per_cc & 0xF)
                | (self.cmd_stream_version & 0xF) << 4
                | (self.num_axi_sram_log2 & 0x3) << 8
                | (self.num_axi_ext_log2 & 0x1) << 10
                | (self.num_wd_log2 & 0x3) << 12
                | (self.custom_dma & 0x1) << 27
                | (self.product & 0xF) << 28)

    def ports(self, interface: str) -> int:
        return self.sram_ports if interface.lower() == "sram" else self.ext_ports

    def port_names(self) -> list[str]:
        return [f"SRAM{i}" for i in range(self.sram_ports)] + [f"EXT{i}" for i in range(self.ext_ports)]

    def max_outstanding(self, interface: str) -> tuple[int, int]:
        """Hardware (reads, writes) outstanding limit per port of a group."""
        if interface.lower() == "sram":
            return self.sram_max_reads, self.sram_max_writes
        return self.ext_max_reads, self.ext_max_writes


def _cfg(macs, sram, ext, wd, ext_rd, dw8, dw16, hash1):
    return NpuConfig(name=f"ethos-u85-{macs}", macs=macs, sram_ports=sram, ext_ports=ext, num_wd=wd,
                     sram_max_reads=12, sram_max_writes=16, ext_max_reads=ext_rd, ext_max_writes=32,
                     dw8_pad_k=dw8, dw16_pad_k=dw16, sram_hash1_mirrors_pins=hash1)


# TRM 3.3.1.23: "CFGSRAMHASH1 = 0x0 for NUM_MACS = 128, 256 and 512; for NUM_MACS = 1024
# and 2048 reflects the values on the configuration pins" (followed literally).
CONFIGS: Mapping[str, NpuConfig] = {c.name: c for c in (
    _cfg(128, 2, 1, 1, 32, 0, 2, False),
    _cfg(256, 2, 1, 1, 32, 0, 2, False),
    _cfg(512, 2, 1, 2, 64, 2, 2, False),
    _cfg(1024, 2, 2, 4, 64, 6, 6, True),
    _cfg(2048, 4, 2, 4, 64, 6, 6, True),
)}

DEFAULT_CONFIG = "ethos-u85-256"


_CONFIG_NAME = re.compile(r"(?:ethos-?u85-|u85-)?(\d+)")   # after lower() and '_' -> '-'


def get_config(cfg: "str | int | NpuConfig | None" = None) -> NpuConfig:
    """Accepts 'ethos-u85-256', 'ETHOSU85_256', 'u85-256', '256', 256 or an NpuConfig.
    Anything else (e.g. 'ethos-u55-128') is a ValueError."""
    if cfg is None:
        return CONFIGS[DEFAULT_CONFIG]
    if isinstance(cfg, NpuConfig):
        return cfg
    key = None
    if isinstance(cfg, numbers.Integral) and not isinstance(cfg, bool):
        key = f"ethos-u85-{int(cfg)}"
    elif isinstance(cfg, str):
        m = _CONFIG_NAME.fullmatch(cfg.strip().lower().replace("_", "-"))
        key = f"ethos-u85-{m.group(1)}" if m else None
    if key not in CONFIGS:
        raise ValueError(f"unknown Ethos-U85 configuration {cfg!r}; known: {', '.join(CONFIGS)}")
    return CONFIGS[key]


@dataclass(frozen=True)
class Pins:
    """Configuration inputs (TRM 5.2). Sampled at hard reset; CFG* also at soft reset.

    Defaults: PORPL=0/PORSL=0 give PROT=0, the TRM's nominal PROT reset value; the CAP
    pins do not cap (64 reads, 32 writes, 256-byte bursts; the hardware maxima of
    Tables 3-21/3-23 still apply); the hash pins are 0 (no striping, so only SRAM0/EXT0
    carry traffic)."""
    PORPL: int = 0
    PORSL: int = 0
    CFGSRAMCAP: int = 0x0002_1F3F
    CFGEXTCAP: int = 0x0002_1F3F
    CFGSRAMHASH0: int = 0
    CFGSRAMHASH1: int = 0
    CFGEXTHASH0: int = 0

    @classmethod
    def make(cls, pins: "Pins | Mapping[str, int] | None") -> "Pins":
        if pins is None:
            return cls()
        if isinstance(pins, Pins):
            return pins
        unknown = set(pins) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown pins {sorted(unknown)}")
        return cls(**{k: int(v) for k, v in pins.items()})

    def replace(self, **kw) -> "Pins":
        return replace(self, **kw)


@dataclass(frozen=True)
class Policy:
    """TLM choices for TRM ambiguities. Defaults follow the TRM text where it gives one.

    APB (TRM 3.1.1, 3.2, 3.4)
      reserved_offset_slverr  Access to a reserved offset: False = RAZ/WI, PSLVERR=0 (the TRM
                              does not say; 3.2 only marks them Reserved).
      running_unpredictable   Accesses the TRM calls UNPREDICTABLE in RUNNING (QBASE, QCONFIG,
                              QSIZE, COND_STATUS, POWER_CTRL any access; REGIONCFG write):
                              'slverr' (PSLVERR=1, read 0, write ignored; 3.1.1 allows a bus
                              error), 'ignore' (PSLVERR=0, read 0, write ignored) or 'allow'.
      cmd_readback_mask       CMD "reads as last written command" (3.3.1.3): the stored word
                              is masked with this (defined fields only by default).
      reset_read              Reads during a reset sequence (3.1.1): 'zero' (STATUS real,
                              others 0) or 'stall' (the read waits for the end of the sequence).
      reset_write             Writes during a reset sequence: 'trm_3_1_1' (CMD takes only
                              clock_q_enable/power_q_enable, RESET updates the pending
                              privilege, anything else PSLVERR=1), 'ignore_cmd_reset' (the
                              chapter 7 text: CMD/RESET ignored, others PSLVERR=1) or 'stall'.
      apb_cycles              Model cycles one APB transfer takes (setup + access phase).
    Reset (TRM 2.2, 2.3.5, 3.1.3, 3.3.1.4)
      reset_cycles            Length of the reset sequence (RAM clear) in model cycles.
      csl_rule                New CSL after a RESET write: 'or_requester' (pending_CSL | PPROT[1]:
                              "cannot reset the NPU to a higher security level than its current
                              level", 2.2) or 'pending' (pending_CSL as written).
      prot_update_at_end      Soft reset applies the new CPL/CSL at the end of the sequence
                              (CPM step 5, 2.3.5) rather than at the RESET write.
      cmd_write_in_reset_unmasks_power  A CMD write inside the reset window counts as "the next
                              write to CMD" that ends the power-control mask (3.3.1.4).
    Execution (TRM 3.3.1.3, 3.5, 3.6.8, 3.11.2)
      resume_after_stop_request  RS=1 after a stop_request stop resumes at QREAD (the TRM only
                              defines resuming after NPU_OP_STOP, so False).
      run_with_sticky_fault   RS=1 while bus_status/cmd_parse_error/ecc_fault/branch_fault is
                              set: 'ignore' (stay STOPPED, log) or 'run'.
      parse_error_on_reserved Reserved command encodings (3.5.3, UNPREDICTABLE) raise
                              cmd_parse_error (True) or are skipped (False).
                              A cmd1 whose payload word lies at/after QSIZE is always a
                              cmd_parse_error.
      branch_misaligned       branch_target & 3 != 0 (assert, UNPREDICTABLE): 'parse_error',
                              'align' (drop bits [1:0]) or 'branch_fault'.
      on_unpredictable        An op's TRM assert fails (errors.Unpredictable): 'continue' (log,
                              op has no further effect) or 'parse_error' (stop with
                              cmd_parse_error).
      on_unimplemented_op     Kernel op with no entry in KERNEL_OPS: 'parse_error' (default:
                              stop with cmd_parse_error + IRQ, never a silent wrong answer) or
                              'continue' (log event 'op_unimplemented', no memory effect).
      on_model_limit          errors.BudgetExceeded or an unexpected exception inside an op:
                              'parse_error' (stop with cmd_parse_error + IRQ) or 'continue'.
      default_max_steps       Step budget of run() when max_steps is None.
      fetch_block             Command fetch granule in bytes (aligned reads, clipped to QBASE
                              below and to align_up(QBASE+QSIZE, 128) above, TRM 3.3.1.8).
      auto_run                A CMD write that sets RS runs the stream at once (with
                              default_max_steps); False: the bench calls run()/step().
      default_max_work        Work budget of run() when max_work is None (None: unbounded).
                              Work units of a command: 1, plus 1 per AXI transaction and per
                              64 bytes it moves, 64 per 64 KiB memory page it writes, and
                              for a kernel op its OFM elements x kernel taps. Checked before
                              each command: when used up the run returns StopKind.BUDGET
                              (NPU still RUNNING, resumable), as for max_steps.
      max_events              Length of Device.events (oldest entries are dropped).
    Model work budgets (not architectural: host time and memory of one operation; beyond a
    budget the op raises errors.BudgetExceeded, before it moves data except for max_op_pages;
    event 'model_limit', handled as on_model_limit says). Defaults are sized so real Vela
    networks never reach them; the fuzzer (tlm.fuzz.BASE_POLICY) uses tighter ones.
      max_op_elements         OFM elements of a kernel op, and IFM/IFM2 elements it reads
                              (padded window included).
      max_op_work             Element-taps of a kernel op (pooling kernel sweeps).
      max_op_macs             Multiply-accumulates of one CONV/DEPTHWISE.
      max_op_weights          Elements of the decoded weight tensor of one op.
      max_weight_bytes        Bytes of weight stream(s) one op reads.
      max_weight_stream_entries  Weight-stream positions (padding included) one op orders.
      dma_max_bytes           Bytes one NPU_OP_DMA_START moves (LEN x SIZE0 x SIZE1).
      dma_max_lines           1D lines (SIZE0 x SIZE1) one DMA visits ...
      dma_max_indexed_lines   ... if it gathers/scatters (one index read per line).
      dma_max_pages           Distinct 64 KiB sparse-memory pages one DMA writes (a huge
                              stride can touch a page per line); counted before anything moves.
      max_op_pages            ... and one kernel op writes (huge OFM strides); checked at each
                              write, so the op stops at the write that would cross it.
    PMU (TRM 3.3.4, 3.3.5)
      pmu_mask_needs_mask_en  NPU_OP_PMU_MASK only acts when PMCR.mask_en=1.
      pmu_bw_event_offsets    Event offsets (within a 16-event AXI family) that PMCAXI_CHAN.
                              BW_CH_SEL_EN filters by channel: the two "bandwidth" events.
      axi_latency_cycles      Latency the TLM attributes to every AXI transaction (for the
                              axi_latency_* events).
      cycles_per_command      Model cycles per executed command (plus one per AXI beat).
    """
    reserved_offset_slverr: bool = False
    running_unpredictable: str = "slverr"
    cmd_readback_mask: int = 0xFFFF_001F
    reset_read: str = "zero"
    reset_write: str = "trm_3_1_1"
    apb_cycles: int = 2
    reset_cycles: int = 8
    csl_rule: str = "or_requester"
    prot_update_at_end: bool = True
    cmd_write_in_reset_unmasks_power: bool = True
    resume_after_stop_request: bool = False
    run_with_sticky_fault: str = "ignore"
    parse_error_on_reserved: bool = True
    branch_misaligned: str = "parse_error"
    on_unpredictable: str = "continue"
    on_unimplemented_op: str = "parse_error"
    on_model_limit: str = "parse_error"
    default_max_steps: int = 1_000_000
    fetch_block: int = 64
    auto_run: bool = False
    default_max_work: "int | None" = 1 << 40
    max_events: int = 50_000
    max_op_elements: int = 1 << 22
    max_op_work: int = 1 << 28
    max_op_macs: int = 1 << 32
    max_op_weights: int = 1 << 22
    max_weight_bytes: int = 1 << 22
    max_weight_stream_entries: int = 1 << 24
    dma_max_bytes: int = 1 << 28
    dma_max_lines: int = 1 << 16
    dma_max_indexed_lines: int = 1 << 14
    dma_max_pages: int = 1 << 14
    max_op_pages: int = 1 << 14
    pmu_mask_needs_mask_en: bool = True
    pmu_bw_event_offsets: frozenset = field(default_factory=lambda: frozenset({2, 7}))
    axi_latency_cycles: int = 0
    cycles_per_command: int = 1

    _CHOICES = {
        "running_unpredictable": ("slverr", "ignore", "allow"),
        "reset_read": ("zero", "stall"),
        "reset_write": ("trm_3_1_1", "ignore_cmd_reset", "stall"),
        "csl_rule": ("or_requester", "pending"),
        "run_with_sticky_fault": ("ignore", "run"),
        "branch_misaligned": ("parse_error", "align", "branch_fault"),
        "on_unpredictable": ("continue", "parse_error"),
        "on_unimplemented_op": ("continue", "parse_error"),
        "on_model_limit": ("continue", "parse_error"),
    }
    _BUDGETS = ("default_max_steps", "default_max_work", "max_op_elements", "max_op_work", "max_op_macs",
                "max_op_weights", "max_weight_bytes", "max_weight_stream_entries", "dma_max_bytes",
                "dma_max_lines", "dma_max_indexed_lines", "dma_max_pages", "max_op_pages")

    def __post_init__(self):
        for name, allowed in self._CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"Policy.{name} must be one of {allowed}, not {getattr(self, name)!r}")
        if self.fetch_block < 4 or self.fetch_block & (self.fetch_block - 1):
            raise ValueError("Policy.fetch_block must be a power of two >= 4")
        for name in self._BUDGETS:
            v = getattr(self, name)
            if v is None and name == "default_max_work":
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"Policy.{name} must be a non-negative integer, not {v!r}")

    def replace(self, **kw) -> "Policy":
        return replace(self, **kw)


def policy_of(device) -> Policy:
    """The Policy of `device` (an op's device argument), or the defaults when it has none
    (unit tests drive ops with stand-in devices)."""
    p = getattr(device, "policy", None)
    return p if isinstance(p, Policy) else _DEFAULT_POLICY


_DEFAULT_POLICY = Policy()
