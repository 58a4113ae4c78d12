"""Image codecs on string tensors: ``DecodePng``, ``DecodeJpeg``, ``DecodeBmp``, ``DecodeGif``,
``DecodeImage`` (sniffs the format), ``EncodePng``, ``EncodeJpeg`` and ``ExtractJpegShape``,
through Pillow (libpng, libjpeg-turbo, as TF's kernels use).

Semantics follow TF 1.x: ``channels=0`` keeps the file's channels (a palette PNG becomes RGB, or
RGBA with transparency), 1 gives grey, 3 RGB, 4 RGBA; 16-bit PNGs decode to uint16 with
``dtype=uint16`` (8-bit files are scaled by 257, 16-bit ones shifted down for uint8, as TF
does). Grey from a colour PNG uses libpng's fixed-point luma, as TF's decoder asks for it; grey from
a colour JPEG is the decoder's luma channel, as libjpeg gives TF. JPEGs always decode with the
accurate integer DCT: ``dct_method="INTEGER_FAST"`` (TF's default) can differ from TF's pixels by
a unit or two. A GIF decodes to ``[frames, height, width, 3]``.

Bad bytes raise ``InvalidArgumentError`` naming the op and the format expected. Strings live in
host memory, so every op here is CPU-only (placement keeps them off GPUs, naming why).

>>> import numpy as np, tensorvm as tv
>>> img = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
>>> with tv.Session() as s: bool((s.run(tv.image.decode_png(tv.image.encode_png(img))) == img).all())
True
"""
from __future__ import annotations

import io

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.op_registry import register_op

__all__: list[str] = []  # the public functions live in tensorvm.tf_api.image

_HOST = "image codecs read and write string tensors in host memory (Pillow)"
_SIGNATURES = {"png": b"\x89PNG\r\n\x1a\n", "jpeg": b"\xff\xd8\xff", "gif": b"GIF8",
               "bmp": b"BM"}


def _bytes(contents, op) -> bytes:
    arr = np.asarray(contents, dtype=object)
    if arr.ndim != 0:
        raise InvalidArgumentError(f"{op}: contents must be a scalar string, got shape "
                                   f"{list(arr.shape)}")
    v = arr.item()
    return v.encode("utf-8", "surrogateescape") if isinstance(v, str) else bytes(v)


def sniff(data: bytes) -> str | None:
    """The image format of ``data`` from its first bytes (png, jpeg, gif, bmp), or None."""
    return next((k for k, sig in _SIGNATURES.items() if data.startswith(sig)), None)


def _open(data: bytes, fmt: str, op: str):
    from PIL import Image, UnidentifiedImageError
    if sniff(data) != fmt:
        raise InvalidArgumentError(f"{op}: the contents are not a {fmt.upper()} image (they "
                                   f"start with {data[:8]!r})")
    try:
        img = Image.open(io.BytesIO(data))
        img.load()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise InvalidArgumentError(f"{op}: invalid {fmt.upper()} data: {e}") from None
    return img


def _check_channels(channels, allowed, op):
    if channels not in allowed:
        raise InvalidArgumentError(f"{op}: channels must be one of {list(allowed)}, got "
                                   f"{channels}")


def _png_gray(rgb: np.ndarray) -> np.ndarray:
    """Grey as TF's PNG decoder gets it from libpng: ``png_set_rgb_to_gray(…, 0.299, 0.587)``
    makes the 15-bit coefficients 9797/19234/3737, applied without rounding; a grey pixel
    stays as it is."""
    r, g, b = (rgb[..., i].astype(np.int64) for i in range(3))
    grey = (9797 * r + 19234 * g + 3737 * b) >> 15
    same = (r == g) & (g == b)
    return np.where(same, r, grey).astype(rgb.dtype)[..., None]


def _as_array(img) -> np.ndarray:
    """The pixels of a Pillow image as [h, w, c] uint8 or uint16, keeping its channels."""
    mode = img.mode
    if mode == "P":
        img = img.convert("RGBA" if "transparency" in img.info else "RGB")
    elif mode in ("I;16", "I;16B", "I;16L", "I"):
        a = np.asarray(img).astype(np.uint16)
        return a[..., None]
    elif mode in ("1", "CMYK", "YCbCr", "LAB", "HSV", "F"):
        img = img.convert("L" if mode in ("1", "F") else "RGB")
    a = np.asarray(img)
    return a[..., None] if a.ndim == 2 else a


def _to_channels(a: np.ndarray, channels: int, grey_fn) -> np.ndarray:
    have = a.shape[-1]
    if channels in (0, have):
        return a
    if channels == 1:
        return grey_fn(a[..., :3]) if have >= 3 else a[..., :1]
    base = a[..., :1].repeat(3, axis=-1) if have <= 2 else a[..., :3]
    if channels == 3:
        return base
    alpha = (a[..., -1:] if have in (2, 4)
             else np.full(a.shape[:-1] + (1,), np.iinfo(a.dtype).max, a.dtype))
    return np.concatenate([base, alpha], axis=-1)


