#!/usr/bin/env bash
# node.sh: stops, kills or restarts one node of a cluster started by
# start.sh, for failover tests.
#
#   node.sh [-dir DIR] stop N    SIGTERM (controlled shutdown), waits for exit
#   node.sh [-dir DIR] kill N    SIGKILL, waits for exit
#   node.sh [-dir DIR] start N   restarts N with its old storage and ports and
#                                waits until Metadata lists it again
#
# DIR defaults to $SAMSA_KAFKA_DIR.
set -euo pipefail
# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

usage() { die "usage: $0 [-dir DIR] stop|kill|start N"; }
dir=${SAMSA_KAFKA_DIR:-}
if (($# > 0)) && [[ $1 == -dir || $1 == --dir ]]; then
	(($# >= 2)) || usage
	dir=$2
	shift 2
fi
(($# == 2)) || usage
verb=$1 n=$2
[[ $n =~ ^[0-9]+$ ]] || usage
[[ -n $dir ]] || die "no cluster given: pass -dir DIR or set SAMSA_KAFKA_DIR"
[[ -d $dir ]] || die "$dir does not exist"
dir=$(cd "$dir" && pwd)
[[ -f $dir/node-$n/server.properties ]] || die "$dir has no node $n"
[[ -f $dir/env ]] || die "$dir/env is missing: the cluster never finished starting"
use_dir_version "$dir"

case $verb in
stop) stop_nodes "$dir" TERM "$n" ;;
kill) stop_nodes "$dir" KILL "$n" ;;
start)
	node_pid "$dir" "$n" >/dev/null && die "node $n is already running"
	ensure_jars
	brokers=$(sed -n 's/^SAMSA_KAFKA_BROKERS=//p' "$dir/env")
	nodes=$(sed -n 's/^SAMSA_KAFKA_NODES=//p' "$dir/env")
	t0=$SECONDS
	start_node "$dir" "$n"
	# Before 4.0 (no SamsaKafkaSetup) the node's log alone says it serves.
	if ! wait_started "$dir" "$n" || { [[ $KAFKA_MODE == kraft4 ]] && ! setup_tool "$dir" "$n" --bootstrap "$brokers" --nodes "$nodes" --wait-node "$n" \
		--timeout-sec "${SAMSA_KAFKA_START_TIMEOUT:-120}"; }; then
		stop_nodes "$dir" KILL "$n"
		log_tails "$dir" 40
		die "node $n did not come back"
	fi
	say "node $n back in Metadata after $((SECONDS - t0))s"
	;;
*) usage ;;
esac
