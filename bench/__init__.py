"""Benchmarks: minibroker side by side with the librdkafka mock cluster, in one run.

`python -m bench.micro` runs the broker core ones and writes bench/RESULTS.md; bench/harness.py
holds what they all share.
"""