def _to_dtype(a: np.ndarray, dtype: str) -> np.ndarray:
    """8-bit pixels as uint16 (scaled by 257) or 16-bit ones as uint8 (shifted), as TF's PNG
    decoder converts; floats are made by ``tv.image.decode_image``'s convert_image_dtype."""
    want = np.dtype(dtype)
    if a.dtype == want:
        return a
    if want == np.uint16:
        return a.astype(np.uint16) * np.uint16(257)
    return (a >> 8).astype(np.uint8)


def _decode_png_kernel(contents, *, channels, dtype):
    op = "DecodePng"
    _check_channels(channels, (0, 1, 2, 3, 4), op)
    a = _as_array(_open(_bytes(contents, op), "png", op))
    return _to_dtype(_to_channels(a, channels, _png_gray), dtype)


def _jpeg_image(data, op, channels, ratio):
    img = _open(data, "jpeg", op)
    if ratio not in (1, 2, 4, 8):
        raise InvalidArgumentError(f"{op}: ratio must be 1, 2, 4 or 8, got {ratio}")
    w, h = img.size
    want = (-(-w // ratio), -(-h // ratio))
    mode = "L" if channels == 1 else ("RGB" if img.mode != "L" or channels == 3 else "L")
    if ratio != 1 or mode != img.mode:
        from PIL import Image
        img = Image.open(io.BytesIO(data))  # a fresh decoder: draft() must come before load()
        img.draft(mode, want)  # libjpeg scales and converts while decoding, as TF asks it to
        img.load()
    return img


def _decode_jpeg_kernel(contents, *, channels, ratio, fancy_upscaling, try_recover_truncated,
                        acceptable_fraction, dct_method):
    op = "DecodeJpeg"
    _check_channels(channels, (0, 1, 3), op)
    if dct_method not in ("", "INTEGER_FAST", "INTEGER_ACCURATE"):
        raise InvalidArgumentError(f"{op}: dct_method must be '', 'INTEGER_FAST' or "
                                   f"'INTEGER_ACCURATE', got {dct_method!r}")
    img = _jpeg_image(_bytes(contents, op), op, channels, ratio)
    a = _as_array(img)
    return _to_channels(a, channels, lambda rgb: rgb[..., :1])


def _decode_bmp_kernel(contents, *, channels):
    op = "DecodeBmp"
    _check_channels(channels, (0, 3, 4), op)
    a = _as_array(_open(_bytes(contents, op), "bmp", op))
    return _to_channels(a, channels, _png_gray)


def _decode_gif_kernel(contents):
    op = "DecodeGif"
    img = _open(_bytes(contents, op), "gif", op)
    frames = []
    for i in range(getattr(img, "n_frames", 1)):
        img.seek(i)
        frames.append(np.asarray(img.convert("RGB")))
    return np.stack(frames)


def _decode_image_kernel(contents, *, channels, dtype, expand_animations):
    op = "DecodeImage"
    data = _bytes(contents, op)
    fmt = sniff(data)
    if fmt is None:
        raise InvalidArgumentError(f"{op}: unknown image file format: the contents start with "
                                   f"{data[:8]!r}; one of JPEG, PNG, GIF, BMP required")
    if fmt == "gif":
        if channels not in (0, 3):
            raise InvalidArgumentError(f"{op}: channels must be 0 or 3 for a GIF, got "
                                       f"{channels}")
        a = _decode_gif_kernel(contents)
        a = a if expand_animations else a[0]
    elif fmt == "png":
        a = _decode_png_kernel(contents, channels=channels, dtype="uint16"
                               if np.dtype(dtype) == np.uint16 else "uint8")
    elif fmt == "jpeg":
        a = _decode_jpeg_kernel(contents, channels=channels, ratio=1, fancy_upscaling=True,
                                try_recover_truncated=False, acceptable_fraction=1.0,
                                dct_method="")
    else:
        a = _decode_bmp_kernel(contents, channels=channels)
    return _to_dtype(a, dtype)


def _encode_png_kernel(image, *, compression):
    op = "EncodePng"
    from PIL import Image
    a = np.asarray(image)
    if a.ndim != 3 or a.shape[-1] not in (1, 2, 3, 4):
        raise InvalidArgumentError(f"{op}: image must be [height, width, channels] with 1-4 "
                                   f"channels, got shape {list(a.shape)}")
    if not -1 <= compression <= 9:
        raise InvalidArgumentError(f"{op}: compression must be in [-1, 9], got {compression}")
    c = a.shape[-1]
    if a.dtype == np.uint16 and c != 1:
        raise InvalidArgumentError(f"{op}: Pillow writes 16-bit PNGs with one channel only, "
                                   f"got {c}")
    # the array's shape and dtype give Pillow's mode: L, LA, RGB, RGBA or I;16
    img = Image.fromarray(a[..., 0].astype("<u2") if a.dtype == np.uint16
                          else (a[..., 0] if c == 1 else a))
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=6 if compression == -1 else compression)
    return np.asarray(buf.getvalue(), dtype=object)


def _encode_jpeg_kernel(image, *, format, quality, progressive, optimize_size,
                        chroma_downsampling):
    op = "EncodeJpeg"
    from PIL import Image
    a = np.asarray(image)
    if a.ndim != 3 or a.shape[-1] not in (1, 3):
        raise InvalidArgumentError(f"{op}: image must be [height, width, 1 or 3], got shape "
                                   f"{list(a.shape)}")
    if not 0 <= quality <= 100:
        raise InvalidArgumentError(f"{op}: quality must be in [0, 100], got {quality}")
    want = {"": None, "grayscale": 1, "rgb": 3}
    if format not in want:
        raise InvalidArgumentError(f"{op}: format must be '', 'grayscale' or 'rgb', got "
                                   f"{format!r}")
    if want[format] not in (None, a.shape[-1]):
        raise InvalidArgumentError(f"{op}: format {format!r} needs {want[format]} channels, "
                                   f"the image has {a.shape[-1]}")
    img = Image.fromarray(a[..., 0] if a.shape[-1] == 1 else a)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=int(quality), progressive=bool(progressive),
             optimize=bool(optimize_size), subsampling=2 if chroma_downsampling else 0)
    return np.asarray(buf.getvalue(), dtype=object)


