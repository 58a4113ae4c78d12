"""Reader ops: TF 1.x readers, whole files, parsing (CSV, raw, tf.Example)."""
