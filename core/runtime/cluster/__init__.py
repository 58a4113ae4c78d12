"""Clusters: the logical ClusterSpec, which Dask worker runs each device, local clusters of
worker processes and the scheduler's events."""
