#!/usr/bin/env bash
# The long fault soak: every fault scenario of the fault suite, several long runs each, against a
# local DynamoDB endpoint (started and stopped here, as by scripts/test.sh). Prints the table of
# fault x runs x violations and writes it, with the command, into docs/reliability.md (its section
# "Latest long run"; the text above it is left as it is).
#
#   scripts/soak.sh [RUNS] [DURATION_MS]     (defaults: 3 runs of 20000 ms per fault)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

runs="${1:-3}" duration_ms="${2:-20000}"
run cargo build --quiet --locked --release -p ddb-lock-fault-suite --bins
target="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
start_endpoint
mkdir -p docs
results="$(mktemp)"
status=0
run "$target/release/fault-suite" --runs "$runs" --duration-ms "$duration_ms" --report "$results" || status=$?
report="$(mktemp)"
{
  # The prose above the results is docs/reliability.md's own: kept as it is, results replaced.
  if [ -f docs/reliability.md ]; then sed '/^## Latest long run$/,$d' docs/reliability.md; fi
  echo '## Latest long run'
  echo
  printf 'Command: `scripts/soak.sh %s %s`.\n' "$runs" "$duration_ms"
  cat "$results"
} >"$report"
mv "$report" docs/reliability.md && chmod 644 docs/reliability.md
rm -f "$results"
echo "wrote docs/reliability.md"
exit "$status"
