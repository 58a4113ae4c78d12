"""``tv.nn``: neural-network ops under TensorFlow's names, resolved on first use so that
importing tensorvm stays cheap. Each family module lists its ``tv.nn`` names in ``NN_ALL``:
nn_ops (activations, cross-entropies, conv/pool, dropout, embeddings), nn_norm (lrn, batch
normalisation, small helpers), nn_sampled (candidate samplers, nce and sampled softmax), nn_deconv
(conv2d_transpose), nn_conv_ext (depthwise/separable/1-D convolutions, selu, swish, moments
helpers, pooling aliases), ctc_ops (ctc_loss, ctc_greedy_decoder), nn_conv3d and nn_pool3d (3-D
convolution and pooling), nn_conv_grads (conv2d_backprop_input/filter, conv1d_transpose),
nn_pool_ext (max_pool_with_argmax, fractional pooling, pool, with_space_to_batch), nn_dilation
(dilation2d, erosion2d), tf_api.rnn_ext (raw_rnn, static_state_saving_rnn), nn_misc_ext (the small
rest: atrous_conv2d_transpose, CTC label helpers, approx_max_k, compute_average_loss, aliases),
nn_ctc_ext (ctc_loss_v2, ctc_beam_search_decoder), nn_sampler_ext (all/fixed/learned unigram
candidate samplers);
``tv.nn.rnn_cell`` and the recurrent networks (``dynamic_rnn`` …) come from
:mod:`tensorvm.tf_api.rnn_cell` and :mod:`tensorvm.tf_api.rnn`."""
import importlib as _importlib
import pkgutil as _pkgutil

_MODULES = tuple(f"tensorvm.ops.nn.{m}" for m in (
    "nn_ops", "nn_norm", "nn_sampled", "nn_deconv", "nn_conv_ext", "ctc_ops", "nn_conv3d",
    "nn_pool3d", "nn_conv_grads", "nn_pool_ext", "nn_dilation", "nn_misc_ext", "nn_ctc_ext",
    "nn_sampler_ext")) + ("tensorvm.tf_api.rnn_ext",)
_RNN = "tensorvm.tf_api.rnn"
_SPARSE = ("embedding_lookup_sparse", "safe_embedding_lookup_sparse")  # in tensorvm.tf_api.sparse


# This package is also the ``tv.nn`` namespace: its family modules are imported by name, never
# resolved through the namespace below (``from . import nn_conv`` asks this module first).
_SUBMODULES = frozenset(m.name for m in _pkgutil.iter_modules(__path__))


def __getattr__(name):
    if name in _SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    if name == "rnn_cell":
        return _importlib.import_module("tensorvm.tf_api.rnn_cell")
    if name in _SPARSE:
        return getattr(_importlib.import_module("tensorvm.tf_api.sparse"), name)
    rnn = _importlib.import_module(_RNN)
    if name in rnn.NN_ALL:
        return getattr(rnn, name)
    for m in _MODULES:
        mod = _importlib.import_module(m)
        if name in getattr(mod, "NN_ALL", ()):
            return getattr(mod, name)
    raise AttributeError(f"module 'tensorvm.nn' has no attribute {name!r}")


def __dir__():
    return sorted([n for m in _MODULES
                   for n in getattr(_importlib.import_module(m), "NN_ALL", ())]
                  + ["rnn_cell", *_SPARSE] + _importlib.import_module(_RNN).NN_ALL)
