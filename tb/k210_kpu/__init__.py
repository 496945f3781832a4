"""The K210 KPU bench: port table, TLM behind the pins, scoreboard, cocotb tests."""
