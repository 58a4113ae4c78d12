"""More of TF 1.x's optimizers: RMSProp, Adadelta, FTRL, proximal gradient descent and
proximal Adagrad. Each update is TF's kernel (``ApplyRMSProp``, ``ApplyAdadelta``,
``ApplyFtrlV2``, ``ApplyProximalGradientDescent``, ``ApplyProximalAdagrad``) written with graph
ops, colocated with its variable; sparse gradients are densified first.

>>> import tensorvm as tv
>>> w = tv.Variable(1.0)
>>> step = tv.train.ProximalGradientDescentOptimizer(0.5, l1_regularization_strength=0.4) \\
...     .minimize(w * 0.0)
>>> with tv.Session() as s:
...     _ = s.run(tv.global_variables_initializer()); _ = s.run(step); round(float(s.run(w)), 4)
0.8
"""
from __future__ import annotations

from ..framework.errors import InvalidArgumentError
from .optimizers import Optimizer

__all__ = ["RMSPropOptimizer", "AdadeltaOptimizer", "FtrlOptimizer",
           "ProximalGradientDescentOptimizer", "ProximalAdagradOptimizer"]


def _shrink(prox, l1_times_lr, l2_times_lr):
    """``sign(prox) * max(|prox| - l1_lr, 0) / (1 + l2_lr)`` (the proximal step)."""
    from ..ops.math.math_ext import abs as abs_
    from ..ops.math.math_ext import maximum, sign
    return sign(prox) * maximum(abs_(prox) - l1_times_lr, 0.0) / (1.0 + l2_times_lr)


class RMSPropOptimizer(Optimizer):
    """``ms = decay * ms + (1 - decay) * g^2``; ``mom = momentum * mom + lr * g /
    sqrt(ms + eps)``; ``var -= mom``. ``centered`` divides by ``sqrt(ms - mg^2 + eps)`` with
    ``mg`` the decayed mean gradient. ``ms`` starts at ones (TF 1.x)."""

    def __init__(self, learning_rate, decay=0.9, momentum=0.0, epsilon=1e-10,
                 use_locking=False, centered=False, name="RMSProp"):
        super().__init__(learning_rate, use_locking, name)
        self._decay, self._momentum, self._eps, self._centered = decay, momentum, epsilon, \
            centered

    def _apply_dense(self, grad, var):
        from ..ops.math.math_ops import sqrt
        rho, mom_c = self._hyper(self._decay, var), self._hyper(self._momentum, var)
        eps = self._hyper(self._eps, var)
        ms, mom = self._slot(var, "rms", 1.0), self._slot(var, "momentum")
        ms_new = ms.assign(rho * ms.value() + (1.0 - rho) * grad * grad)
        denom = ms_new
        if self._centered:
            mg = self._slot(var, "mg")
            mg_new = mg.assign(rho * mg.value() + (1.0 - rho) * grad)
            denom = ms_new - mg_new * mg_new
        mom_new = mom.assign(mom_c * mom.value() + self._lr_tensor(var) * grad /
                             sqrt(denom + eps))
        return var.assign_sub(mom_new).op


class AdadeltaOptimizer(Optimizer):
    """``accum = rho * accum + (1 - rho) * g^2``; ``update = sqrt(accum_update + eps) /
    sqrt(accum + eps) * g``; ``accum_update = rho * accum_update + (1 - rho) * update^2``;
    ``var -= lr * update``."""

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-8, use_locking=False,
                 name="Adadelta"):
        super().__init__(learning_rate, use_locking, name)
        self._rho, self._eps = rho, epsilon

    def _apply_dense(self, grad, var):
        from ..ops.math.math_ops import sqrt
        rho, eps = self._hyper(self._rho, var), self._hyper(self._eps, var)
        accum, accum_up = self._slot(var, "accum"), self._slot(var, "accum_update")
        accum_new = accum.assign(rho * accum.value() + (1.0 - rho) * grad * grad)
        update = sqrt(accum_up.value() + eps) / sqrt(accum_new + eps) * grad
        up_new = accum_up.assign(rho * accum_up.value() + (1.0 - rho) * update * update)
        from ..ops.array.array_ops import group
        return group(var.assign_sub(self._lr_tensor(var) * update).op, up_new.op)


