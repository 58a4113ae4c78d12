"""tf.data: Dataset (graph side), its pipeline stages and the iterator resource."""
