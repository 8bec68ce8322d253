"""Serve the template's HTTP APIs on loopback ports in server mode (one port per API)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from .http_api import HttpApi


class ApiServer:
    def __init__(self, api: HttpApi, host: str, port: int = 0) -> None:
        self.api = api
        self._server = ThreadingHTTPServer((host, port), _handler_for(api))  # port 0: any free port
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"http-api-{api.logical_id}", daemon=True
        )
        self.url = f"http://{host}:{self._server.server_address[1]}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler_for(api: HttpApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("content-length") or 0)
            response = api.handle(
                self.command,
                url.path,
                headers=dict(self.headers.items()),
                body=self.rfile.read(length) if length else None,
                query=url.query,
                source_ip=self.client_address[0],
            )
            self.send_response(response.status)
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(response.body)))
            self.end_headers()
            self.wfile.write(response.body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve

        def log_message(self, format: str, *args: object) -> None:
            pass  # one line per request on stderr otherwise

    return Handler
