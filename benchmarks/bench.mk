# Benchmarks (issue 8): `include benchmarks/bench.mk` from the Makefile. Not part of `make test`.
# Needs PY (and STAMP, the venv's install stamp) from the including Makefile.
.PHONY: bench bench-quick bench-seed001

bench: $(STAMP) ## Run every benchmark, full settings (~40 min, quiet machine); README table
	$(PY) -m benchmarks.run_all $(BENCH_ARGS)

bench-quick: $(STAMP) ## Run every benchmark with tiny settings (checks the scripts)
	$(PY) -m benchmarks.run_all --quick $(BENCH_ARGS)

bench-seed001: $(STAMP) ## Ours vs seed 001's ResNet50 trainer at equal work (~15 min on 2 CPUs)
	$(PY) -m benchmarks.bench_seed001 $(BENCH_ARGS)
