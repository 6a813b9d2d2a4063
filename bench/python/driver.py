"""Benchmark driver for the PyPI package python_dynamodb_lock (0.9.1).

Speaks the same command line and JSON-lines protocol as the other drivers in bench/, so that the
orchestrator can run every contender the same way. See README.md next to this file.
"""

import argparse
import datetime
import json
import os
import sys
import threading
import time

import boto3
import botocore
from botocore.exceptions import ClientError
from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient, DynamoDBLockError

LIBRARY = "python_dynamodb_lock"
LIBRARY_VERSION = "0.9.1"
REGION = "us-east-1"

# The library's defaults are lease 30 s, heartbeat 5 s, safe period 20 s. The lease comes from the
# command line, and a 5 s heartbeat under a shorter lease would let waiters take live locks, so the
# other two keep the default proportions; at --lease-ms 30000 every setting is the library default.
HEARTBEAT_PER_LEASE = 5 / 30
SAFE_PERIOD_PER_LEASE = 20 / 30

# A waiter that is not meant to time out still needs a bound, so that a stuck run ends with an
# error line instead of hanging the orchestrator.
WAIT_CAP_S = 600

_out_lock = threading.Lock()


def emit(obj):
    line = json.dumps(obj, separators=(",", ":")) + "\n"
    # Worker threads print concurrently; one line must never be split by another.
    with _out_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def fail(message):
    emit({"error": message})
    # os._exit, not sys.exit: other workers may be blocked inside acquire_lock, and the run is
    # already lost, so there is nothing worth waiting for.
    os._exit(1)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--endpoint", required=True)
    p.add_argument("--table", required=True)
    p.add_argument("--scenario", required=True,
                   choices=["uncontended", "contended", "many", "hold", "takeover"])
    p.add_argument("--resource", required=True)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--ops", type=int, default=1)
    p.add_argument("--lease-ms", type=int, required=True)
    p.add_argument("--hold-ms", type=int, default=0)
    # Holds vary from --hold-ms up to this: see hold_of.
    p.add_argument("--hold-max-ms", type=int, default=None)
    p.add_argument("--poll-ms", type=int, default=None)
    args = p.parse_args()
    if args.workers < 1 or args.ops < 1 or args.lease_ms < 1 or args.hold_ms < 0:
        p.error("--workers, --ops and --lease-ms must be positive, --hold-ms not negative")
    if args.hold_max_ms is not None and args.hold_max_ms < args.hold_ms:
        p.error("--hold-max-ms must not be below --hold-ms")
    if args.poll_ms is not None and args.poll_ms < 1:
        # The library treats a zero retry period as "use the default", which would be misleading.
        p.error("--poll-ms must be positive")
    return args


def new_session(access_key="test"):
    # boto3 documents that resources are not thread-safe, and each lock client keeps one resource
    # for its whole life, so every lock client gets a session of its own. A worker's session signs
    # with an access key of its own (worker<i>), by which the orchestrator's proxy tells its
    # requests from the other workers'; the endpoint does not tell them apart (-sharedDb).
    return boto3.session.Session(
        aws_access_key_id=access_key,
        aws_secret_access_key="test",
        region_name=REGION,
    )


def ensure_table(endpoint, table):
    client = new_session().client("dynamodb", endpoint_url=endpoint)
    pk = DynamoDBLockClient._DEFAULT_PARTITION_KEY_NAME
    sk = DynamoDBLockClient._DEFAULT_SORT_KEY_NAME
    try:
        desc = client.describe_table(TableName=table)["Table"]
    except ClientError as e:
        if e.response["Error"]["Code"] != "ResourceNotFoundException":
            raise
        try:
            # The library's own helper, so that the schema (lock_key, sort_key) and the TTL
            # attribute are exactly what the library expects.
            DynamoDBLockClient.create_dynamodb_table(client, table_name=table)
            return
        except ClientError as e2:
            # Another driver may have created it in the meantime.
            if e2.response["Error"]["Code"] != "ResourceInUseException":
                raise
        while True:
            desc = client.describe_table(TableName=table)["Table"]
            if desc.get("TableStatus") == "ACTIVE":
                break
            time.sleep(0.2)
    keys = {k["AttributeName"]: k["KeyType"] for k in desc["KeySchema"]}
    if keys != {pk: "HASH", sk: "RANGE"}:
        raise RuntimeError(
            f"table {table} exists with key schema {keys}, "
            f"but {LIBRARY} needs {{'{pk}': 'HASH', '{sk}': 'RANGE'}}")


