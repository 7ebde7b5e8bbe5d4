# Benchmarks (issue 8): `include benchmarks/bench.mk` from the Makefile. Not part of `make test`.
# Needs PY (and STAMP, the venv's install stamp) from the including Makefile.
.PHONY: bench bench-quick

bench: $(STAMP) ## Run every benchmark, full settings (~40 min, quiet machine); README table
	$(PY) -m benchmarks.run_all $(BENCH_ARGS)

bench-quick: $(STAMP) ## Run every benchmark with tiny settings (checks the scripts)
	$(PY) -m benchmarks.run_all --quick $(BENCH_ARGS)
