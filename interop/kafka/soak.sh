#!/usr/bin/env bash
# soak.sh: the soak in compressed time (issue 32): starts the clusters it
# needs, runs interop's TestRealKafkaSoak against them, and stops them,
# also when the test fails or is interrupted.
#
#   interop/kafka/soak.sh [go test flags...]     (e.g. -run 'TestRealKafkaSoak/pid')
#
#   - a 1-node cluster whose months are seconds: connections.max.idle.ms=3000,
#     producer.id.expiration.ms=5000 and transactional.id.expiration.ms=5000,
#     both checked every 1000 ms (producer.id.expiration.check.interval.ms,
#     transaction.remove.expired.transaction.cleanup.interval.ms):
#     SAMSA_SOAK_BROKERS, SAMSA_SOAK_DIR;
#   - a 3-node cluster with Kafka's defaults (the reassignment, and the
#     "other cluster" an address leads to): SAMSA_SOAK3_BROKERS,
#     SAMSA_SOAK3_DIR.
#
# The test prints one row of figures per event and the table at the end
# (go test -v). The clusters' directories are removed after a pass and
# kept, with their logs, after a failure. Needs what start.sh needs (a JDK
# 17+ and Maven) and Go.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/samsa-soak.XXXXXX")
dir1="$tmp/soak1" dir3="$tmp/soak3"
rc=1
cleanup() {
	local status=$?
	((rc == 0)) || rc=$status
	trap - EXIT INT TERM
	local p
	for p in ${p1:-} ${p3:-}; do
		kill -TERM "$p" 2>/dev/null || true
	done
	wait
	"$here/stop.sh" -dir "$dir1" >/dev/null 2>&1 &
	"$here/stop.sh" -dir "$dir3" >/dev/null 2>&1 &
	wait
	if ((rc == 0)); then
		rm -rf "$tmp"
	else
		echo "== soak clusters stopped; their logs are kept in $tmp/soak*/logs"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'rc=130; exit 130' INT
trap 'rc=143; exit 143' TERM

t0=$SECONDS
echo "== starting the soak's Kafka clusters (1 node with short idle and expiry settings; 3 nodes)"
"$here/start.sh" -brokers 1 -dir "$dir1" \
	-conf connections.max.idle.ms=3000 \
	-conf producer.id.expiration.ms=5000 \
	-conf producer.id.expiration.check.interval.ms=1000 \
	-conf transactional.id.expiration.ms=5000 \
	-conf transaction.remove.expired.transaction.cleanup.interval.ms=1000 \
	>"$tmp/start1.out" &
p1=$!
"$here/start.sh" -brokers 3 -dir "$dir3" >"$tmp/start3.out" &
p3=$!
ok=1
wait "$p1" || ok=0
wait "$p3" || ok=0
p1="" p3=""
if ((ok == 0)); then
	echo "== a Kafka cluster did not start (its logs are printed above)" >&2
	exit 1
fi
SAMSA_SOAK_DIR=$dir1
SAMSA_SOAK_BROKERS=$(sed -n 's/^SAMSA_KAFKA_BROKERS=//p' "$dir1/env")
SAMSA_SOAK3_DIR=$dir3
SAMSA_SOAK3_BROKERS=$(sed -n 's/^SAMSA_KAFKA_BROKERS=//p' "$dir3/env")
SAMSA_KAFKA_SOAK=1
export SAMSA_SOAK_DIR SAMSA_SOAK_BROKERS SAMSA_SOAK3_DIR SAMSA_SOAK3_BROKERS SAMSA_KAFKA_SOAK
echo "== clusters up in $((SECONDS - t0))s: SAMSA_SOAK_BROKERS=$SAMSA_SOAK_BROKERS SAMSA_SOAK3_BROKERS=$SAMSA_SOAK3_BROKERS"

set +e
(cd "$here/.." && go test -race -count=1 -timeout 15m -v -run '^TestRealKafkaSoak$' "$@" .)
rc=$?
set -e
echo "== soak finished in $((SECONDS - t0))s (exit $rc)"
exit "$rc"
