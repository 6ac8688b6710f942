#!/usr/bin/env bash
# upgrade.sh: the rolling upgrade under load, in one command. Starts a
# 3-node Kafka FROM cluster (KRaft, transaction.version 1), runs
# interop's TestRealKafkaRollingUpgrade against it (which upgrades the
# nodes one by one to TO with node.sh -version, finalizes metadata.version
# and transaction.version 2, while an idempotent and a transactional samsa
# producer write), and stops the cluster. See README.md, "Rolling upgrade".
#
#   upgrade.sh [-from V] [-to V] [-records N] [-keep]
#
# -from (default 4.0.2), -to (default 4.4.0): Kafka 4.x releases.
# -records (default 1000000): the idempotent producer's records.
# -keep: keep the cluster's directory after a pass too (it is kept after
# a failure, and its path printed).
# Exit status: the test's.
set -euo pipefail
# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

usage() {
	echo "usage: $0 [-from V] [-to V] [-records N] [-keep]" >&2
	exit 2
}
from=4.0.2 to=$KAFKA_DEFAULT_VERSION records=1000000 keep=0
while (($# > 0)); do
	case $1 in
	-from | --from | -to | --to | -records | --records)
		(($# >= 2)) || usage
		declare "${1##*-}=$2"
		shift
		;;
	-keep | --keep) keep=1 ;;
	*) usage ;;
	esac
	shift
done
[[ $records =~ ^[0-9]+$ ]] || die "-records wants a number, not '$records'"
for v in "$from" "$to"; do
	set_kafka_version "$v"
	[[ $KAFKA_MODE == kraft4 ]] || die "the rolling upgrade runs Kafka 4.x releases (KRaft, transaction.version), not $v"
done
command -v go >/dev/null 2>&1 || die "go not found"

t0=$SECONDS
dir=$(mktemp -d "${TMPDIR:-/tmp}/samsa-upgrade.XXXXXX")
rc=1
finish() {
	"$KAFKA_HOME_DIR/stop.sh" -dir "$dir" || true
	if ((rc == 0 && keep == 0)); then
		rm -rf "$dir"
	else
		say "cluster directory kept: $dir"
	fi
	say "upgrade.sh: exit $rc after $((SECONDS - t0))s"
}
trap finish EXIT
trap 'exit 130' INT TERM

# -txn-version 1: a new 4.x cluster would finalize transaction.version 2
# at once, and the run would have no switch to make.
brokers=$("$KAFKA_HOME_DIR/start.sh" -version "$from" -brokers 3 -txn-version 1 -no-auto-create -dir "$dir" | tail -n 1)
say "Kafka $from up after $((SECONDS - t0))s: $brokers"

set +e
(
	cd "$KAFKA_HOME_DIR/.." &&
		SAMSA_KAFKA_UPGRADE=1 SAMSA_KAFKA_UPGRADE_TO="$to" SAMSA_KAFKA_UPGRADE_RECORDS="$records" \
			SAMSA_KAFKA3_BROKERS="$brokers" SAMSA_KAFKA3_DIR="$dir" \
			go test -race -count=1 -timeout 20m -v -run '^TestRealKafkaRollingUpgrade$' .
)
rc=$?
set -e
exit "$rc"
