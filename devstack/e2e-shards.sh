#!/usr/bin/env bash
# e2e-shards.sh N: devstack/e2e's tests (but the pages test, which make
# test runs beside everything) in N go test processes at once, the tests
# dealt in turn. Each test starts a stack of its own on addresses of its
# own, and much of a test's time is its stack's waiting (blocks, polls,
# leases), so two at a time on two cores take about two thirds of the
# time of one after another (394 s against 610 s under make test, before
# the contract check compiled each schema once; 385 s now, beside the
# benchmarks and the simulation, which take what the tests leave). Each
# shard's output is printed whole, in turn; it fails if a shard fails.
set -uo pipefail
n=${1:-2}
go=${GO:-go}
cd "$(dirname "$0")" || exit 1
out=../bin
mkdir -p "$out"
listed=$($go test -race -list '^Test' ./e2e/ | grep '^Test' | grep -vx 'TestPagesArriveWithinMinutes')
if [ -z "$listed" ]; then
	echo "devstack/e2e: no tests listed"
	exit 1
fi
# The longest tests, longest first (measured on 2 cores, 2026-11-30: 35 s
# down to 13 s; the rest take 10 s or less), are dealt first, so that no
# shard gets most of them; a name no longer listed is skipped. Tests are
# dealt in a snake (0, 1, 1, 0, 0, 1, …), which evens out a list sorted
# longest first.
heavy="TestNoAcknowledgementRestsOnARowTheStandbyLacks TestRefundsLandOnceThroughKills TestAKilledWatcherCountsEveryTransferOnce
TestPayoutsSurviveAPostgreSQLFailover TestKillsLoseAndDoubleNothing TestEveryRailCanBePaidAndLands TestTheDocsPasteEndToEnd
TestCardBuysInChromium"
tests=$( (for t in $heavy; do echo "$listed" | grep -x "$t"; done; echo "$listed" | grep -vxF "$(echo $heavy | tr ' ' '\n')") | grep .)
shard() { echo "$tests" | awk -v n="$n" -v i="$1" '{ r = int((NR - 1) / n); p = (NR - 1) % n; if ((r % 2 == 0 ? p : n - 1 - p) == i) print }'; }
for i in $(seq 0 $((n - 1))); do
	names=$(shard "$i" | paste -sd'|')
	rm -f "$out/e2e-shard-$i.status"
	($go test -race -count=1 -timeout 30m -run "^($names)\$" ./e2e/ >"$out/e2e-shard-$i.log" 2>&1
		echo $? >"$out/e2e-shard-$i.status") &
done
wait
rc=0
for i in $(seq 0 $((n - 1))); do
	echo "== devstack/e2e, shard $((i + 1)) of $n ($(shard "$i" | wc -l) tests)"
	cat "$out/e2e-shard-$i.log"
	[ "$(cat "$out/e2e-shard-$i.status" 2>/dev/null)" = 0 ] || rc=1
done
exit $rc
