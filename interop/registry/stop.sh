#!/usr/bin/env bash
# stop.sh: stops the registry started by start.sh in DIR (SIGTERM, then
# SIGKILL after 20 s) and waits until it has exited. Idempotent.
#
#   stop.sh [-dir DIR]      (default DIR: $SAMSA_SCHEMA_REGISTRY_DIR)
set -euo pipefail
dir=${SAMSA_SCHEMA_REGISTRY_DIR:-}
if (($# == 2)) && [[ $1 == -dir || $1 == --dir ]]; then
	dir=$2
elif (($# != 0)); then
	echo "usage: $0 [-dir DIR]" >&2
	exit 2
fi
[[ -n $dir ]] || {
	echo "registry: no registry given: pass -dir DIR or set SAMSA_SCHEMA_REGISTRY_DIR" >&2
	exit 1
}
[[ -f $dir/pid ]] || exit 0
pid=$(cat "$dir/pid")
kill -TERM "$pid" 2>/dev/null || exit 0
for ((i = 0; i < 200; i++)); do
	kill -0 "$pid" 2>/dev/null || exit 0
	sleep 0.1
done
kill -KILL "$pid" 2>/dev/null || true
