"""cocotb test modules of the bench; tb/run.py runs every ``test_*.py`` module here."""
