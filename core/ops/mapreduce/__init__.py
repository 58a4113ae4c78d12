"""Map-reduce ops: reading splits, group-by-key, partition, merge, write; the values they carry."""
