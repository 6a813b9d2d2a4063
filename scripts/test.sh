#!/usr/bin/env bash
# The test command: formatting, lints, then unit, doc and integration tests against a local
# DynamoDB endpoint (see scripts/dynamodb-local.sh), which it starts and stops.
# Exits with the result; the endpoint is stopped also when a step fails or the run is interrupted.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*"; }

started_endpoint=false
cleanup() { if $started_endpoint; then scripts/dynamodb-local.sh stop; fi; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  step "installing rustfmt and clippy"
  rustup component add rustfmt clippy
fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "local DynamoDB endpoint"
scripts/dynamodb-local.sh status >/dev/null 2>&1 || started_endpoint=true
DYNAMODB_ENDPOINT="$(scripts/dynamodb-local.sh start)"
export DYNAMODB_ENDPOINT
echo "using $DYNAMODB_ENDPOINT"

step "cargo test"
cargo test --workspace --locked