class Run:
    def __init__(self, args):
        self.args = args
        self.lease = datetime.timedelta(milliseconds=args.lease_ms)
        self.heartbeat = self.lease * HEARTBEAT_PER_LEASE
        self.safe_period = self.lease * SAFE_PERIOD_PER_LEASE
        # None means "let the library choose", which is its heartbeat period.
        self.retry_period = (datetime.timedelta(milliseconds=args.poll_ms)
                             if args.poll_ms is not None else None)
        if args.scenario == "takeover":
            self.retry_timeout = self.lease * 10
        else:
            self.retry_timeout = max(self.lease * 10, datetime.timedelta(seconds=WAIT_CAP_S))
        self.clients = []

    def new_client(self, access_key="test"):
        resource = new_session(access_key).resource("dynamodb", endpoint_url=self.args.endpoint)
        client = DynamoDBLockClient(
            resource,
            table_name=self.args.table,
            heartbeat_period=self.heartbeat,
            safe_period=self.safe_period,
            lease_duration=self.lease,
        )
        self.clients.append(client)
        return client

    def settings(self, workers, clients, callers):
        retry_period = self.retry_period or self.heartbeat
        return {
            "library": LIBRARY,
            "library_version": LIBRARY_VERSION,
            "boto3_version": boto3.__version__,
            "botocore_version": botocore.__version__,
            "scenario": self.args.scenario,
            "workers": workers,
            "lock_clients": clients,
            "callers": callers,
            "lease_ms": ms(self.lease),
            "heartbeat_period_ms": ms(self.heartbeat),
            "safe_period_ms": ms(self.safe_period),
            "retry_period_ms": ms(retry_period),
            "retry_period_source": "--poll-ms" if self.retry_period else "library default (heartbeat period)",
            "retry_timeout_ms": ms(self.retry_timeout),
            "expiry_period_s": DynamoDBLockClient._DEFAULT_EXPIRY_PERIOD.total_seconds(),
            "heartbeat_tps": DynamoDBLockClient._DEFAULT_HEARTBEAT_TPS,
            "sort_key_value": DynamoDBLockClient._DEFAULT_SORT_KEY_VALUE,
            "release_best_effort": False,
            "requests": "acquire: GetItem (consistent) + conditional PutItem, one GetItem per retry; "
                        "release: conditional DeleteItem; heartbeat: UpdateItem per held lock per period",
        }

    def acquire(self, client, resource, on_event):
        return client.acquire_lock(
            resource,
            retry_period=self.retry_period,
            retry_timeout=self.retry_timeout,
            app_callback=on_event,
        )

    def close_all(self):
        # close() stops the heartbeat threads, then joins them; they sleep up to a heartbeat period
        # (5 s at the default lease) and cannot be woken. Every lock is released by now, so they
        # have nothing left to send: the joins run on daemon threads and the process does not wait
        # for them.
        for c in self.clients:
            threading.Thread(target=c.close, daemon=True).start()


def ms(delta):
    value = round(delta / datetime.timedelta(milliseconds=1), 3)
    return int(value) if value == int(value) else value


def lock_event_handler(resource):
    # The library reports a stolen lock only through this callback, on its own thread; a stolen lock
    # in a benchmark means the numbers are not of a working lock, so the run fails.
    def on_event(code, lock):
        if code == DynamoDBLockError.LOCK_STOLEN:
            fail(f"lock on {resource} was stolen while held")
        else:
            print(f"{LIBRARY}: {code} on {resource}", file=sys.stderr, flush=True)
    return on_event


