"""Natural English text for the own-run studies (issue 60 item 3): Jane Austen's six novels, as
Debian ships them in r-cran-janeaustenr 1.0.0-1 (CRAN's janeaustenr 1.0.0, Julia Silge; package
MIT, the novels public domain, Project Gutenberg's texts without its licence headers).

    python3 experiments/natural_text/prepare.py data/natural_text

(run from the repository root; Python 3.8+ standard library, apt-get and dpkg-deb; apt-get
update once first if apt has no package lists). Nothing is installed: the pinned .deb is fetched
with `apt-get download`, checked against its sha256, and unpacked into a temporary directory
with `dpkg-deb -x`; the novels are read from the package's R lazy-load database
(data/Rdata.rdb + .rdx: zlib-compressed R serializations of one character vector per novel,
one element per line) by the minimal reader below, so R is not needed.

Written into OUT (deterministic: the same bytes on every machine; PROVENANCE.md lists each
file's sha256):
  train/<novel>-NNN.txt   five novels, each cut at paragraph breaks into chunks of about
                          CHUNK_BYTES bytes (the text-file loader reads one document per file and
                          deals files to the 16 batch rows: many equal chunks keep every row fed)
  validation/NNN-northangerabbey.txt
                          the sixth novel, held out whole (Northanger Abbey, the shortest), cut
                          the same way; its chunks are numbered in a spread order (every s-th
                          chunk around the book, s coprime to the count), so the evaluated prefix of the split -- the loader
                          reads validation files in sorted order and the studies evaluate the
                          first 64 batches x 16 rows x 65 bytes = 66,560 byte tokens -- samples the
                          whole novel, not its first chapters
  source/r-cran-janeaustenr_1.0.0-1_all.deb
                          the package as downloaded (kept so a rerun needs no network)
  PROVENANCE.md           package, version, sha256, licence, byte counts, the split, file hashes

The loader's holdout: `data.holdout_files` = the number of validation files (printed, and in
PROVENANCE.md) holds out the last files in sorted path order, and `validation/` sorts after
`train/`.

Text handling: lines joined with "\\n" as the package stores them (Gutenberg's hard-wrapped
lines), trailing spaces removed, runs of blank lines cut to one, the editor's "A NOTE ON THE
TEXT" at the end of Northanger Abbey removed; UTF-8 (one non-ASCII character: a pound sign).
"""
from __future__ import annotations

import gzip
import hashlib
import math
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

PACKAGE, VERSION = "r-cran-janeaustenr", "1.0.0-1"
DEB = f"{PACKAGE}_{VERSION}_all.deb"
DEB_SHA256 = "df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95"
DATA_DIR = "usr/lib/R/site-library/janeaustenr/data"
NOVELS = {  # R object name -> (file stem, title); the package's six objects
    "sensesensibility": ("sensesensibility", "Sense and Sensibility (1811)"),
    "prideprejudice": ("prideprejudice", "Pride and Prejudice (1813)"),
    "mansfieldpark": ("mansfieldpark", "Mansfield Park (1814)"),
    "emma": ("emma", "Emma (1815)"),
    "persuasion": ("persuasion", "Persuasion (1817)"),
    "northangerabbey": ("northangerabbey", "Northanger Abbey (1817)"),
}
HELD_OUT = "northangerabbey"
CHUNK_BYTES = 8192  # a chunk closes at the first paragraph break at or after this many bytes
EVAL_BYTES = 64 * 16 * 65  # what the studies evaluate: 64 batches x 16 rows x 65 byte tokens


