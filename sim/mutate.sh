#!/usr/bin/env bash
# The mutation suite (docs/design/mutations.md): each
# sim/mutations/<name>.mut is a realistic bug (a one-to-twenty-line change a
# developer could commit). Each is applied in turn to a temporary worktree
# of the committed tree, and the simulation runs there at make sim's budget
# (SIM_SEEDS x SIM_STEPS), stopping at the first failing seed. The table
# says which the simulation caught, at which seed and step, and how long it
# took; a mutation whose anchor the code no longer holds says so (write it
# again against the code as it is).
#
#   sim/mutate.sh [NAME...]    (no NAME: every mutation)
#   MUTATIONS=sim/mutations/heldout sim/mutate.sh   (another set: a
#   directory of *.mut, relative to the repository root or absolute)
set -uo pipefail
seeds=${SIM_SEEDS:-1+6}
steps=${SIM_STEPS:-150}
root=$(git rev-parse --show-toplevel)
apply=$root/sim/mutations/apply.go
dir=${MUTATIONS:-sim/mutations}
case $dir in /*) ;; *) dir=$root/$dir ;; esac
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
	for f in "$dir"/*.mut; do names+=("$(basename "$f" .mut)"); done
fi
for m in "${names[@]}"; do
	[ -f "$dir/$m.mut" ] || { echo "no mutation $m (${dir#"$root"/}/: $(cd "$dir" && ls *.mut | sed 's/\.mut$//' | tr '\n' ' '))"; exit 2; }
done
tmp=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$tmp" >/dev/null 2>&1 || rm -rf "$tmp"' EXIT
git -C "$root" worktree add --detach --quiet "$tmp" HEAD
table=$(mktemp)
printf '%-34s %-8s %-14s %6s  %s\n' mutation caught seed/step secs violation | tee "$table"
caught=0 total=0 stale=0
for m in "${names[@]}"; do
	git -C "$tmp" checkout --quiet --force HEAD -- . && git -C "$tmp" clean -fdq
	start=$(date +%s)
	if ! err=$(go run "$apply" "$tmp" "$dir/$m.mut" 2>&1); then
		stale=$((stale + 1))
		printf '%-34s %-8s %-14s %6s  %s\n' "$m" STALE - 0 "$(echo "$err" | head -1 | cut -c1-120)" | tee -a "$table"
		continue
	fi
	total=$((total + 1))
	out=$tmp/sim.out
	(cd "$tmp" && go test -count=1 -timeout 40m -run 'TestLifecycleSimulation$' ./sim/ -sim.seeds="$seeds" -sim.steps="$steps" -sim.failfast -sim.cover=false) >"$out" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	at=$(grep -m1 -o 'seed [0-9]* failed at step [0-9]*' "$out" | sed 's/seed \([0-9]*\) failed at step \([0-9]*\)/\1\/\2/')
	why=$(grep -m1 -A1 'failed at step' "$out" | tail -1 | sed 's/^ *//' | cut -c1-110)
	if [ $rc -eq 0 ]; then
		printf '%-34s %-8s %-14s %6s  %s\n' "$m" no - "$secs" "survived $seeds x $steps" | tee -a "$table"
	elif [ -n "$at" ]; then
		caught=$((caught + 1))
		printf '%-34s %-8s %-14s %6s  %s\n' "$m" yes "$at" "$secs" "$why" | tee -a "$table"
	else
		printf '%-34s %-8s %-14s %6s  %s\n' "$m" ERROR - "$secs" "$(grep -m1 -E 'FAIL|panic|error' "$out" | cut -c1-110)" | tee -a "$table"
	fi
done
echo
echo "caught $caught of $total mutations at $seeds x $steps steps$([ $stale -gt 0 ] && echo "; $stale no longer apply (STALE)")"
[ $stale -eq 0 ]
