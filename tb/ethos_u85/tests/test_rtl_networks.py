"""The project's Vela catalog (tests/nets) through the pins of the RTL stand-in (DUT=rtl).

Every network is compiled with Vela for the bench's configuration (``make sim ...
CONFIG=ethos-u85-N``; tb.run builds the stand-in with that MACS) and a memory mode, loaded
and started as tlm.ethos_u85.runner does (tb/ethos_u85/testlib/netjob.py), and checked by the scoreboard's TLM:

* a network made only of what the stand-in claims (tb/ethos_u85/testlib/rtl_support.py, the README's
  support table) must run to its end on LiteRT's inputs with every AXI write, STATUS, QREAD
  and IRQ equal to the TLM's and every output byte the TLM's and LiteRT's (tests/nets
  ``VELA_VS_LITERT`` names the networks where Vela's stream and LiteRT disagree);
* any other network must stop with cmd_parse_error with QREAD at exactly the first operation
  rtl_support names, having written nothing the TLM does not write before that operation
  (the scoreboard allows no write outside the TLM's footprint).

A quick list by default (a few networks with CONV/DEPTHWISE, pooling, elementwise and an
OFM transpose); every NPU network of the catalog with ``KERNEL_NETS=all``
(``KERNEL_NETS=name,name`` picks some). DUT=tlm: skipped (the TLM runs every network;
tests/ethos_u85/test_nets.py covers it against LiteRT).
"""
from __future__ import annotations

import os
import random

import cocotb
from cocotb.triggers import ClockCycles

from tb.ethos_u85.env import Env
from tb.ethos_u85.testlib.hostile import soft_reset
from tb.ethos_u85.testlib.marks import DUT, named, rtl_unsupported, skip_now
from tb.ethos_u85.testlib.netjob import check_litert, refusing_reference, run_network, vela_model
from tb.ethos_u85.testlib.rtl_support import UNCLAIMED_NET, Refused, first_unsupported, judge

# dwconv_mult3_c3: a DEPTHWISE, then a POOL transposing an NHCWB16 OFM (npu_ofm_addr.v); the
# last one is refused (a matrix multiply)
QUICK = ("conv2d_3x3_s2_same_relu6_pc", "dwconv_5x5_s2_c33", "conv2d_3x3_int16", "conv2d_3x3_c7to21_odd",
         "avgpool_3x3_s1_same", "add_bcast_relu", "resize_nearest_8x8to12x12", "dwconv_mult3_c3",
         UNCLAIMED_NET)
SKIP = ("mobilenet_v2_0p5_224",)           # the bench network (minutes of simulation)


def _catalog() -> list:
    from tests.nets import catalog
    return [n for n in catalog.NAMES if n not in SKIP]


def _names() -> list:
    sel = os.environ.get("KERNEL_NETS", "")
    if sel == "all":
        return _catalog()
    if sel:
        return [n for n in sel.split(",") if n]
    return list(QUICK)


@cocotb.parametrize(mode=named(["default", "sram_only"]))
@cocotb.test(timeout_time=36000, timeout_unit="sec")
async def test_catalog_networks(dut, mode):
    """Catalog networks on the stand-in: claimed ones run clean, the others stop with
    cmd_parse_error at the first operation the stand-in does not claim."""
    if DUT != "rtl":
        skip_now("the RTL stand-in's support claim (DUT=rtl)")

    from tests import nets
    from tlm.ethos_u85.config import get_config
    from tlm.ethos_u85.vela import load

    env = Env(dut, reference_model=True)
    await env.start()
    macs = get_config(env.config).macs
    rng = random.Random(0x5eed ^ macs)
    names = _names()
    ran = refused = 0
    for name in names:
        path = vela_model(name, env.config, mode)
        model = load(path)
        miss = first_unsupported(model.command_words, macs)
        if miss is None:
            # LiteRT's inputs; the outputs must equal LiteRT's as well as the TLM's (but for
            # the networks where Vela's stream and LiteRT disagree, tests/nets VELA_VS_LITERT)
            inputs, lit = nets.reference(nets.build(name))
            res = await run_network(env, path, rng, inputs=inputs)
            litert = check_litert(name, res.outputs, lit) is None
            ran += 1
            cocotb.log.info("%s (%s, %s): %d output bytes match the TLM%s; %d cycles; %s", name, env.config,
                            mode, res.output_bytes, " and LiteRT" if litert else "", res.cycles, res.ops)
        else:
            off, op, why = miss
            # the scoreboard's reference refuses the same operation (cmd_parse_error, QREAD at
            # it), so everything before it is compared as usual; judge() holds the stop to
            # exactly that operation with the scoreboard clean
            try:
                with refusing_reference(env, off):
                    await run_network(env, path, rng)
            except Refused as e:
                judge(e)
            else:
                raise AssertionError(f"{name}: ran to its end, but the stand-in does not claim "
                                     f"{op} at 0x{off:x} ({why}): update rtl_support and the README")
            await soft_reset(env, 0b01)                      # clear the sticky cmd_parse_error
            refused += 1
            cocotb.log.info("%s (%s, %s): stopped with cmd_parse_error at %s 0x%x as claimed (%s)", name,
                            env.config, mode, op, off, why)
        await ClockCycles(env.clock, 4)
    cocotb.log.info("%d networks ran to their end, %d refused as claimed (%s, %s)", ran, refused,
                    env.config, mode)
    assert ran > 0, "no network of the list is claimed by the stand-in"
    env.finish()


@cocotb.test(timeout_time=600, timeout_unit="sec")
@rtl_unsupported
async def test_unclaimed_network(dut):
    """A catalog network with an operation the stand-in does not claim (rtl_support's
    UNCLAIMED_NET: a chained OFM larger than the chaining FIFOs). DUT=tlm:
    runs to its end, every output byte equal to the TLM's and LiteRT's. DUT=rtl: an expected
    failure only if the stand-in stops with cmd_parse_error at exactly the operation
    rtl_support names with the scoreboard clean (``rtl_unsupported``); anything else fails."""
    import contextlib

    import numpy as np

    from tests import nets
    from tlm.ethos_u85.config import get_config
    from tlm.ethos_u85.vela import load

    env = Env(dut, reference_model=True)
    await env.start()
    path = vela_model(UNCLAIMED_NET, env.config)
    miss = first_unsupported(load(path).command_words, get_config(env.config).macs)
    assert miss is not None, f"{UNCLAIMED_NET}: the stand-in claims it now; pick a network it refuses"
    inputs, want = nets.reference(nets.build(UNCLAIMED_NET))
    ctx = refusing_reference(env, miss[0]) if DUT == "rtl" else contextlib.nullcontext()
    with ctx:
        res = await run_network(env, path, random.Random(0), inputs=inputs)
    for i, (got, lit) in enumerate(zip(res.outputs, want, strict=True)):
        lit = np.asarray(lit).reshape(-1)
        assert got.dtype == lit.dtype and got.size == lit.size, (i, got.dtype, lit.dtype, got.size, lit.size)
        bad = np.flatnonzero(got != lit)
        assert bad.size == 0, f"output{i}: {bad.size} of {got.size} elements differ from LiteRT"
    env.finish()
