"""The BMKernel 1880 API (guide chapters 3 and 4), one Python function per call.

A context collects computation requests into a command buffer, as BMKernel does; nothing
runs here. `bmk1880_acquire_cmdbuf` hands out the bytes (format: tlm/bm1880/descriptors.py),
and `tlm.bm1880.device.Bm1880.run(buf)` executes them on the chip model.

Every call checks its arguments by the guide's rules (tlm/bm1880/checks.py, shared with the
command-buffer decoder) and raises `BmkError("bmk1880_<call>: <argument>: <why>")` on the
first broken one; nothing is recorded then. The lmem allocators return None on failure as
the guide says (4.7-4.10), with the reason in `ctx.last_error`.

Parameter structures (`bmk1880_conv_param_t`, ...) are generated from the descriptor table;
a call takes one (`bmk1880_tpu_conv(ctx, p)`) or its fields as keywords
(`bmk1880_tpu_conv(ctx, ofmap=..., ifmap=..., ...)`).
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
from bisect import bisect_right
from dataclasses import dataclass

from .checks import ArgError, check, tl_layout_error
from .chip import (CHIP, CTRL_AL, CTRL_NULL, FMT_I8, FMT_NAMES, FMT_U8, align, bmk1880_chip_info_t,
                   ctrl_name, lmem_default_stride, matrix_tensor_shape, shape_t, stride_t)
from .descriptors import (BY_NAME, DEPENDENCY, FLAG_SYNC, KINDS, NO_STREAM, Kind, encode_record)
from .schedule import EpochOrder
from .tensors import snapshot_tg, snapshot_tl, tensor_gmem, tensor_lmem


class BmkError(Exception):
    """A BMKernel call rejected its arguments: 'bmk1880_<call>: <argument>: <why>'."""


@dataclass
class bmk1880_info_t:                          # noqa: N801 - the guide's names (3.1)
    chip_version: int = 1880
    cmdbuf: "bytearray | memoryview | None" = None
    cmdbuf_size: int = 0


@dataclass(eq=False)
class bmk1880_op_t:                            # noqa: N801
    """What a computation call returns: the command, for bmk1880_add_dependency."""
    ctx: "bmk1880_context_t"
    generation: int
    index: int                                  # computation command index in the buffer
    kind: Kind

    def __repr__(self) -> str:
        return f"bmk1880_op_t(#{self.index} {self.kind.call})"


# ---- parameter structures, generated from the descriptor table ------------------------------------------
_DEFAULTS = {"tl": None, "bool": False, "stride": None}


def _param_class(kind: Kind):
    return dataclasses.make_dataclass(
        kind.param, [(f.name, object, dataclasses.field(default=_DEFAULTS.get(f.type, 0))) for f in kind.fields])


PARAM_TYPES = {k.name: _param_class(k) for k in KINDS if k.param}
globals().update({cls.__name__: cls for cls in PARAM_TYPES.values()})


class bmk1880_context_t:                        # noqa: N801
    """A BMKernel context (3.1): command buffer, lmem stack, ordering mode."""

    def __init__(self, info: bmk1880_info_t, chip: bmk1880_chip_info_t):
        self.info, self.chip = info, chip
        self.cleaned = False
        self.generation = 0
        self.last_error = ""
        self._init()

    def _init(self) -> None:
        self.records: list[bytes] = []
        self.size = 0
        self.ops: list[bmk1880_op_t] = []
        self.cmds: list[tuple[int, bool, int]] = []     # (engine, sync, stream) per computation command
        self.epoch_start: list[int] = []                # first command of each epoch (schedule.py)
        self.epoch_order: list[EpochOrder] = []         # the order inside each epoch
        self.deps: list[tuple[int, int]] = []
        self.parallel = False
        self.streams = 0
        self.stream = 0
        self.pending_sync = False
        self.stack_top = 0
        self.stack: list[tensor_lmem] = []

    # ---- helpers shared by the calls ----------------------------------------------------------------------
    def _fail(self, call: str, arg: str, why: str):
        raise BmkError(f"{call}: {arg}: {why}")

    def _append(self, call: str, rec: bytes) -> None:
        if self.size + len(rec) > self.info.cmdbuf_size:
            raise BmkError(f"{call}: the command buffer is full: {self.size} of {self.info.cmdbuf_size} bytes "
                           f"used, this command needs {len(rec)} (bmk1880_info_t.cmdbuf_size)")
        self.records.append(rec)
        self.size += len(rec)

    def _operand(self, call: str, name: str, v):
        if isinstance(v, tensor_lmem):
            why = _stale(v) or _malformed(v)
            if why:
                self._fail(call, name, why)
            return snapshot_tl(v)
        if isinstance(v, tensor_gmem):
            s = v.shape
            if not isinstance(s, shape_t) or not isinstance(v.stride, stride_t) or s.dim not in (2, 4) \
                    or not all(_is_u32(x) for x in (s.n, s.c, s.h, s.w) + v.stride.as4()) \
                    or not isinstance(v.addr, int) or isinstance(v.addr, bool):
                self._fail(call, name, "a tensor_gmem needs an integer addr, a shape_t and a stride_t of u32 values")
            return snapshot_tg(v)
        return v

    def emit(self, name: str, args: dict) -> bmk1880_op_t:
        kind = BY_NAME[name]
        call = kind.call
        _live(self, call)
        vals = {f.name: self._operand(call, f.name, args.get(f.name)) for f in kind.fields}
        try:
            check(kind, vals, self.chip)
        except ArgError as e:
            raise BmkError(f"{call}: {e}") from None
        if self.parallel or self.streams:
            sync, self.pending_sync = self.pending_sync, False
        else:
            sync = True
        stream = self.stream if self.streams else NO_STREAM
        vals = {f.name: (int(v) if f.type in ("u8", "int", "u32", "u64", "ctrl", "c8", "c16") else
                         bool(v) if f.type == "bool" else v) for f, v in zip(kind.fields, vals.values())}
        self._append(call, encode_record(kind, vals, FLAG_SYNC if sync else 0, stream))
        op = bmk1880_op_t(self, self.generation, len(self.ops), kind)
        self.ops.append(op)
        if sync or not self.cmds:
            self.epoch_start.append(len(self.cmds))
            self.epoch_order.append(EpochOrder())
        self.epoch_order[-1].add(len(self.cmds), kind.engine, stream)
        self.cmds.append((kind.engine, sync, stream))
        return op


def _live(ctx, call: str) -> None:
    if not isinstance(ctx, bmk1880_context_t):
        raise BmkError(f"{call}: ctx: must be a bmk1880_context_t from bmk1880_register, got {type(ctx).__name__}")
    if ctx.cleaned:
        raise BmkError(f"{call}: ctx: was freed by bmk1880_cleanup")


def _stale(t: tensor_lmem) -> str:
    if t.freed:
        return "was freed by bmk1880_tl_free"
    if t.alloc_kind != "prealloc" and t.owner is not None:
        if t.owner.cleaned:
            return "its context was freed by bmk1880_cleanup"
        if t.generation != t.owner.generation:
            return "was allocated before bmk1880_reset, which released it (choice C-RESET)"
    return ""


def _is_u32(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 1 << 32


def _malformed(t: tensor_lmem) -> str:
    """A tensor_lmem whose fields do not have the guide's types (4.4)."""
    s = t.shape
    if not isinstance(s, shape_t) or s.dim not in (2, 4) or not all(_is_u32(x) for x in (s.n, s.c, s.h, s.w)):
        return f"shape {s!r} is not a shape_t of u32 dimensions (shape_t4 / shape_t2)"
    if t.stride is not None and (not isinstance(t.stride, stride_t) or not all(_is_u32(x) for x in t.stride.as4())):
        return f"stride {t.stride!r} is neither NULL (None) nor a stride_t of u32 values"
    if not _is_u32(t.laddr):
        return f"laddr {t.laddr!r} is not a u32 lmem address"
    if not isinstance(t.fmt, int) or isinstance(t.fmt, bool):
        return f"fmt {t.fmt!r} is not an fmt_t"
    return ""


