"""The runnable examples in the core modules' docstrings (the passes' three-node examples)."""
import doctest
import importlib

import pytest

MODULES = [
    "tensorvm", "tensorvm.device_spec", "tensorvm.registry", "tensorvm.gradients",
    "tensorvm.variables", "tensorvm.session", "tensorvm.passes.prune",
    "tensorvm.passes.optimize", "tensorvm.passes.place", "tensorvm.passes.partition",
    "tensorvm.passes.stage", "tensorvm.passes.unroll", "tensorvm.train.cluster",
    "tensorvm.train.device_setter",
    "tensorvm.train.optimizers",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
