"""Moto's DynamoDB emulation served one request at a time.

Moto's own server handles each request on its own thread, and its conditional writes check and then
write without a lock, so two concurrent conditional PutItems can both succeed. DynamoDB makes each
conditional write atomic per item. Serializing every request restores that guarantee for the
emulator (at the cost of throughput, which only matters to benchmarks).

Usage: moto_serialized.py --host 127.0.0.1 --port-file PATH [--port N] [--state-file PATH]
Binds the port (by default an ephemeral one), writes it to PATH once listening, then serves until
terminated. With --state-file, the DynamoDB state is loaded from that file at start (if it exists)
and saved to it on SIGTERM, so that a restart keeps the tables and items, as DynamoDB Local does
with -dbPath.
"""

import argparse
import os
import pickle
import signal
import sys
import threading

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from moto.backends import get_backend
from werkzeug.serving import make_server


class Serialized:
    """WSGI middleware that runs the wrapped application under one global lock."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        with self.lock:
            # Materialize the body inside the lock: the handler's work may be lazy.
            return list(self.app(environ, start_response))


def load_state(path: str) -> None:
    if not os.path.exists(path):
        return
    with open(path, "rb") as f:
        saved = pickle.load(f)
    backends = get_backend("dynamodb")
    for account, regions in saved.items():
        backends[account] = regions


def save_state(path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        pickle.dump(dict(get_backend("dynamodb")), f)
    os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--state-file")
    args = parser.parse_args()

    if args.state_file:
        load_state(args.state_file)
    app = Serialized(DomainDispatcherApplication(create_backend_app))
    server = make_server(args.host, args.port, app, threaded=True, request_handler=MotoRequestHandler)

    def terminate(*_):
        if args.state_file:
            with app.lock:  # not in the middle of a request
                save_state(args.state_file)
        sys.exit(0)

    signal.signal(signal.SIGTERM, terminate)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_port))
    os.replace(tmp, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
