"""``tensorvm.jobs``: the ``tensorvm`` command line and the bundled batch jobs."""
