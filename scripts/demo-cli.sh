#!/usr/bin/env bash
# The command line's demo: starts a local DynamoDB endpoint, builds `ddb-lock`, and shows two
# shells contending for one lock, as two cron hosts would for one nightly job: the first runs the
# job under the lock, the second is refused at once (--no-wait), then waits its turn (--wait) and
# runs after the first; `status` shows the holder meanwhile. Then stops everything.
#
#   scripts/demo-cli.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

run cargo build --quiet --locked -p ddb-lock-cli
target="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
start_endpoint

# DynamoDB Local takes any credentials; the CLI finds the endpoint where every AWS tool does.
export AWS_ENDPOINT_URL_DYNAMODB="$DYNAMODB_ENDPOINT" AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_EC2_METADATA_DISABLED=true
export DDB_LOCK_TABLE=ddb-lock-demo PATH="$target/debug:$PATH"
key="nightly-report-$$"

say() { printf '\n$ %s\n' "$*"; }
# Runs a command as shell NAME: its lines prefixed, its exit code kept.
shell() { local name=$1; shift; "$@" 2>&1 | sed -u "s/^/[$name] /"; return "${PIPESTATUS[0]}"; }

say ddb-lock create-table
ddb-lock create-table

say "[shell A] ddb-lock run $key -- <a job that runs until the demo tells it to finish>  &"
fifo="$(mktemp -u)"; mkfifo "$fifo"; exec 3<>"$fifo"
shell A ddb-lock run "$key" --owner cron-host-a -- sh -c 'echo "working as $DDB_LOCK_OWNER, lock $DDB_LOCK_ID"; read _ <&3; echo done' &
a=$!
# Wait until shell A holds the lock (status says so), without guessing a time.
until ddb-lock status "$key" --json | grep -q '"locked":true'; do :; done

say "[shell B] ddb-lock run $key --no-wait -- echo never"
code=0; shell B ddb-lock run "$key" --no-wait --owner cron-host-b -- echo never || code=$?
echo "[shell B] exit code $code: held by someone else"

say "[shell B] ddb-lock run $key --fair --wait 60s -- echo 'my turn'  &"
shell B ddb-lock run "$key" --fair --wait 60s --owner cron-host-b -- sh -c 'echo "my turn, as $DDB_LOCK_OWNER"' &
b=$!
# Shell B waits in the lock's line (a fair wait), where status shows it.
until ddb-lock status "$key" | grep -q 'in line'; do :; done
say ddb-lock status "$key"
ddb-lock status "$key"

echo
echo "(shell A's job finishes: its release hands the lock to shell B)"
echo go >&3
wait "$a"; wait "$b"
exec 3>&-; rm -f "$fifo"

say ddb-lock status "$key" --json
ddb-lock status "$key" --json
