#!/usr/bin/env bash
# with-registry.sh COMMAND [ARGS...]: runs COMMAND with Apicurio Registry up
# (SAMSA_SCHEMA_REGISTRY_URL and the other keys of start.sh's DIR/env
# exported), and stops it afterwards, also when COMMAND fails or is
# interrupted. The root Makefile's test target runs the tests this way,
# inside interop/kafka/with-clusters.sh.
#
# Without java, javac, mvn or curl on PATH it prints one line and runs
# COMMAND without a registry (the real-registry tests skip themselves, or
# fail when CI is set); so does SAMSA_REGISTRY_SKIP=1.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
(($# > 0)) || {
	echo "usage: $0 COMMAND [ARGS...]" >&2
	exit 2
}
if [[ ${SAMSA_REGISTRY_SKIP:-} == 1 ]]; then
	echo "== real Schema Registry tests skipped: SAMSA_REGISTRY_SKIP=1"
	exec "$@"
fi
missing=""
for tool in java javac mvn curl; do
	command -v "$tool" >/dev/null 2>&1 || missing+=" $tool"
done
if [[ -n $missing ]]; then
	echo "== real Schema Registry tests skipped:$missing not on PATH (see interop/registry/README.md)"
	exec "$@"
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/samsa-registry-run.XXXXXX")
rc=1
cleanup() {
	local status=$?
	((rc == 0)) || rc=$status
	trap - EXIT INT TERM
	"$here/stop.sh" -dir "$dir" >/dev/null 2>&1 || true
	if ((rc == 0)); then
		rm -rf "$dir"
	else
		echo "== Schema Registry stopped; its log is kept in $dir/registry.log"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'rc=130; exit 130' INT
trap 'rc=143; exit 143' TERM

echo "== starting Apicurio Registry"
"$here/start.sh" -dir "$dir" >/dev/null || {
	echo "== the Schema Registry did not start (its log is printed above)" >&2
	exit 1
}
set -a
# shellcheck source=/dev/null
. "$dir/env"
set +a
echo "== Schema Registry up: SAMSA_SCHEMA_REGISTRY_URL=$SAMSA_SCHEMA_REGISTRY_URL"

set +e
"$@"
rc=$?
set -e
exit "$rc"
