#!/usr/bin/env bash
# A local DynamoDB endpoint for tests and the demo.
#
#   scripts/dynamodb-local.sh start     start one (or reuse the running one); prints its endpoint
#   scripts/dynamodb-local.sh stop      stop it and remove its state; leaves no process behind
#   scripts/dynamodb-local.sh status    "running <kind> <endpoint>" (exit 0) or "stopped" (exit 1)
#   scripts/dynamodb-local.sh endpoint  print the endpoint URL (exit 1 if none is running)
#   scripts/dynamodb-local.sh restart   stop the running endpoint process and start it again on the
#                                       same port, keeping its data (exit 3 for an external endpoint)
#
# Which endpoint, in order of preference:
#   1. DYNAMODB_ENDPOINT, if set: used as is, nothing is started or stopped;
#   2. DynamoDB Local from the jar in DYNAMODB_LOCAL_JAR, if set (needs java);
#   3. DynamoDB Local in Docker, if a Docker engine answers;
#   4. moto from PyPI (pinned in scripts/requirements-moto.txt) in the git-ignored .venv,
#      serving one request at a time so that a conditional write is atomic, as in DynamoDB.
# Every endpoint listens on loopback, on a free port.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
state="$root/.dynamodb-local"
venv="$root/.venv"
requirements="$root/scripts/requirements-moto.txt"
docker_image="amazon/dynamodb-local:2.5.4"
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

ensure_moto() {
  local stamp="$venv/.requirements-moto"
  if [ -x "$venv/bin/python" ] && cmp -s "$requirements" "$stamp"; then return; fi
  log "installing moto into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
  cp "$requirements" "$stamp"
}

start() {
  if running; then cat "$state/endpoint"; return; fi
  stop # clear the state of an endpoint that died
  mkdir -p "$state"
  local endpoint kind port
  if [ -n "${DYNAMODB_ENDPOINT:-}" ]; then
    kind=external endpoint="$DYNAMODB_ENDPOINT"
  elif [ -n "${DYNAMODB_LOCAL_JAR:-}" ]; then
    kind=dynamodb-local-jar port="$(free_port)" endpoint="http://127.0.0.1:$port"
    echo "$port" >"$state/port"
    start_jar "$port"
  elif command -v docker >/dev/null 2>&1 && timeout 5 docker info >/dev/null 2>&1; then
    kind=dynamodb-local-docker port="$(free_port)" endpoint="http://127.0.0.1:$port"
    docker run --detach -p "127.0.0.1:$port:8000" "$docker_image" \
      -jar DynamoDBLocal.jar -sharedDb -dbPath . >"$state/container"
  else
    kind=moto
    ensure_moto
    start_moto 0 || { stop; return 1; }
    endpoint="http://127.0.0.1:$(cat "$state/port")"
  fi
  if ! wait_until_answers "$endpoint"; then stop; return 1; fi
  echo "$kind" >"$state/kind"
  echo "$endpoint" >"$state/endpoint"
  log "running $kind at $endpoint"
  echo "$endpoint"
}

# DynamoDB Local from the jar on port $1, its data in the state directory (kept across restarts).
start_jar() {
  mkdir -p "$state/db"
  nohup java -Djava.library.path="$(dirname "$DYNAMODB_LOCAL_JAR")/DynamoDBLocal_lib" \
    -jar "$DYNAMODB_LOCAL_JAR" -sharedDb -dbPath "$state/db" -port "$1" >>"$state/log" 2>&1 &
  echo $! >"$state/pid"
}

# Serialized moto on port $1 (0: any free port, written to the port file), its data saved to and
# loaded from the state directory.
start_moto() {
  rm -f "$state/port"
  nohup "$venv/bin/python" "$root/scripts/moto_serialized.py" --host 127.0.0.1 --port "$1" \
    --port-file "$state/port" --state-file "$state/moto-state.pickle" >>"$state/log" 2>&1 &
  echo $! >"$state/pid"
  local deadline=$((SECONDS + start_timeout_s))
  until [ -s "$state/port" ]; do
    if ! kill -0 "$(cat "$state/pid")" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
      log "moto did not start; its log:"; cat "$state/log" >&2 || true
      return 1
    fi
    sleep 0.1
  done
}

# Stops the endpoint process (letting it save its data) without removing the state directory.
stop_process() {
  if [ -f "$state/pid" ]; then
    local pid; pid="$(cat "$state/pid")"
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
}

restart() {
  running || { log "not running (run: $0 start)"; return 1; }
  local kind endpoint; kind="$(cat "$state/kind")" endpoint="$(cat "$state/endpoint")"
  case "$kind" in
    external) log "cannot restart an external endpoint"; return 3 ;;
    dynamodb-local-docker) docker restart "$(cat "$state/container")" >/dev/null ;;
    dynamodb-local-jar) stop_process; start_jar "$(cat "$state/port")" ;;
    moto) local port; port="$(cat "$state/port")"; stop_process; start_moto "$port" ;;
  esac
  wait_until_answers "$endpoint"
  log "restarted $kind at $endpoint"
  echo "$endpoint"
}

stop() {
  [ -d "$state" ] || return 0
  stop_process
  if [ -f "$state/container" ]; then
    docker rm --force "$(cat "$state/container")" >/dev/null 2>&1 || true
  fi
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
  *) echo "usage: $0 start|stop|status|endpoint|restart" >&2; exit 2 ;;
esac
