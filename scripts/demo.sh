#!/usr/bin/env bash
# The demo: starts a local DynamoDB endpoint, creates the lock table, and shows N workers
# contending for one resource (who waited, who held, for how long), then stops everything.
#
#   scripts/demo.sh [WORKERS] [HOLD_MS]     (defaults: 5 workers, 200 ms each)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

run cargo build --quiet --locked -p ddb-lock --example contention
start_endpoint
run cargo run --quiet --locked -p ddb-lock --example contention -- "$@"
