"""The NE16 bench: port table, TLM behind the pins, host driver, scoreboard, coverage, tests."""
