"""AXI agents (device-neutral): subordinate memories, a passive monitor, binding by pin map.

* ``signals``: the AXI5 signal list, ``PortView``, ``port_present``/``port_signals``/``port_drivers``;
* ``burst``: ``AxiBurst`` (one burst as recorded) and the beat arithmetic of AXI A3.4;
* ``memory``: ``BenchMemory`` (the system memory: sparse, faults per port);
* ``subordinate``: ``AxiSubordinate`` (one port, cocotbext-axi channel models) and ``AxiMemory``
  (every port, one memory; lean subordinates by default);
* ``lean``: ``LeanSubordinate`` (one port, raw pins, one coroutine for all ports);
* ``monitor``: ``AxiMonitor`` (bursts rebuilt from the pins, VALID/payload rules).
"""
from tb.agents.axi.burst import (
                                 BURST_FIXED,
                                 BURST_INCR,
                                 BURST_WRAP,
                                 AxiBurst,
                                 beat_addr,
                                 beat_span,
                                 lane_mask,
                                 random_pause,
                                 strobe_runs,
)
from tb.agents.axi.memory import BenchFault, BenchMemory
from tb.agents.axi.monitor import AxiMonitor
from tb.agents.axi.signals import AXI5_SIGNALS, PortView, pin_int, port_drivers, port_present, port_signals
from tb.agents.axi.subordinate import AxiMemory, AxiSubordinate, BareRam, subordinate_impl

__all__ = ["AXI5_SIGNALS", "AxiBurst", "AxiMemory", "AxiMonitor", "AxiSubordinate", "BareRam", "BURST_FIXED",
           "BURST_INCR", "BURST_WRAP", "BenchFault", "BenchMemory", "PortView", "beat_addr", "beat_span",
           "lane_mask", "pin_int", "port_drivers", "port_present", "port_signals", "random_pause",
           "strobe_runs", "subordinate_impl"]
