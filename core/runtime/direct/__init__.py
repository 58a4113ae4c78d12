"""The direct data plane: partitions registered once on the workers and run by one message per
step, tensors exchanged through a per-worker rendezvous."""
