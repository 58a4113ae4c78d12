"""TF 1.x's framework helpers: ``tv.RegisterGradient`` and ``Graph.gradient_override_map``,
``tv.NotDifferentiable``/``no_gradient``, ``tv.custom_gradient``, ``tv.py_function``,
``tv.print`` and ``tv.make_template``.

>>> import tensorvm as tv
>>> @tv.custom_gradient
... def clip_grad(x):
...     return tv.identity(x), lambda dy: tv.clip_by_value(dy, -0.5, 0.5)
>>> x = tv.constant([3.0])
>>> with tv.Session() as s: s.run(tv.gradients(clip_grad(x) * 10.0, x))[0].tolist()
[0.5]
"""
from __future__ import annotations

import functools
import sys

import numpy as np

from ..framework.errors import InvalidArgumentError
from ..framework.graph import Tensor
from ..framework.op_def_library import apply_op
from ..framework.op_registry import register_kernel, register_named_gradient, register_op
from ..framework.tensor_conversion import convert_to_tensor

__all__ = ["RegisterGradient", "NotDifferentiable", "no_gradient", "custom_gradient",
           "py_function", "print_", "make_template", "Template"]


class RegisterGradient:
    """Decorator: ``@tv.RegisterGradient("MyGrad") def _grad(op, grad): ...`` registers a
    gradient under a name, used by ``g.gradient_override_map({"Relu": "MyGrad"})`` (or as the
    gradient of an op type of that name)."""

    def __init__(self, op_type: str):
        if not isinstance(op_type, str):
            raise TypeError("op_type must be a string")
        self._op_type = op_type

    def __call__(self, fn):
        register_named_gradient(self._op_type, fn)
        return fn


def NotDifferentiable(op_type: str) -> None:  # noqa: N802  (TF's name)
    """Declare that ops of ``op_type`` have no gradient: ``tv.gradients`` gives None through
    them instead of an error."""
    if not isinstance(op_type, str):
        raise TypeError("op_type must be a string")
    register_named_gradient(op_type, None)


no_gradient = NotDifferentiable


# ---- custom_gradient --------------------------------------------------------------------------

def _custom_shape(inputs, attrs):
    n = attrs["n_out"]
    return [(t.dtype, t._shape) for t in inputs[:n]]


def _custom_kernel(*values, n_out, grad_fn):
    out = values[:n_out]
    return out[0] if n_out == 1 else tuple(out)


def _custom_grad(op, *grads):
    n = op.attrs["n_out"]
    got = op.attrs["grad_fn"](*grads)
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    n_in = len(op.inputs) - n
    if len(got) != n_in:
        raise ValueError(f"custom_gradient: the gradient function returned {len(got)} "
                         f"gradients for {n_in} inputs")
    # the outputs' own computation gets no gradient: grad_fn replaces it
    return [None] * n + [None if g is None else convert_to_tensor(g) for g in got]


register_op("CustomGradient", _custom_shape, _custom_kernel, grad=_custom_grad, foldable=False)
register_kernel("CustomGradient", "GPU", _custom_kernel)  # passes its inputs through


def custom_gradient(f):
    """Decorator: ``f(*xs)`` returns ``(ys, grad_fn)``; the decorated function returns ``ys``
    and ``tv.gradients`` through them calls ``grad_fn(*dys)`` for the gradients of ``xs``."""
    @functools.wraps(f)
    def decorated(*args, **kwargs):
        xs = [convert_to_tensor(a) for a in args]
        result, grad_fn = f(*xs, **kwargs)
        flat = list(result) if isinstance(result, (list, tuple)) else [result]
        flat = [convert_to_tensor(t) for t in flat]
        op = apply_op("CustomGradient", flat + xs,
                      {"n_out": len(flat), "grad_fn": grad_fn},
                      name=f"{getattr(f, '__name__', 'custom')}_custom_gradient")
        outs = list(op.outputs)
        return type(result)(outs) if isinstance(result, (list, tuple)) else outs[0]
    return decorated


# ---- py_function ------------------------------------------------------------------------------

