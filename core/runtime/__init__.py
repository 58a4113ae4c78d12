"""Running steps: the session, its backends, the Dask plane, the direct plane and the mapping
of a cluster's logical tasks onto Dask workers."""
