"""A fake GPU backend for CPU-only machines: a CuPy-like module whose arrays keep their data on
the host but behave as CuPy's do where it matters to tensorvm's one-source kernels.

* ``np.*`` calls on fake arrays dispatch (NEP 13/18) to NumPy on the unwrapped data and wrap
  the results, as CuPy's ``__array_ufunc__``/``__array_function__`` run ``cupy.*``;
* implicit conversion to NumPy is refused (``np.asarray(fake)`` raises TypeError, as CuPy
  does), and a NumPy array mixed into a fake computation is refused too, so a kernel that
  creates with ``np.zeros`` instead of ``xp.zeros`` fails here as it would on a GPU;
* only what CuPy has is there: a NumPy function, ufunc method, keyword or array method that
  CuPy lacks (``np.maximum.reduce``, ``np.add.reduce(..., initial=0)``, ``x.tobytes``' peers
  that CuPy never grew...) fails as it does on a GPU, by CuPy's recorded API
  (``tests/cupy_api.py``, ``tests/data/cupy_api.json``);
* ``.get()`` is the explicit copy to the host; reductions return 0-d arrays, not scalars;
* every copy to the host (``.get()``, ``bool()``, ``int()``, ``.item()``...) is counted in
  ``xp.cuda.syncs``: on a GPU the host waits there for the kernels queued before it; so is
  each result whose size depends on the data (``x[mask]``, ``nonzero``, ``unique``...),
  which CuPy sizes by copying a count to the host;
* ``xp.cuda.Device(n)`` records the devices entered (``xp.cuda.entered``); ``install(count)``
  says how many GPUs ``xp.device_count()`` reports;
* results differ from NumPy's where CuPy's do (docs.cupy.dev, "Differences between CuPy and
  NumPy"), so a kernel that leans on NumPy's behaviour there fails here too: integer-array
  indices out of bounds wrap around (``x[idx]``, ``x[idx] = v``, ``take``,
  ``take_along_axis``, ``ufunc.at``; NumPy raises IndexError); of duplicate indices in a
  scatter the *first* value lands (CuPy leaves it undefined, NumPy's last one wins); a float
  cast to a 32/64-bit integer saturates and NaN gives 0 (CUDA's conversion; NumPy's x86 one
  gives the minimum integer); ``sort``/``argsort`` take ``kind`` None or "stable" only
  (CuPy's sorts are stable); ufuncs never warn (``x // 0`` is 0 for integers). (float16 sums
  accumulate in float32 in both: nothing to model.)

``install()`` makes it tensorvm's device backend (``kernels_gpu.set_device_backend``).
"""
from __future__ import annotations

import functools
import types

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

import cupy_api  # beside this file, as the tests import fake_device

_SCALARS = (bool, int, float, complex, str, bytes, np.generic, type(None), slice,
            type(Ellipsis))
_CREATION = {"asarray", "array", "asanyarray", "ascontiguousarray"}


class FakeDeviceError(TypeError):
    """A host NumPy array met a device array (CuPy raises TypeError there too)."""


class NotInCuPyError(TypeError):
    """A kernel asked the device for a function, method or keyword CuPy does not have."""


def _check_params(what, params, args, kw):
    """Refuse keywords (and extra positionals) that CuPy's ``what`` does not take."""
    if params is None:
        return
    for k in kw:
        if k not in params:
            raise NotInCuPyError(f"{what}() got an unexpected keyword argument '{k}' "
                                 f"(CuPy {cupy_api.load()['cupy_version']})")
    if len(args) > len(params):
        raise NotInCuPyError(f"{what}() takes {len(params)} arguments in CuPy, "
                             f"{len(args)} given")


def _cupy_function(np_func):
    """CuPy's parameters for the NumPy function ``np_func`` (by its module path, as CuPy's
    ``__array_function__`` finds it), or NotInCuPyError when CuPy has none."""
    path = np_func.__module__.removeprefix("numpy").lstrip(".")
    names = cupy_api.load()["modules"].get(path, {})
    if np_func.__name__ not in names:
        raise NotInCuPyError(
            f"no implementation found for '{np_func.__module__}.{np_func.__name__}' on types "
            f"that implement __array_function__: CuPy has no such function")
    return names[np_func.__name__]


