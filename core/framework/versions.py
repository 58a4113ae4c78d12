"""The version of tensorvm, in a leaf (TensorFlow's ``python/framework/versions.py``): the
façade's ``tv.__version__`` and the names that cross the wire to Dask workers
(:mod:`tensorvm.runtime.wire_names`) read it from here.

>>> import tensorvm as tv
>>> tv.__version__ == __version__
True
"""
__version__ = "0.1.0"
