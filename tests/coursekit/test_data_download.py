"""coursekit.data.download against a local HTTP server on 127.0.0.1 (no real network)."""
import hashlib
import io
import socket
import tarfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from coursekit.data import load_yelp
from coursekit.data.__main__ import main
from coursekit.data.download import DATASETS, DownloadError, download
from coursekit.data.yelp import write_yelp_csv

FILENAME = DATASETS["yelp_review_full"].filename


def _small_tarball(tmp_path_factory) -> bytes:
    folder = tmp_path_factory.mktemp("tarball")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for split, rows in (("train", [(5, "great"), (1, "awful\nreally")]), ("test", [(3, "fine")])):
            write_yelp_csv(folder / f"{split}.csv", rows)
            archive.add(folder / f"{split}.csv", arcname=f"yelp_review_full_csv/{split}.csv")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """Serves /good, /truncated (announces more bytes than it sends), /corrupt (other bytes), /missing (404)."""
    payload = _small_tarball(tmp_path_factory)
    hits = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            if self.path == "/missing":
                self.send_error(404)
                return
            body = payload
            if self.path == "/corrupt":
                body = payload[:-10] + bytes(10)
            self.send_response(200)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.path == "/truncated":
                body = payload[: len(payload) // 2]
                self.close_connection = True
            self.wfile.write(body)
            self.wfile.flush()

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield base, payload, hits
    httpd.shutdown()
    httpd.server_close()


def _md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def _names(folder):
    return sorted(path.name for path in folder.iterdir())


def test_success_verifies_renames_and_loads(server, tmp_path):
    base, payload, _ = server
    path = download(dest=tmp_path / "data", url=f"{base}/good", md5=_md5(payload), size=len(payload),
                    progress=False)
    assert path == tmp_path / "data" / FILENAME
    assert path.read_bytes() == payload
    assert _names(tmp_path / "data") == [FILENAME]  # no temporary file left
    assert load_yelp(tmp_path / "data", "train") == (["great", "awful\nreally"], [4, 0])


def test_custom_url_without_checksums_skips_verification(server, tmp_path):
    base, payload, _ = server
    assert download(dest=tmp_path, url=f"{base}/good", progress=False).read_bytes() == payload


def test_verified_file_is_not_downloaded_again(server, tmp_path):
    base, payload, hits = server
    (tmp_path / FILENAME).write_bytes(payload)
    before = len(hits)
    download(dest=tmp_path, url=f"{base}/good", md5=_md5(payload), progress=False)
    assert len(hits) == before


@pytest.mark.parametrize("route, message", [("truncated", "bytes"), ("corrupt", "MD5"), ("missing", "HTTP 404")])
def test_failures_leave_nothing_behind(server, tmp_path, route, message):
    base, payload, _ = server
    (tmp_path / "keep.txt").write_text("an unrelated file")
    with pytest.raises(DownloadError, match=message) as caught:
        download(dest=tmp_path, url=f"{base}/{route}", md5=_md5(payload), size=len(payload), progress=False)
    assert _names(tmp_path) == ["keep.txt"]
    assert "by hand" in str(caught.value) and str(tmp_path / FILENAME) in str(caught.value)


def test_corrupt_download_keeps_an_existing_file(server, tmp_path):
    base, payload, _ = server
    (tmp_path / FILENAME).write_bytes(b"an older, unverified copy")
    with pytest.raises(DownloadError):
        download(dest=tmp_path, url=f"{base}/corrupt", md5=_md5(payload), progress=False)
    assert (tmp_path / FILENAME).read_bytes() == b"an older, unverified copy"
    assert _names(tmp_path) == [FILENAME]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens there once the socket is closed


def test_unreachable_host_fails_at_once_with_instructions(tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}/{FILENAME}"
    start = time.monotonic()
    with pytest.raises(DownloadError, match="by hand") as caught:
        download(dest=tmp_path, url=url, timeout=5, progress=False)
    assert time.monotonic() - start < 5
    assert url in str(caught.value)
    assert _names(tmp_path) == []


def test_unknown_data_set_name():
    with pytest.raises(ValueError, match="unknown data set"):
        download("imdb")


def test_command_line(server, tmp_path, capsys):
    base, payload, _ = server
    assert main(["download", "yelp_review_full", "--dest", str(tmp_path), "--url", f"{base}/good",
                 "--md5", _md5(payload), "--size", str(len(payload)), "--no-progress"]) == 0
    assert "ready:" in capsys.readouterr().out
    assert main(["download", "yelp_review_full", "--dest", str(tmp_path / "x"), "--url", f"{base}/corrupt",
                 "--md5", _md5(payload), "--no-progress"]) == 1
    assert "error:" in capsys.readouterr().err
    assert _names(tmp_path / "x") == []