def _param(name: str, p, kw: dict) -> dict:
    kind = BY_NAME[name]
    cls = PARAM_TYPES[name]
    if p is not None and kw:
        raise BmkError(f"{kind.call}: p: give a {kind.param} or keyword fields, not both")
    if p is None:
        names = {f.name for f in kind.fields}
        bad = sorted(set(kw) - names)
        if bad:
            raise BmkError(f"{kind.call}: {bad[0]}: {kind.param} has no such field "
                           f"(fields: {', '.join(f.name for f in kind.fields)})")
        p = cls(**kw)
    if not isinstance(p, cls):
        raise BmkError(f"{kind.call}: p: must be a {kind.param}, got {type(p).__name__}")
    return {f.name: getattr(p, f.name) for f in kind.fields}


# =========================================================================================================
# System API (chapter 3)
# =========================================================================================================
def bmk1880_register(info: bmk1880_info_t, chip: "bmk1880_chip_info_t | None" = None) -> bmk1880_context_t:
    """3.1. `chip` (not in the guide) replaces the chip parameters for experiments."""
    call = "bmk1880_register"
    if not isinstance(info, bmk1880_info_t):
        raise BmkError(f"{call}: info: must be a bmk1880_info_t, got {type(info).__name__}")
    chip = chip or CHIP
    if info.chip_version != chip.version:
        raise BmkError(f"{call}: info.chip_version: {info.chip_version!r}; it must be {chip.version} (3.1)")
    if not isinstance(info.cmdbuf_size, int) or info.cmdbuf_size < 0:
        raise BmkError(f"{call}: info.cmdbuf_size: {info.cmdbuf_size!r} is not a byte count")
    if not isinstance(info.cmdbuf, (bytearray, memoryview)) or (isinstance(info.cmdbuf, memoryview)
                                                                 and info.cmdbuf.readonly):
        raise BmkError(f"{call}: info.cmdbuf: must be a writable buffer (bytearray) the user allocates (3.1)")
    if len(info.cmdbuf) < info.cmdbuf_size:
        raise BmkError(f"{call}: info.cmdbuf: holds {len(info.cmdbuf)} bytes, cmdbuf_size says {info.cmdbuf_size}")
    return bmk1880_context_t(info, chip)


