"""The files of published run tables: where each comes from, its sha256, and the download.

The package ships none of them (except the paper's own table): a registered table is downloaded
from its source repository, pinned by commit, into a cache, the way scikit-learn's
``fetch_openml`` or seaborn's ``load_dataset`` work. The downloader is pooch (the scientific
Python stack's), the cache a user cache directory (platformdirs). A file is used only once its
sha256 matches the registered one (``reference/published_files.txt``, pooch's registry format:
``OWNER/REPO/COMMIT/PATH sha256`` per line); a mismatch is refused and leaves nothing cached.

``DEPTHDELUSION_CACHE`` overrides the cache directory (its ``tables/`` folder holds them). ``DEPTHDELUSION_TABLES_URL`` replaces the
raw-file host for every download: a mirror is a plain copy with the same layout,
``OWNER/REPO/COMMIT/PATH``, so an offline cluster serves a copied folder over HTTP
and every table downloads from it.
"""
from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ..reference import REFERENCE_DIR

RAW_HOST = "https://raw.githubusercontent.com"
MIRROR_VARIABLE = "DEPTHDELUSION_TABLES_URL"
CACHE_VARIABLE = "DEPTHDELUSION_CACHE"
REGISTRY = REFERENCE_DIR / "published_files.txt"
#: Seconds to wait for the server to answer (connect and each read): an offline host fails fast.
TIMEOUT_S = 10


class TableUnavailable(ValueError):
    """A registered file could not be obtained (offline, not on the mirror, sha256 mismatch)."""


@dataclass(frozen=True)
class SourceFile:
    """One file of a source repository at one commit: ``key`` is OWNER/REPO/COMMIT/PATH."""

    repo: str
    commit: str
    path: str

    @property
    def key(self) -> str:
        return f"{self.repo}/{self.commit}/{self.path}"

    @property
    def sha256(self) -> str:
        return registry()[self.key]

    @property
    def raw_url(self) -> str:
        """The file at the source (the raw-file host), whatever mirror is set."""
        return f"{RAW_HOST}/{self.key}"

    def url(self) -> str:
        """Where it is downloaded from now: the mirror when ``DEPTHDELUSION_TABLES_URL`` is set."""
        return f"{(os.environ.get(MIRROR_VARIABLE) or RAW_HOST).rstrip('/')}/{self.key}"

    def cache_path(self) -> Path:
        return cache_dir() / self.key

    def cache_state(self) -> str:
        """``verified`` (the cache holds this file, its sha256 the registered one), ``altered``
        (it holds a file of that name with another sha256: never used, replaced on the next
        download) or ``absent``."""
        path = self.cache_path()
        if not path.is_file():
            return "absent"
        return "verified" if sha256_of(path) == self.sha256 else "altered"

    def cached(self) -> bool:
        return self.cache_state() == "verified"


def sha256_of(path: Path) -> str:
    """The file's sha256, remembered per (path, size, modification time): ``tables list`` checks
    every cached file, and one command may ask more than once."""
    stat = Path(path).stat()
    return _sha256(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=1024)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@functools.lru_cache(maxsize=None)
def registry() -> dict[str, str]:
    """{OWNER/REPO/COMMIT/PATH: sha256} of every registered file."""
    entries = {}
    for line in REGISTRY.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, sha = line.split()
            entries[key] = sha
    return entries


def files_under(repo: str, commit: str, folder: str) -> tuple[SourceFile, ...]:
    """Every registered file of ``repo`` at ``commit`` under ``folder`` (a table of many files)."""
    prefix = f"{repo}/{commit}/{folder.rstrip('/')}/"
    return tuple(SourceFile(repo, commit, key[len(f"{repo}/{commit}/"):])
                 for key in sorted(registry()) if key.startswith(prefix))


def cache_dir() -> Path:
    """``tables/`` in the package's cache: ``DEPTHDELUSION_CACHE`` (as for the data pipeline's
    cache), else the user cache directory platformdirs names (~/.cache/depthdelusion on Linux)."""
    own = os.environ.get(CACHE_VARIABLE)
    if own:
        return Path(own).expanduser() / "tables"
    import platformdirs

    return platformdirs.user_cache_path("depthdelusion") / "tables"


def fetch(files, announce: str = "") -> list[Path]:
    """The verified local copies of ``files`` (:class:`SourceFile`), each downloaded first when
    the cache lacks it; after a download, ``announce`` (the table's licence and citation) is
    printed on stderr, once."""
    if not all(file.cached() for file in files):  # a filled read-only cache is used as it is
        _check_cache_dir()
    paths, fresh = [], []
    for file in files:
        missing = not file.cached()
        paths.append(_retrieve(file))
        if missing:
            fresh.append(file.url())
    if fresh and announce:
        more = f" and {len(fresh) - 1} more file(s)" if len(fresh) > 1 else ""
        print(f"downloaded {fresh[0]}{more} to {cache_dir()}\n{announce}", file=sys.stderr)
    return paths


def _check_cache_dir() -> None:
    """TableUnavailable, naming the path, when the cache cannot hold a download (a file, a
    read-only mount, a folder without write permission): said before any download."""
    from depthdelusion.outputs import unwritable

    where = cache_dir()
    why = unwritable(str(where))
    if why is None:
        try:  # os.access says yes to root on a read-only mount's subfolders: try it
            where.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            why = f"cannot create {where}: {err.strerror}"
    if why:
        raise TableUnavailable(f"the table cache {where} cannot be written ({why}): set "
                               f"{CACHE_VARIABLE} to a writable directory (its tables/ folder holds "
                               "the downloads)")


def _retrieve(file: SourceFile) -> Path:
    import pooch
    import requests

    pooch.get_logger().setLevel("WARNING")  # its "Downloading ..." lines are ours to say
    target, url = file.cache_path(), file.url()
    altered = file.cache_state() == "altered"
    try:
        path = pooch.retrieve(url, known_hash=f"sha256:{file.sha256}", fname=target.name,
                              path=target.parent, progressbar=False,
                              downloader=pooch.HTTPDownloader(timeout=TIMEOUT_S))
    except requests.exceptions.RequestException as err:  # before OSError: it is one
        target.unlink(missing_ok=True)  # an altered copy is never used: not kept either
        held = (f"the cache's copy {target} was not the registered file (sha256 mismatch), so it "
                "was removed" if altered else f"the cache {cache_dir()} has no copy")
        raise TableUnavailable(
            f"cannot download {url} ({type(err).__name__}) and {held}: "
            f"connect, or set {MIRROR_VARIABLE} to a mirror (OWNER/REPO/COMMIT/PATH layout) or "
            f"{CACHE_VARIABLE} to a cache that has it") from None
    except OSError as err:  # the cache folder went away or lost its permissions meanwhile
        raise TableUnavailable(f"cannot write {target} in the table cache ({err.strerror}): set "
                               f"{CACHE_VARIABLE} to a writable directory") from None
    except ValueError as err:  # pooch: the sha256 does not match
        target.unlink(missing_ok=True)
        raise TableUnavailable(f"{url}: refused, its sha256 is not the registered {file.sha256} "
                               f"({str(err).splitlines()[0]}); nothing was kept in {cache_dir()}") from None
    return Path(path)
