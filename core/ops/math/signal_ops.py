"""``tv.signal`` beyond the FFTs: framing, windows, STFT and its inverse, ``overlap_and_add``,
``fftshift``, DCTs, mel weight matrices and MFCCs; and the ``tv.spectral``/``tv.signal``
namespaces.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...framework.op_def_library import apply_op
from .fft_ops import (fft, fft2d, fft3d, ifft, ifft2d, ifft3d, irfft, irfft2d, irfft3d, rfft,
                      rfft2d, rfft3d)

__all__ = ["spectral", "signal"]


# ---- tv.signal's framing, windows and STFT ---------------------------------------------------
def frame(signal, frame_length, frame_step, pad_end=False, pad_value=0, axis=-1, name=None):
    """Overlapping frames of ``frame_length`` samples every ``frame_step`` along ``axis``
    (that axis becomes ``[frames, frame_length]``); ``pad_end`` pads the end with
    ``pad_value`` so that every frame step starts a frame (TF's ``tf.signal.frame``). A gather
    of constant indices, so gradients flow."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from ..common import static_int
    from ..array.index_ops import gather
    from ..array.manip_ops import pad
    with get_default_graph().name_scope(name or "frame"):
        x = convert_to_tensor(signal, name="signal")
        fl = static_int(frame_length, "frame_length", "frame")
        fs = static_int(frame_step, "frame_step", "frame")
        rank = None if x._shape is None else len(x._shape)
        if rank is None:
            from ...framework.errors import InvalidArgumentError
            raise InvalidArgumentError("frame: the signal's rank must be known")
        ax = axis % rank
        n = x._shape[ax]
        if n is None:
            from ...framework.errors import InvalidArgumentError
            raise InvalidArgumentError("frame: the framed axis must have a known length")
        if pad_end:
            frames = -(-n // fs) if n else 0
            total = max(0, (frames - 1) * fs + fl) if frames else 0
            if total > n:
                pads = [[0, 0]] * rank
                pads[ax] = [0, total - n]
                x = pad(x, pads, constant_values=pad_value)
            n = max(n, total)
        frames = max(0, 1 + (n - fl) // fs) if n >= fl else 0
        idx = (np.arange(frames)[:, None] * fs + np.arange(fl)[None, :]).astype(np.int32)
        return gather(x, idx, axis=ax)


def _window(window_length, periodic, dtype, a, b, name):
    from ...framework import dtypes as _dtypes
    from ..array.array_ops import constant
    from ..common import static_int
    n = static_int(window_length, "window_length", name)
    dt = _dtypes.as_dtype(dtype)
    if n == 1:
        return constant(np.ones(1, dt.np_dtype), name=name)
    denom = n + (1 if periodic and n % 2 == 0 else 0) - 1  # TF: periodic affects even lengths
    w = a - b * np.cos(2.0 * np.pi * np.arange(n) / denom)
    return constant(w.astype(dt.np_dtype), name=name)


def hann_window(window_length, periodic=True, dtype=None, name=None):
    """The Hann window ``0.5 - 0.5 cos(2 pi n / N)``: ``N`` is the length if ``periodic``
    and the length is even, else the length - 1 (TF's rule)."""
    from ...framework import dtypes as _dtypes
    return _window(window_length, periodic, dtype or _dtypes.float32, 0.5, 0.5,
                   name or "hann_window")


def hamming_window(window_length, periodic=True, dtype=None, name=None):
    """The Hamming window ``0.54 - 0.46 cos(2 pi n / N)``."""
    from ...framework import dtypes as _dtypes
    return _window(window_length, periodic, dtype or _dtypes.float32, 0.54, 0.46,
                   name or "hamming_window")


def stft(signals, frame_length, frame_step, fft_length=None, window_fn=hann_window,
         pad_end=False, name=None):
    """The short-time Fourier transform of real ``signals[..., samples]``: frames of
    ``frame_length`` every ``frame_step``, windowed by ``window_fn``, each :func:`rfft` to
    ``fft_length`` (default: the next power of 2) — ``[..., frames, fft_length // 2 + 1]``."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from ..common import static_int
    with get_default_graph().name_scope(name or "stft"):
        x = convert_to_tensor(signals, name="signals")
        fl = static_int(frame_length, "frame_length", "stft")
        n = int(2 ** int(np.ceil(np.log2(fl)))) if fft_length is None else \
            static_int(fft_length, "fft_length", "stft")
        frames = frame(x, fl, frame_step, pad_end=pad_end)
        if window_fn is not None:
            frames = frames * window_fn(fl, dtype=x.dtype)
        return rfft(frames, [n])


def fftshift(x, axes=None, name=None):
    """The zero frequency moved to the middle (``np.fft.fftshift``): a roll by half."""
    return _shift(x, axes, name, inverse=False)


def ifftshift(x, axes=None, name=None):
    """The inverse of :func:`fftshift`."""
    return _shift(x, axes, name, inverse=True)


def _shift(x, axes, name, inverse):
    from ...framework.tensor_conversion import convert_to_tensor
    from ..array.index_ops import roll
    x = convert_to_tensor(x)
    if x._shape is None or None in x._shape:
        from ...framework.errors import InvalidArgumentError
        raise InvalidArgumentError("fftshift needs a fully known static shape")
    axes = list(range(len(x._shape))) if axes is None else list(np.atleast_1d(axes))
    shifts = [(-(x._shape[a] // 2) if inverse else x._shape[a] // 2) for a in axes]
    return roll(x, shifts, axes, name=name)


def _dct_matrix(n, dct_type, norm):
    """The ``n x n`` matrix ``C`` of TF's (SciPy's) DCT of ``dct_type``: ``dct(x) = x @ C.T``."""
    k = np.arange(n)[:, None].astype(np.float64)
    j = np.arange(n)[None, :].astype(np.float64)
    if dct_type == 1:
        c = 2.0 * np.cos(np.pi * k * j / (n - 1))
        c[:, 0] = 1.0
        c[:, -1] = (-1.0) ** np.arange(n)
    elif dct_type == 2:
        c = 2.0 * np.cos(np.pi * k * (2 * j + 1) / (2 * n))
        if norm == "ortho":
            c[0] *= np.sqrt(1.0 / (4 * n))
            c[1:] *= np.sqrt(1.0 / (2 * n))
    elif dct_type == 3:
        c = 2.0 * np.cos(np.pi * j * (2 * k + 1) / (2 * n))
        if norm == "ortho":
            c[:, 0] *= np.sqrt(1.0 / (4 * n))
            c[:, 1:] *= np.sqrt(1.0 / (2 * n))
        else:
            c[:, 0] = 1.0
    else:
        c = 2.0 * np.cos(np.pi * (2 * j + 1) * (2 * k + 1) / (4 * n))
        if norm == "ortho":
            c *= np.sqrt(1.0 / (2 * n))
    return c


def _dct_args(input, dct_type, n, axis, norm, what):
    from ...framework.errors import InvalidArgumentError
    from ...framework.tensor_conversion import convert_to_tensor
    if dct_type not in (1, 2, 3, 4):
        raise ValueError(f"Types I, II, III and IV (I)DCT are supported, got type {dct_type}.")
    if axis != -1:  # (TF raises NotImplementedError here)
        raise ValueError(f"axis must be -1. Got: {axis}")
    if norm not in (None, "ortho"):
        raise ValueError(f"Unknown normalization. Expected None or 'ortho', got: {norm}")
    if dct_type == 1 and norm == "ortho":
        raise ValueError("Normalization is not supported for the Type-I DCT.")
    x = convert_to_tensor(input)
    if not x.dtype.is_floating:
        raise InvalidArgumentError(f"{what} needs a floating-point tensor, got {x.dtype.name}")
    length = None if x._shape is None else x._shape[-1]
    if n is not None:
        if n < 1:
            raise ValueError(f"Invalid value of `n`. Expected `n > 0`, got {n}")
        if length is not None and n != length:
            x = index_fit(x, n)
        length = n
    if length is None:
        raise InvalidArgumentError(f"{what} needs the last dimension known when the graph is "
                                   "built")
    if dct_type == 1 and length < 2:
        raise ValueError("Type-I DCT requires the dimension to be greater than one.")
    return x, length


def index_fit(x, n):
    """``x`` cropped or zero-padded in its last axis to ``n``."""
    return apply_op("_FitLast", [x], {"shape": (int(n),)}).outputs[0]


def _apply_matrix(x, c):
    from ..array.array_ops import constant
    from .math_ops import matmul
    return matmul(x, constant(c.T.astype(x.dtype.np_dtype)))


def dct(input, type=2, n=None, axis=-1, norm=None, name=None):
    """The discrete cosine transform of types I-IV over the last axis (TF's and SciPy's
    definitions, ``norm="ortho"`` for II-IV), as a product with the DCT matrix (so
    gradients flow); ``n`` crops or zero-pads the input first."""
    from ...framework.graph import get_default_graph
    with get_default_graph().name_scope(name or "dct"):
        x, length = _dct_args(input, type, n, axis, norm, "dct")
        return _apply_matrix(x, _dct_matrix(length, type, norm))


def idct(input, type=2, n=None, axis=-1, norm=None, name=None):
    """TF's inverse DCT: the :func:`dct` of the inverse type (III for II, II for III, I and IV
    their own). Without ``norm="ortho"`` it is not normalised: divide by ``2N`` (``2(N - 1)``
    for type I) to invert, as TF documents."""
    from ...framework.graph import get_default_graph
    with get_default_graph().name_scope(name or "idct"):
        x, length = _dct_args(input, type, n, axis, norm, "idct")
        inverse_type = {1: 1, 2: 3, 3: 2, 4: 4}[type]
        return _apply_matrix(x, _dct_matrix(length, inverse_type, norm))


def _hertz_to_mel(f):
    return 1127.0 * np.log1p(np.asarray(f, np.float64) / 700.0)


def linear_to_mel_weight_matrix(num_mel_bins=20, num_spectrogram_bins=129, sample_rate=8000,
                                lower_edge_hertz=125.0, upper_edge_hertz=3800.0, dtype=None,
                                name=None):
    """The ``[num_spectrogram_bins, num_mel_bins]`` matrix that maps a linear spectrogram to
    mel bands (triangular filters evenly spaced on the HTK mel scale; the DC bin maps to
    nothing), TF's ``tf.signal.linear_to_mel_weight_matrix``; a constant."""
    from ...framework import dtypes as _dtypes
    from ..array.array_ops import constant
    if num_mel_bins <= 0:
        raise ValueError(f"num_mel_bins must be positive. Got: {num_mel_bins}")
    if lower_edge_hertz < 0.0:
        raise ValueError(f"lower_edge_hertz must be non-negative. Got: {lower_edge_hertz}")
    if lower_edge_hertz >= upper_edge_hertz:
        raise ValueError(f"lower_edge_hertz {lower_edge_hertz} >= upper_edge_hertz "
                         f"{upper_edge_hertz}")
    if upper_edge_hertz > sample_rate / 2:
        raise ValueError(f"upper_edge_hertz must not be larger than the Nyquist frequency "
                         f"(sample_rate / 2). Got {upper_edge_hertz} for sample_rate: "
                         f"{sample_rate}")
    dt = _dtypes.as_dtype(dtype or _dtypes.float32)
    linear = np.linspace(0.0, sample_rate / 2.0, num_spectrogram_bins)[1:]
    bins_mel = _hertz_to_mel(linear)[:, None]
    edges = np.linspace(_hertz_to_mel(lower_edge_hertz), _hertz_to_mel(upper_edge_hertz),
                        num_mel_bins + 2)
    lower, center, upper = edges[:-2][None], edges[1:-1][None], edges[2:][None]
    lower_slopes = (bins_mel - lower) / (center - lower)
    upper_slopes = (upper - bins_mel) / (upper - center)
    weights = np.maximum(0.0, np.minimum(lower_slopes, upper_slopes))
    weights = np.pad(weights, [[1, 0], [0, 0]])
    return constant(weights.astype(dt.np_dtype), name=name or "linear_to_mel_weight_matrix")


def mfccs_from_log_mel_spectrograms(log_mel_spectrograms, name=None):
    """MFCCs: the type-II DCT of log-mel spectrograms over their last axis, scaled by
    ``1 / sqrt(2 * num_mel_bins)`` (TF's ``tf.signal.mfccs_from_log_mel_spectrograms``)."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    with get_default_graph().name_scope(name or "mfccs_from_log_mel_spectrograms"):
        x = convert_to_tensor(log_mel_spectrograms)
        n = x._shape[-1] if x._shape is not None else None
        if n is None:
            from ...framework.errors import InvalidArgumentError
            raise InvalidArgumentError("mfccs need the number of mel bins known")
        return dct(x, type=2) * (1.0 / np.sqrt(2.0 * n))


def overlap_and_add(signal, frame_step, name=None):
    """The inverse of :func:`frame`: ``signal[..., frames, frame_length]`` added at
    ``frame_step`` offsets into ``[..., (frames - 1) * frame_step + frame_length]``."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from ..array.array_ops import reshape
    from ..common import static_int
    from ..array.index_ops import unsorted_segment_sum
    from ..array.manip_ops import transpose
    with get_default_graph().name_scope(name or "overlap_and_add"):
        x = convert_to_tensor(signal)
        step = static_int(frame_step, "frame_step", "overlap_and_add")
        s = x._shape
        if s is None or len(s) < 2 or s[-1] is None or s[-2] is None:
            raise ValueError("overlap_and_add needs the frame count and length known")
        frames, length = s[-2], s[-1]
        out_len = (frames - 1) * step + length if frames else 0
        rank = len(s)
        xt = transpose(x, [rank - 2, rank - 1] + list(range(rank - 2)))
        flat = reshape(xt, [frames * length] + [-1 if d is None else d for d in s[:-2]]) \
            if rank > 2 else reshape(xt, [frames * length])
        ids = (np.arange(frames)[:, None] * step + np.arange(length)[None, :]).reshape(-1)
        summed = unsorted_segment_sum(flat, ids.astype(np.int32), out_len)
        return transpose(summed, list(range(1, rank - 1)) + [0]) if rank > 2 else summed


def inverse_stft_window_fn(frame_step, forward_window_fn=hann_window, name=None):
    """The window that makes :func:`inverse_stft` invert a :func:`stft` windowed by
    ``forward_window_fn``: the forward window over the sum of its overlapping squares."""
    def window(frame_length, dtype=None):
        from ...framework import dtypes as _dtypes
        from ..array.array_ops import constant
        from ..common import static_value
        dt = _dtypes.as_dtype(dtype or _dtypes.float32)
        fwd = np.asarray(static_value(forward_window_fn(frame_length, dtype=_dtypes.float64)))
        step = int(frame_step)
        overlaps = -(-frame_length // step)
        denom = np.pad(np.square(fwd), (0, overlaps * step - frame_length))
        denom = np.tile(denom.reshape(overlaps, step).sum(0, keepdims=True), (overlaps, 1))
        return constant((fwd / denom.reshape(-1)[:frame_length]).astype(dt.np_dtype),
                        name=name or "inverse_stft_window_fn")
    return window


def inverse_stft(stfts, frame_length, frame_step, fft_length=None, window_fn=hann_window,
                 name=None):
    """Signals from their short-time Fourier transforms: each frame :func:`irfft`, cropped to
    ``frame_length``, windowed, then overlap-added (exactly :func:`stft`'s inverse with
    ``window_fn=inverse_stft_window_fn(frame_step)``)."""
    from ...framework.graph import get_default_graph
    from ...framework.tensor_conversion import convert_to_tensor
    from ..common import static_int
    with get_default_graph().name_scope(name or "inverse_stft"):
        x = convert_to_tensor(stfts)
        fl = static_int(frame_length, "frame_length", "inverse_stft")
        n = int(2 ** int(np.ceil(np.log2(fl)))) if fft_length is None else \
            static_int(fft_length, "fft_length", "inverse_stft")
        frames = irfft(x, [n])
        frames = index_fit(frames, fl)
        if window_fn is not None:
            frames = frames * window_fn(fl, dtype=frames.dtype)
        return overlap_and_add(frames, frame_step)


spectral = SimpleNamespace(fft=fft, ifft=ifft, fft2d=fft2d, ifft2d=ifft2d, fft3d=fft3d,
                           ifft3d=ifft3d, rfft=rfft, irfft=irfft, rfft2d=rfft2d,
                           irfft2d=irfft2d, rfft3d=rfft3d, irfft3d=irfft3d, dct=dct,
                           idct=idct)
spectral.__doc__ = "``tv.spectral``: TF 1.x's ``tf.spectral`` (the FFTs, dct and idct)."
signal = SimpleNamespace(**vars(spectral), frame=frame, stft=stft, hann_window=hann_window,
                         hamming_window=hamming_window, fftshift=fftshift, ifftshift=ifftshift,
                         linear_to_mel_weight_matrix=linear_to_mel_weight_matrix,
                         mfccs_from_log_mel_spectrograms=mfccs_from_log_mel_spectrograms,
                         overlap_and_add=overlap_and_add, inverse_stft=inverse_stft,
                         inverse_stft_window_fn=inverse_stft_window_fn)
signal.__doc__ = ("``tv.signal``: TF's ``tf.signal`` — the FFTs, ``frame``, ``stft`` and "
                  "``inverse_stft``, ``overlap_and_add``, the Hann and Hamming windows, "
                  "``fftshift``, ``dct``/``idct``, mel matrices and MFCCs.")
