"""Server mode: the local cloud behind moto's HTTP server on a loopback port, in real time.

    converge local up --port 4566 --outputs-file .converge-local.json     # the CLI calls serve()
    aws --endpoint-url http://127.0.0.1:4566 dynamodb put-item ...        # enqueue from anywhere
    aws --endpoint-url http://127.0.0.1:4566 ssm put-parameter --overwrite ...   # flip a toggle

The stack is deployed through boto3 pointed at the endpoint; a background thread polls the emulated
event sources (batching windows honoured), fires schedules on the real clock and turns SSM changes
into events. Handlers run in this process with AWS_ENDPOINT_URL set to the endpoint, and Lambda
Invoke of a stack function (e.g. the RedriveFunctionName output) runs its handler here too. Each HTTP
API of the template listens on its own loopback port (see `http_apis` in the outputs file; the enqueue
API's is also `api_url`), and stack outputs naming an API's execute-api URL are rewritten to that port.
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import socket
import threading
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from moto.server import ThreadedMotoServer

from .api_server import ApiServer
from .cloud import LocalCloud, Seeder
from .emf import EmfToCloudWatch

LOG = logging.getLogger(__name__)
HOST = "127.0.0.1"
DEFAULT_API = "EnqueueApi"
"""Logical id of the HTTP API whose URL `serve()` reports as `api_url` (converge's enqueue API)."""


class PortInUse(OSError):
    """The loopback port asked for is taken (another local cloud, or any other server)."""


def ensure_port_free(port: int) -> None:
    """Fail now if the port is taken: moto's server would fail in its own thread and never report ready."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server itself binds
        try:
            probe.bind((HOST, port))
        except OSError as exc:
            raise PortInUse(f"port {port} on {HOST} is already in use ({exc.strerror})") from None


def catalogue_seeder(cloud: LocalCloud) -> None:
    """Seed the job catalogue's demo data through its local hooks (nothing, for a catalogue without them)."""
    cloud.hooks.seed(cloud.clients, cloud.outputs)


class BackgroundPoller:
    """Runs `cloud.poll_once()` every `interval` seconds until stopped; errors are logged, not fatal."""

    def __init__(self, cloud: LocalCloud, interval: float = 0.25) -> None:
        self._cloud = cloud
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="localcloud-poller", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self._cloud.poll_once()
            except Exception:
                LOG.exception("local cloud poll failed; continuing")
            self._stopped.wait(self._interval)


@contextlib.contextmanager
def running(
    port: int | None = None,
    *,
    template_path: Path | str | None = None,
    stage: str = "dev",
    seeders: list[Seeder] | tuple[Seeder, ...] = (),
    poll_interval: float = 0.25,
    metrics: bool = False,
    catalogue: str | None = None,
) -> Iterator[LocalCloud]:
    """Start the server, deploy, seed and poll; yields the cloud (its endpoint is cloud.clients.endpoint_url).

    Without a port (or with 0) the server binds a port the OS picks: no probe-then-bind, so clouds started at
    once in several processes (tests in parallel) never race for one. `metrics` turns the functions' EMF log
    lines into CloudWatch metrics, as the service does on AWS."""
    if port:
        ensure_port_free(port)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one access-log line per API call otherwise
    server = ThreadedMotoServer(ip_address=HOST, port=port or 0, verbose=False)
    server.start()
    endpoint = f"http://{HOST}:{server.get_host_and_port()[1]}"
    # moto's backends are process-wide: start from an empty account, not from an earlier cloud's state.
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"), timeout=10).close()
    cloud = LocalCloud(
        template_path=template_path, stage=stage, endpoint_url=endpoint, history_limit=1000, catalogue=catalogue
    )
    poller = BackgroundPoller(cloud, poll_interval)
    api_servers: list[ApiServer] = []
    emf = EmfToCloudWatch(cloud.client("cloudwatch"))
    try:
        cloud.deploy()
        for seeder in seeders:
            cloud.add_seeder(seeder)
        for api in cloud.http_apis:
            api_servers.append(ApiServer(api, HOST))
            api_servers[-1].start()
        cloud.http_api_urls = {s.api.logical_id: s.url for s in api_servers}
        for api_server in api_servers:
            _point_outputs_at(cloud.outputs, api_server.api.api_id, api_server.url)
        if metrics:
            cloud.runtime.log_listeners.append(emf.start())
        poller.start()
        yield cloud
    finally:
        poller.stop()
        emf.stop()
        for api_server in api_servers:
            api_server.stop()
        cloud.close()
        server.stop()


def _point_outputs_at(outputs: dict[str, str], api_id: str, url: str) -> None:
    """Rewrite outputs naming the API's execute-api endpoint (e.g. an ApiUrl output) to its loopback URL."""
    for key, value in outputs.items():
        host, slash, path = str(value).removeprefix("https://").partition("/")
        if str(value).startswith("https://") and host.startswith(f"{api_id}.execute-api."):
            outputs[key] = url + slash + path if path else url


def primary_api_url(http_api_urls: dict[str, str], logical_id: str = DEFAULT_API) -> str | None:
    """The URL of the API named `logical_id`, else of the template's only API, else None."""
    if logical_id in http_api_urls:
        return http_api_urls[logical_id]
    return next(iter(http_api_urls.values())) if len(http_api_urls) == 1 else None


def serve(
    port: int = 4566,
    outputs_file: Path | str | None = None,
    seed: bool = True,
    on_ready: Callable[[dict[str, Any]], None] | None = None,
    *,
    template_path: Path | str | None = None,
    stage: str = "dev",
    seeders: list[Seeder] | None = None,
    stop: threading.Event | None = None,
    api: str = DEFAULT_API,
    on_log: Callable[[str, str], None] | None = None,
    catalogue: str | None = None,
) -> None:
    """Run until SIGINT/SIGTERM (or `stop` is set). When ready: write {"endpoint_url", "outputs",
    "http_apis": {api logical id: url}, "api_url"} to `outputs_file`, then call `on_ready(info)` (or print it).
    The outputs file is removed again when the cloud stops, so no reader finds an endpoint that is gone.

    `api_url` is the loopback URL of the HTTP API with logical id `api` (or of the template's only one).
    `on_log(function logical id, line)` receives every line the functions print (their CloudWatch logs)."""
    stop = stop or threading.Event()
    chosen_seeders = (seeders if seeders is not None else [catalogue_seeder]) if seed else []
    path = Path(outputs_file) if outputs_file else None
    with running(
        port, template_path=template_path, stage=stage, seeders=chosen_seeders, metrics=True, catalogue=catalogue
    ) as cloud:
        if on_log:
            cloud.runtime.log_listeners.append(on_log)
        info = {
            "endpoint_url": cloud.clients.endpoint_url,
            "region": cloud.clients.region,
            "outputs": cloud.outputs,
            "http_apis": cloud.http_api_urls,
            "api_url": primary_api_url(cloud.http_api_urls, api),
        }
        try:
            if path:
                temporary = path.with_suffix(path.suffix + ".tmp")
                temporary.write_text(json.dumps(info, indent=2))
                temporary.replace(path)  # readers never see a half-written file
            (on_ready or _print_ready)(info)
            with _stop_on_signals(stop):
                while not stop.wait(0.5):
                    pass
        finally:
            if on_log:
                cloud.runtime.log_listeners.remove(on_log)
            if path:
                path.unlink(missing_ok=True)


def _print_ready(info: dict[str, Any]) -> None:
    print(f"local cloud ready at {info['endpoint_url']}")
    if info["api_url"]:
        print(f"enqueue API at {info['api_url']}")
    print(json.dumps(info["outputs"], indent=2))


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be installed from the main thread
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda *_: stop.set())
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
