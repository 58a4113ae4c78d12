"""``tv.gfile`` and ``tv.io.gfile``: TensorFlow's file API on fsspec (any URL tensorvm's
storage reads: local paths, ``file://``, ``memory://``, ``s3://``...).

TF 1.x's names (``tf.gfile.Exists``, ``MakeDirs``, ``DeleteRecursively``, ``GFile``...) are
this module's; TF >= 1.13's lower-case ones (``tf.io.gfile.exists``, ``makedirs``,
``rmtree``...) are :data:`io_gfile`'s. A missing file or directory is
``tv.errors.NotFoundError`` naming the path; creating over an existing one without
``overwrite`` is ``tv.errors.AlreadyExistsError``, as TF's.

>>> import tensorvm as tv
>>> tv.gfile.MakeDirs("memory://gfile-doc/a/b")
>>> with tv.gfile.GFile("memory://gfile-doc/a/b/x.txt", "w") as f:
...     _ = f.write("hello\\nworld\\n")
>>> tv.io.gfile.exists("memory://gfile-doc/a/b/x.txt"), tv.gfile.ListDirectory("memory://gfile-doc/a")
(True, ['b'])
>>> with tv.gfile.GFile("memory://gfile-doc/a/b/x.txt") as f:
...     f.readlines()
['hello\\n', 'world\\n']
>>> tv.io.gfile.rmtree("memory://gfile-doc"); tv.gfile.Exists("memory://gfile-doc/a")
False
"""
from __future__ import annotations

import posixpath
import types

import fsspec

from ..framework.errors import AlreadyExistsError, NotFoundError

__all__ = ["Copy", "DeleteRecursively", "Exists", "FastGFile", "GFile", "Glob", "IsDirectory",
           "ListDirectory", "MakeDirs", "MkDir", "Open", "Remove", "Rename", "Stat",
           "Walk", "io_gfile"]


def _fs(path):
    fs, p = fsspec.core.url_to_fs(str(path))
    return fs, p


def _not_found(path, what="file or directory") -> NotFoundError:
    return NotFoundError(f"{path}; No such {what}")


class GFile:
    """TF's ``GFile``: a file at ``name`` opened with ``mode`` (``'r'``, ``'rb'``, ``'w'``,
    ``'wb'``, ``'a'``); text modes read and write ``str`` (UTF-8)."""

    def __init__(self, name, mode: str = "r"):
        self.name = str(name)
        self.mode = mode
        fs, path = _fs(name)
        if "r" in mode and not fs.isfile(path):
            raise _not_found(self.name, "file")
        local = "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,))
        if ("w" in mode or "a" in mode) and local and not fs.isdir(posixpath.dirname(path)):
            raise _not_found(posixpath.dirname(self.name), "directory")
        text = "b" not in mode
        self._f = fsspec.open(self.name, mode.replace("b", "") + "b").open()
        if text:
            import io
            self._f = io.TextIOWrapper(self._f, encoding="utf-8", newline="")

    def __getattr__(self, name):  # read, write, readline, seek, tell, flush ...
        return getattr(self.__dict__["_f"], name)

    def __iter__(self):
        return iter(self._f)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def size(self) -> int:
        """The file's size in bytes."""
        self._f.flush()
        fs, path = _fs(self.name)
        return fs.size(path)

    def close(self) -> None:
        self._f.close()

    def __repr__(self):
        return f"<GFile {self.name!r} mode={self.mode!r}>"


Open = FastGFile = GFile


def Exists(filename) -> bool:
    """Whether a file or directory exists at ``filename``."""
    fs, path = _fs(filename)
    return fs.exists(path)


def IsDirectory(dirname) -> bool:
    """Whether ``dirname`` is a directory."""
    fs, path = _fs(dirname)
    return fs.isdir(path)


def MakeDirs(dirname) -> None:
    """Make ``dirname`` and its missing parents (an existing directory is fine)."""
    fs, path = _fs(dirname)
    fs.makedirs(path, exist_ok=True)


def MkDir(dirname) -> None:
    """Make the one directory ``dirname``; AlreadyExistsError where it exists."""
    fs, path = _fs(dirname)
    if fs.exists(path):
        raise AlreadyExistsError(f"{dirname}; File exists")
    fs.mkdir(path, create_parents=False)