def _extract_jpeg_shape_kernel(contents, *, output_type):
    op = "ExtractJpegShape"
    img = _open(_bytes(contents, op), "jpeg", op)
    w, h = img.size
    return np.asarray([h, w, 1 if img.mode == "L" else 3], np.dtype(output_type))


# ---- shapes and registration ------------------------------------------------------------------

def _needs_string(op_type, x):
    if x.dtype != _dt.string:
        raise InvalidArgumentError(f"{op_type}: contents must be a string tensor, got "
                                   f"{x.dtype.name}")
    if x._shape is not None and len(x._shape) != 0:
        raise InvalidArgumentError(f"{op_type}: contents must be a scalar string, got shape "
                                   f"{list(x._shape)}")


def _decode_shape(op_type, rank=3, fixed_channels=None):
    def shape_fn(inputs, attrs):
        _needs_string(op_type, inputs[0])
        c = attrs.get("channels", 0) or fixed_channels or None
        dt = _dt.as_dtype(attrs.get("dtype", "uint8"))
        if op_type == "DecodeImage" and attrs["expand_animations"]:
            return [(dt, None)]  # a GIF gives [frames, h, w, 3], any other format [h, w, c]
        return [(dt, (None,) * (rank - 1) + (c,))]
    return shape_fn


def _encode_shape(op_type, channels):
    def shape_fn(inputs, attrs):
        (x,) = inputs
        allowed = (_dt.uint8, _dt.uint16) if op_type == "EncodePng" else (_dt.uint8,)
        if x.dtype not in allowed:
            raise InvalidArgumentError(f"{op_type}: image must be "
                                       f"{' or '.join(d.name for d in allowed)}, got "
                                       f"{x.dtype.name} (convert with "
                                       "tv.image.convert_image_dtype)")
        if x._shape is not None and (len(x._shape) != 3 or x._shape[-1] not in channels
                                     + (None,)):
            raise InvalidArgumentError(f"{op_type}: image must be [height, width, channels] "
                                       f"with channels in {list(channels)}, got shape "
                                       f"{list(x._shape)}")
        return [(_dt.string, ())]
    return shape_fn


def _jpeg_shape_shape(inputs, attrs):
    _needs_string("ExtractJpegShape", inputs[0])
    return [(_dt.as_dtype(attrs["output_type"]), (3,))]


for _op, _k, _fn in (
        ("DecodePng", _decode_png_kernel, _decode_shape("DecodePng")),
        ("DecodeJpeg", _decode_jpeg_kernel, _decode_shape("DecodeJpeg")),
        ("DecodeBmp", _decode_bmp_kernel, _decode_shape("DecodeBmp")),
        ("DecodeGif", _decode_gif_kernel, _decode_shape("DecodeGif", rank=4, fixed_channels=3)),
        ("DecodeImage", _decode_image_kernel, _decode_shape("DecodeImage", rank=4)),
        ("EncodePng", _encode_png_kernel, _encode_shape("EncodePng", (1, 2, 3, 4))),
        ("EncodeJpeg", _encode_jpeg_kernel, _encode_shape("EncodeJpeg", (1, 3))),
        ("ExtractJpegShape", _extract_jpeg_shape_kernel, _jpeg_shape_shape)):
    register_op(_op, _fn, _k, differentiable=False, cpu_only=_HOST)