class FtrlOptimizer(Optimizer):
    """FTRL-Proximal (McMahan et al. 2013), TF's ``ApplyFtrlV2``: with ``n`` the accumulated
    squared gradients and ``p = -learning_rate_power``, ``linear += g' - (n_new^p - n^p) / lr *
    var`` (``g' = g + 2 * l2_shrinkage * var``), then ``var = (sign(linear) * l1 - linear) /
    (n_new^p / lr + 2 * l2)`` where ``|linear| > l1``, else 0."""

    def __init__(self, learning_rate, learning_rate_power=-0.5, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 use_locking=False, name="Ftrl", accum_name=None, linear_name=None,
                 l2_shrinkage_regularization_strength=0.0):
        super().__init__(learning_rate, use_locking, name)
        if learning_rate_power > 0.0:
            raise InvalidArgumentError(f"learning_rate_power ({learning_rate_power}) must be "
                                       "<= 0.0")
        if initial_accumulator_value < 0.0:
            raise InvalidArgumentError(f"initial_accumulator_value ({initial_accumulator_value}) "
                                       "must be >= 0.0")
        for what, v in (("l1", l1_regularization_strength), ("l2", l2_regularization_strength),
                        ("l2_shrinkage", l2_shrinkage_regularization_strength)):
            if v < 0.0:
                raise InvalidArgumentError(f"{what}_regularization_strength ({v}) must be >= 0")
        self._power, self._init_acc = learning_rate_power, initial_accumulator_value
        self._l1, self._l2 = l1_regularization_strength, l2_regularization_strength
        self._l2s = l2_shrinkage_regularization_strength
        self._accum_name, self._linear_name = accum_name or "Ftrl", linear_name or "Ftrl_1"

    def _apply_dense(self, grad, var):
        from ..ops.array.array_ops import group, zeros_like
        from ..ops.math.math_ext import abs as abs_
        from ..ops.math.math_ext import greater, sign, where_
        from ..ops.math.math_ops import pow as pow_
        lr = self._lr_tensor(var)
        p = self._hyper(-self._power, var)
        l1, l2 = self._hyper(self._l1, var), self._hyper(self._l2, var)
        accum = self._slot(var, self._accum_name, self._init_acc)
        linear = self._slot(var, self._linear_name)
        w, n = var.value(), accum.value()
        n_new = n + grad * grad
        g_shrunk = grad + (2.0 * self._l2s) * w if self._l2s else grad
        sigma = (pow_(n_new, p) - pow_(n, p)) / lr
        lin_new = linear.assign(linear.value() + g_shrunk - sigma * w)
        quadratic = pow_(n_new, p) / lr + 2.0 * l2
        w_new = where_(greater(abs_(lin_new), l1), (sign(lin_new) * l1 - lin_new) / quadratic,
                       zeros_like(lin_new))
        return group(var.assign(w_new).op, accum.assign(n_new).op)


class ProximalGradientDescentOptimizer(Optimizer):
    """``prox = var - lr * g``; ``var = sign(prox) * max(|prox| - lr * l1, 0) / (1 + lr *
    l2)``."""

    def __init__(self, learning_rate, l1_regularization_strength=0.0,
                 l2_regularization_strength=0.0, use_locking=False,
                 name="ProximalGradientDescent"):
        super().__init__(learning_rate, use_locking, name)
        self._l1, self._l2 = l1_regularization_strength, l2_regularization_strength

    def _apply_dense(self, grad, var):
        lr = self._lr_tensor(var)
        prox = var.value() - lr * grad
        return var.assign(_shrink(prox, lr * self._hyper(self._l1, var),
                                  lr * self._hyper(self._l2, var))).op


class ProximalAdagradOptimizer(Optimizer):
    """Adagrad's per-coordinate rate ``lr / sqrt(accum)`` in the proximal step."""

    def __init__(self, learning_rate, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 use_locking=False, name="ProximalAdagrad"):
        super().__init__(learning_rate, use_locking, name)
        self._init_acc = initial_accumulator_value
        self._l1, self._l2 = l1_regularization_strength, l2_regularization_strength

    def _apply_dense(self, grad, var):
        from ..ops.math.math_ext import rsqrt
        acc = self._slot(var, "ProximalAdagrad", self._init_acc)
        acc_new = acc.assign_add(grad * grad)
        lr = self._lr_tensor(var) * rsqrt(acc_new)
        prox = var.value() - lr * grad
        return var.assign(_shrink(prox, lr * self._hyper(self._l1, var),
                                  lr * self._hyper(self._l2, var))).op
