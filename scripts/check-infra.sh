#!/usr/bin/env bash
# Deployment checks, offline and without AWS credentials:
#   cfn-lint and `sam validate --lint` on infra/sam/template.yaml, and its schema parameters
#   resolved for four table schemas (infra/sam/check_schema.py),
#   `npm ci && npm test` for the CDK app in infra/cdk (bundling skipped),
#   `cargo lambda build --release --arm64`, the artifact SAM and CDK deploy, and the same build of
#   the example Lambda that uses the lock layer (examples/locked-handler).
# Installs its tools itself: infra/requirements.txt into the git-ignored .venv-infra, the CDK
# app's packages from infra/cdk/package-lock.json, and Rust's aarch64 target.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"

step() { printf '\n==> %s\n' "$*"; }

venv="$root/.venv-infra"
stamp="$venv/.requirements"
if ! [ -x "$venv/bin/python" ] || ! cmp -s infra/requirements.txt "$stamp"; then
  step "installing the deployment tools into .venv-infra"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r infra/requirements.txt
  cp infra/requirements.txt "$stamp"
fi
export PATH="$venv/bin:$PATH"
# No telemetry, no credentials, a region for the template translator.
export SAM_CLI_TELEMETRY=0 AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"

step "cfn-lint infra/sam/template.yaml"
cfn-lint infra/sam/template.yaml

step "sam validate --lint"
(cd infra/sam && sam validate --lint --template template.yaml)

step "SAM schema parameters reach the table and the functions (infra/sam/check_schema.py)"
python infra/sam/check_schema.py

step "CDK app: npm ci && npm test"
(cd infra/cdk && npm ci --no-audit --no-fund --loglevel=error && npm test)

step "cargo lambda build --release --arm64 (the function, and the example examples/locked-handler)"
rustup target list --installed | grep -qx aarch64-unknown-linux-gnu || rustup target add aarch64-unknown-linux-gnu
# One build of both: their link-time optimised final steps, each on one core, run side by side.
cargo lambda build --release --arm64 --locked -p ddb-lock-lambda -p ddb-lock-example-locked-handler
ls -l target/lambda/bootstrap/bootstrap target/lambda/locked-handler/bootstrap
