#!/usr/bin/env bash
# The demo: starts a local DynamoDB endpoint, runs N instances of the Lambda function (the real
# `bootstrap` binary) behind a local Runtime API, and shows N sagas contending for one resource
# through them: who was refused, who waited, who held it when. Then stops everything.
#
#   scripts/demo.sh [SAGAS] [WORK_MS]     (defaults: 4 sagas, 200 ms of work each)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

run cargo build --quiet --locked -p ddb-lock-lambda --bin bootstrap --example saga_demo
target="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
start_endpoint
run "$target/debug/examples/saga_demo" "$target/debug/bootstrap" "$@"