class _EagerLike(np.ndarray):
    """A NumPy array that answers ``.numpy()``, as the EagerTensors ``tf.py_function`` hands
    its function do."""

    def numpy(self):
        """The array as a plain ndarray."""
        return np.asarray(self)


def py_function(func, inp, Tout, name=None):  # noqa: N803  (TF's name)
    """``tf.py_function``: ``func`` gets array values that answer ``.numpy()`` (as TF's eager
    tensors do) and returns values of ``Tout``."""
    from ..ops.control.script_ops import py_func

    def call(*args):
        out = func(*(np.asarray(a).view(_EagerLike) for a in args))
        if isinstance(out, (list, tuple)):
            return type(out)(np.asarray(getattr(o, "numpy", lambda o=o: o)()) for o in out)
        return np.asarray(getattr(out, "numpy", lambda: out)())
    call.__name__ = getattr(func, "__name__", "py_function")
    return py_func(call, inp, Tout, stateful=True, name=name or "EagerPyFunc")


# ---- tf.print -----------------------------------------------------------------------------------

def _scalar_text(v, quoted=False) -> str:
    if isinstance(v, (bytes, np.bytes_, str)):
        text = v.decode("utf-8", "replace") if isinstance(v, (bytes, np.bytes_)) else v
        return f'"{text}"' if quoted else text
    if isinstance(v, (float, np.floating)):
        return np.format_float_positional(v, trim="-")
    if isinstance(v, (bool, np.bool_)):
        return "1" if v else "0"
    return str(v)


def format_tensor(a, summarize=3, depth=0) -> str:
    """A tensor as ``tf.print`` writes it: ``[[1 2]\n [3 4]]``, the first and last
    ``summarize`` elements of each longer dimension around ``...`` (all with -1)."""
    a = np.asarray(a)
    if a.ndim == 0:  # a NumPy scalar keeps its precision (float32 0.1 prints as 0.1)
        return _scalar_text(a[()], quoted=depth > 0)
    n = a.shape[0]
    if summarize is not None and summarize >= 0 and n > 2 * summarize:
        idx = [*range(summarize), None, *range(n - summarize, n)]
    else:
        idx = list(range(n))
    parts = ["..." if i is None else format_tensor(a[i], summarize, depth + 1) for i in idx]
    sep = " " if a.ndim == 1 else "\n" * (a.ndim - 1) + " " * (depth + 1)
    return "[" + sep.join(parts) + "]"


def _print_v2_kernel(*values, template, stream, summarize, end):
    parts = iter(format_tensor(v, summarize) for v in values)
    text = "".join(p if p is not None else next(parts) for p in template) + end
    if stream == "stdout":
        sys.stdout.write(text)
        sys.stdout.flush()
    elif stream == "stderr":
        sys.stderr.write(text)
        sys.stderr.flush()
    elif stream.startswith("log:"):
        import logging
        logging.getLogger("tensorvm").log(int(stream[4:]), text.rstrip("\n"))
    else:  # file://path: appended
        with open(stream[len("file://"):], "a", encoding="utf-8") as f:
            f.write(text)
    return None


register_op("PrintV2", lambda inputs, attrs: [], _print_v2_kernel, stateful=True,
            differentiable=False, cpu_only="prints on the host")


def _stream_name(output_stream) -> str:
    import logging
    if output_stream is None or output_stream in (sys.stderr, sys.__stderr__):
        return "stderr"
    if output_stream in (sys.stdout, sys.__stdout__):
        return "stdout"
    if isinstance(output_stream, str) and output_stream.startswith("file://"):
        return output_stream
    levels = {logging.info: logging.INFO, logging.warning: logging.WARNING,
              logging.error: logging.ERROR, logging.debug: logging.DEBUG}
    from . import tf_logging
    for fn, lvl in ((tf_logging.info, logging.INFO), (tf_logging.warning, logging.WARNING),
                    (tf_logging.error, logging.ERROR), (tf_logging.debug, logging.DEBUG)):
        levels[fn] = lvl
    if output_stream in levels:
        return f"log:{levels[output_stream]}"
    raise ValueError(f"Unsupported output stream, logging level, or file: {output_stream!r}. "
                     "Supported: sys.stdout, sys.stderr, a logging function, or "
                     "'file://<path>'")


