#!/usr/bin/env bash
# Deploys the real CDK stack to LocalStack with cdklocal, then prints how to
# aim the end-to-end suite at it.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.npm/node_modules/.bin
export CDK_HOME=$PWD/.npm/cdk-home
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=us-east-1
export CDK_DISABLE_CLI_TELEMETRY=true
# The REST API: LocalStack's free image has API Gateway v1 only (HTTP APIs,
# v2, need a paid plan).
$bin/cdklocal bootstrap -c icehold:assets=dist -c icehold:api=rest
$bin/cdklocal deploy --require-approval never \
  -c icehold:assets=dist -c icehold:api=rest -c "icehold:admins=arn:aws:iam::000000000000:*" --outputs-file localstack/outputs.json
url=$(node -e 'const o=require("./localstack/outputs.json");console.log(Object.values(o)[0].CatalogUri)')
echo "make e2e E2E_ENDPOINT=${url%/}"
