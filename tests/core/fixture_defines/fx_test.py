"""cocotb module of tests/core/test_fixture_rebuild.py: the DUT's value is FX_WANT."""
import os

import cocotb
from cocotb.triggers import Timer


@cocotb.test()
async def value_is_the_define(dut):
    await Timer(1, "ns")
    assert int(dut.value.value) == int(os.environ["FX_WANT"])
