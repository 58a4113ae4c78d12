"""Package hygiene: nothing is ever unpickled, storage imports nothing else of tensorvm,
and every module's docstring examples run."""

from __future__ import annotations

import ast
import doctest
import importlib
import pathlib
import re

import fsspec
import pytest

STORAGE = pathlib.Path(__file__).resolve().parents[2] / "storage"
MODULES = sorted(p for p in STORAGE.glob("*.py"))
_UNPICKLERS = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "marshal", "shelve",
               "joblib"}
_BAD_TEXT = [r"allow_pickle\s*=\s*True", r"\bpickle\.loads?\(", r"\bnp\.load\(",
             r"\bnumpy\.load\(", r"\bUnpickler\b", r"to_pandas\("]


def test_storage_has_modules():
    assert {p.name for p in MODULES} >= {"errors.py", "checkpoint.py", "splits.py",
                                         "readers.py", "output.py"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_nothing_is_ever_unpickled(path):
    source = path.read_text()
    for pattern in _BAD_TEXT:
        assert not re.search(pattern, source), f"{path.name} matches {pattern!r}"
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            assert not {a.name.split(".")[0] for a in node.names} & _UNPICKLERS, path.name
        if isinstance(node, ast.ImportFrom):
            assert (node.module or "").split(".")[0] not in _UNPICKLERS, path.name
        if isinstance(node, ast.keyword) and node.arg == "allow_pickle":
            assert isinstance(node.value, ast.Constant) and node.value.value is False, path.name


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_storage_imports_nothing_else_of_tensorvm(path):
    # psutil: whether an output claim's owner process still lives (output.py), a declared
    # dependency (and distributed's)
    allowed = {"fsspec", "numpy", "pyarrow", "google_crc32c", "psutil", "__future__"}
    allowed_packages = ("google.protobuf",)  # TF's protos: tf_protos.py (declared dependency)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            continue  # relative: inside tensorvm.storage
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) else [])
        for name in names:
            top = name.split(".")[0]
            if top == "tensorvm":
                assert name.startswith("tensorvm.storage"), f"{path.name} imports {name}"
            else:
                import sys
                assert top in allowed or top in sys.stdlib_module_names or \
                    name.startswith(allowed_packages), \
                    f"{path.name} imports {name}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_docstring_examples(path):
    fs = fsspec.filesystem("memory")
    for root in [p for p in fs.ls("/") if "tvm-doc" in str(p)]:
        fs.rm(root if isinstance(root, str) else root["name"], recursive=True)
    name = "tensorvm.storage" if path.stem == "__init__" else f"tensorvm.storage.{path.stem}"
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0
    for root in fs.ls("/", detail=False):
        if "tvm-doc" in root:
            fs.rm(root, recursive=True)


def test_wsum64_still_reads_version_1_by_its_definition():
    """wsum64 is kept only to verify version-1 checkpoints: check it against its definition."""
    import numpy as np

    from tensorvm.storage.checksums import WSum64

    rng = np.random.default_rng(0)
    for size in [0, 1, 7, 8, 9, 8191, 8192, 8 * 1024 * 3 + 5, 50_003]:
        record = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        words = np.frombuffer(record + bytes(-len(record) % 8), "<u8")
        want = sum(pow(0x9E3779B97F4A7C15, i // 1024, 1 << 64) * (2 * (i % 1024) + 1) * int(x)
                   for i, x in enumerate(words)) % (1 << 64)
        state = WSum64()  # streaming in odd-sized pieces
        for lo in range(0, size, 3001):
            state.update(record[lo : lo + 3001])
        assert state.digest() == want