def bmk1880_cleanup(ctx: bmk1880_context_t) -> None:
    """3.2."""
    _live(ctx, "bmk1880_cleanup")
    ctx.cleaned = True


def bmk1880_acquire_cmdbuf(ctx: bmk1880_context_t) -> tuple[memoryview, int]:
    """3.3: the commands recorded so far, copied into info.cmdbuf: (buffer[:size], size)."""
    _live(ctx, "bmk1880_acquire_cmdbuf")
    data = b"".join(ctx.records)
    ctx.info.cmdbuf[:len(data)] = data
    return memoryview(ctx.info.cmdbuf)[:len(data)], len(data)


def bmk1880_reset(ctx: bmk1880_context_t) -> None:
    """3.4: back to the state right after bmk1880_register (choice C-RESET)."""
    _live(ctx, "bmk1880_reset")
    ctx.generation += 1
    ctx._init()


def bmk1880_parallel_enable(ctx: bmk1880_context_t) -> None:
    """3.5."""
    call = "bmk1880_parallel_enable"
    _live(ctx, call)
    if ctx.parallel:
        raise BmkError(f"{call}: ctx: a parallel group is already open (groups do not nest; choice C-STREAM)")
    if ctx.streams:
        raise BmkError(f"{call}: ctx: streams are active; the engine- and dependency-oriented styles do not "
                       "mix (choice C-STREAM)")
    ctx.parallel, ctx.pending_sync = True, True


def bmk1880_parallel_disable(ctx: bmk1880_context_t) -> None:
    """3.6."""
    call = "bmk1880_parallel_disable"
    _live(ctx, call)
    if not ctx.parallel:
        raise BmkError(f"{call}: ctx: no parallel group is open")
    ctx.parallel, ctx.pending_sync = False, True


