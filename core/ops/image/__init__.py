"""Image kernels: resizing, colour spaces, boxes, codecs (tv.image is in tf_api)."""
