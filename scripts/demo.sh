#!/usr/bin/env bash
# The demo: starts a local DynamoDB endpoint, creates the lock table, and shows N workers
# contending for one resource (who waited, who held, for how long), then stops everything.
#
#   scripts/demo.sh [WORKERS] [HOLD_MS]     (defaults: 5 workers, 200 ms each)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

started_endpoint=false
cleanup() { if $started_endpoint; then scripts/dynamodb-local.sh stop; fi; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cargo build --quiet --locked -p ddb-lock --example contention
scripts/dynamodb-local.sh status >/dev/null 2>&1 || started_endpoint=true
DYNAMODB_ENDPOINT="$(scripts/dynamodb-local.sh start)"
export DYNAMODB_ENDPOINT
cargo run --quiet --locked -p ddb-lock --example contention -- "$@"
