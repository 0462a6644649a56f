"""One local HTTP server for the fakes that speak a cloud API to the real client libraries
(Cost Explorer, BigQuery, the Kubernetes API, Auto Scaling, GKE): a thread serving
``answer(method, path, headers, body) -> (status, headers, body)``, every call recorded."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[int, dict[str, str], bytes | str | dict[str, Any] | list[Any]]


class LocalServer:
    """``answer`` returns a dict/list (sent as JSON), str or bytes; ``calls`` holds
    ``{"method", "path", "headers", "body"}`` of every request."""

    def __init__(self, answer: Callable[[str, str, dict[str, str], bytes], Answer]) -> None:
        self.calls: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                server.calls.append({"method": self.command, "path": self.path,
                                     "headers": headers, "body": body})
                status, out_headers, out = answer(self.command, self.path, headers, body)
                if isinstance(out, dict | list):
                    data = json.dumps(out).encode()
                    out_headers = {"Content-Type": "application/json", **out_headers}
                else:
                    data = out.encode() if isinstance(out, str) else out
                self.send_response(status)
                for k, v in out_headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
