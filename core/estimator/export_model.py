"""``Estimator.export_saved_model``: the prediction graph on serving inputs, with the
checkpoint's variables, written as described in :mod:`tensorvm.estimator.export`."""
from __future__ import annotations

import json
import logging
import time

from .export import DEFAULT_SERVING_SIGNATURE_DEF_KEY, SIGNATURES_FILE, ExportOutput, PredictOutput
from .model_fn import ModeKeys

_log = logging.getLogger("tensorvm")

__all__ = ["export_saved_model"]


def _signatures(spec, receiver) -> dict:
    outputs = spec.export_outputs or {
        DEFAULT_SERVING_SIGNATURE_DEF_KEY: PredictOutput(spec.predictions)}
    if len(outputs) == 1 and DEFAULT_SERVING_SIGNATURE_DEF_KEY not in outputs:
        outputs = {**outputs, DEFAULT_SERVING_SIGNATURE_DEF_KEY: next(iter(outputs.values()))}
    if DEFAULT_SERVING_SIGNATURE_DEF_KEY not in outputs:
        raise ValueError("Multiple export_outputs were provided, but none of them is specified "
                         "as the default.  Do this by naming one of them with "
                         "signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY.")
    inputs = {k: t.name for k, t in receiver.receiver_tensors.items()}
    out = {}
    for key, o in outputs.items():
        if not isinstance(o, ExportOutput):
            raise TypeError(f"Values in export_outputs must be ExportOutput objects. Given: "
                            f"{outputs}")
        out[key] = {"method": o.method, "inputs": inputs,
                    "outputs": {k: t.name for k, t in o.outputs.items()}}
    return out


def _timestamped_dir(base: str) -> str:
    from ..storage.fsio import to_fs
    fs, path = to_fs(base)
    stamp = int(time.time())
    while fs.exists(f"{path.rstrip('/')}/{stamp}"):
        stamp += 1
    return f"{base.rstrip('/')}/{stamp}"


def export_saved_model(est, export_dir_base, serving_input_receiver_fn, checkpoint_path=None):
    """Build the PREDICT graph on the serving inputs, restore the checkpoint and write the
    export folder; returns its path as bytes (as TF)."""
    from ..framework.graph import Graph
    from ..storage.fsio import to_fs
    from ..train.saver import Saver
    from ..ops.state.variables import global_variables
    if serving_input_receiver_fn is None:
        raise ValueError("An input_receiver_fn must be defined.")
    checkpoint_path = checkpoint_path or est.latest_checkpoint()
    if not checkpoint_path:
        raise ValueError(f"Couldn't find trained model at {est.model_dir}.")
    with Graph().as_default() as g:
        est._new_graph(g)
        receiver = serving_input_receiver_fn()
        spec = est._call_model_fn(receiver.features, None, ModeKeys.PREDICT, est.config)
        signatures = _signatures(spec, receiver)
        saver = Saver(global_variables(g), sharded=False)
        export_dir = _timestamped_dir(str(export_dir_base))
        with est._session(g) as sess:
            saver.restore(sess, checkpoint_path)
            saver.save(sess, f"{export_dir}/variables/variables", write_meta_graph=True)
    fs, path = to_fs(export_dir)
    fs.pipe_file(f"{path}/{SIGNATURES_FILE}", json.dumps(signatures, indent=1).encode())
    _log.info("Exported the model of %s to %s", checkpoint_path, export_dir)
    return export_dir.encode()
