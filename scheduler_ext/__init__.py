"""``tensorvm.scheduler_ext``: Dask scheduler/worker plugins — the job registry and the
tensorvm page of the Dask dashboard (DESIGN.md "Monitoring and the CLI"); lands with its own
issue."""
