"""tv.read_file / write_file / matching_files (and their tv.io names) on local paths and fsspec
URLs; a write is atomic; errors name the file."""
from __future__ import annotations

import os

import numpy as np
import pytest

import tensorvm as tv


def test_write_then_read_local_and_memory(tmp_path):
    local = str(tmp_path / "deep" / "dir" / "f.bin")
    data = bytes(range(256)) * 3
    with tv.Session() as s:
        s.run(tv.write_file(local, data))
        s.run(tv.io.write_file("memory://tv-file-ops/a.txt", "héllo"))
        assert s.run(tv.read_file(local)) == data
        assert s.run(tv.io.read_file("memory://tv-file-ops/a.txt")) == "héllo".encode()
    with open(local, "rb") as f:
        assert f.read() == data
    assert [p for p in os.listdir(tmp_path / "deep" / "dir")] == ["f.bin"]  # no temp left


def test_matching_files_sorted_per_pattern(tmp_path):
    for name in ("b.txt", "a.txt", "c.csv"):
        (tmp_path / name).write_text(name)
    pats = tv.placeholder(tv.string, [None])
    with tv.Session() as s:
        got = s.run(tv.matching_files(str(tmp_path / "*.txt")))
        assert [os.path.basename(p.decode()) for p in got] == ["a.txt", "b.txt"]
        both = s.run(tv.io.matching_files(pats), {pats: [str(tmp_path / "*.csv"),
                                                        str(tmp_path / "a*")]})
        assert [os.path.basename(p.decode()) for p in both] == ["c.csv", "a.txt"]
        assert s.run(tv.matching_files(str(tmp_path / "*.none"))).shape == (0,)
        s.run(tv.write_file("memory://tv-file-ops-glob/x.txt", "1"))
        urls = s.run(tv.matching_files("memory://tv-file-ops-glob/*.txt"))
        assert [u.decode() for u in urls] == ["memory:///tv-file-ops-glob/x.txt"]
        assert s.run(tv.read_file(urls[0])) == b"1"


def test_read_files_named_by_a_dataset_and_decode_them(tmp_path):
    imgs = [np.full((2, 3, 3), v, np.uint8) for v in (10, 200)]
    with tv.Session() as s:
        for i, img in enumerate(imgs):
            s.run(tv.write_file(str(tmp_path / f"{i}.png"), tv.image.encode_png(img)))
    files = tv.matching_files(str(tmp_path / "*.png"))
    ds = tv.data.Dataset.from_tensor_slices(files).map(
        lambda f: tv.io.decode_png(tv.read_file(f)))
    nxt = ds.make_initializable_iterator()
    with tv.Session() as s:
        s.run(nxt.initializer)
        got = [s.run(nxt.get_next()) for _ in imgs]
    for g, img in zip(got, imgs):
        np.testing.assert_array_equal(g, img)


def test_file_op_errors(tmp_path):
    with tv.Session() as s:
        with pytest.raises(tv.errors.NotFoundError, match="ReadFile: .*missing.txt.*no such file"):
            s.run(tv.read_file(str(tmp_path / "missing.txt")))
    with pytest.raises(tv.errors.InvalidArgumentError, match="ReadFile: filename must be a "
                                                             "scalar string, got shape"):
        tv.read_file(["a", "b"])
    with pytest.raises(tv.errors.InvalidArgumentError, match="MatchingFiles: pattern must be a "
                                                             "scalar or a vector"):
        tv.matching_files([["a"]])
    from tensorvm.framework.op_registry import get_op_def
    assert "host" in get_op_def("ReadFile").cpu_only
