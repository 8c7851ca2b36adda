"""Fetching the real yelp_review_full tarball, verified and atomically renamed into place.

The file is streamed into a hidden temporary file next to its destination, checked (byte count against the
server's Content-Length, then the known size and MD5), and only then renamed to its final name. On any failure
the temporary file is deleted, so the destination folder never holds a partial or corrupt download.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DATASETS", "DatasetInfo", "DownloadError", "download", "file_md5"]

CHUNK_BYTES = 1 << 20
DEFAULT_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class DatasetInfo:
    url: str
    filename: str
    size: int | None
    md5: str | None


DATASETS = {
    "yelp_review_full": DatasetInfo(
        url="https://s3.amazonaws.com/fast-ai-nlp/yelp_review_full_csv.tgz",
        filename="yelp_review_full_csv.tgz",
        size=196146755,
        md5="f7ddfafed1033f68ec72b9267863af6c",
    ),
}


class DownloadError(RuntimeError):
    """The download failed or did not verify; nothing was left in the destination folder."""


class _TransferBroken(Exception):
    """Fewer bytes arrived than the server announced."""


def file_md5(path: str | os.PathLike) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _by_hand(info: DatasetInfo, url: str, target: Path, size, md5) -> str:
    checks = ", ".join(part for part in (f"size {size} bytes" if size else "", f"md5 {md5}" if md5 else "") if part)
    return (f"Download it by hand from {url} (any browser or mirror) and save it as {target}"
            + (f" ({checks})" if checks else "") + "; coursekit.load_yelp() reads it from there.")


def _verify(path: Path, size: int | None, md5: str | None) -> str | None:
    """None when the file matches, else what is wrong."""
    actual_size = path.stat().st_size
    if size is not None and actual_size != size:
        return f"size is {actual_size} bytes, expected {size}"
    if md5 is not None:
        actual_md5 = file_md5(path)
        if actual_md5 != md5.lower():
            return f"MD5 is {actual_md5}, expected {md5.lower()}"
    return None


def download(name: str = "yelp_review_full", dest: str | os.PathLike = "data", url: str | None = None,
             md5: str | None = None, size: int | None = None, timeout: float = DEFAULT_TIMEOUT_S,
             progress: bool = True) -> Path:
    """Download data set `name` into folder `dest` and return the path of the verified file.

    url overrides the source (a mirror, a test server). The known size/MD5 are checked for the default URL;
    for another URL only the `size`/`md5` given here are checked (none when not given). A file already in
    place that verifies is kept and not downloaded again.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; known: {', '.join(sorted(DATASETS))}")
    info = DATASETS[name]
    source = url or info.url
    if size is None and source == info.url:
        size = info.size
    if md5 is None and source == info.url:
        md5 = info.md5
    dest = Path(dest)
    target = dest / info.filename
    if target.is_file() and (size is not None or md5 is not None) and _verify(target, size, md5) is None:
        return target
    dest.mkdir(parents=True, exist_ok=True)
    handle = tempfile.NamedTemporaryFile(dir=dest, prefix=f".{info.filename}.", suffix=".partial", delete=False)
    partial = Path(handle.name)
    try:
        with handle:
            _fetch(source, handle, timeout, progress, info.filename)
        problem = _verify(partial, size, md5)
        if problem:
            raise DownloadError(f"the file from {source} is corrupt: {problem}. " + _by_hand(info, source, target,
                                                                                          size, md5))
        os.replace(partial, target)
    except DownloadError:
        raise
    except (urllib.error.URLError, OSError, ValueError, _TransferBroken) as error:
        raise DownloadError(f"could not download {source}: {_reason(error)}. "
                            + _by_hand(info, source, target, size, md5)) from error
    finally:
        if partial.exists():
            partial.unlink()
    return target


def _reason(error: BaseException) -> str:
    if isinstance(error, urllib.error.HTTPError):
        return f"HTTP {error.code} {error.reason}"
    if isinstance(error, urllib.error.URLError):
        return str(error.reason)
    return str(error) or type(error).__name__


def _fetch(url: str, out, timeout: float, progress: bool, label: str) -> None:
    """Stream `url` into the open binary file `out`; raise _TransferBroken when fewer bytes arrive than announced."""
    from tqdm.auto import tqdm

    with urllib.request.urlopen(url, timeout=timeout) as response:
        announced = response.headers.get("Content-Length")
        announced = int(announced) if announced and announced.isdigit() else None
        received = 0
        with tqdm(total=announced, unit="B", unit_scale=True, unit_divisor=1024, desc=label,
                  disable=not progress) as bar:
            while True:
                try:
                    chunk = response.read(CHUNK_BYTES)
                except Exception as error:  # http.client.IncompleteRead and friends: the server stopped early
                    raise _TransferBroken(f"the connection broke after {received} bytes ({error!r})") from error
                if not chunk:
                    break
                out.write(chunk)
                received += len(chunk)
                bar.update(len(chunk))
    if announced is not None and received != announced:
        raise _TransferBroken(f"the server announced {announced} bytes but sent {received}")
