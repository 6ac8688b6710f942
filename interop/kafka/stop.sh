#!/usr/bin/env bash
# stop.sh: stops every node of a cluster started by start.sh (SIGTERM, then
# SIGKILL after SAMSA_KAFKA_STOP_TIMEOUT seconds, default 20), and its KDC
# (-gssapi) or ZooKeeper server (Kafka before 3.3), and waits until they have exited. Idempotent: a stopped or
# missing cluster is not an error. DIR (storage, logs, env) is kept.
#
#   stop.sh [-dir DIR]      (default DIR: $SAMSA_KAFKA_DIR)
set -euo pipefail
# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

dir=${SAMSA_KAFKA_DIR:-}
while (($# > 0)); do
	case $1 in
	-dir | --dir)
		(($# >= 2)) || die "usage: $0 [-dir DIR]"
		dir=$2
		shift
		;;
	*) die "usage: $0 [-dir DIR]" ;;
	esac
	shift
done
[[ -n $dir ]] || die "no cluster given: pass -dir DIR or set SAMSA_KAFKA_DIR"
if [[ ! -d $dir ]]; then
	say "$dir does not exist; nothing to stop"
	exit 0
fi
dir=$(cd "$dir" && pwd)
use_dir_version "$dir"
# shellcheck disable=SC2046 # node numbers
stop_nodes "$dir" TERM $(all_nodes "$dir")
# After the brokers: they talk to ZooKeeper in their controlled shutdown.
stop_zk "$dir"
stop_kdc "$dir"
