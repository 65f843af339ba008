#!/usr/bin/env bash
# make soak: the simulation's seeds START+COUNT at STEPS steps, in two
# processes per core (each a contiguous share of the seeds; a seed's run does
# not depend on which process runs it; a seed waits on its pipeline about
# two thirds of its time), every seed run to its end. Prints
# each process's summary: the seeds that failed, each with its replay
# command, and how many seeds passed; exits non-zero when any failed
# (-test.v: each seed's PASS or FAIL line is in its process's output as it
# ends).
#
#   sim/soak.sh START+COUNT STEPS [PROCS]
set -uo pipefail
seeds=${1:?START+COUNT}
steps=${2:?STEPS}
procs=${3:-$((2 * $(nproc)))}
start=${seeds%+*}
count=${seeds#*+}
root=$(git rev-parse --show-toplevel)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$root" && ${GO:-go} test -c -o "$bin/sim.test" ./sim/) || exit 2
per=$(((count + procs - 1) / procs))
pids=()
for ((i = 0; i < procs; i++)); do
	from=$((start + i * per))
	n=$((count - i * per < per ? count - i * per : per))
	[ "$n" -gt 0 ] || break
	(
		cd "$root/sim" && "$bin/sim.test" -test.v -test.count=1 -test.timeout 0 -test.run 'TestLifecycleSimulation$' \
			-sim.seeds="$from+$n" -sim.steps="$steps" -sim.cover=false >"$bin/shard$i.out" 2>&1
		echo $? >"$bin/shard$i.rc"
	) &
	pids+=($!)
	echo "shard $i: seeds $from+$n"
done
wait "${pids[@]}"
rc=0
echo "passed: $(cat "$bin"/shard*.out | grep -c -- '--- PASS: TestLifecycleSimulation/seed=') of $count seeds"
for ((i = 0; i < ${#pids[@]}; i++)); do
	if [ "$(cat "$bin/shard$i.rc")" != 0 ]; then
		rc=1
		grep -A200 'seeds failed:' "$bin/shard$i.out" | grep -E 'seeds failed|^ *seed [0-9]+:' || tail -20 "$bin/shard$i.out"
		# What each failed on: the shard's output goes with the script.
		grep -A1 'lifecycle simulation: seed [0-9]* failed at step' "$bin/shard$i.out" | grep -v '^--$' | cut -c1-400
	fi
done
[ $rc -eq 0 ] && echo "soak: $seeds x $steps steps: every seed passed"
exit $rc
