"""A fake Cloud Storage JSON API and OAuth token endpoint on loopback, for the gs:// preflight.

Only HTTP is faked: the code under test finds real credentials (a service account key
file whose `token_uri` is this server), google-auth signs and exchanges its JWT, and
`requests` sends every call here through `STORAGE_EMULATOR_HOST`.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

TOKEN = "fake-access-token"


class FakeGcs:
    """Buckets: name → object names, or an HTTP status every request to it gets."""

    def __init__(self) -> None:
        self.buckets: dict[str, list[str] | int] = {}
        self.requests: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeGcs:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def key_file(self, folder: Path) -> Path:
        """A service account key file whose tokens come from this server."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        path = folder / "key.json"
        info = {
            "type": "service_account",
            "project_id": "fake-project",
            "private_key_id": "1",
            "private_key": pem,
            "client_email": "trainer@fake-project.iam.gserviceaccount.com",
            "client_id": "1",
            "token_uri": f"{self.url}/token",
        }
        path.write_text(json.dumps(info))
        return path

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: object) -> None:  # quiet
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                fake.requests.append(f"POST {self.path}")
                self._send(200, {"access_token": TOKEN, "expires_in": 3600, "token_type": "Bearer"})

            def do_GET(self) -> None:
                fake.requests.append(f"GET {self.path}")
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    self._send(401, {"error": {"code": 401, "message": "no token"}})
                    return
                url = urlparse(self.path)
                parts = url.path.split("/")  # '', storage, v1, b, <bucket>, o[, <object>]
                bucket = fake.buckets.get(unquote(parts[4]), 404)
                if isinstance(bucket, int):
                    message = {403: "trainer@ does not have storage.objects.list access"}
                    said = message.get(bucket, "The specified bucket does not exist.")
                    self._send(bucket, {"error": {"code": bucket, "message": said}})
                elif len(parts) > 6:
                    name = unquote(parts[6])
                    if name in bucket:
                        self._send(200, {"name": name, "size": "10"})
                    else:
                        self._send(404, {"error": {"code": 404, "message": "No such object"}})
                else:
                    query = parse_qs(url.query)
                    prefix = query.get("prefix", [""])[0]
                    start = int(query.get("pageToken", ["0"])[0])
                    size = int(query.get("maxResults", ["1000"])[0])
                    names = [n for n in bucket if n.startswith(prefix)]
                    page: dict = {"items": [{"name": n} for n in names[start : start + size]]}
                    if start + size < len(names):
                        page["nextPageToken"] = str(start + size)
                    self._send(200, page if names else {})

        return Handler