def _check_ufunc(ufunc, method, kw):
    api = cupy_api.load()
    methods = api["ufuncs"].get(ufunc.__name__)
    if methods is None:
        methods = api["gufuncs"].get(ufunc.__name__)
        if methods is None:
            raise NotInCuPyError(f"CuPy has no ufunc '{ufunc.__name__}'")
        if method in methods:
            return  # a generalised ufunc (matmul): its own keywords
    if method not in methods:
        raise NotInCuPyError(f"`cupy.{ufunc.__name__}.{method}` is not supported "
                             f"(CuPy has {', '.join(methods)})")
    allowed = cupy_api.UFUNC_KWARGS[method]
    for k in kw:
        if k not in allowed:
            raise NotInCuPyError(f"cupy.{ufunc.__name__}.{method}: wrong argument '{k}' "
                                 f"(CuPy takes {', '.join(allowed) or 'none'})")


def _unwrap(x, strict=True):
    if isinstance(x, FakeDeviceArray):
        return x._a
    if type(x) is np.ndarray or isinstance(x, np.ndarray):
        if strict and x.dtype.kind in "biufc":
            raise FakeDeviceError(
                f"Unsupported type {type(x).__name__}: a host NumPy array {x.dtype}"
                f"{list(x.shape)} met a device array (a kernel created it with np.*)")
        return x
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v, strict) for v in x)
    if isinstance(x, dict):
        return {k: _unwrap(v, strict) for k, v in x.items()}
    return x


def _wrap(x):
    if type(x) is np.ndarray:
        return FakeDeviceArray(x) if x.dtype.kind in "biufc" else x
    if isinstance(x, np.generic) and x.dtype.kind in "biufc":
        return FakeDeviceArray(np.asarray(x))
    if isinstance(x, tuple):
        return tuple(_wrap(v) for v in x)
    if isinstance(x, list):
        return [_wrap(v) for v in x]
    return x


# ---- where CuPy's results differ from NumPy's -------------------------------------------------
def _wrap_index(shape, key):
    """``key`` with its integer-array indices taken modulo their axis' size: CuPy wraps
    out-of-bounds integer-array indices around, NumPy raises IndexError."""
    parts = key if isinstance(key, tuple) else (key,)
    parts = tuple(np.asarray(k) if isinstance(k, list) else k for k in parts)

    def width(k):  # axes of ``shape`` that ``k`` indexes
        if k is None or k is Ellipsis:
            return 0
        if isinstance(k, np.ndarray) and k.dtype.kind == "b":
            return k.ndim
        return 1
    rest = len(shape) - sum(width(k) for k in parts)
    out, axis = [], 0
    for k in parts:
        if k is Ellipsis:
            axis += rest
        elif isinstance(k, np.ndarray) and k.dtype.kind in "iu" and k.ndim and \
                axis < len(shape) and shape[axis]:
            k = np.mod(k, shape[axis])
        out.append(k)
        axis += width(k)
    return tuple(out) if isinstance(key, tuple) or len(out) != 1 else out[0]


def _first_wins(a, key, value):
    """``a[key] = value`` where the first of duplicate indices lands (CuPy leaves which one
    undefined; NumPy's last one wins), for a 1-D integer-array key and a value per index."""
    k = key[0] if isinstance(key, tuple) and len(key) == 1 else key
    v = np.asarray(value)
    if not (isinstance(k, np.ndarray) and k.dtype.kind in "iu" and k.ndim == 1 and v.ndim
            and v.shape[0] == k.size and v.ndim == a.ndim):
        return False
    _, first = np.unique(k, return_index=True)
    if first.size == k.size:
        return False  # no duplicates: NumPy's own write
    a[k[first]] = v[first]
    return True


def _sorting(method):
    def sort(axis=-1, kind=None):
        _check_sort_kind(kind)
        return method(axis=axis, kind="stable")
    return sort


def _cupy_astype(a, dtype, *args, **kw):
    """``a.astype(dtype)`` with CUDA's float-to-integer conversion (32/64-bit targets): it
    saturates at the target's bounds and gives 0 for NaN, where NumPy's x86 conversion gives
    the minimum integer (8/16-bit targets: NumPy's result, CUDA's is not documented)."""
    dt = np.dtype(dtype)
    if a.dtype.kind not in "fc" or dt.kind not in "iu" or dt.itemsize < 4:
        return a.astype(dtype, *args, **kw)
    info = np.iinfo(dt)
    x = np.nan_to_num(np.real(a).astype(np.float64), nan=0.0, posinf=float(info.max),
                      neginf=float(info.min))
    with np.errstate(invalid="ignore"):
        out = np.asarray(np.clip(np.trunc(x), float(info.min), float(info.max))).astype(dt)
        big = np.asarray(x >= float(info.max))  # (float(max) of 64 bits rounds past the max)
    out[big] = info.max
    return out



