"""TensorFlow 1.x's ``tensorflow.examples.tutorials`` helpers, for its tutorial programs run
unchanged through :mod:`tensorvm.tf_api.tf_shim`: :mod:`tensorvm.tutorials.mnist.input_data`
(``read_data_sets``) and :mod:`tensorvm.tutorials.mnist.mnist` (the tutorials' model
functions)."""
