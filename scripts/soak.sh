#!/usr/bin/env bash
# The long fault soak: every fault scenario of the fault suite, several long runs each, against a
# local DynamoDB endpoint (started and stopped here, as by scripts/test.sh). Prints the table of
# fault x runs x violations and writes it, with the command, to docs/reliability.md.
#
#   scripts/soak.sh [RUNS] [DURATION_MS]     (defaults: 3 runs of 20000 ms per fault)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

runs="${1:-3}" duration_ms="${2:-20000}"
run cargo build --quiet --locked --release -p ddb-lock-tests --bins
target="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
start_endpoint
mkdir -p docs
results="$(mktemp)"
status=0
run "$target/release/fault-suite" --runs "$runs" --duration-ms "$duration_ms" --report "$results" || status=$?
{
  cat <<'DOC'
# Reliability: the fault suite

`scripts/test.sh` runs a quick form of the fault suite on every change (one 6 s run per fault);
`scripts/soak.sh [RUNS] [DURATION_MS]` runs the long form and rewrites this file with its table.

**How a run works.** Four client *processes* (`tests/src/bin/fault-client.rs`) contend for two
resources through fault-injecting TCP proxies of our own (`tests/src/proxy.rs`), one per client. In
a loop each takes a fenced lock (lease 1 s), then on the resource's register item (another table)
makes a fenced *claim* write, reads the counter, writes counter + 1 (fenced), and releases; every
step is recorded with `CLOCK_MONOTONIC` timestamps, one JSON line when invoked and one when done, so
a killed client leaves its in-flight operation as indeterminate. A third of the way in, the suite
(`tests/src/faults/suite.rs`) injects the fault:

| fault | what happens |
|---|---|
| SIGKILL holder | a client holding a lock (found through `status`) is killed |
| SIGSTOP holder past lease | a holder is stopped for 2.5 leases, then continued: its late writes and its release must be refused |
| latency > lease | one client's answers are delayed by 1.5 leases, for a third of the run |
| answers dropped (retries) | one client's every third answer is dropped after the request was applied, so the SDK retries (ambiguous outcomes) |
| partition > lease | one client is cut off for 2.5 leases |
| throttling | every second request of one client is answered `ThrottlingException`, for a third of the run |
| endpoint restart | the endpoint is restarted, keeping its data (`scripts/dynamodb-local.sh restart`) |
| SIGSTOP endpoint past lease | the endpoint process is stopped for 2.5 leases, then continued: every request hangs, then is answered late |
| clock ahead (wall clock) | one client's clock runs 0.8 leases ahead (the library's clock abstraction) |
| clock ahead (observed lease) | the same, with every client on `TakeoverRule::ObservedLease` |

**The checks** (`tests/src/faults/check.rs`), after each run:
- *fencing order*: no write with a lower token was accepted after a write with a higher token had
  completed (the register's tokens only increase in real time);
- *counter*: the final counter lies between the number of counter writes that succeeded and that
  number plus the indeterminate ones (no lost update, no phantom one);
- *overlapping holds*: no two holds that ended in a successful release overlapped (a successful
  release proves the lock item stood unchanged from acquisition to release);
- *store agrees*: the register's last writer is a client that saw that write succeed or could not
  tell, and no client saw a write succeed with a token above the register's;
- *no wedged key*: every resource can be acquired within four leases after the run, and every
  client process finished.

"Critical sections" counts counter writes that succeeded. A violation fails the run (and
`scripts/test.sh`) and prints what was broken. The last row is a negative control: the same clients
with no lock and unfenced writes. It must show violations (lost updates), or the checks would be
unable to see any; the run fails if it shows none.

The quick form found one real bug, now fixed in `lib/`: a fenced write whose answer was lost, retried
by the SDK after a newer holder had written, was refused on the retry although its first attempt had
been applied, and the client counted it as not written (the counter check saw 37 for 36 writes).
`FencedWrite::send_update` now reports such a write as `Unknown` (regression test
`a_refused_retry_of_a_fenced_write_whose_first_attempt_applied_is_unknown`).

## Model-based test

`tests/tests/model_based.rs` (part of `cargo test`, so of `scripts/test.sh`) runs random sequences
of up to 40 operations on one resource against the real client and the local endpoint, 48 sequences
in about 10 s (`proptest-state-machine`), and checks every answer against a small reference model of
the lock: the holder (which acquisition, owner, acquisition time, lease end, fenced or not,
payload), the highest fencing token issued, and "now". The operations: `try_acquire` and `acquire`
with a zero timeout (idempotent or not, fenced or not, with or without data), `release` of the
current or a stale lock, `release_owned`, `extend` and `extend_and_replace_data`, `force_release`,
`status`, the passage of time (one clock shared by all clients and moved by the test, so leases end
on the exact millisecond with no sleeping), and TTL deletion of an expired item; from three owners
through two clients, and any of them with its answer dropped by the proxy after the endpoint
applied the request, so that the SDK retries. After every step the stored lock and fence items are
compared with the model too.

What it would catch: an acquire that wins over a live lock or loses to an expired one (on either
side of `ExpiresAt == now`); a release or extension of another acquisition's lock; an extension
that revives an expired lock or shortens a stored lease; `NotOwner` for one's own lock after a
retried release, or a retried acquire or extension reported as contention or loss; an idempotent
acquire that does not hand back the same lock and token; a fencing token not above every earlier
one, across release, expiry, force release and TTL deletion; a `status`, `Lock::expires_at` or
stored `TTL` that disagrees with the stored lease; a payload not stored, replaced or removed as
asked. A failure prints the shrunk sequence and the step whose answer the model does not allow. It
runs operations one at a time, so it leaves to the other tests concurrency (waiting `acquire`,
hand-off between tasks, the guard), retries that land after another client's write, the
observed-lease rule and skewed clocks.

## Latest long run

DOC
  printf 'Command: `scripts/soak.sh %s %s`.\n' "$runs" "$duration_ms"
  cat "$results"
} > docs/reliability.md
rm -f "$results"
echo "wrote docs/reliability.md"
exit "$status"
