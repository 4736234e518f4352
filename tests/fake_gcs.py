"""A `gs://` served from a local directory, for tests: registered in fsspec under "gs" and "gcs",
which is what etils.epath uses for gs:// when TensorFlow is not installed (it calls
fsspec.filesystem("gcs", finalize_on_close=True); gcsfs is the real implementation there).
Paths come back without the protocol ("bucket/key"), as gcsfs returns them."""
from __future__ import annotations

import contextlib
from pathlib import Path

import fsspec
from etils.epath import backend as epath_backend
from fsspec.implementations.dirfs import DirFileSystem
from fsspec.implementations.local import LocalFileSystem


class LocalDirGCS(DirFileSystem):
    protocol = ("gs", "gcs")
    root: str = ""  # set by `serve_gs_from`
    writes: list[str] = []  # every object opened for writing, in order

    def __init__(self, *args, finalize_on_close=None, **kwargs):
        super().__init__(path=self.root, fs=LocalFileSystem(auto_mkdir=True))

    def _join(self, path):
        if isinstance(path, str):
            return super()._join(path.split("://", 1)[-1])
        return super()._join([p.split("://", 1)[-1] for p in path])

    def open(self, path, mode="rb", *args, **kwargs):
        if "w" in mode or "a" in mode:
            type(self).writes.append(path.split("://", 1)[-1])
        return super().open(path, mode, *args, **kwargs)


@contextlib.contextmanager
def serve_gs_from(root: Path):
    """Within the block, gs://BUCKET/KEY is the file ROOT/BUCKET/KEY. Raises if gcsfs (the
    dependency that makes epath reach real GCS) is missing."""
    real = fsspec.get_filesystem_class("gs")  # ImportError without gcsfs
    assert real.__module__.startswith("gcsfs"), real
    LocalDirGCS.root, LocalDirGCS.writes = str(root), []
    root.mkdir(parents=True, exist_ok=True)
    for name in ("gs", "gcs"):
        fsspec.register_implementation(name, LocalDirGCS, clobber=True)
    LocalDirGCS.clear_instance_cache()
    epath_backend.fsspec_backend._get_filesystem.cache_clear()
    try:
        yield LocalDirGCS
    finally:
        for name in ("gs", "gcs"):
            fsspec.register_implementation(name, real, clobber=True)
        epath_backend.fsspec_backend._get_filesystem.cache_clear()
