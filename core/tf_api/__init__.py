"""The TF 1.x surface built on the ops: layers, losses, metrics, image, summary, lookup,
recurrent networks, tf.data's namespace, tv.compat, the TF shim …"""
