# Shared by scripts/test.sh and scripts/demo.sh (sourced, not run): start the local DynamoDB
# endpoint if none is running, and stop it on exit, failure or interruption.
#
# Long commands go through `run`, which waits for them in the background: bash defers a trap until
# a foreground child exits, so a signal to this script alone would otherwise leave the endpoint up
# until the command finished.

started_endpoint=false
child=""

cleanup() {
  if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null || true; fi
  if $started_endpoint; then scripts/dynamodb-local.sh stop; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

run() {
  "$@" &
  child=$!
  local status=0
  wait "$child" || status=$?
  child=""
  return "$status"
}

start_endpoint() {
  scripts/dynamodb-local.sh status >/dev/null 2>&1 || started_endpoint=true
  DYNAMODB_ENDPOINT="$(scripts/dynamodb-local.sh start)"
  export DYNAMODB_ENDPOINT
}
