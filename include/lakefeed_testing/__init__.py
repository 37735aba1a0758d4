"""Test data shaped like the services' own files (the blob change feed, the CockroachDB sink, a Delta source
with its change data feed), for the tests, the demo and the benchmarks. The runtime never imports it."""
