#!/usr/bin/env bash
# The mutation check (docs/design/simulation.md, "Lifecycle simulation"): reintroduce one
# known defect of issue 18 in a temporary worktree of the committed tree and
# run the simulation there with make test's budget: it must fail, and this
# says at which seed and step it was caught.
#
#   sim/mutate.sh duration|generations|backfill [SEEDS [STEPS]]
set -euo pipefail
m=${1:?usage: sim/mutate.sh duration|generations|backfill [SEEDS [STEPS]]}
seeds=${2:-${SIM_SEEDS:-1+6}}
steps=${3:-${SIM_STEPS:-150}}
root=$(git rev-parse --show-toplevel)
patch=$root/sim/mutations/$m.patch
[ -f "$patch" ] || { echo "no mutation $m (sim/mutations/: $(ls "$root/sim/mutations" | sed 's/\.patch//' | tr '\n' ' '))"; exit 2; }
tmp=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$tmp" >/dev/null 2>&1 || rm -rf "$tmp"' EXIT
git -C "$root" worktree add --detach --quiet "$tmp" HEAD
git -C "$tmp" apply "$patch"
echo "mutation $m: $(grep -c '^+.*MUTATION' "$patch") change(s) from $patch applied in $tmp"
out=$tmp/sim.out
start=$(date +%s)
if (cd "$tmp" && go test -count=1 -timeout 20m -run 'TestLifecycleSimulation' ./sim/ -sim.seeds="$seeds" -sim.steps="$steps") >"$out" 2>&1; then
	echo "mutation $m SURVIVED: the simulation passed $seeds x $steps steps in $(( $(date +%s) - start )) s"
	exit 1
fi
caught=$(grep -m1 -A1 'failed at step' "$out" || true)
if [ -z "$caught" ]; then
	echo "mutation $m: the run failed without a violation (build or setup):"
	tail -20 "$out"
	exit 1
fi
echo "mutation $m CAUGHT in $(( $(date +%s) - start )) s:"
echo "$caught" | sed 's/^ *sim_test.go:[0-9]*: //' | cut -c1-400
grep -m1 '^replay:' "$out" || true
