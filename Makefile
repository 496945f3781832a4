# NPU TLMs, cocotb benches and RTL stand-ins (devices: tlm/<device>/, registry in tlm/core/registry.py).
#   make sim   run a device's cocotb regression (DEVICE=ethos-u85 SIM=verilator|icarus DUT=rtl|tlm
#              WAVES=1 SEED=n TESTS=pattern CONFIG=name TRACE=path NPU_MODEL=x_vela.npz JOBS=n)
#   make test  everything CI runs; make lint: ruff + RTL checks; make bench; make fuzz N=...
#   make mutate  mutation testing of a stand-in's datapath (DEVICE=ethos-u85|dtpu, MUTANTS=n sampled, default 40)
SHELL   := /bin/bash
PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed

DEVICE  ?= ethos-u85
SIM     ?= verilator
DUT     ?= rtl
WAVES   ?= 0
SEED    ?=
TESTS   ?=
CONFIG  ?=
TRACE   ?=
NPU_MODEL ?=
NPU_MODEL_REF ?=
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
	$(PY) -m tb.core.run $(if $(TRACE),,--device $(DEVICE)) --sim $(SIM) --dut $(DUT) --waves $(WAVES) \
	    $(if $(TRACE),--trace '$(TRACE)') $(if $(CONFIG),--config '$(CONFIG)') $(if $(SEED),--seed $(SEED)) $(if $(JOBS),--jobs $(JOBS)) $(if $(TESTS),--tests '$(TESTS)') $(if $(NPU_MODEL),--npu-model '$(NPU_MODEL)') $(if $(NPU_MODEL_REF),--npu-model-ref '$(NPU_MODEL_REF)') $(foreach d,$(DEFINES),--define '$(d)')

# pytest-xdist: TEST_JOBS workers (default: one per core), builds shared under a lock
# (tb/core/run.py BuildLock), tests that depend on each other's files in one xdist_group
TEST_JOBS ?= auto
test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest -q -n $(TEST_JOBS) --dist loadgroup tests

# mutation testing of the stand-in's datapath (DEVICE=ethos-u85 or dtpu) against a fast DUT=rtl regression (Icarus)
MUTANTS ?= 40
mutate: $(STAMP)
	$(PY) -m tools.mutate --device $(DEVICE) -n $(MUTANTS) $(if $(SEED),--seed $(SEED))

# Python: ruff (pyproject.toml); RTL: verilator --lint-only -Wall, iverilog -g2012, Yosys (no
# latches), generated includes up to date
lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest -q tests/ethos_u85/test_rtl_lint.py

# Hostile-input stream fuzzer: N cases (default 20000), SEED=s to reproduce, JOBS=j workers
fuzz: $(STAMP)
	$(PY) -m tlm.core.fuzz --device $(DEVICE) --cases $(N) $(if $(SEED),--seed $(SEED)) $(if $(JOBS),--jobs $(JOBS))

# Ethos-U85: TLM vs LiteRT (BUILTIN_REF, XNNPACK) and bench vs bare AXI loopback; BENCH_ARGS e.g.
# --config ethos-u85-512 --profile. DTPU: the RTL's MACs/cycle vs its peak on micro_speech's
# depthwise layer and stream beats/s (DTPU_BENCH_ARGS e.g. --sim icarus --layers person_detect:1,2)
bench: $(STAMP)
	$(PY) -m tools.bench $(BENCH_ARGS)
	$(PY) -m tools.bench_dtpu $(DTPU_BENCH_ARGS)

clean:
	rm -rf sim_build build .pytest_cache results.xml *.vcd *.fst
distclean: clean
	rm -rf $(VENV)
