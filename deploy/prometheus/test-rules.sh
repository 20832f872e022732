#!/usr/bin/env bash
# test-rules.sh: promtool's unit tests of the alert rules (tests/*.yml),
# each file's test groups dealt into one part per core and run at once.
# promtool runs a file's groups one after another on one core: the 43
# groups of partner-api_test.yml took 143 s so, most of deploy-check (82 s
# of them the treasury's day of samples, now treasury_test.yml).
# A part is the file's header (its rule_files made absolute) and every
# n-th group; what promtool prints of each part is printed in turn, and
# the script fails if any part does.
set -uo pipefail
cd "$(dirname "$0")" || exit 1
n=${PARTS:-$(nproc 2>/dev/null || echo 2)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rules=$(cd rules && pwd)
parts=()
for f in tests/*.yml; do
	base=$(basename "$f" .yml)
	awk -v n="$n" -v out="$tmp/$base" -v rules="$rules" '
		BEGIN { header = ""; g = -1 }
		g < 0 {
			sub(/\.\.\/rules\//, rules "/")
			header = header $0 "\n"
			if ($0 ~ /^tests:/) {
				g = 0
				for (i = 0; i < n; i++) printf "%s", header > (out "-" i ".yml")
			}
			next
		}
		/^  - name:/ { g++ }
		{ print > (out "-" ((g > 0 ? g - 1 : 0) % n) ".yml") }
	' "$f" || exit 1
	groups=$(grep -c '^  - name:' "$f")
	for i in $(seq 0 $((n - 1))); do
		[ "$i" -lt "$groups" ] && parts+=("$tmp/$base-$i.yml")
	done
done
for p in "${parts[@]}"; do
	(promtool test rules "$p" >"$p.out" 2>&1; echo $? >"$p.status") &
done
wait
rc=0
for p in "${parts[@]}"; do
	sed "s#$tmp/##" "$p.out"
	[ "$(cat "$p.status")" = 0 ] || rc=1
done
exit $rc