def print_(*inputs, output_stream=None, summarize=3, sep=" ", end="\n", name=None):
    """``tf.print``: an op that prints its inputs (tensors formatted as TF prints them, other
    values as ``str``) separated by ``sep`` when it runs; run it, or make it a control
    dependency. ``output_stream``: ``sys.stderr`` (the default), ``sys.stdout``, a
    ``tv.logging`` function, or ``"file://<path>"`` (appended to)."""
    template, tensors = [], []
    for i, x in enumerate(inputs):
        if i:
            template.append(sep)
        if isinstance(x, Tensor) or hasattr(x, "_as_graph_element"):
            tensors.append(convert_to_tensor(x))
            template.append(None)
        else:
            template.append(str(x))
    return apply_op("PrintV2", tensors, {"template": tuple(template),
                                         "stream": _stream_name(output_stream),
                                         "summarize": summarize, "end": end},
                    name=name or "PrintV2")


# ---- make_template ------------------------------------------------------------------------------

class Template:
    """A function whose variables are made on the first call (in its own variable scope) and
    shared by every later call (TF 1.x's ``tf.make_template``)."""

    def __init__(self, name, func, create_scope_now=False, unique_name=None, **kwargs):
        from ..ops.state.variable_scope import variable_scope
        if not name:
            raise ValueError("name cannot be None.")
        self._name, self._func, self._kwargs = name, func, kwargs
        self._unique_name = unique_name
        self._scope = None
        self._variables: list = []
        if create_scope_now:
            with variable_scope(unique_name, default_name=name) as vs:
                self._scope = vs

    def __call__(self, *args, **kwargs):
        from ..ops.state.variable_scope import variable_scope
        from ..ops.state.variables import global_variables
        kw = {**self._kwargs, **kwargs}
        if self._first_call_pending():
            before = set(map(id, global_variables()))
            with variable_scope(self._scope or self._unique_name,
                                default_name=None if self._scope or self._unique_name
                                else self._name) as vs:
                self._scope = vs
                out = self._func(*args, **kw)
            self._variables = [v for v in global_variables() if id(v) not in before]
            self._called = True
            return out
        before = set(map(id, global_variables()))
        with variable_scope(self._scope, reuse=True):
            out = self._func(*args, **kw)
        new = [v for v in global_variables() if id(v) not in before]
        if new:
            raise ValueError(f"Trainable variable created when calling a template after the "
                             f"first time, perhaps you used tf.Variable when you meant "
                             f"tf.get_variable: {[v.name for v in new]}")
        return out

    def _first_call_pending(self) -> bool:
        return not getattr(self, "_called", False)

    @property
    def name(self) -> str:
        """The template's name."""
        return self._name

    @property
    def variable_scope(self):
        """The variable scope of the template's variables (None before the first call)."""
        return self._scope

    @property
    def variable_scope_name(self) -> str | None:
        """The name of that scope."""
        return None if self._scope is None else getattr(self._scope, "name", str(self._scope))

    @property
    def variables(self) -> list:
        """The variables the first call made."""
        return list(self._variables)

    global_variables = variables

    @property
    def trainable_variables(self) -> list:
        """Those of them that are trainable."""
        from ..ops.state.variables import trainable_variables
        ids = set(map(id, trainable_variables()))
        return [v for v in self._variables if id(v) in ids]


def make_template(name_, func_, create_scope_now_=False, unique_name_=None,
                  custom_getter_=None, **kwargs):
    """``tf.make_template``: ``func_`` wrapped so that its ``get_variable`` variables are made
    once and shared by every call."""
    if custom_getter_ is not None:
        raise InvalidArgumentError("make_template: custom_getter_ is not supported by tensorvm")
    return Template(name_, func_, create_scope_now_, unique_name_, **kwargs)