def _check_sort_kind(kind):
    """CuPy sorts stably and takes ``kind`` None or "stable" only (``_check_kind_sort``)."""
    if kind not in (None, "stable"):
        raise NotInCuPyError(f"CuPy's sort takes kind=None or 'stable' (always stable), "
                             f"got kind={kind!r}")


# Functions whose result's size depends on the data: CuPy copies that size to the host (a
# wait), as a boolean-mask index does
_SIZED_BY_DATA = frozenset({"nonzero", "argwhere", "flatnonzero", "unique", "extract",
                            "compress", "trim_zeros"})


def _synced():
    """Count a device-to-host copy: on a GPU the host waits there for the queued kernels
    (``xp.cuda.syncs``; a step's kernels should queue without one)."""
    xp.cuda.syncs += 1


class _Flags:
    """``cupy.ndarray.flags`` (cupy/_core/flags.pyx): read-only contiguity and ownership, and
    no ``writeable`` — device arrays are always writeable, and a kernel that sets the flag
    (as on a NumPy array) fails, as it does on CuPy."""

    __slots__ = ("c_contiguous", "f_contiguous", "owndata")

    def __init__(self, a):
        f = a.flags
        for name in self.__slots__:
            object.__setattr__(self, name, bool(getattr(f, name)))

    def __setattr__(self, name, value):
        raise AttributeError(f"attribute '{name}' of 'cupy._core.flags.Flags' objects is not "
                             f"writable")

    def __getitem__(self, name):
        key = {"C_CONTIGUOUS": "c_contiguous", "F_CONTIGUOUS": "f_contiguous",
               "OWNDATA": "owndata"}.get(name)
        if key is None:
            raise KeyError(f"{name} is not defined for cupy.ndarray.flags")
        return getattr(self, key)


class FakeDeviceArray(NDArrayOperatorsMixin):
    """A "device" array (see the module docstring)."""

    __slots__ = ("_a",)
    __array_priority__ = 100

    def __init__(self, a):
        self._a = a

    # -- conversion: explicit only
    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use "
                        "`.get()` to construct a NumPy array explicitly.")

    def get(self):
        _synced()
        return self._a.copy()

    def __getstate__(self):
        return self._a

    def __setstate__(self, a):
        self._a = a

    # -- NumPy dispatch
    def __array_ufunc__(self, ufunc, method, *inputs, **kw):
        _check_ufunc(ufunc, method, kw)
        args = _unwrap(inputs)
        if "out" in kw:
            kw["out"] = _unwrap(kw["out"])
        if method == "at":  # (a scatter: out-of-bounds indices wrap, as CuPy's)
            args = (args[0], _wrap_index(np.shape(args[0]), args[1])) + tuple(args[2:])
        with np.errstate(all="ignore"):  # CuPy never warns (x // 0 is 0, 1.0 / 0 is inf)
            return _wrap(getattr(ufunc, method)(*args, **kw))

    def __array_function__(self, func, types_, args, kwargs):
        _check_params(func.__name__, _cupy_function(func), args, kwargs)
        if func.__name__ in ("sort", "argsort"):  # CuPy's sorts are stable, whatever asked
            _check_sort_kind(args[2] if len(args) > 2 else kwargs.get("kind"))
            args, kwargs = args[:2], {**kwargs, "kind": "stable"}
        if func.__name__ in _SIZED_BY_DATA or (func is np.where and len(args) == 1):
            _synced()  # CuPy reads the size of the result from the device
        args, kwargs = _unwrap(args), _unwrap(kwargs)
        if func is np.take or func is np.take_along_axis:  # out-of-bounds indices wrap
            a, idx = args[0], args[1]
            axis = args[2] if len(args) > 2 else kwargs.get("axis")
            n = np.size(a) if axis is None else np.shape(a)[axis]
            if n:
                args = (a, np.mod(idx, n)) + tuple(args[2:])
        return _wrap(func(*args, **kwargs))

    # -- ndarray surface
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    T = property(lambda self: FakeDeviceArray(self._a.T))
    flags = property(lambda self: _Flags(self._a))
    base = property(lambda self: None if self._a.base is None else FakeDeviceArray(self._a.base))
    real = property(lambda self: _wrap(self._a.real))
    imag = property(lambda self: _wrap(self._a.imag))

    def __getattr__(self, name):
        if name.startswith("__"):  # __array_interface__, __array_struct__: no host view
            raise AttributeError(name)
        methods = cupy_api.load()["ndarray"]
        if name not in methods:
            raise AttributeError(f"'cupy.ndarray' object has no attribute '{name}'")
        attr = getattr(self._a, name)
        if not callable(attr):
            return attr
        if name in ("tolist", "item", "tobytes"):  # copies to the host
            _synced()
            return attr

        if name == "astype":
            attr = functools.partial(_cupy_astype, self._a)
        elif name in ("sort", "argsort"):
            attr = _sorting(attr)

        def method(*args, **kw):
            _check_params(f"ndarray.{name}", methods[name], args, kw)
            return _wrap(attr(*_unwrap(args), **_unwrap(kw)))
        return method

    def __getitem__(self, key):
        key = _wrap_index(self._a.shape, _unwrap(key, strict=False))
        if any(isinstance(k, np.ndarray) and k.dtype == bool and k.ndim
               for k in (key if isinstance(key, tuple) else (key,))):
            _synced()  # a boolean mask: CuPy reads how many are true from the device
        return _wrap(self._a[key])

    def __setitem__(self, key, value):
        key = _wrap_index(self._a.shape, _unwrap(key, strict=False))
        value = _unwrap(value)
        if not _first_wins(self._a, key, value):
            self._a[key] = value

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (_wrap(v) for v in self._a)

    def __bool__(self):
        _synced()
        return bool(self._a)

    def __int__(self):
        _synced()
        return int(self._a)

    def __float__(self):
        _synced()
        return float(self._a)

    def __complex__(self):
        _synced()
        return complex(self._a)

    def __index__(self):
        _synced()
        return self._a.__index__()

    def __repr__(self):
        return f"fake_device.array({self._a!r})"

    def __copy__(self):
        return FakeDeviceArray(self._a.copy())

    def __deepcopy__(self, memo):
        return FakeDeviceArray(self._a.copy())


