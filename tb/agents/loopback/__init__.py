"""A bare AXI loopback design and its cocotb tests (bench throughput reference, AXI memory model tests)."""
