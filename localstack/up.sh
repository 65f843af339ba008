#!/usr/bin/env bash
# Starts LocalStack (needs a Docker engine: not available on the dev machines
# of this project, so this runs on a workstation or a CI runner with Docker).
# The image is pinned (LOCALSTACK_IMAGE overrides it): a new LocalStack can
# change what its emulators answer. LocalStack community does not enforce
# IAM: API Gateway's AWS_IAM authorization and every role's policy go
# unchecked, so a run against it says nothing about authorization (the
# in-process suite and infra/'s policy tests do).
set -euo pipefail
image=${LOCALSTACK_IMAGE:-localstack/localstack:4.10.0}
docker run -d --rm --name icehold-localstack -p 4566:4566 \
  -e SERVICES=dynamodb,s3,sqs,stepfunctions,events,lambda,apigateway,iam,sts,cloudformation,ssm,logs,cloudwatch \
  -v /var/run/docker.sock:/var/run/docker.sock \
  "$image"
# Bounded: the first pull and start take a minute or two, not more.
for _ in $(seq 180); do
  if curl -sf http://localhost:4566/_localstack/health >/dev/null; then
    echo "LocalStack ($image) is up on http://localhost:4566; next: make localstack-deploy"
    exit 0
  fi
  sleep 1
done
echo "LocalStack did not answer on :4566 within 3 minutes; its log:" >&2
docker logs --tail 50 icehold-localstack >&2 || true
exit 1
