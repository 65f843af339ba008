#!/usr/bin/env bash
# Deploys the real CDK stack to LocalStack with cdklocal: the functions built
# for the Docker host's architecture (LocalStack runs them in containers
# there: arm64 ones on an x86 host only under emulation, if at all), then a
# catalog demo (what the e2e suite defaults to), then prints how to aim the
# end-to-end suite at it. LocalStack community enforces no IAM: the run
# checks behaviour, not authorization.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.npm/node_modules/.bin
export CDK_HOME=$PWD/.npm/cdk-home
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1
export CDK_DISABLE_CLI_TELEMETRY=true
case "$(docker info --format '{{.Architecture}}' 2>/dev/null || uname -m)" in
  aarch64 | arm64) goarch=arm64 arch=arm64 ;;
  *) goarch=amd64 arch=x86_64 ;;
esac
make lambdas LAMBDA_ARCH=$goarch
# The REST API: LocalStack's free image has API Gateway v1 only (HTTP APIs,
# v2, need a paid plan).
$bin/cdklocal bootstrap -c icehold:assets=dist -c icehold:arch=$arch -c icehold:api=rest
$bin/cdklocal deploy --require-approval never -c icehold:assets=dist -c icehold:arch=$arch -c icehold:api=rest \
  -c "icehold:admins=arn:aws:iam::000000000000:*" --outputs-file localstack/outputs.json
url=$(node -e 'const o=require("./localstack/outputs.json");console.log(Object.values(o)[0].CatalogUri)')
bucket=$(node -e 'const o=require("./localstack/outputs.json");console.log(Object.values(o)[0].WarehouseBuckets)' | cut -d, -f1)
# The suite's default catalog; a second deploy finds it there (409).
go run ./cmd/icehold catalogs create demo --warehouse "s3://$bucket/demo" --url "${url%/}" --sigv4 --region us-east-1 ||
  echo "(catalog demo exists already, or see the error above)"
echo "make e2e E2E_ENDPOINT=${url%/} E2E_CATALOG=demo"
