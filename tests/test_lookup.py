"""tv.lookup (TF 1.x's tf.lookup / tf.contrib.lookup): tables against Python dicts, text-file
initializers on local paths and memory://, out-of-vocabulary buckets, and the errors."""
from __future__ import annotations

import numpy as np
import pytest

import tensorvm as tv

VOCAB = ["the", "cat", "sat", "on", "mat"]


def test_index_tables_equal_dict_lookups():
    words = np.array([["cat", "dog"], ["mat", "the"]], dtype=object)
    ids = tv.lookup.index_table_from_tensor(VOCAB)
    back = tv.lookup.index_to_string_table_from_tensor(VOCAB, default_value="<unk>")
    prices = tv.contrib.lookup.HashTable(
        tv.contrib.lookup.KeyValueTensorInitializer([7, 3, 11], [0.7, 0.3, 1.1]), -1.0)
    assert tv.get_collection(tv.GraphKeys.TABLE_INITIALIZERS)
    with tv.Session() as s:
        s.run(tv.tables_initializer())
        want = [[VOCAB.index(w) if w in VOCAB else -1 for w in row] for row in words]
        assert s.run(ids.lookup(tv.constant(words))).tolist() == want
        got = s.run(back.lookup(tv.constant([4, 0, 9, -1], tv.int64)))
        assert got.tolist() == ["mat", "the", "<unk>", "<unk>"]
        np.testing.assert_allclose(s.run(prices.lookup(tv.constant([11, 5, 7]))),
                                   [1.1, -1.0, 0.7])
        assert s.run([ids.size(), prices.size()]) == [5, 3]


def test_oov_buckets_are_stable_and_after_the_vocabulary():
    table = tv.lookup.index_table_from_tensor(VOCAB, num_oov_buckets=4)
    unknown = [f"w{i}" for i in range(50)]
    q = tv.constant(np.array(VOCAB + unknown, dtype=object))
    with tv.Session() as s:
        s.run(tv.initialize_all_tables())
        a = s.run(table.lookup(q))
        b = s.run(table.lookup(q))
        assert s.run(table.size()) == 9
    assert a[:5].tolist() == [0, 1, 2, 3, 4]
    assert ((a[5:] >= 5) & (a[5:] < 9)).all() and len(set(a[5:].tolist())) > 1
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("root", ["local", "memory"])
def test_text_file_tables(tmp_path, root):
    base = str(tmp_path) if root == "local" else "memory://tv-lookup-test"
    vocab, pairs = f"{base}/vocab.txt", f"{base}/pairs.tsv"
    with tv.Session() as s:
        s.run(tv.write_file(vocab, "\n".join(VOCAB) + "\n"))
        s.run(tv.write_file(pairs, "a\t1\nb\t2\nc\t30\n"))
    ids = tv.lookup.index_table_from_file(vocab)
    names = tv.lookup.index_to_string_table_from_file(vocab)
    short = tv.lookup.index_table_from_file(vocab, vocab_size=2)
    kv = tv.lookup.HashTable(tv.lookup.TextFileInitializer(pairs, tv.string, 0, tv.int64, 1), -1)
    with tv.Session() as s:
        s.run(tv.tables_initializer())
        assert s.run(ids.lookup(tv.constant(["sat", "mat", "dog"]))).tolist() == [2, 4, -1]
        assert s.run(names.lookup(tv.constant([1, 3], tv.int64))).tolist() == ["cat", "on"]
        assert s.run(short.lookup(tv.constant(["the", "sat"]))).tolist() == [0, -1]
        assert s.run(kv.lookup(tv.constant(["c", "a", "z"]))).tolist() == [30, 1, -1]


def test_lookup_errors(tmp_path):
    table = tv.lookup.index_table_from_tensor(VOCAB)
    missing = tv.lookup.index_table_from_file(str(tmp_path / "nope.txt"))
    bad_size = tv.lookup.index_table_from_file(str(tmp_path / "v.txt"), vocab_size=9)
    (tmp_path / "v.txt").write_text("a\nb\n")
    with tv.Session() as s:
        with pytest.raises(tv.errors.FailedPreconditionError, match="Table not initialized"):
            s.run(table.lookup(tv.constant(["cat"])))
        with pytest.raises(tv.errors.NotFoundError, match="nope.txt: no such file"):
            s.run(missing.initializer)
        with pytest.raises(tv.errors.InvalidArgumentError,
                           match="invalid vocab_size .*expected 9 lines, the file has 2"):
            s.run(bad_size.initializer)
    with pytest.raises(TypeError, match="Signature mismatch. Keys must be dtype string"):
        table.lookup(tv.constant([1, 2]))
    with pytest.raises(ValueError, match="num_oov_buckets must be greater or equal than 0"):
        tv.lookup.index_table_from_tensor(VOCAB, num_oov_buckets=-1)
    with pytest.raises(ValueError, match="vocabulary_file must be specified"):
        tv.lookup.index_table_from_file("")
    dup = tv.lookup.HashTable(tv.lookup.KeyValueTensorInitializer(["a", "a"], [1, 2]), 0)
    with tv.Session() as s, pytest.raises(tv.errors.InvalidArgumentError, match="duplicate keys"):
        s.run(dup.initializer)


def test_tables_are_cpu_only():
    from tensorvm.framework.op_registry import get_op_def
    for op in ("LookupTableImport", "LookupTableFind", "InitializeTableFromTextFile"):
        assert "host" in get_op_def(op).cpu_only