def bmk1880_create_streams(ctx: bmk1880_context_t, nr_streams: int) -> None:
    """3.7: creates streams 0 .. nr_streams-1 and selects stream 0 (choice C-STREAM)."""
    call = "bmk1880_create_streams"
    _live(ctx, call)
    if ctx.streams:
        raise BmkError(f"{call}: ctx: streams already exist (bmk1880_destroy_streams first)")
    if ctx.parallel:
        raise BmkError(f"{call}: ctx: a parallel group is open; the two styles do not mix (choice C-STREAM)")
    if not isinstance(nr_streams, int) or isinstance(nr_streams, bool) or not 1 <= nr_streams < NO_STREAM:
        raise BmkError(f"{call}: nr_streams: {nr_streams!r}; it must be 1..{NO_STREAM - 1} (choice C-STREAM)")
    ctx.streams, ctx.stream, ctx.pending_sync = nr_streams, 0, True


def bmk1880_destroy_streams(ctx: bmk1880_context_t) -> None:
    """3.8: back to serial mode."""
    call = "bmk1880_destroy_streams"
    _live(ctx, call)
    if not ctx.streams:
        raise BmkError(f"{call}: ctx: no streams exist")
    ctx.streams, ctx.stream, ctx.pending_sync = 0, 0, True


def bmk1880_set_stream(ctx: bmk1880_context_t, i: int) -> None:
    """3.9."""
    call = "bmk1880_set_stream"
    _live(ctx, call)
    if not ctx.streams:
        raise BmkError(f"{call}: ctx: no streams exist (bmk1880_create_streams first)")
    if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < ctx.streams:
        raise BmkError(f"{call}: i: {i!r}; the streams are 0..{ctx.streams - 1}")
    ctx.stream = i


def bmk1880_add_dependency(ctx: bmk1880_context_t, before: bmk1880_op_t, after: bmk1880_op_t) -> None:
    """3.10: `before` must take place strictly before `after`."""
    call = "bmk1880_add_dependency"
    _live(ctx, call)
    for name, op in (("before", before), ("after", after)):
        if not isinstance(op, bmk1880_op_t):
            raise BmkError(f"{call}: {name}: must be a bmk1880_op_t returned by a computation call, "
                           f"got {type(op).__name__}")
        if op.ctx is not ctx:
            raise BmkError(f"{call}: {name}: {op} belongs to another context")
        if op.generation != ctx.generation:
            raise BmkError(f"{call}: {name}: {op} was recorded before bmk1880_reset")
    if before is after:
        raise BmkError(f"{call}: after: is the same command as before")
    # Epochs are ordered one after the other (schedule.py), so only a dependency inside one epoch
    # can close a cycle, and only that epoch's commands and dependencies decide it.
    eb, ea = (bisect_right(ctx.epoch_start, op.index) - 1 for op in (before, after))
    if eb > ea or (eb == ea and ctx.epoch_order[eb].reaches(after.index, before.index)):
        raise BmkError(f"{call}: after: {after} already takes place before {before} "
                       "(engine order, epochs or earlier dependencies); the dependency would close a cycle")
    ctx._append(call, encode_record(DEPENDENCY, {"before": before.index, "after": after.index}))
    ctx.deps.append((before.index, after.index))
    if eb == ea:
        ctx.epoch_order[eb].add_dep(before.index, after.index)


_current: "list[bmk1880_context_t]" = []


def bmk1880_enter(ctx: bmk1880_context_t) -> None:
    """Appendix A: makes ctx the current context until bmk1880_exit (choice C-ENTER)."""
    _live(ctx, "bmk1880_enter")
    if _current:
        raise BmkError("bmk1880_enter: ctx: another context is entered (bmk1880_exit first)")
    _current.append(ctx)


def bmk1880_exit() -> None:
    """Appendix A."""
    if not _current:
        raise BmkError("bmk1880_exit: no context is entered")
    _current.pop()


def bmk1880_current() -> "bmk1880_context_t | None":
    """The context of the open bmk1880_enter, if any."""
    return _current[0] if _current else None


