"""Benchmark harness for gpufit (issue #5): `make bench` or `python -m bench.run [--quick]`."""
