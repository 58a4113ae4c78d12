"""Fixed-width histograms: ``histogram_fixed_width`` and ``histogram_fixed_width_bins``.
"""
from __future__ import annotations

import numpy as np

from ...framework import dtypes as _dt
from ...framework.errors import InvalidArgumentError
from ...framework.op_def_library import apply_op
from ...vm.kernels.array_api import array_namespace
from ...framework.op_registry import register_op
from ...framework.tensor_conversion import convert_to_tensor

__all__ = ["histogram_fixed_width", "histogram_fixed_width_bins"]


# ---- histograms ---------------------------------------------------------------------------------
def _histogram_bins(values, value_range, n):
    """The bin of each value: ``floor((v - lo) / (hi - lo) * nbins)`` clipped to
    ``[0, nbins - 1]`` (TF's rule: values outside the range go to the end bins). The range
    stays where it is (a device range is not read by the host)."""
    xp = array_namespace(values)
    vr = value_range.astype(np.float64)
    scaled = (values.astype(np.float64) - vr[0]) / (vr[1] - vr[0]) * n
    return xp.clip(xp.floor(scaled), 0, n - 1).astype(np.int32)


def _histogram_nbins(nbins, value_range):
    """``nbins`` (read on the host, as TF's HostMemory input), and a host range checked."""
    from ...vm.kernels.array_api import to_host
    nb = int(np.asarray(to_host(nbins)))
    if nb <= 0:
        raise InvalidArgumentError(f"nbins should be a positive number, but got '{nb}'")
    if type(value_range) is np.ndarray and not value_range[0] < value_range[1]:
        raise InvalidArgumentError(f"value_range should satisfy value_range[0] < "
                                   f"value_range[1], but got [{value_range[0]}, "
                                   f"{value_range[1]}]")
    return nb


def _histogram_kernel(values, value_range, nbins, dtype):
    n = _histogram_nbins(nbins, value_range)
    bins = _histogram_bins(values.reshape(-1), value_range, n)
    xp = array_namespace(values)
    return xp.bincount(bins, minlength=n).astype(dtype.np_dtype, copy=False)


def _histogram_bins_kernel(values, value_range, nbins, dtype):
    n = _histogram_nbins(nbins, value_range)
    return _histogram_bins(values, value_range, n).astype(dtype.np_dtype, copy=False)


def _histogram_shape(inputs, attrs):
    from ..common import static_value
    v = static_value(inputs[2])
    return [(attrs["dtype"], (None if v is None else int(v),))]


register_op("HistogramFixedWidth", _histogram_shape, _histogram_kernel, differentiable=False)
register_op("HistogramFixedWidthBins",
            lambda inputs, attrs: [(attrs["dtype"], inputs[0]._shape)],
            _histogram_bins_kernel, differentiable=False)


def histogram_fixed_width(values, value_range, nbins=100, dtype=_dt.int32, name=None):
    """How many of ``values`` fall in each of ``nbins`` equal bins over ``value_range``
    (``[lo, hi]``); values below ``lo`` count in the first bin, above ``hi`` in the last.

    >>> import tensorvm as tv
    >>> with tv.Session() as s:
    ...     s.run(tv.histogram_fixed_width([-1.0, 0.0, 1.5, 2.0, 5.0, 15], [0.0, 5.0], 5)).tolist()
    [2, 1, 1, 0, 2]
    """
    values = convert_to_tensor(values)
    vr = convert_to_tensor(value_range, dtype=values.dtype)
    nb = convert_to_tensor(nbins, dtype=_dt.int32)
    return apply_op("HistogramFixedWidth", [values, vr, nb], {"dtype": _dt.as_dtype(dtype)},
                    name=name).outputs[0]


def histogram_fixed_width_bins(values, value_range, nbins=100, dtype=_dt.int32, name=None):
    """The bin index of each of ``values`` (as :func:`histogram_fixed_width` bins them)."""
    values = convert_to_tensor(values)
    vr = convert_to_tensor(value_range, dtype=values.dtype)
    nb = convert_to_tensor(nbins, dtype=_dt.int32)
    return apply_op("HistogramFixedWidthBins", [values, vr, nb],
                    {"dtype": _dt.as_dtype(dtype)}, name=name).outputs[0]