def ListDirectory(dirname) -> list[str]:
    """The names (not paths) in directory ``dirname``."""
    fs, path = _fs(dirname)
    if not fs.isdir(path):
        raise _not_found(dirname, "directory")
    return sorted(posixpath.basename(p.rstrip("/")) for p in fs.ls(path, detail=False)
                  if p.rstrip("/") != path.rstrip("/"))


def Glob(filename) -> list[str]:
    """The paths matching the pattern ``filename``, with its protocol where it had one."""
    fs, path = _fs(filename)
    found = sorted(fs.glob(path))
    text = str(filename)
    if "://" in text:
        proto = text.split("://", 1)[0]
        return [f"{proto}://{p.lstrip('/') if proto == 'memory' else p}" if "://" not in p
                else p for p in found]
    return found


def Remove(filename) -> None:
    """Delete the file ``filename``."""
    fs, path = _fs(filename)
    if not fs.isfile(path):
        raise _not_found(filename, "file")
    fs.rm_file(path)


def DeleteRecursively(dirname) -> None:
    """Delete ``dirname`` and everything in it (a file is deleted too)."""
    fs, path = _fs(dirname)
    if not fs.exists(path):
        raise _not_found(dirname)
    fs.rm(path, recursive=True)


def Rename(oldname, newname, overwrite: bool = False) -> None:
    """Move ``oldname`` to ``newname``; AlreadyExistsError where it exists, unless
    ``overwrite``."""
    fs, old = _fs(oldname)
    _, new = _fs(newname)
    if not fs.exists(old):
        raise _not_found(oldname)
    if fs.exists(new):
        if not overwrite:
            raise AlreadyExistsError(f"{newname}; File exists")
        fs.rm(new, recursive=True)
    fs.mv(old, new, recursive=True)


def Copy(oldpath, newpath, overwrite: bool = False) -> None:
    """Copy the file ``oldpath`` to ``newpath``; AlreadyExistsError where it exists, unless
    ``overwrite``."""
    fs, old = _fs(oldpath)
    _, new = _fs(newpath)
    if not fs.isfile(old):
        raise _not_found(oldpath, "file")
    if fs.exists(new) and not overwrite:
        raise AlreadyExistsError(f"{newpath}; File exists")
    fs.copy(old, new)


class FileStatistics(types.SimpleNamespace):
    """``Stat``'s answer: ``length``, ``mtime_nsec``, ``is_directory``."""


def Stat(filename) -> FileStatistics:
    """Size, modification time and kind of ``filename``."""
    fs, path = _fs(filename)
    if not fs.exists(path):
        raise _not_found(filename)
    info = fs.info(path)
    mtime = info.get("mtime") or info.get("created") or 0
    mtime = mtime.timestamp() if hasattr(mtime, "timestamp") else float(mtime)
    return FileStatistics(length=int(info.get("size") or 0), mtime_nsec=int(mtime * 1e9),
                          is_directory=info.get("type") == "directory")


def Walk(top, in_order: bool = True):
    """``(dirpath, subdirnames, filenames)`` for ``top`` and each directory below it (parents
    first with ``in_order``, else children first); nothing where ``top`` is no directory."""
    fs, path = _fs(top)
    if not fs.isdir(path):
        return
    dirs, files = [], []
    for p in fs.ls(path, detail=True):
        name = posixpath.basename(p["name"].rstrip("/"))
        if p["name"].rstrip("/") == path.rstrip("/"):
            continue
        (dirs if p["type"] == "directory" else files).append(name)
    here = (str(top), sorted(dirs), sorted(files))
    if in_order:
        yield here
    for d in sorted(dirs):
        yield from Walk(posixpath.join(str(top), d), in_order)
    if not in_order:
        yield here


io_gfile = types.ModuleType("tensorvm.io.gfile", "TF >= 1.13's ``tf.io.gfile`` (lower-case "
                                                 "names of :mod:`tensorvm.tf_api.gfile`).")
io_gfile.__dict__.update(
    GFile=GFile, copy=Copy, exists=Exists, glob=Glob, isdir=IsDirectory, listdir=ListDirectory,
    makedirs=MakeDirs, mkdir=MkDir, remove=Remove, rename=Rename, rmtree=DeleteRecursively,
    stat=Stat, walk=Walk)
