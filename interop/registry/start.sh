#!/usr/bin/env bash
# start.sh: starts Apicurio Registry (in-memory storage) on 127.0.0.1 from
# the Maven Central distribution, with its Confluent-compatible API (see
# README.md in this directory).
#
#   start.sh [-dir DIR]
#
# Prints the Confluent API's URL as the last line of stdout and writes
# DIR/env (shell-sourceable KEY=VALUE lines). Progress goes to stderr. On
# failure it stops what it started, prints the tail of the log and exits 1.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VERSION=3.0.9

say() { echo "registry: $*" >&2; }
die() {
	say "$*"
	exit 1
}

dir=""
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

java=java
[[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]] && java=$JAVA_HOME/bin/java
javac=javac
[[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/javac ]] && javac=$JAVA_HOME/bin/javac
command -v "$java" >/dev/null || die "java not found (a JDK 17+)"
command -v curl >/dev/null || die "curl not found"

# The registry's distribution and the Java client's jars, fetched with
# Maven once per pom.xml change; the client compiled with javac. Concurrent
# callers serialize on a lock file.
t0=$SECONDS
mkdir -p "$here/target"
if command -v flock >/dev/null 2>&1; then
	exec {lockfd}>"$here/target/.lock"
	flock "$lockfd"
fi
stamp="$here/target/.complete"
if [[ ! -f $stamp || $here/pom.xml -nt $stamp || $here/SamsaSerdeInterop.java -nt $stamp ]]; then
	command -v mvn >/dev/null || die "mvn not found (needed once to fetch the registry)"
	say "fetching Apicurio Registry $VERSION and the Java serdes with Maven into $here/target"
	rm -rf "$here/target/lib" "$here/target/app" "$here/target/classes"
	{
		mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$here/target/lib" &&
			mvn -q -B -f "$here/pom.xml" dependency:copy -Dartifact="io.apicurio:apicurio-registry-app:$VERSION:tar.gz:all" -DoutputDirectory="$here/target/app"
	} >"$here/target/mvn.log" 2>&1 || {
		tail -n 30 "$here/target/mvn.log" >&2
		die "mvn failed (see $here/target/mvn.log)"
	}
	tar -xzf "$here/target/app/apicurio-registry-app-$VERSION-all.tar.gz" -C "$here/target/app"
	mkdir -p "$here/target/classes"
	"$javac" -nowarn -cp "$here/target/lib/*" -d "$here/target/classes" "$here/SamsaSerdeInterop.java" 2>"$here/target/javac.log" ||
		die "javac failed (see $here/target/javac.log)"
	touch "$stamp"
fi
if [[ -n ${lockfd:-} ]]; then
	exec {lockfd}>&-
fi

if [[ -z $dir ]]; then
	dir=$(mktemp -d "${TMPDIR:-/tmp}/samsa-registry.XXXXXX")
else
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	[[ ! -f $dir/pid ]] || ! kill -0 "$(cat "$dir/pid")" 2>/dev/null || die "a registry is already running in $dir (stop.sh -dir $dir)"
fi

# Free ports below the ephemeral range, not in use by any socket.
read -r eph_low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || eph_low=32768
declare -A used=()
for f in /proc/net/tcp /proc/net/tcp6; do
	[[ -r $f ]] || continue
	while read -r _ local _; do
		[[ $local == *:* ]] || continue
		used[$((16#${local##*:}))]=1
	done <"$f"
done
free_port() {
	local p i
	for ((i = 0; i < 1000; i++)); do
		p=$((10000 + (RANDOM * 32768 + RANDOM) % (eph_low - 10000)))
		if [[ -z ${used[$p]:-} ]]; then
			used[$p]=1
			echo "$p"
			return 0
		fi
	done
	die "no free port found"
}
port=$(free_port)
mport=$(free_port)

started=0
cleanup() {
	local rc=$?
	if ((started == 0)) && [[ -f $dir/pid ]]; then
		say "start failed; stopping the registry"
		kill -KILL "$(cat "$dir/pid")" 2>/dev/null || true
		tail -n 40 "$dir/registry.log" >&2 || true
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The management interface binds 0.0.0.0:9000 unless told otherwise.
# SAMSA_REGISTRY_JVM_OPTS replaces the JVM flags.
# shellcheck disable=SC2086 # the flags are words
(cd "$dir" && exec "$java" ${SAMSA_REGISTRY_JVM_OPTS:--Xms64m -Xmx384m -XX:+UseSerialGC -XX:TieredStopAtLevel=1} \
	-Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$port" \
	-Dquarkus.management.host=127.0.0.1 -Dquarkus.management.port="$mport" \
	-jar "$here/target/app/apicurio-registry-app-$VERSION-runner.jar" >>"$dir/registry.log" 2>&1) &
echo $! >"$dir/pid"

url="http://127.0.0.1:$port/apis/ccompat/v7"
deadline=$((SECONDS + ${SAMSA_REGISTRY_START_TIMEOUT:-120}))
until [[ $(curl -s -o /dev/null -w '%{http_code}' "$url/subjects" 2>/dev/null) == 200 ]]; do
	kill -0 "$(cat "$dir/pid")" 2>/dev/null || die "the registry exited (see $dir/registry.log)"
	((SECONDS < deadline)) || die "the registry did not answer within ${SAMSA_REGISTRY_START_TIMEOUT:-120}s"
	sleep 0.5
done

{
	echo "SAMSA_SCHEMA_REGISTRY_URL=$url"
	echo "SAMSA_SCHEMA_REGISTRY_DIR=$dir"
	echo "SAMSA_SCHEMA_REGISTRY_JAVA_CP=$here/target/classes:$here/target/lib/*"
} >"$dir/env"
started=1
say "Apicurio Registry $VERSION up in $((SECONDS - t0))s at $url; env in $dir/env, log in $dir/registry.log"
echo "$url"