# =========================================================================================================
# lmem allocation (4.7-4.11) and size helpers (EXT)
# =========================================================================================================
def _shape_ok(s) -> str:
    if not isinstance(s, shape_t):
        return f"must be a shape_t (shape_t4 / shape_t2), got {type(s).__name__}"
    if s.dim not in (2, 4):
        return f"dim is {s.dim}; it must be 4 (shape_t4) or 2 (shape_t2)"
    dims = (s.h, s.w) if s.dim == 2 else (s.n, s.c, s.h, s.w)
    if not all(isinstance(d, int) and 1 <= d < 1 << 32 for d in dims):
        return f"{s}: every dimension must be 1 .. 2^32-1"
    return ""


def _shape4(chip, s: shape_t) -> tuple[int, int, int, int]:
    return matrix_tensor_shape(chip, s.h, s.w) if s.dim == 2 else (s.n, s.c, s.h, s.w)


def bmk1880_tl_shape_to_size(ctx: bmk1880_context_t, s: shape_t, aligned: bool, fmt: int) -> int:
    """EXT: bytes per slice of a tensor / matrix of shape s at its default strides (N x S_N)."""
    call = "bmk1880_tl_shape_to_size"
    _live(ctx, call)
    why = _shape_ok(s)
    if why:
        raise BmkError(f"{call}: s: {why}")
    if fmt not in (FMT_I8, FMT_U8):
        raise BmkError(f"{call}: fmt: {fmt!r}; it must be FMT_I8 or FMT_U8")
    s4 = _shape4(ctx.chip, s)
    return s4[0] * lmem_default_stride(ctx.chip, s4, bool(aligned))[0]


def bmk1880_tl_size(ctx: bmk1880_context_t, tlp: tensor_lmem) -> int:
    """EXT: bmk1880_tl_shape_to_size of a tensor_lmem."""
    if not isinstance(tlp, tensor_lmem):
        raise BmkError(f"bmk1880_tl_size: tlp: must be a tensor_lmem, got {type(tlp).__name__}")
    return bmk1880_tl_shape_to_size(ctx, tlp.shape, tlp.aligned, tlp.fmt)


def bmk1880_tg_shape_to_size(s: shape_t, fmt: int) -> int:
    """EXT: bytes of a tensor / matrix of shape s in gmem at default strides."""
    why = _shape_ok(s)
    if why:
        raise BmkError(f"bmk1880_tg_shape_to_size: s: {why}")
    if fmt not in (FMT_I8, FMT_U8):
        raise BmkError(f"bmk1880_tg_shape_to_size: fmt: {fmt!r}; it must be FMT_I8 or FMT_U8")
    return s.h * s.w if s.dim == 2 else s.n * s.c * s.h * s.w


def bmk1880_tl_shape_to_nchw(ctx: bmk1880_context_t, s: shape_t) -> tuple[int, int, int, int]:
    """EXT: the (N, C, H, W) of the tensor that holds shape s in lmem (a matrix's special tensor, 2.3)."""
    _live(ctx, "bmk1880_tl_shape_to_nchw")
    why = _shape_ok(s)
    if why:
        raise BmkError(f"bmk1880_tl_shape_to_nchw: s: {why}")
    return _shape4(ctx.chip, s)


def _alloc_fail(ctx, call: str, why: str) -> None:
    ctx.last_error = f"{call}: {why}"
    return None


def _prealloc(ctx, call: str, la, s, fmt, aligned: bool) -> "tensor_lmem | None":
    _live(ctx, call)
    why = _shape_ok(s)
    if why:
        return _alloc_fail(ctx, call, f"s: {why}")
    if fmt not in (FMT_I8, FMT_U8):
        return _alloc_fail(ctx, call, f"fmt: {fmt!r}; it must be FMT_I8 or FMT_U8 (4.1)")
    if not isinstance(la, int) or isinstance(la, bool) or la < 0:
        return _alloc_fail(ctx, call, f"la: {la!r} is not an lmem address")
    t = tensor_lmem(fmt, s, None, aligned, la, "prealloc", ctx, ctx.generation)
    err = tl_layout_error(ctx.chip, snapshot_tl(t))
    if err:
        return _alloc_fail(ctx, call, f"la: {err}")
    ctx.last_error = ""
    return t


