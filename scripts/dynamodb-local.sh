#!/usr/bin/env bash
# A local DynamoDB endpoint for tests and the demo.
#
#   scripts/dynamodb-local.sh start     start one (or reuse the running one); prints its endpoint
#   scripts/dynamodb-local.sh stop      stop it and remove its state; leaves no process behind
#   scripts/dynamodb-local.sh status    "running <kind> <endpoint>" (exit 0) or "stopped" (exit 1)
#   scripts/dynamodb-local.sh endpoint  print the endpoint URL (exit 1 if none is running)
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
    nohup java -Djava.library.path="$(dirname "$DYNAMODB_LOCAL_JAR")/DynamoDBLocal_lib" \
      -jar "$DYNAMODB_LOCAL_JAR" -inMemory -port "$port" >"$state/log" 2>&1 &
    echo $! >"$state/pid"
  elif command -v docker >/dev/null 2>&1 && timeout 5 docker info >/dev/null 2>&1; then
    kind=dynamodb-local-docker port="$(free_port)" endpoint="http://127.0.0.1:$port"
    docker run --detach --rm -p "127.0.0.1:$port:8000" "$docker_image" \
      -jar DynamoDBLocal.jar -inMemory >"$state/container"
  else
    kind=moto
    ensure_moto
    rm -f "$state/port"
    nohup "$venv/bin/python" "$root/scripts/moto_serialized.py" --host 127.0.0.1 \
      --port-file "$state/port" >"$state/log" 2>&1 &
    echo $! >"$state/pid"
    local deadline=$((SECONDS + start_timeout_s))
    until [ -s "$state/port" ]; do
      if ! kill -0 "$(cat "$state/pid")" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
        log "moto did not start; its log:"; cat "$state/log" >&2 || true
        stop; return 1
      fi
      sleep 0.1
    done
    endpoint="http://127.0.0.1:$(cat "$state/port")"
  fi
  if ! wait_until_answers "$endpoint"; then stop; return 1; fi
  echo "$kind" >"$state/kind"
  echo "$endpoint" >"$state/endpoint"
  log "running $kind at $endpoint"
  echo "$endpoint"
}

stop() {
  [ -d "$state" ] || return 0
  if [ -f "$state/pid" ]; then
    local pid; pid="$(cat "$state/pid")"
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  if [ -f "$state/container" ]; then
    docker rm --force "$(cat "$state/container")" >/dev/null 2>&1 || true
  fi
  rm -rf "$state"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status)
    if running; then echo "running $(cat "$state/kind") $(cat "$state/endpoint")"; else echo stopped; exit 1; fi ;;
  endpoint)
    if running; then cat "$state/endpoint"; else log "not running (run: $0 start)"; exit 1; fi ;;
  *) echo "usage: $0 start|stop|status|endpoint" >&2; exit 2 ;;
esac
