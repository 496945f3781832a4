"""cocotb test modules of single stand-in blocks (run by tests/ethos_u85/test_rtl_units.py)."""
