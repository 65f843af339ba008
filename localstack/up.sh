#!/usr/bin/env bash
# Starts LocalStack (needs a Docker engine: not available on the dev machines
# of this project, so this runs on a workstation or a CI runner with Docker).
set -euo pipefail
docker run -d --rm --name icehold-localstack -p 4566:4566 \
  -e SERVICES=dynamodb,s3,sqs,stepfunctions,events,lambda,apigateway,iam,sts,cloudformation,ssm,logs,cloudwatch \
  -v /var/run/docker.sock:/var/run/docker.sock \
  localstack/localstack:latest
until curl -sf http://localhost:4566/_localstack/health >/dev/null; do sleep 1; done
echo "LocalStack is up on http://localhost:4566"
