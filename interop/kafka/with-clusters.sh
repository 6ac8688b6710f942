#!/usr/bin/env bash
# with-clusters.sh COMMAND [ARGS...]: runs COMMAND with two real Kafka
# clusters up, and stops them afterwards, also when COMMAND fails or is
# interrupted. The root Makefile's test target runs the tests this way.
#
#   - a 1-node cluster with -quota -acl -telemetry, -sasl-ssl when openssl is present
#     and -gssapi when MIT Kerberos' KDC is (krb5kdc, kdb5_util,
#     kadmin.local): its DIR/env keys are exported (SAMSA_KAFKA_BROKERS,
#     SAMSA_KAFKA_GSSAPI_BROKERS, SAMSA_KRB5_*, ...);
#   - a 3-node cluster with -no-auto-create: SAMSA_KAFKA3_BROKERS,
#     SAMSA_KAFKA3_DIR, SAMSA_KAFKA3_NODES;
#   - one 1-node cluster per older version of SAMSA_KAFKA_MATRIX_VERSIONS
#     (default "2.8.2 3.9.2"; empty: none), for the version matrix:
#     SAMSA_KAFKA_MATRIX lists them and the 1-node 4.4 cluster as
#     VERSION=BOOTSTRAP pairs (interop/realkafka_versions_test.go).
#
# Without java, javac or mvn on PATH it prints one line and runs COMMAND
# without clusters (the real-Kafka tests skip themselves); so does
# SAMSA_KAFKA_SKIP=1. The clusters'
# directories are removed after a successful COMMAND and kept, with their
# logs, after a failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
(($# > 0)) || {
	echo "usage: $0 COMMAND [ARGS...]" >&2
	exit 2
}

if [[ ${SAMSA_KAFKA_SKIP:-} == 1 ]]; then
	echo "== real Apache Kafka tests skipped: SAMSA_KAFKA_SKIP=1"
	exec "$@"
fi
missing=""
for tool in java javac mvn; do
	command -v "$tool" >/dev/null 2>&1 || missing+=" $tool"
done
if [[ -n $missing ]]; then
	echo "== real Apache Kafka tests skipped:$missing not on PATH (see interop/kafka/README.md)"
	exec "$@"
fi

one_args=(-brokers 1 -quota -acl -telemetry)
if command -v openssl >/dev/null 2>&1; then
	one_args+=(-sasl-ssl)
else
	echo "== openssl not on PATH: the 1-node Kafka cluster has no SASL_SSL listener"
fi
# shellcheck source=kdc.sh
if (. "$here/kdc.sh" && kdc_tools_present); then
	one_args+=(-gssapi)
else
	echo "== MIT Kerberos' KDC not installed (krb5-kdc, krb5-admin-server): the 1-node Kafka cluster has no GSSAPI listener"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/samsa-kafka-run.XXXXXX")
dir1="$tmp/kafka1" dir3="$tmp/kafka3"
matrix_versions=${SAMSA_KAFKA_MATRIX_VERSIONS-2.8.2 3.9.2}
declare -a old_dirs=() old_pids=()
rc=1
cleanup() {
	local status=$?
	((rc == 0)) || rc=$status
	trap - EXIT INT TERM
	# A start.sh still running (interrupted here: background jobs ignore
	# SIGINT) stops its own nodes on SIGTERM.
	local p d
	for p in ${p1:-} ${p3:-} "${old_pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	wait
	for d in "$dir1" "$dir3" "${old_dirs[@]}"; do
		"$here/stop.sh" -dir "$d" >/dev/null 2>&1 &
	done
	wait
	if ((rc == 0)); then
		rm -rf "$tmp"
	else
		echo "== Kafka clusters stopped; their logs are kept in $tmp/kafka*/logs"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'rc=130; exit 130' INT
trap 'rc=143; exit 143' TERM

echo "== starting real Apache Kafka clusters (1 node: ${one_args[*]:2}; 3 nodes: -no-auto-create; the matrix's older versions: ${matrix_versions:-none})"
t0=$SECONDS
"$here/start.sh" -dir "$dir1" "${one_args[@]}" >"$tmp/start1.out" &
p1=$!
"$here/start.sh" -dir "$dir3" -brokers 3 -no-auto-create >"$tmp/start3.out" &
p3=$!
# The older versions of the matrix, one node each, beside them.
for v in $matrix_versions; do
	old_dirs+=("$tmp/kafka-$v")
	"$here/start.sh" -version "$v" -dir "$tmp/kafka-$v" >"$tmp/start-$v.out" &
	old_pids+=("$!")
done
ok=1
wait "$p1" || ok=0
wait "$p3" || ok=0
for p in "${old_pids[@]}"; do
	wait "$p" || ok=0
done
if ((ok == 0)); then
	echo "== a Kafka cluster did not start (its logs are printed above)" >&2
	exit 1
fi

set -a
# shellcheck source=/dev/null
. "$dir1/env"
set +a
SAMSA_KAFKA3_DIR=$dir3
SAMSA_KAFKA3_BROKERS=$(sed -n 's/^SAMSA_KAFKA_BROKERS=//p' "$dir3/env")
SAMSA_KAFKA3_NODES=$(sed -n 's/^SAMSA_KAFKA_NODES=//p' "$dir3/env")
export SAMSA_KAFKA3_DIR SAMSA_KAFKA3_BROKERS SAMSA_KAFKA3_NODES
SAMSA_KAFKA_MATRIX=""
for v in $matrix_versions; do
	SAMSA_KAFKA_MATRIX+="$v=$(sed -n 's/^SAMSA_KAFKA_BROKERS=//p' "$tmp/kafka-$v/env") "
done
SAMSA_KAFKA_MATRIX+="$SAMSA_KAFKA_VERSION=$SAMSA_KAFKA_BROKERS"
export SAMSA_KAFKA_MATRIX
echo "== Kafka $SAMSA_KAFKA_VERSION up in $((SECONDS - t0))s: SAMSA_KAFKA_BROKERS=$SAMSA_KAFKA_BROKERS SAMSA_KAFKA3_BROKERS=$SAMSA_KAFKA3_BROKERS"
echo "== broker version matrix: SAMSA_KAFKA_MATRIX=$SAMSA_KAFKA_MATRIX"

set +e
"$@"
rc=$?
set -e
exit "$rc"
