#!/usr/bin/env bash
# The test command: formatting, lints, then unit, doc and integration tests against a local
# DynamoDB endpoint (see scripts/dynamodb-local.sh), which it starts and stops.
# Exits with the result; the endpoint is stopped also when a step fails or the run is interrupted.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

step() { printf '\n==> %s\n' "$*"; }

if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  step "installing rustfmt and clippy"
  rustup component add rustfmt clippy
fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
run cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo doc (broken links are errors)"
RUSTDOCFLAGS="-D warnings" run cargo doc --workspace --no-deps --locked

step "deployment checks (scripts/check-infra.sh)"
run scripts/check-infra.sh

step "local DynamoDB endpoint"
start_endpoint
echo "using $DYNAMODB_ENDPOINT"

step "cargo test"
run cargo test --workspace --locked

step "the command line's demo (scripts/demo-cli.sh)"
run scripts/demo-cli.sh

step "fault suite, quick form (scripts/soak.sh runs the long one)"
run cargo build --locked -p ddb-lock-fault-suite --bins
run target/debug/fault-suite
step "fault suite, quick form, on a table keyed by id alone"
run target/debug/fault-suite --schema id-only

step "benchmark harness, quick form (scripts/bench.sh runs the full one)"
run scripts/bench.sh --quick
