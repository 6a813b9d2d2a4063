#!/usr/bin/env bash
# Benchmarks: ddb-lock's library and Lambda handler against dynamodb-lease (crates.io),
# python_dynamodb_lock (PyPI) and dynamodb-lock-client (npm), all against the same local endpoint in
# one run. Writes docs/benchmarks.md and docs/benchmarks.svg (the full run only).
#
#   scripts/bench.sh            the documented run: release builds, 3 runs per contender
#   scripts/bench.sh --runs N   N runs per contender
#   scripts/bench.sh --quick    every scenario of every contender once, briefly, debug builds, no
#                               files written (scripts/test.sh runs this so the harness cannot rot)
#
# The peers are benchmark dependencies only: bench/python/requirements.txt (in bench/python/.venv),
# bench/node/package-lock.json (in bench/node/node_modules), and the crate bench/rust.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

profile=release
for arg in "$@"; do [ "$arg" = "--quick" ] && profile=debug; done
cargo_profile=(); [ "$profile" = release ] && cargo_profile=(--release)

venv=bench/python/.venv
if ! { [ -x "$venv/bin/python" ] && cmp -s bench/python/requirements.txt "$venv/.requirements"; }; then
  echo "bench: installing the Python peer into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r bench/python/requirements.txt
  cp bench/python/requirements.txt "$venv/.requirements"
fi
if ! { [ -d bench/node/node_modules ] && cmp -s bench/node/package-lock.json bench/node/node_modules/.package-lock.json.copy; }; then
  echo "bench: installing the npm peer into bench/node/node_modules"
  (cd bench/node && npm ci --silent --no-audit --no-fund)
  cp bench/node/package-lock.json bench/node/node_modules/.package-lock.json.copy
fi

run cargo build --quiet --locked "${cargo_profile[@]}" \
  -p ddb-lock-bench -p ddb-lock-bench-harness -p ddb-lock-lambda --bin bootstrap --bin bench-driver --bin bench
if [ "$profile" = release ] && [ -x .venv-infra/bin/cargo-lambda ]; then
  # The arm64 release binary whose size the report gives (as scripts/check-infra.sh builds it).
  PATH="$PWD/.venv-infra/bin:$PATH" run cargo lambda build --quiet --release --arm64 --locked -p ddb-lock-lambda
fi
target="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
user_endpoint="${DYNAMODB_ENDPOINT:-}"
start_endpoint
if [ "$profile" = release ] && [ -z "$user_endpoint" ] && ! $started_endpoint; then
  # An engine's process can slow down as it ages (moto did: a hand-off rate of 47/s became 62/s
  # after a restart): the documented run starts on a fresh process, keeping the data.
  echo "bench: restarting the local endpoint for a fresh process (its data is kept)"
  DYNAMODB_ENDPOINT="$(scripts/dynamodb-local.sh restart)"
fi
# The engine's process, whose CPU time the endpoint ceiling reads (none for an external endpoint:
# the harness then looks for the process listening on the endpoint's port).
DYNAMODB_ENDPOINT_PID="$(scripts/dynamodb-local.sh pid 2>/dev/null || true)" \
  DYNAMODB_ENDPOINT_KIND="$(scripts/dynamodb-local.sh describe)" run "$target/$profile/bench" "$@"
