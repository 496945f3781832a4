"""cocotb test modules of single stand-in blocks (run by tests/test_rtl_units.py)."""
