#!/usr/bin/env bash
# matrix.sh: the broker version matrix, in one command. For each Apache
# Kafka version in turn it starts a 1-node cluster (start.sh -version V),
# runs interop's TestRealKafkaVersions against it (SAMSA_KAFKA_MATRIX),
# stops it, and at the end prints a table, version x check -> PASS or FAIL,
# with the start and test times. It exits 1 if any version failed to start
# or any check failed. See README.md in this directory.
#
#   matrix.sh [-versions "2.8.2 3.6.2 3.9.2 4.0.2 4.4.0"]
#
# Each run's go test output and each failed cluster's directory (its logs)
# are kept in a directory printed at the end.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

versions="2.8.2 3.6.2 3.9.2 4.0.2 4.4.0"
while (($# > 0)); do
	case $1 in
	-versions | --versions)
		(($# >= 2)) || { echo "usage: $0 [-versions \"V1 V2...\"]" >&2; exit 2; }
		versions=$2
		shift
		;;
	*)
		echo "usage: $0 [-versions \"V1 V2...\"]" >&2
		exit 2
		;;
	esac
	shift
done

out=$(mktemp -d "${TMPDIR:-/tmp}/samsa-kafka-matrix.XXXXXX")
dir=""
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[[ -z $dir ]] || "$here/stop.sh" -dir "$dir" >/dev/null 2>&1 || true
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

checks=(codecs/none codecs/gzip codecs/snappy codecs/lz4 codecs/zstd headers parking transactions missing_features)
names=(none gzip snappy lz4 zstd headers parking txn missing)
declare -A result=() start_s=() test_s=()
failed=0
# One test binary for every version (interop's tests run in interop/).
echo "== building interop's tests (go test -c -race)"
(cd "$here/.." && go test -c -race -o "$out/interop.test" .) || exit 1
for v in $versions; do
	echo "== Kafka $v: starting"
	dir="$out/kafka-$v"
	t0=$SECONDS
	if ! brokers=$("$here/start.sh" -version "$v" -dir "$dir" 2>"$out/start-$v.log"); then
		tail -n 20 "$out/start-$v.log" >&2
		echo "== Kafka $v did not start (log: $out/start-$v.log)" >&2
		start_s[$v]=FAIL
		failed=1
		dir=""
		continue
	fi
	start_s[$v]=$((SECONDS - t0))
	echo "== Kafka $v up in ${start_s[$v]}s at $brokers: go test -run TestRealKafkaVersions"
	t0=$SECONDS
	set +e
	(cd "$here/.." && SAMSA_KAFKA_MATRIX="$v=$brokers" "$out/interop.test" -test.count=1 -test.timeout=15m \
		-test.run '^TestRealKafkaVersions$' -test.v >"$out/test-$v.log" 2>&1)
	rc=$?
	set -e
	test_s[$v]=$((SECONDS - t0))
	for c in "${checks[@]}"; do
		if grep -q -- "--- PASS: TestRealKafkaVersions/$v/$c " "$out/test-$v.log"; then
			result[$v/$c]=PASS
		elif grep -q -- "--- FAIL: TestRealKafkaVersions/$v/$c " "$out/test-$v.log"; then
			result[$v/$c]=FAIL
		else
			result[$v/$c]=-
		fi
	done
	if ((rc != 0)); then
		failed=1
		grep -E -- "--- FAIL|Error:|\.go:[0-9]+:" "$out/test-$v.log" | head -n 30 >&2 || true
		echo "== Kafka $v: go test failed (log: $out/test-$v.log); its cluster's logs are kept in $dir/logs" >&2
		"$here/stop.sh" -dir "$dir" >/dev/null 2>&1 || true
	else
		"$here/stop.sh" -dir "$dir" >/dev/null 2>&1 || true
		rm -rf "$dir"
	fi
	dir=""
done

rm -f "$out/interop.test"
echo
printf '%-7s %6s' version start
for c in "${names[@]}"; do printf ' %-7s' "$c"; done
printf ' %6s\n' test
for v in $versions; do
	s=${start_s[$v]}
	[[ $s == FAIL ]] || s="${s}s"
	printf '%-7s %6s' "$v" "$s"
	for c in "${checks[@]}"; do printf ' %-7s' "${result[$v/$c]:--}"; done
	t=${test_s[$v]:-}
	[[ -z $t ]] || t="${t}s"
	printf ' %6s\n' "$t"
done
echo "(txn: transactions read at read_committed; missing: what a user gets for what the broker lacks;"
echo " start: start.sh's wall time; test: TestRealKafkaVersions' wall time; go test output in $out)"
if ((failed)); then
	echo "== the matrix FAILED" >&2
	exit 1
fi
echo "== the matrix passed on every version: $versions"
