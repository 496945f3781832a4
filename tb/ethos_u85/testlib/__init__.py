"""Helpers of the Ethos-U85 cocotb tests (tb/ethos_u85/tests), one concern a module; no test
module imports another.

* ``marks``: DUT, timeouts, ``rtl_unsupported`` / ``known_bug`` (checked expected failures,
  tb/core/expect.py), skips, seeds;
* ``regs``: register facts derived from the tables (offsets, STATUS masks, channels, PROT rules);
* ``memmap``: the bench's memory map and its programming; TLM runs with the same map;
* ``streams``: command streams (feature maps, DMA with the DMA reference as oracle, kernel ops);
* ``hostile``: the hostile-input tests' pin monitor, reset-window sync and fault checks;
* ``jobs``: a DMA job through the host driver, burst keys;
* ``bugs``: bugs planted in the TLM adapter to prove the checkers fire (DUT=tlm);
* ``netjob``: a Vela network through the pins (``refusing_reference``: the reference TLM refuses
  the operation the stand-in refuses);
* ``rtl_support``: what the RTL stand-in claims (``first_unsupported``), ``Refused``, ``judge``.
"""
