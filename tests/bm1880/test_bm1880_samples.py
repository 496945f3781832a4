"""The guide's sample programs (appendix A) and the chapter-3 workflow snippet, ported to
Python and checked.

The appendix calls an older, context-less form of the API (`bmk1880_tl_load(t, ...)`,
`bmk1880_acquire_cmdbuf(&size)`, `bmk1880_exit()`). Between `bmk1880_enter` and
`bmk1880_exit` the model takes these calls as written (choice C-ENTER), so the ports below
are line for line; `bmk1880_tl_load` is `bmk1880_gdma_load`.
The samples print bytes but show no expected output; the checks are that the printout is
exactly the buffer, in the sample's format, and that the buffer does what the program asked.
"""
import numpy as np

from tests.bm1880 import bm1880_ref as ref
from tlm.bm1880 import (CTRL_NULL, FMT_I8, Bm1880, bmk1880_acquire_cmdbuf, bmk1880_cleanup, bmk1880_current,
                        bmk1880_enter, bmk1880_exit, bmk1880_gdma_load, bmk1880_info_t, bmk1880_register,
                        bmk1880_reset, bmk1880_tl_prealloc, shape_t4)
from tlm.bm1880.descriptors import decode


def print_cmdbuf(cmdbuf, size):
    """A.1's print_cmdbuf. The C original prints `char` values with %02x, which sign-extends
    bytes >= 0x80 to ffffffXX where char is signed (an erratum); this port prints the bytes."""
    print("print_cmdbuf: the emitted bytes are:")
    p = bytes(cmdbuf)
    for i in range(0, size, 16):
        print("\t" + "".join(f"{p[i + j]:02x} " for j in range(min(16, size - i))))


def expected_print(buf: bytes) -> str:
    lines = ["print_cmdbuf: the emitted bytes are:"]
    lines += ["\t" + " ".join(f"{b:02x}" for b in buf[i:i + 16]) + " " for i in range(0, len(buf), 16)]
    return "\n".join(lines) + "\n"


def do_print():
    cmdbuf, size = bmk1880_acquire_cmdbuf()
    print_cmdbuf(cmdbuf, size)
    return bytes(cmdbuf)


def do_compute():
    s = shape_t4(1, 32, 8, 8)
    t = bmk1880_tl_prealloc(0, s, FMT_I8)
    bmk1880_gdma_load(t, 0x1000, CTRL_NULL)
    return t


def new_info(size=4096):
    info = bmk1880_info_t()
    info.chip_version = 1880
    info.cmdbuf_size = size
    info.cmdbuf = bytearray(info.cmdbuf_size)
    return info


def check_load(buf: bytes) -> None:
    """The buffer loads the (1, 32, 8, 8) tensor at 0x1000 into lmem address 0."""
    m = Bm1880()
    v = np.random.default_rng(7).integers(-128, 128, 32 * 64)
    m.gmem.write(0x1000, (v & 0xFF).astype(np.uint8).tobytes())
    assert m.run(buf).ok
    p = ref.params(m.chip)
    got = ref.lmem_get(m.lmem, p, 0, ref.default_lmem_stride(p, (1, 32, 8, 8), False), (1, 32, 8, 8), True)
    assert np.array_equal(got.reshape(-1), v)


def test_a1_print_generated_bytes(capsys):
    info = new_info()
    ctx = bmk1880_register(info)
    bmk1880_enter(ctx)
    buf = do_print()
    bmk1880_exit()
    bmk1880_cleanup(ctx)
    assert buf == b""
    assert capsys.readouterr().out == "print_cmdbuf: the emitted bytes are:\n"


def test_a2_effect_of_reset(capsys):
    info = new_info()
    ctx = bmk1880_register(info)
    bmk1880_enter(ctx)
    do_compute()
    first = do_print()
    bmk1880_reset()
    second = do_print()
    bmk1880_exit()
    bmk1880_cleanup(ctx)
    out = capsys.readouterr().out
    assert out == expected_print(first) + expected_print(b"")
    assert len(first) == 40 and second == b""
    (rec,) = decode(first)
    assert rec.kind.call == "bmk1880_gdma_load" and rec.args["gaddr"] == 0x1000
    assert info.cmdbuf[:len(first)] == first                 # in the user's buffer, as 3.3 says
    check_load(first)


def test_a3_multiple_contexts(capsys):
    info_0, info_1 = new_info(), new_info()
    ctx_0, ctx_1 = bmk1880_register(info_0), bmk1880_register(info_1)
    bufs = []
    for ctx in (ctx_0, ctx_1):
        bmk1880_enter(ctx)
        do_compute()
        bufs.append(do_print())
        bmk1880_exit()
    bmk1880_cleanup(ctx_0)
    bmk1880_cleanup(ctx_1)
    assert bufs[0] == bufs[1] and len(bufs[0]) == 40
    assert info_0.cmdbuf is not info_1.cmdbuf and info_0.cmdbuf[:40] == info_1.cmdbuf[:40]
    assert capsys.readouterr().out == expected_print(bufs[0]) * 2
    check_load(bufs[0])


def test_chapter3_workflow():
    """register -> computation calls -> acquire -> process -> reset -> ... -> cleanup."""
    info = new_info()
    ctx = bmk1880_register(info)
    t = bmk1880_tl_prealloc(ctx, 0, shape_t4(1, 32, 8, 8), FMT_I8)
    bmk1880_gdma_load(ctx, t, 0x1000, CTRL_NULL)
    cmdbuf, size = bmk1880_acquire_cmdbuf(ctx)
    check_load(bytes(cmdbuf))
    bmk1880_reset(ctx)
    bmk1880_gdma_load(ctx, t, 0x1000, CTRL_NULL)
    bmk1880_gdma_load(ctx, t, 0x1000, CTRL_NULL)
    cmdbuf2, size2 = bmk1880_acquire_cmdbuf(ctx)
    assert size2 == 2 * size and bytes(cmdbuf2) == bytes(cmdbuf) * 2
    check_load(bytes(cmdbuf2))
    bmk1880_cleanup(ctx)


def test_context_less_calls_need_an_entered_context():
    """Outside bmk1880_enter / bmk1880_exit a call without ctx, or with arguments that do not fit,
    is one BmkError naming the call (choice C-ENTER)."""
    import pytest
    from tlm.bm1880 import BmkError
    info = new_info()
    ctx = bmk1880_register(info)
    with pytest.raises(BmkError, match=r"^bmk1880_acquire_cmdbuf: arguments: missing a required argument: 'ctx'$"):
        bmk1880_acquire_cmdbuf()
    bmk1880_enter(ctx)
    t = bmk1880_tl_prealloc(0, shape_t4(1, 32, 8, 8), FMT_I8)
    with pytest.raises(BmkError, match=r"^bmk1880_gdma_load: arguments: missing a required argument: 'ctrls'$"):
        bmk1880_gdma_load(t, 0x1000)
    with pytest.raises(BmkError, match=r"^bmk1880_gdma_load: arguments: too many positional arguments$"):
        bmk1880_gdma_load(ctx, t, 0x1000, CTRL_NULL, 7)
    assert bmk1880_current() is ctx and bmk1880_acquire_cmdbuf()[1] == 0
    bmk1880_exit()
    bmk1880_cleanup(ctx)
