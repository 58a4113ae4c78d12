"""``tv.image``'s codecs: decode/encode PNG and JPEG, BMP, GIF, ``decode_image``,
``extract_jpeg_shape`` and ``is_jpeg``.
"""
from __future__ import annotations

from ..framework import dtypes as _dt
from ..framework.errors import InvalidArgumentError
from ..framework.graph import name_scope
from ..framework.op_def_library import apply_op
from ..framework.tensor_conversion import convert_to_tensor
from .image_colour import convert_image_dtype

__all__ = ["decode_png", "decode_jpeg", "decode_bmp", "decode_gif", "decode_image", "encode_png",
           "encode_jpeg", "extract_jpeg_shape", "is_jpeg"]


# ---- codecs -------------------------------------------------------------------------------------

def _codec(op_type, contents, attrs, name):
    return apply_op(op_type, [convert_to_tensor(contents, dtype=_dt.string)], attrs,
                    name=name or op_type).outputs[0]


def decode_png(contents, channels=0, dtype=_dt.uint8, name=None):
    """A PNG string to ``[height, width, channels]`` uint8 (or uint16)."""
    dt = _dt.as_dtype(dtype)
    if dt not in (_dt.uint8, _dt.uint16):
        raise InvalidArgumentError(f"decode_png: dtype must be uint8 or uint16, got {dt.name}")
    return _codec("DecodePng", contents, {"channels": int(channels), "dtype": dt.name}, name)


def decode_jpeg(contents, channels=0, ratio=1, fancy_upscaling=True,
                try_recover_truncated=False, acceptable_fraction=1, dct_method="", name=None):
    """A JPEG string to ``[height, width, channels]`` uint8 (``ratio`` downscales by 1/2/4/8
    while decoding)."""
    return _codec("DecodeJpeg", contents, {
        "channels": int(channels), "ratio": int(ratio), "fancy_upscaling": bool(fancy_upscaling),
        "try_recover_truncated": bool(try_recover_truncated),
        "acceptable_fraction": float(acceptable_fraction), "dct_method": str(dct_method)}, name)


def decode_bmp(contents, channels=0, name=None):
    """A BMP string to ``[height, width, channels]`` uint8."""
    return _codec("DecodeBmp", contents, {"channels": int(channels)}, name)


def decode_gif(contents, name=None):
    """A GIF string to ``[frames, height, width, 3]`` uint8."""
    return _codec("DecodeGif", contents, {}, name)


def decode_image(contents, channels=None, dtype=_dt.uint8, name=None, expand_animations=True):
    """Any of PNG, JPEG, GIF or BMP, by its first bytes; a float ``dtype`` gives values in
    [0, 1] (as :func:`convert_image_dtype`)."""
    dt = _dt.as_dtype(dtype)
    raw = _dt.uint16 if dt == _dt.uint16 else _dt.uint8
    out = _codec("DecodeImage", contents, {"channels": int(channels or 0), "dtype": raw.name,
                                           "expand_animations": bool(expand_animations)}, name)
    return out if dt == raw else convert_image_dtype(out, dt)


def encode_png(image, compression=-1, name=None):
    """A uint8/uint16 ``[height, width, channels]`` image to a PNG string."""
    return apply_op("EncodePng", [convert_to_tensor(image)], {"compression": int(compression)},
                    name=name or "EncodePng").outputs[0]


def encode_jpeg(image, format="", quality=95, progressive=False, optimize_size=False,
                chroma_downsampling=True, density_unit="in", x_density=300, y_density=300,
                xmp_metadata="", name=None):
    """A uint8 ``[height, width, 1 or 3]`` image to a JPEG string."""
    return apply_op("EncodeJpeg", [convert_to_tensor(image)], {
        "format": format, "quality": int(quality), "progressive": bool(progressive),
        "optimize_size": bool(optimize_size), "chroma_downsampling": bool(chroma_downsampling)},
        name=name or "EncodeJpeg").outputs[0]


def extract_jpeg_shape(contents, output_type=_dt.int32, name=None):
    """``[height, width, channels]`` of a JPEG, read from its header."""
    return _codec("ExtractJpegShape", contents,
                  {"output_type": _dt.as_dtype(output_type).name}, name)


def is_jpeg(contents, name=None):
    """Whether a string starts with JPEG's magic bytes."""
    from ..ops import equal, substr
    with name_scope(name or "is_jpeg"):
        return equal(substr(convert_to_tensor(contents, dtype=_dt.string), 0, 3),
                     convert_to_tensor(b"\xff\xd8\xff", dtype=_dt.string))
