"""Moto's DynamoDB emulation served one request at a time.

Moto's own server handles each request on its own thread, and its conditional writes check and then
write without a lock, so two concurrent conditional PutItems can both succeed. DynamoDB makes each
conditional write atomic per item. Serializing every request restores that guarantee for the
emulator (at the cost of throughput, which only matters to benchmarks).

Usage: moto_serialized.py --host 127.0.0.1 --port-file PATH
Binds an ephemeral port, writes it to PATH once listening, then serves until terminated.
"""

import argparse
import os
import signal
import sys
import threading

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port-file", required=True)
    args = parser.parse_args()

    app = Serialized(DomainDispatcherApplication(create_backend_app))
    server = make_server(args.host, 0, app, threaded=True, request_handler=MotoRequestHandler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_port))
    os.replace(tmp, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
