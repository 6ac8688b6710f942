#!/usr/bin/env bash
# node.sh: stops, kills or restarts one node of a cluster started by
# start.sh, for failover tests and rolling upgrades.
#
#   node.sh [-dir DIR] stop N    SIGTERM (controlled shutdown), waits for exit
#   node.sh [-dir DIR] kill N    SIGKILL, waits for exit
#   node.sh [-dir DIR] [-version V] start N
#                                restarts N with its old storage and ports and
#                                waits until Metadata lists it again; with
#                                -version, from Kafka V's jars (a rolling
#                                upgrade: stop N, then start it with -version)
#
# DIR defaults to $SAMSA_KAFKA_DIR. A node runs the version it was last
# started with (DIR/node-N/kafka.version), else the cluster's
# (DIR/kafka.version, start.sh -version).
set -euo pipefail
# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

usage() { die "usage: $0 [-dir DIR] [-version V] stop|kill|start N"; }
dir=${SAMSA_KAFKA_DIR:-} version=""
while (($# > 0)) && [[ $1 == -* ]]; do
	case $1 in
	-dir | --dir)
		(($# >= 2)) || usage
		dir=$2
		;;
	-version | --version)
		(($# >= 2)) || usage
		version=$2
		;;
	*) usage ;;
	esac
	shift 2
done
(($# == 2)) || usage
verb=$1 n=$2
[[ $n =~ ^[0-9]+$ ]] || usage
[[ -z $version || $verb == start ]] || die "-version goes with start only (a node stops as the version it runs)"
[[ -n $dir ]] || die "no cluster given: pass -dir DIR or set SAMSA_KAFKA_DIR"
[[ -d $dir ]] || die "$dir does not exist"
dir=$(cd "$dir" && pwd)
[[ -f $dir/node-$n/server.properties ]] || die "$dir has no node $n"
[[ -f $dir/env ]] || die "$dir/env is missing: the cluster never finished starting"
use_node_version "$dir" "$n"
if [[ -n $version ]]; then
	# The same server.properties and storage serve the other version:
	# within one mode only (4.x to 4.x, 3.x KRaft to 3.x KRaft), whose
	# settings start.sh writes alike.
	was=$KAFKA_VERSION mode=$KAFKA_MODE
	set_kafka_version "$version"
	[[ $KAFKA_MODE == "$mode" ]] || die "node $n runs Kafka $was ($mode); -version $version ($KAFKA_MODE) is another mode"
fi

case $verb in
stop) stop_nodes "$dir" TERM "$n" ;;
kill) stop_nodes "$dir" KILL "$n" ;;
start)
	node_pid "$dir" "$n" >/dev/null && die "node $n is already running"
	ensure_jars
	if [[ -n $version ]]; then
		echo "$KAFKA_VERSION" >"$dir/node-$n/kafka.version"
		say "starting node $n with Kafka $KAFKA_VERSION (was $was)"
	fi
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
	say "node $n (Kafka $KAFKA_VERSION) back in Metadata after $((SECONDS - t0))s"
	;;
*) usage ;;
esac
