"""``tensorflow.examples.tutorials.mnist``: :mod:`.input_data` reads MNIST's IDX files;
:mod:`.mnist` builds the tutorials' two-layer model (imported on demand)."""
from . import input_data  # noqa: F401