def bmk1880_tl_prealloc(ctx: bmk1880_context_t, la: int, s: shape_t, fmt: int) -> "tensor_lmem | None":
    """4.7: a tensor_lmem at lmem address la, unaligned; None on failure (choice C-PREALLOC)."""
    return _prealloc(ctx, "bmk1880_tl_prealloc", la, s, fmt, False)


def bmk1880_tl_prealloc_align(ctx: bmk1880_context_t, la: int, s: shape_t, fmt: int) -> "tensor_lmem | None":
    """4.8: as bmk1880_tl_prealloc, aligned."""
    return _prealloc(ctx, "bmk1880_tl_prealloc_align", la, s, fmt, True)


def _alloc(ctx, call: str, bank, s, fmt, ctrl) -> "tensor_lmem | None":
    _live(ctx, call)
    chip = ctx.chip
    why = _shape_ok(s)
    if why:
        return _alloc_fail(ctx, call, f"s: {why}")
    if fmt not in (FMT_I8, FMT_U8):
        return _alloc_fail(ctx, call, f"fmt: {fmt!r}; it must be FMT_I8 or FMT_U8 (4.1)")
    if ctrl not in (CTRL_NULL, CTRL_AL):
        return _alloc_fail(ctx, call, f"ctrl: {ctrl_name(ctrl) if isinstance(ctrl, int) else repr(ctrl)}; it must be "
                                      "CTRL_NULL or CTRL_AL (4.9)")
    aligned = ctrl == CTRL_AL
    s4 = _shape4(chip, s)
    size = s4[0] * lmem_default_stride(chip, s4, aligned)[0]
    start = align(ctx.stack_top, chip.eu_num) if aligned else ctx.stack_top      # choice C-ALLOC
    limit = chip.lmem_size
    if bank is not None:
        if not isinstance(bank, int) or isinstance(bank, bool) or not 0 <= bank < chip.lmem_banks:
            return _alloc_fail(ctx, call, f"bank_id: {bank!r}; the banks are 0..{chip.lmem_banks - 1}")
        lo = bank * chip.lmem_bank_size
        limit = lo + chip.lmem_bank_size
        if start > limit:
            return _alloc_fail(ctx, call, f"bank_id: the stack top 0x{ctx.stack_top:x} is already past bank {bank} "
                                          f"(0x{lo:x}..0x{limit:x}); banks are taken in stack order (choice C-ALLOC)")
        start = max(start, lo)
    if start + size > limit:
        where = f"bank {bank}" if bank is not None else "lmem"
        return _alloc_fail(ctx, call, f"s: out of memory: {s} {FMT_NAMES[fmt]} needs {size} bytes per slice at "
                                      f"0x{start:x}, {where} ends at 0x{limit:x}")
    t = tensor_lmem(fmt, s, None, aligned, start, "alloc" if bank is None else "alloc_bank", ctx, ctx.generation,
                    reserved_from=ctx.stack_top)
    ctx.stack.append(t)
    ctx.stack_top = start + size
    ctx.last_error = ""
    return t


def bmk1880_tl_alloc(ctx: bmk1880_context_t, s: shape_t, fmt: int, ctrl: int) -> "tensor_lmem | None":
    """4.9: from the lmem stack; CTRL_AL for aligned; None if out of memory (choice C-ALLOC)."""
    return _alloc(ctx, "bmk1880_tl_alloc", None, s, fmt, ctrl)


def bmk1880_tl_alloc_bank(ctx: bmk1880_context_t, bank_id: int, s: shape_t, fmt: int,
                          ctrl: int) -> "tensor_lmem | None":
    """4.10: from lmem bank bank_id (choice C-ALLOC)."""
    return _alloc(ctx, "bmk1880_tl_alloc_bank", bank_id, s, fmt, ctrl)


