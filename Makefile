# Ethos-U85 TLM, cocotb bench and RTL stand-in.
#   make sim   run the cocotb regression (SIM=verilator|icarus DUT=rtl|tlm WAVES=1 SEED=n TESTS=pattern NPU_MODEL=x_vela.npz CONFIG=ethos-u85-N)
#   make test  everything CI runs; make lint: RTL checks; make bench; make fuzz N=...
#   make mutate  mutation testing of the RTL stand-in's datapath (MUTANTS=n sampled, default 40)
SHELL   := /bin/bash
PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed

SIM     ?= verilator
DUT     ?= rtl
WAVES   ?= 0
SEED    ?=
TESTS   ?=
NPU_MODEL ?=
NPU_MODEL_REF ?=
CONFIG  ?=
N       ?= 20000

.PHONY: all venv sim test lint fuzz bench mutate clean distclean
all: test

venv: $(STAMP)
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	@touch $@

sim: $(STAMP)
	$(PY) -m tb.run --sim $(SIM) --dut $(DUT) --waves $(WAVES) \
	    $(if $(SEED),--seed $(SEED)) $(if $(TESTS),--tests '$(TESTS)') $(if $(NPU_MODEL),--npu-model '$(NPU_MODEL)') $(if $(NPU_MODEL_REF),--npu-model-ref '$(NPU_MODEL_REF)') $(if $(CONFIG),--config $(CONFIG))

test: $(STAMP)
	$(PY) -m pytest -q tests

# mutation testing of the stand-in's datapath against a fast DUT=rtl regression (Icarus)
MUTANTS ?= 40
mutate: $(STAMP)
	$(PY) tools/mutate.py -n $(MUTANTS) $(if $(SEED),--seed $(SEED))

# RTL: verilator --lint-only -Wall, iverilog -g2012, Yosys (no latches), generated includes up to date
lint: $(STAMP)
	$(PY) -m pytest -q tests/test_rtl_lint.py

# Hostile-input stream fuzzer: N cases (default 20000), SEED=s to reproduce, JOBS=j workers
fuzz: $(STAMP)
	$(PY) -m tlm.fuzz --cases $(N) $(if $(SEED),--seed $(SEED)) $(if $(JOBS),--jobs $(JOBS))

# TLM vs LiteRT (BUILTIN_REF, XNNPACK) on a MobileNet-sized net; BENCH_ARGS e.g. --config ethos-u85-512 --profile
bench: $(STAMP)
	$(PY) tools/bench.py $(BENCH_ARGS)

clean:
	rm -rf sim_build build .pytest_cache results.xml *.vcd *.fst
distclean: clean
	rm -rf $(VENV)
