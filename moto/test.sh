#!/usr/bin/env bash
# make test-moto: the store contract tests, the S3 contract tests, the purge
# adapter tests and an e2e subset against moto_server (an AWS implementation no one here wrote)
# instead of the embedded emulators. Starts moto on a free loopback port,
# prints each suite's test counts, stops moto.
set -uo pipefail
GO=${GO:-go}

if ! command -v moto_server >/dev/null 2>&1; then
	if [ "${CI:-}" = "true" ]; then
		echo "make test-moto: moto_server is not on PATH, and CI=true requires it (pip install 'moto[server]')" >&2
		exit 1
	fi
	echo "make test-moto: SKIPPED: moto_server is not on PATH (pip install 'moto[server]' to run the tests against moto)"
	exit 0
fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log=$(mktemp -t moto-XXXXXX.log)
moto_server -H 127.0.0.1 -p "$port" >"$log" 2>&1 &
moto_pid=$!
trap 'kill "$moto_pid" 2>/dev/null; wait "$moto_pid" 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 100); do
	curl -sf -o /dev/null "http://127.0.0.1:$port/moto-api/" && break
	sleep 0.2
done
curl -sf -o /dev/null "http://127.0.0.1:$port/moto-api/" || { echo "moto_server did not start:" >&2; cat "$log" >&2; exit 1; }
export ICEHOLD_TEST_AWS_ENDPOINT="http://127.0.0.1:$port"
echo "make test-moto: moto $(python3 -c "import moto; print(moto.__version__)" 2>/dev/null) on $ICEHOLD_TEST_AWS_ENDPOINT"

# The e2e subset (about 1.5 minutes on 2 cores): iceberg-go's conformance
# suite, the scenario, the purge tests, the restart-free crash points and
# the kill -9 purge, and the versioned warehouse's purge and repair. Tests needing the embedded emulators' fault injection
# skip there; moto's StartMessageMoveTask fails, so redrive stays embedded.
E2E='^(TestIcebergGoConformance|TestTableLifeThroughRESTCatalog|TestPurgeDeletesWhatIsReachableAndNothingElse|TestPurgeHonoursGCAndLocation|TestCrashPointsResumeExactly|TestPurgeSurvivesKill9|TestPurgeLeavesNoVersion|TestRepairRestoresFromVersions)$'

status=0
cuts=0
summary=""
suite() { # name package run-pattern
	local out start rc
	out=$(mktemp)
	start=$(date +%s)
	$GO test -race -count=1 -v -timeout 15m -run "$3" "$2" >"$out" 2>&1
	rc=$?
	local pass fail skip whole
	pass=$(grep -cE '^\s*--- PASS' "$out")
	# Answers moto cut in transit that awstest.SerialDynamoDB made whole.
	whole=$(grep -c 'awstest.SerialDynamoDB: the answer to' "$out")
	cuts=$((cuts + whole))
	fail=$(grep -cE '^\s*--- FAIL' "$out")
	skip=$(grep -cE '^\s*--- SKIP' "$out")
	if [ $rc -ne 0 ]; then
		grep -vE '^(=== |\s*--- PASS)' "$out" | tail -80
		status=1
	fi
	summary+=$(printf '\n  %-16s %4d passed %3d failed %3d skipped  (%s, %d s)' "$1" "$pass" "$fail" "$skip" "$2" $(( $(date +%s) - start )))
	rm -f "$out"
}
suite "store contract" ./shared/store/ '.'
suite "s3 contract" ./local/emulators/ 'TestS3Contract'
# Not TestSharedPacerHoldsTheSumOfProcesses: it also bounds how long the
# fleet takes, a speed moto's one-at-a-time DynamoDB does not have.
suite "purge adapters" ./shared/purge/ 'OnS3|OnSQS|SharedPacerCuts|SharedPacerWithout|PacesPerPrefix|LeaveNoVersion'
# Repair's restore from versions (moto keeps versions; the embedded S3 not yet).
suite "repair" ./shared/partitions/ 'TestRestoreFromVersions'
suite "e2e" ./e2e/ "$E2E"
echo "make test-moto against moto:$summary"
echo "  DynamoDB answers moto cut in transit, made whole by awstest.SerialDynamoDB: $cuts"
[ $status -eq 0 ] && echo "make test-moto: PASS" || echo "make test-moto: FAIL"
exit $status