def bmk1880_tl_free(ctx: bmk1880_context_t, tlp: tensor_lmem) -> None:
    """4.11: frees the structure; for tl_alloc / tl_alloc_bank tensors also the lmem, last
    allocated first freed."""
    call = "bmk1880_tl_free"
    _live(ctx, call)
    if not isinstance(tlp, tensor_lmem):
        raise BmkError(f"{call}: tlp: must be a tensor_lmem, got {type(tlp).__name__}")
    if tlp.freed:
        raise BmkError(f"{call}: tlp: {tlp} was already freed")
    if tlp.alloc_kind != "prealloc":
        if tlp.owner is not ctx:
            raise BmkError(f"{call}: tlp: {tlp} was allocated by another context")
        if tlp.generation != ctx.generation:
            raise BmkError(f"{call}: tlp: {tlp} was allocated before bmk1880_reset, which released it")
        if not ctx.stack or ctx.stack[-1] is not tlp:
            raise BmkError(f"{call}: tlp: {tlp} is not the last allocated tensor ({ctx.stack[-1]!r}); "
                           "the last allocated must be freed first (4.9)")
        ctx.stack.pop()
        ctx.stack_top = tlp.reserved_from
    tlp.freed = True


# =========================================================================================================
# Computation API (chapter 4)
# =========================================================================================================
def bmk1880_gdma_copy_gmem(ctx, dst: tensor_gmem, src: tensor_gmem, ctrls: int) -> bmk1880_op_t:
    """4.12."""
    _live(ctx, "bmk1880_gdma_copy_gmem")
    return ctx.emit("gdma_copy_gmem", dict(dst=dst, src=src, ctrls=ctrls))


def bmk1880_gdma_copy_lmem(ctx, dst: tensor_lmem, src: tensor_lmem) -> bmk1880_op_t:
    """4.13."""
    _live(ctx, "bmk1880_gdma_copy_lmem")
    return ctx.emit("gdma_copy_lmem", dict(dst=dst, src=src))


def bmk1880_gdma_load(ctx, t: tensor_lmem, gaddr: int, ctrls: int) -> bmk1880_op_t:
    """4.14."""
    _live(ctx, "bmk1880_gdma_load")
    return ctx.emit("gdma_load", dict(t=t, gaddr=gaddr, ctrls=ctrls))


def bmk1880_gdma_store(ctx, t: tensor_lmem, gaddr: int, ctrls: int) -> bmk1880_op_t:
    """4.15."""
    _live(ctx, "bmk1880_gdma_store")
    return ctx.emit("gdma_store", dict(t=t, gaddr=gaddr, ctrls=ctrls))


def bmk1880_gdma_load_stride(ctx, t: tensor_lmem, gaddr: int, stride: stride_t, ctrls: int) -> bmk1880_op_t:
    """4.16."""
    _live(ctx, "bmk1880_gdma_load_stride")
    return ctx.emit("gdma_load_stride", dict(t=t, gaddr=gaddr, stride=stride, ctrls=ctrls))


def bmk1880_gdma_store_stride(ctx, t: tensor_lmem, gaddr: int, stride: stride_t, ctrls: int) -> bmk1880_op_t:
    """4.17."""
    _live(ctx, "bmk1880_gdma_store_stride")
    return ctx.emit("gdma_store_stride", dict(t=t, gaddr=gaddr, stride=stride, ctrls=ctrls))


def bmk1880_gdma_lrn_shift(ctx, dst: tensor_lmem, src: tensor_lmem, right_shift: bool, lrn_step: int) -> bmk1880_op_t:
    """4.18."""
    _live(ctx, "bmk1880_gdma_lrn_shift")
    return ctx.emit("gdma_lrn_shift", dict(dst=dst, src=src, right_shift=right_shift, lrn_step=lrn_step))


def _tpu(name: str, doc: str):
    def call(ctx, p=None, **fields) -> bmk1880_op_t:
        _live(ctx, BY_NAME[name].call)
        return ctx.emit(name, _param(name, p, fields))
    call.__name__ = call.__qualname__ = BY_NAME[name].call
    call.__doc__ = f"{doc}: takes a {BY_NAME[name].param} (or its fields as keywords)."
    return call


