"""Benchmarks: minibroker side by side with the librdkafka mock cluster, in one run.

`python -m bench.core` runs them and writes bench/RESULTS.md.
"""