# ---- a minimal reader of R's XDR serialization (version 2 or 3): vectors, pairlists, symbols
class _RReader:
    def __init__(self, data: bytes):
        self.data, self.pos, self.refs = data, 0, []

    def _int(self) -> int:
        (v,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return v

    def item(self):
        flags = self._int()
        kind, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
        if kind in (254, 242, 241, 253, 252, 251, 250):  # NULL and the special environments
            return None
        if kind == 255:  # a reference to an earlier symbol
            return self.refs[(flags >> 8) - 1]
        if kind == 1:  # SYMSXP
            sym = ("sym", self.item())
            self.refs.append(sym)
            return sym
        if kind == 9:  # CHARSXP
            n = self._int()
            if n == -1:
                return None  # NA_character_
            text = self.data[self.pos:self.pos + n].decode("utf-8")
            self.pos += n
            return text
        if kind == 2:  # LISTSXP (attributes)
            if has_attr:
                self.item()
            tag = self.item() if has_tag else None
            car, cdr = self.item(), self.item()
            return [(tag, car)] + (cdr or [])
        if kind in (16, 19):  # STRSXP, VECSXP
            values = [self.item() for _ in range(self._int())]
        elif kind in (10, 13):  # LGLSXP, INTSXP
            n = self._int()
            values = list(struct.unpack_from(f">{n}i", self.data, self.pos))
            self.pos += 4 * n
        elif kind == 14:  # REALSXP
            n = self._int()
            values = list(struct.unpack_from(f">{n}d", self.data, self.pos))
            self.pos += 8 * n
        else:
            raise ValueError(f"R object type {kind} is not read by this script")
        attrs = dict((t[1] if t else None, v) for t, v in self.item()) if has_attr else {}
        return dict(zip(attrs["names"], values)) if "names" in attrs else values


def unserialize(data: bytes):
    if data[:2] != b"X\n":
        raise ValueError("not an R XDR serialization")
    r = _RReader(data)
    r.pos = 2
    version = r._int()
    r._int(), r._int()  # the writer's R version, the minimal reader version
    if version == 3:
        n = r._int()
        r.pos += n  # the native encoding's name
    return r.item()


def lazyload(rdx: Path, rdb: Path) -> dict:
    """The objects of an R lazy-load database (zlib-compressed entries, as R packages write them)."""
    index = unserialize(gzip.decompress(rdx.read_bytes()))
    blob = rdb.read_bytes()
    out = {}
    for name, (offset, length) in index["variables"].items():
        entry = blob[offset:offset + length]
        out[name] = unserialize(zlib.decompress(entry[4:]))  # 4 bytes: the uncompressed length
    return out


# ---- the corpus
def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch_deb(dest: Path) -> Path:
    """The pinned .deb in dest/ (downloaded unless already there), its sha256 checked."""
    dest.mkdir(parents=True, exist_ok=True)
    deb = dest / DEB
    if not deb.exists():
        subprocess.run(["apt-get", "download", f"{PACKAGE}={VERSION}"], cwd=dest, check=True)
    got = sha256(deb)
    if got != DEB_SHA256:
        raise SystemExit(f"{deb}: sha256 {got}, expected {DEB_SHA256}: not the pinned package")
    return deb


def clean(lines: list, name: str) -> str:
    if any(line is None for line in lines):
        raise SystemExit(f"{name}: NA lines in the package's text")
    if name == "northangerabbey":  # the Signet edition's note on the text, not Austen's
        lines = lines[:max(i for i, line in enumerate(lines) if line.strip() == "A NOTE ON THE TEXT")]
    text = "\n".join(line.rstrip() for line in lines).strip("\n") + "\n"
    return re.sub(r"\n{3,}", "\n\n", text)


def chunks(text: str) -> list[str]:
    """Consecutive pieces of `text`, each closing at the first paragraph break at or after
    CHUNK_BYTES bytes (the last piece takes the rest); their concatenation is `text`."""
    out, start = [], 0
    while start < len(text):
        cut = text.find("\n\n", start + CHUNK_BYTES)
        end = len(text) if cut < 0 else cut + 2
        if len(text.encode()) - len(text[:end].encode()) < CHUNK_BYTES // 2:
            end = len(text)  # no short tail: it joins the last chunk
        out.append(text[start:end])
        start = end
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    out = Path(argv[0])
    for sub in ("train", "validation"):
        if (out / sub).exists():
            shutil.rmtree(out / sub)
    deb = fetch_deb(out / "source")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["dpkg-deb", "-x", str(deb), tmp], check=True)
        data = Path(tmp) / DATA_DIR
        objects = lazyload(data / "Rdata.rdx", data / "Rdata.rdb")
    if set(objects) != set(NOVELS):
        raise SystemExit(f"the package holds {sorted(objects)}, expected {sorted(NOVELS)}")
    rows, files = [], []
    for name, (stem, title) in NOVELS.items():
        text = clean(objects[name], name)
        pieces = chunks(text)
        assert "".join(pieces) == text
        n = len(pieces)
        if name == HELD_OUT:
            split = out / "validation"
            # sorted position p holds chunk (p * stride) mod n, the stride coprime to n and about
            # n / (the chunks the evaluation reads): the evaluated prefix spans the whole book
            stride = max(1, n * CHUNK_BYTES // EVAL_BYTES)
            while math.gcd(stride, n) != 1:
                stride += 1
            names = {(p * stride) % n: f"{p:03d}-{stem}.txt" for p in range(n)}
        else:
            split = out / "train"
            names = {k: f"{stem}-{k:03d}.txt" for k in range(n)}
        split.mkdir(parents=True, exist_ok=True)
        for k, piece in enumerate(pieces):
            path = split / names[k]
            path.write_bytes(piece.encode("utf-8"))
            files.append(path)
        size = len(text.encode("utf-8"))
        rows.append((title, name, split.name, n, size))
    total = sum(r[4] for r in rows)
    train_bytes = sum(r[4] for r in rows if r[2] == "train")
    n_val = sum(r[3] for r in rows if r[2] == "validation")
    n_train = sum(r[3] for r in rows if r[2] == "train")
    chunk_sizes = sorted(p.stat().st_size for p in (out / "train").glob("*.txt"))
    manifest = hashlib.sha256("".join(f"{sha256(p)}  {p.relative_to(out)}\n" for p in sorted(files)).encode()).hexdigest()
    lines = [
        "# Natural-text corpus: Jane Austen's six novels",
        "",
        "Written by `python3 experiments/natural_text/prepare.py OUT` (depthdelusion, issue 60 item 3).",
        "",
        "| | |",
        "|---|---|",
        f"| package | Debian `{PACKAGE}` {VERSION} (architecture all; upstream CRAN `janeaustenr` 1.0.0 by Julia Silge, 2022-08-26) |",
        f"| archive | `{DEB}`, sha256 `{DEB_SHA256}` (fetched with `apt-get download {PACKAGE}={VERSION}`, unpacked with `dpkg-deb -x`; nothing installed) |",
        "| licence | the package: MIT (Copyright 2016-2017 Julia Silge; Debian packaging 2021 Andreas Tille, MIT); the novels (1811-1817): public domain. The texts are Project Gutenberg's with its licence headers already removed by the package |",
        "| read from | `usr/lib/R/site-library/janeaustenr/data/Rdata.rdb` (+ `.rdx`): one R character vector per novel, one element per line |",
        "| cleaning | lines joined with newlines, trailing spaces removed, runs of blank lines cut to one; Northanger Abbey's closing editorial note (\"A NOTE ON THE TEXT\") removed; UTF-8 |",
        f"| bytes | {total:,} in all; train {train_bytes:,}, validation {total - train_bytes:,} |",
        f"| files | train/: {n_train} chunks ({chunk_sizes[0]:,}-{chunk_sizes[-1]:,} bytes each), validation/: {n_val} chunks |",
        f"| loader settings | `data.path=OUT data.format=text data.holdout_files={n_val} data.tokenizer=bytes` |",
        f"| manifest sha256 | `{manifest}` (sha256 of the sorted `sha256  path` lines below) |",
        "",
        "## Split",
        "",
        f"Five novels train; {NOVELS[HELD_OUT][1]}, the shortest, is held out whole. Each novel is cut at",
        f"paragraph breaks into chunks of about {CHUNK_BYTES:,} bytes (a chunk closes at the first blank line",
        f"after {CHUNK_BYTES:,} bytes; a tail under half that joins the chunk before): the loader reads one",
        "document per .txt file and deals the training files, shuffled by `data.seed`, to the 16 batch",
        "rows, so equal small chunks give every row the same share (about 1/16 of the training bytes).",
        f"`data.holdout_files={n_val}` holds out the last {n_val} files in sorted path order, which are exactly",
        "`validation/` (it sorts after `train/`). The loader evaluates validation files in sorted order;",
        f"chunk k of the held-out novel is file number p with k = p x {stride} mod {n_val}, so the evaluated",
        "prefix (64 batches x 16 rows x 65 byte tokens = 66,560 bytes, about 9 chunks) is spread over the",
        "whole novel.",
        "",
        "| novel | R object | split | chunks | bytes |",
        "|---|---|---|---:|---:|",
        *[f"| {t} | `{n}` | {s} | {c} | {b:,} |" for t, n, s, c, b in rows],
        "",
        "## Files",
        "",
        "```",
        *[f"{sha256(p)}  {p.relative_to(out)}" for p in sorted(files)],
        "```",
        "",
    ]
    (out / "PROVENANCE.md").write_text("\n".join(lines))
    print(f"{out}: {total:,} bytes; train/ {n_train} files ({train_bytes:,} bytes), validation/ {n_val} files; "
          f"train with data.path={out} data.format=text data.holdout_files={n_val}; manifest {manifest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