bmk1880_tpu_mul = _tpu("tpu_mul", "4.19")
bmk1880_tpu_mul_const = _tpu("tpu_mul_const", "4.20")
bmk1880_tpu_mac = _tpu("tpu_mac", "4.21")
bmk1880_tpu_mac_const = _tpu("tpu_mac_const", "4.22")
bmk1880_tpu_add = _tpu("tpu_add", "4.23")
bmk1880_tpu_add_const = _tpu("tpu_add_const", "4.24")
bmk1880_tpu_sub = _tpu("tpu_sub", "4.25")
bmk1880_tpu_max = _tpu("tpu_max", "4.26")
bmk1880_tpu_max_const = _tpu("tpu_max_const", "EXT (bmkernel_1880.h; not in the guide)")
bmk1880_tpu_min = _tpu("tpu_min", "4.27")
bmk1880_tpu_min_const = _tpu("tpu_min_const", "4.28")
bmk1880_tpu_arith_shift = _tpu("tpu_arith_shift", "4.29")
bmk1880_tpu_and_int8 = _tpu("tpu_and_int8", "4.30")
bmk1880_tpu_and_int16 = _tpu("tpu_and_int16", "4.31")
bmk1880_tpu_or_int8 = _tpu("tpu_or_int8", "4.32")
bmk1880_tpu_or_int16 = _tpu("tpu_or_int16", "4.33")
bmk1880_tpu_xor_int8 = _tpu("tpu_xor_int8", "4.34")
bmk1880_tpu_xor_int16 = _tpu("tpu_xor_int16", "4.35")
bmk1880_tpu_copy = _tpu("tpu_copy", "4.36")
bmk1880_tpu_copy_with_stride = _tpu("tpu_copy_with_stride", "4.37")
bmk1880_tpu_mdsum = _tpu("tpu_mdsum", "4.38")
bmk1880_tpu_lut = _tpu("tpu_lut", "4.39")
bmk1880_tpu_relu = _tpu("tpu_relu", "4.40")
bmk1880_tpu_conv = _tpu("tpu_conv", "4.41")
bmk1880_tpu_winograd = _tpu("tpu_winograd", "4.42")
bmk1880_tpu_depthwise = _tpu("tpu_depthwise", "4.43")
bmk1880_tpu_max_pooling = _tpu("tpu_max_pooling", "4.44")
bmk1880_tpu_avg_pooling = _tpu("tpu_avg_pooling", "4.45")
bmk1880_tpu_matrix_mac = _tpu("tpu_matrix_mac", "4.46")
bmk1880_tpu_matrix_mac_2 = _tpu("tpu_matrix_mac_2", "4.47")

# Every computation kind has its function (checked at import: the table and the API agree).
assert all(f"bmk1880_{k.name}" in globals() for k in KINDS if k is not DEPENDENCY)


def _entry(fn):
    """Every call: arguments that do not bind to its parameters are one BmkError, not a
    TypeError; and, as in appendix A, a call whose ctx is left out uses the context of the open
    bmk1880_enter (choice C-ENTER)."""
    sig = inspect.signature(fn)
    names = list(sig.parameters)
    takes_ctx = bool(names) and names[0] == "ctx" and fn.__name__ != "bmk1880_enter"

    @functools.wraps(fn)
    def call(*args, **kw):
        if takes_ctx and _current and "ctx" not in kw and not (args and isinstance(args[0], bmk1880_context_t)):
            args = (_current[0],) + args
        try:
            sig.bind(*args, **kw)
        except TypeError as e:
            raise BmkError(f"{fn.__name__}: arguments: {e}") from None
        return fn(*args, **kw)
    return call


for _name, _fn in list(globals().items()):
    if _name.startswith("bmk1880_") and inspect.isfunction(_fn):
        globals()[_name] = _entry(_fn)

__all__ = sorted([n for n in globals() if n.startswith("bmk1880_")] + ["BmkError", "PARAM_TYPES"]
                 + [cls.__name__ for cls in PARAM_TYPES.values()])