def _module_fn(fn, name, params):
    def call(*args, **kw):
        _check_params(name, params, args, kw)
        strict = name not in _CREATION
        return _wrap(fn(*_unwrap(args, strict), **_unwrap(kw, strict)))
    call.__name__ = name
    return call


class _FakeModule(types.ModuleType):
    """``fake_device.xp``: NumPy's functions over fake arrays (``cupy``'s place)."""

    def __init__(self, name, np_mod, path=""):
        super().__init__(name)
        self._np = np_mod
        self._path = path  # CuPy's module path: "" (cupy), "linalg", "lib.stride_tricks"

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        path = f"{self._path}.{name}" if self._path else name
        names = cupy_api.load()["modules"].get(self._path, {})
        if name not in names and path not in cupy_api.MODULES and path != "lib":
            raise AttributeError(f"module 'cupy{'.' + self._path if self._path else ''}' "
                                 f"has no attribute '{name}'")
        attr = getattr(self._np, name)
        if isinstance(attr, types.ModuleType):
            sub = _FakeModule(f"{self.__name__}.{name}", attr, path)
            setattr(self, name, sub)
            return sub
        if isinstance(attr, (type, np.ufunc)) or not callable(attr):
            return attr  # dtypes, constants; ufuncs dispatch to the fake by themselves
        fn = _module_fn(attr, name, names.get(name))
        setattr(self, name, fn)
        return fn


class _Device:
    """``cupy.cuda.Device(n)``: a context that makes GPU ``n`` current; the fake only records
    which devices were entered (``xp.cuda.entered``), so tests see where a program ran."""

    def __init__(self, index=0):
        self.id = int(index)

    def __enter__(self):
        xp.cuda.entered.append(self.id)
        return self

    def __exit__(self, *exc):
        return False


xp = _FakeModule("fake_device.xp", np)
xp.ndarray = FakeDeviceArray
xp.cuda = types.SimpleNamespace(Device=_Device, entered=[], syncs=0)
_COUNT = [1]
xp.device_count = lambda: _COUNT[0]


def _get_array_module(*args):
    return xp if any(isinstance(a, FakeDeviceArray) for a in args) else np


xp.get_array_module = _get_array_module


def install(count: int = 1):
    """Make the fake the device backend, with ``count`` GPUs; returns the previous backend
    (``restore(prev)``)."""
    from tensorvm.vm.kernels import array_api as kernels_gpu
    _COUNT[0] = int(count)
    xp.cuda.entered.clear()
    xp.cuda.syncs = 0
    prev = kernels_gpu.device_backend()
    kernels_gpu.set_device_backend(xp)
    return prev


def restore(prev):
    from tensorvm.vm.kernels import array_api as kernels_gpu
    kernels_gpu.set_device_backend(prev)