def wait_for_go():
    """After its ready line the driver waits for a line `go` on stdin, so that the orchestrator
    counts the timed work's requests only, none of the setup's."""
    line = sys.stdin.readline().strip()
    if line != "go":
        fail(f"expected go on stdin, got {line!r}")


def hold_of(args, worker, op):
    """Seconds that worker `worker` holds its `op`-th acquisition (from 0): --hold-ms, or with
    --hold-max-ms M, --hold-ms + ((7 op + 11 worker) mod (M - --hold-ms + 1)) ms, the sequence
    every driver follows."""
    most = args.hold_ms if args.hold_max_ms is None else args.hold_max_ms
    return (args.hold_ms + (7 * op + 11 * worker) % (most - args.hold_ms + 1)) / 1000


def run_workers(run, resources):
    args = run.args
    clients = [run.new_client(f"worker{i}") for i in range(len(resources))]
    emit({"ready": True, "settings": run.settings(
        len(resources), len(clients), "one access key per worker: worker<i>")})
    wait_for_go()

    start = threading.Barrier(len(resources))

    def worker(i):
        resource = resources[i]
        client = clients[i]
        on_event = lock_event_handler(resource)
        try:
            start.wait()
            for op in range(args.ops):
                t0 = time.monotonic_ns()
                lock = run.acquire(client, resource, on_event)
                t1 = time.monotonic_ns()
                hold_s = hold_of(args, i, op)
                if hold_s > 0:
                    time.sleep(hold_s)
                t2 = time.monotonic_ns()
                # best_effort=False so that a failed release is an error here, not a log line.
                lock.release(best_effort=False)
                t3 = time.monotonic_ns()
                emit({"worker": i, "resource": resource, "wait_start_ns": t0,
                      "acquired_ns": t1, "release_start_ns": t2, "released_ns": t3})
        except BaseException as e:  # noqa: BLE001 - any failure ends the run with an error line
            fail(f"worker {i} on {resource}: {e}")

    threads = [threading.Thread(target=worker, args=(i,), daemon=True)
               for i in range(len(resources))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    run.close_all()


def run_hold(run):
    args = run.args
    resource = f"{args.resource}/0"
    client = run.new_client()
    emit({"ready": True, "settings": run.settings(1, 1, "one access key: test")})
    wait_for_go()
    run.acquire(client, resource, lock_event_handler(resource))
    emit({"acquired_ns": time.monotonic_ns()})
    # The heartbeat thread keeps the lock alive until the orchestrator kills this process.
    while True:
        time.sleep(3600)


def run_takeover(run):
    args = run.args
    resource = f"{args.resource}/0"
    client = run.new_client()
    emit({"ready": True, "settings": run.settings(1, 1, "one access key: test")})
    wait_for_go()
    lock = run.acquire(client, resource, lock_event_handler(resource))
    emit({"acquired_ns": time.monotonic_ns()})
    lock.release(best_effort=False)
    run.close_all()


def main():
    args = parse_args()
    try:
        ensure_table(args.endpoint, args.table)
        run = Run(args)
        if args.scenario == "uncontended":
            run_workers(run, [f"{args.resource}/0"])
        elif args.scenario == "contended":
            run_workers(run, [f"{args.resource}/0"] * args.workers)
        elif args.scenario == "many":
            run_workers(run, [f"{args.resource}/{i}" for i in range(args.workers)])
        elif args.scenario == "hold":
            run_hold(run)
        elif args.scenario == "takeover":
            run_takeover(run)
    except BaseException as e:  # noqa: BLE001 - the protocol wants an error line for any failure
        if isinstance(e, SystemExit) and e.code == 0:
            raise
        fail(f"{type(e).__name__}: {e}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
