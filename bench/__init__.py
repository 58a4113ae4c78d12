"""Benchmarks: the same workload on tensorvm and its peers, ratios printed (``make bench``)."""
