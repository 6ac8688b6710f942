# lib.sh: what start.sh, stop.sh and node.sh share. Sourced, never run.
# shellcheck shell=bash

KAFKA_HOME_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The version pom.xml names; start.sh -version V runs another one.
KAFKA_DEFAULT_VERSION=4.4.0

# Per-node JVM: a small heap; the serial collector, which costs less CPU
# than G1 on a 2-core machine; and the C1 JIT only (TieredStopAtLevel=1):
# measured here, it halves a node's start-up CPU, and over 3M records
# produced the broker used less CPU than with C2, whose compilations never
# paid off within a test run. SAMSA_KAFKA_JVM_OPTS replaces these flags
# (e.g. "-Xmx512m -XX:+UseSerialGC" for C2 in a long benchmark).
NODE_JVM_OPTS=${SAMSA_KAFKA_JVM_OPTS:--Xms128m -Xmx384m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:+ExitOnOutOfMemoryError}
# Short-lived tools (storage format, admin setup): C1 only, fast to start.
TOOL_JVM_OPTS="-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1"
# Class data sharing: the first node ever started writes an archive of the
# classes it loaded when it stops (-XX:ArchiveClassesAtExit); later JVMs map
# it instead of loading and verifying those classes again, which halves a
# node's start-up CPU. One archive per JDK; refetched jars drop it.
# SAMSA_KAFKA_CDS=0 turns it off.
#
# set_kafka_version V points KAFKA_LIB, KAFKA_CLASSES and CDS_DIR at
# version V's own directories (target/lib, target/classes and target/cds for
# the default version, target/lib-V... for another) and sets KAFKA_MODE:
#   kraft4  4.x: KRaft, formatted and checked by SamsaKafkaSetup (every option)
#   kraft3  3.3 to 3.9: KRaft, formatted by Kafka's own StorageTool
#   zk      2.1 to 3.2: a ZooKeeper server beside the brokers
set_kafka_version() {
	local v=$1 major minor rest
	[[ $v =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "a Kafka version is X.Y.Z (e.g. 3.9.2), not '$v'"
	major=${v%%.*} rest=${v#*.}
	minor=${rest%%.*}
	if ((major >= 4)); then
		KAFKA_MODE=kraft4
	elif ((major == 3 && minor >= 3)); then
		KAFKA_MODE=kraft3
	elif ((major == 3 || (major == 2 && minor >= 1))); then
		KAFKA_MODE=zk
	else
		die "Kafka $v is not supported: 2.1 and later are (ZooKeeper before 3.3, KRaft from 3.3)"
	fi
	KAFKA_VERSION=$v
	local suffix=""
	[[ $v == "$KAFKA_DEFAULT_VERSION" ]] || suffix="-$v"
	KAFKA_LIB="$KAFKA_HOME_DIR/target/lib$suffix"
	KAFKA_CLASSES="$KAFKA_HOME_DIR/target/classes$suffix"
	CDS_DIR="$KAFKA_HOME_DIR/target/cds$suffix"
}
set_kafka_version "$KAFKA_DEFAULT_VERSION"

# use_dir_version DIR switches to the version DIR's cluster runs
# (DIR/kafka.version, written by start.sh); a DIR without it runs the
# default version.
use_dir_version() {
	[[ ! -s $1/kafka.version ]] || set_kafka_version "$(<"$1/kafka.version")"
}

# use_node_version DIR N switches to the version node N of DIR runs: the one
# node.sh -version last started it with (DIR/node-N/kafka.version, a
# rolling upgrade), else the cluster's (use_dir_version).
use_node_version() {
	if [[ -s $1/node-$2/kafka.version ]]; then
		set_kafka_version "$(<"$1/node-$2/kafka.version")"
	else
		use_dir_version "$1"
	fi
}

# node_cds_writer DIR N succeeds if node N is writing the class data
# archive of the version it runs.
node_cds_writer() {
	(
		use_node_version "$1" "$2"
		[[ $(cat "$CDS_DIR/dumping/owner" 2>/dev/null || true) == "$1 $2" ]]
	)
}

# node_cds_done DIR N is cds_done for node N's own version: after a
# rolling upgrade the nodes of one cluster use different archives.
node_cds_done() {
	(
		use_node_version "$1" "$2"
		cds_done "$1" "$2"
	)
}

die() {
	echo "kafka: $*" >&2
	exit 1
}

say() {
	echo "kafka: $*" >&2
}

java_bin() {
	if [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]]; then
		echo "$JAVA_HOME/bin/java"
	elif command -v java >/dev/null 2>&1; then
		command -v java
	else
		die "java not found (install a JDK 17+ or set JAVA_HOME)"
	fi
}

javac_bin() {
	if [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/javac ]]; then
		echo "$JAVA_HOME/bin/javac"
	elif command -v javac >/dev/null 2>&1; then
		command -v javac
	else
		die "javac not found (install a JDK 17+, not only a JRE, or set JAVA_HOME)"
	fi
}

# ensure_jars copies the jars of Kafka $KAFKA_VERSION into KAFKA_LIB with
# Maven, once per pom.xml change (another version than the default through
# -Dkafka.version), and for 4.x compiles SamsaKafkaSetup.java and
# SamsaTelemetryCapture.java (the -telemetry plugin) against them.
# Concurrent callers for one version serialize on its lock file, and every
# Maven run on another one (they share ~/.m2).
ensure_jars() {
	mkdir -p "$KAFKA_HOME_DIR/target"
	local lock="$KAFKA_HOME_DIR/target/.lock" log="$KAFKA_HOME_DIR/target/mvn.log"
	local -a mvn_version=()
	if [[ $KAFKA_VERSION != "$KAFKA_DEFAULT_VERSION" ]]; then
		lock+="-$KAFKA_VERSION" log="$KAFKA_HOME_DIR/target/mvn-$KAFKA_VERSION.log"
		mvn_version=("-Dkafka.version=$KAFKA_VERSION")
	fi
	local have_flock=0
	command -v flock >/dev/null 2>&1 && have_flock=1
	if ((have_flock)); then
		exec {lockfd}>"$lock"
		flock "$lockfd"
	fi
	local stamp="$KAFKA_LIB/.complete"
	if [[ ! -f $stamp || $KAFKA_HOME_DIR/pom.xml -nt $stamp ]]; then
		command -v mvn >/dev/null 2>&1 || die "mvn not found (needed once to fetch Kafka's jars)"
		if ((have_flock)); then
			exec {mvnfd}>"$KAFKA_HOME_DIR/target/.mvn-lock"
			flock "$mvnfd"
		fi
		say "fetching Kafka $KAFKA_VERSION jars with Maven into $KAFKA_LIB"
		rm -rf "$KAFKA_LIB" "$CDS_DIR"
		if ! mvn -q -B -f "$KAFKA_HOME_DIR/pom.xml" dependency:copy-dependencies "${mvn_version[@]}" \
			-DincludeScope=runtime -DoutputDirectory="$KAFKA_LIB" </dev/null >"$log" 2>&1; then
			tail -n 30 "$log" >&2
			die "mvn dependency:copy-dependencies failed (is Maven Central reachable? full log: $log)"
		fi
		touch "$stamp"
		if [[ -n ${mvnfd:-} ]]; then
			exec {mvnfd}>&-
		fi
	fi
	local name src cls
	local -a tools=(SamsaKafkaSetup SamsaTelemetryCapture)
	# Before 4.0 the scripts run Kafka's own tools instead: SamsaKafkaSetup
	# does not compile against 3.6's jars. The telemetry plugin is built
	# for the default version only (4.0's ClientTelemetry API differs).
	[[ $KAFKA_VERSION == "$KAFKA_DEFAULT_VERSION" ]] || tools=(SamsaKafkaSetup)
	[[ $KAFKA_MODE == kraft4 ]] || tools=()
	for name in "${tools[@]}"; do
		src="$KAFKA_HOME_DIR/$name.java"
		cls="$KAFKA_CLASSES/$name.class"
		if [[ ! -f $cls || $src -nt $cls || $stamp -nt $cls ]]; then
			mkdir -p "$KAFKA_CLASSES"
			"$(javac_bin)" -nowarn -d "$KAFKA_CLASSES" -cp "$KAFKA_LIB/*" "$src" >&2 ||
				die "javac $name.java failed"
		fi
	done
	if [[ -n ${lockfd:-} ]]; then
		exec {lockfd}>&-
	fi
}

# cds_archive prints the class data archive's path for this JDK.
cds_archive() {
	local j sum
	j=$(readlink -f "$(java_bin)")
	sum=$(printf '%s %s' "$j" "$(stat -c %Y "$j")" | cksum)
	echo "$CDS_DIR/kafka-${sum%% *}.jsa"
}

# cds_opts DIR N prints (one a line) the JVM flags that map the archive, or, if there is
# none yet and no other node is writing it, the flag that makes node N
# write it at exit. Prints nothing with SAMSA_KAFKA_CDS=0.
cds_opts() {
	[[ ${SAMSA_KAFKA_CDS:-1} != 0 ]] || return 0
	local dir=$1 n=$2 jsa owner
	jsa=$(cds_archive)
	if [[ -s $jsa ]]; then
		printf '%s\n' "-XX:SharedArchiveFile=$jsa" -Xlog:cds=off -Xlog:cds+dynamic=off
		return 0
	fi
	[[ -n $n ]] || return 0
	mkdir -p "$CDS_DIR"
	if ! mkdir "$CDS_DIR/dumping" 2>/dev/null; then
		# A writer whose node is gone without stop_nodes left a stale claim.
		owner=$(cat "$CDS_DIR/dumping/owner" 2>/dev/null || true)
		if [[ -z $owner ]] || node_pid "${owner% *}" "${owner##* }" >/dev/null; then
			return 0
		fi
		rm -rf "$CDS_DIR/dumping"
		mkdir "$CDS_DIR/dumping" 2>/dev/null || return 0
	fi
	echo "$dir $n" >"$CDS_DIR/dumping/owner"
	printf '%s\n' "-XX:ArchiveClassesAtExit=$jsa.tmp" -Xlog:cds=off -Xlog:cds+dynamic=off
}

# cds_done DIR N publishes the archive node N wrote as it exited, if it was
# the writer.
cds_done() {
	local owner jsa
	owner=$(cat "$CDS_DIR/dumping/owner" 2>/dev/null || true)
	[[ $owner == "$1 $2" ]] || return 0
	jsa=$(cds_archive)
	if [[ -s $jsa.tmp ]]; then
		mv -f "$jsa.tmp" "$jsa"
	else
		rm -f "$jsa.tmp"
	fi
	rm -rf "$CDS_DIR/dumping"
}

# our_pid PIDFILE FLAG prints the pid in PIDFILE if that process is alive
# and has FLAG among its arguments: a reused pid is not ours.
our_pid() {
	local f=$1 pid
	[[ -s $f ]] || return 1
	pid=$(<"$f")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "$2" || return 1
	echo "$pid"
}

# node_pid DIR N prints node N's pid if that process is alive and is ours
# (a JVM started for this DIR).
node_pid() { our_pid "$1/node-$2/pid" "-Dsamsa.kafka.dir=$1"; }

# start_node DIR N launches node N from DIR/node-N/server.properties in its
# own session, logging to DIR/logs/node-N.log.
start_node() {
	local dir=$1 n=$2 java
	java=$(java_bin)
	local pidf="$dir/node-$n/pid" log="$dir/logs/node-$n.log"
	rm -f "$pidf"
	# wait_started reads the log from here on.
	if [[ -f $log ]]; then wc -l <"$log" >"$dir/node-$n/logline"; else echo 0 >"$dir/node-$n/logline"; fi
	echo "==== $(date -u '+%Y-%m-%dT%H:%M:%SZ') start node $n (Kafka $KAFKA_VERSION)" >>"$log"
	local -a cds=()
	local flags
	flags=$(cds_opts "$dir" "$n")
	[[ -z $flags ]] || mapfile -t cds <<<"$flags"
	# DIR/jvm.opts: the cluster's own flags, one a line (-gssapi's krb5.conf).
	local -a extra=()
	[[ ! -s $dir/jvm.opts ]] || mapfile -t extra <"$dir/jvm.opts"
	# shellcheck disable=SC2086 # NODE_JVM_OPTS is a list of flags
	setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$pidf" \
		"$java" $NODE_JVM_OPTS "${cds[@]}" "${extra[@]}" -Dsamsa.kafka.dir="$dir" \
		-Dlog4j2.configurationFile="$dir/log4j2.properties" \
		-cp "$KAFKA_LIB/*:$KAFKA_CLASSES" kafka.Kafka "$dir/node-$n/server.properties" \
		</dev/null >>"$log" 2>&1 &
	# Not a job of this shell: no "Killed" line when stop_nodes kills it.
	disown "$!"
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -s $pidf ]] && return 0
		sleep 0.02
	done
	die "node $n did not start (no pid file $pidf)"
}

# stop_nodes DIR SIGNAL N... signals the nodes and waits for them to exit,
# SIGKILLing those still alive after SAMSA_KAFKA_STOP_TIMEOUT seconds
# (default 20).
stop_nodes() {
	local dir=$1 sig=$2 n pid
	shift 2
	local -A live=()
	for n in "$@"; do
		if pid=$(node_pid "$dir" "$n"); then
			kill "-$sig" "$pid" 2>/dev/null || true
			live[$n]=$pid
		else
			rm -f "$dir/node-$n/pid"
			node_cds_done "$dir" "$n"
		fi
	done
	local deadline=$((SECONDS + ${SAMSA_KAFKA_STOP_TIMEOUT:-20})) killed=0
	while ((${#live[@]} > 0)); do
		for n in "${!live[@]}"; do
			if ! node_pid "$dir" "$n" >/dev/null; then
				echo "==== $(date -u '+%Y-%m-%dT%H:%M:%SZ') node $n stopped (SIG$sig)" >>"$dir/logs/node-$n.log"
				rm -f "$dir/node-$n/pid"
				node_cds_done "$dir" "$n"
				unset "live[$n]"
			fi
		done
		((${#live[@]} > 0)) || break
		if ((SECONDS >= deadline && killed == 0)); then
			# The node writing the class data archive gets 30 s more.
			local writer=""
			for n in "${!live[@]}"; do
				! node_cds_writer "$dir" "$n" || writer=$n
			done
			if [[ -n $writer ]] && ((SECONDS < deadline + 30)); then
				sleep 0.1
				continue
			fi
			for n in "${!live[@]}"; do
				say "node $n still up after SIG$sig: SIGKILL"
				kill -KILL "${live[$n]}" 2>/dev/null || true
			done
			killed=1
		fi
		sleep 0.1
	done
}

# wait_started DIR N waits until node N's log, since its last start_node,
# says its broker has started: it is unfenced and serves requests on its
# listeners. (Metadata from another broker may still list a node that was
# killed a moment ago, until broker.session.timeout.ms passes.)
wait_started() {
	local dir=$1 n=$2 from
	from=$(<"$dir/node-$n/logline")
	local deadline=$((SECONDS + ${SAMSA_KAFKA_START_TIMEOUT:-120}))
	local want="[BrokerServer id=$n] Transition from STARTING to STARTED"
	# A ZooKeeper-mode broker (before 3.3 here) says it differently.
	[[ $KAFKA_MODE != zk ]] || want="[KafkaServer id=$n] started"
	until awk -v from="$from" -v want="$want" 'NR > from && index($0, want) { found = 1; exit }
		END { exit !found }' "$dir/logs/node-$n.log"; do
		node_pid "$dir" "$n" >/dev/null || { say "node $n exited while starting (see $dir/logs/node-$n.log)"; return 1; }
		((SECONDS < deadline)) || { say "node $n not started after ${SAMSA_KAFKA_START_TIMEOUT:-120}s"; return 1; }
		sleep 0.1
	done
}

# zk_pid DIR prints the pid of DIR's ZooKeeper server if it is alive and
# ours.
zk_pid() { our_pid "$1/zk/pid" "-Dsamsa.kafka.zk=$1"; }

# start_zk DIR PORT starts a standalone ZooKeeper server (from Kafka's own
# class path: kafka_2.13 before 4.0 depends on zookeeper) on
# 127.0.0.1:PORT, its data in DIR/zk, logging to DIR/logs/zookeeper.log,
# and waits until it accepts connections.
start_zk() {
	local dir=$1 port=$2 java
	java=$(java_bin)
	mkdir -p "$dir/zk/data"
	printf '%s\n' "dataDir=$dir/zk/data" "clientPort=$port" "clientPortAddress=127.0.0.1" \
		"maxClientCnxns=0" "admin.enableServer=false" >"$dir/zk/zk.properties"
	rm -f "$dir/zk/pid"
	echo "==== $(date -u '+%Y-%m-%dT%H:%M:%SZ') start ZooKeeper" >>"$dir/logs/zookeeper.log"
	# shellcheck disable=SC2086 # TOOL_JVM_OPTS is a list of flags
	setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$dir/zk/pid" \
		"$java" $TOOL_JVM_OPTS -Dsamsa.kafka.zk="$dir" -Dlog4j2.configurationFile="$dir/log4j2.properties" \
		-cp "$KAFKA_LIB/*" org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zk/zk.properties" \
		</dev/null >>"$dir/logs/zookeeper.log" 2>&1 &
	disown "$!"
	local deadline=$((SECONDS + 30))
	until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
		if ((SECONDS >= deadline)) || { [[ -s $dir/zk/pid ]] && ! zk_pid "$dir" >/dev/null; }; then
			say "ZooKeeper did not start (see $dir/logs/zookeeper.log)"
			return 1
		fi
		sleep 0.1
	done
}

# stop_zk DIR stops DIR's ZooKeeper server, if any (SIGTERM, SIGKILL after
# 10 s), and waits for it to exit. Stop the brokers first: a broker whose
# ZooKeeper is gone waits for it in its controlled shutdown.
stop_zk() {
	local dir=$1 pid i
	[[ -d $dir/zk ]] || return 0
	if ! pid=$(zk_pid "$dir"); then
		rm -f "$dir/zk/pid"
		return 0
	fi
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		zk_pid "$dir" >/dev/null || break
		sleep 0.1
	done
	if zk_pid "$dir" >/dev/null; then
		say "ZooKeeper still up after SIGTERM: SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		while zk_pid "$dir" >/dev/null; do sleep 0.1; done
	fi
	echo "==== $(date -u '+%Y-%m-%dT%H:%M:%SZ') ZooKeeper stopped" >>"$dir/logs/zookeeper.log"
	rm -f "$dir/zk/pid"
}

# all_nodes DIR prints the node numbers configured in DIR.
all_nodes() {
	local d
	for d in "$1"/node-*/; do
		[[ -d $d ]] || continue
		d=${d%/}
		echo "${d##*/node-}"
	done
}

# log_tails DIR [LINES] prints the end of every node's log to stderr.
log_tails() {
	local f lines=${2:-40}
	for f in "$1"/logs/*.log; do
		[[ -f $f ]] || continue
		echo "---- last $lines lines of $f" >&2
		tail -n "$lines" "$f" >&2
	done
}

# tool_cmd DIR sets TOOL_CMD to the command that runs SamsaKafkaSetup. The
# class path starts with the nodes' own, so the class data archive applies.
tool_cmd() {
	local dir=$1 java flags
	local -a cds=()
	java=$(java_bin)
	flags=$(cds_opts "$dir" "")
	[[ -z $flags ]] || mapfile -t cds <<<"$flags"
	# shellcheck disable=SC2206 # TOOL_JVM_OPTS is a list of flags
	TOOL_CMD=("$java" $TOOL_JVM_OPTS "${cds[@]}" -Dlog4j2.configurationFile="$dir/log4j2-tools.properties"
		-cp "$KAFKA_LIB/*:$KAFKA_CLASSES" SamsaKafkaSetup)
}

# run_tool DIR ARGS... runs SamsaKafkaSetup in the foreground.
run_tool() {
	tool_cmd "$1"
	shift
	"${TOOL_CMD[@]}" "$@"
}

# setup_tool runs SamsaKafkaSetup with its flags while watching that every
# node in NODES_TO_WATCH (a space-separated list) stays alive: a node dying
# fails at once instead of after the timeout.
setup_tool() {
	local dir=$1 watch=$2
	shift 2
	local n
	for n in $watch; do
		node_pid "$dir" "$n" >/dev/null || {
			say "node $n exited while starting (see $dir/logs/node-$n.log)"
			return 1
		}
	done
	tool_cmd "$dir"
	# The JVM replaces the subshell, so killing $! kills it; the caller's
	# traps must not run in the subshell.
	(
		trap - EXIT INT TERM
		exec "${TOOL_CMD[@]}" "$@"
	) 2>>"$dir/logs/setup.log" &
	local tool=$!
	sleep 0.2
	while kill -0 "$tool" 2>/dev/null; do
		for n in $watch; do
			if ! node_pid "$dir" "$n" >/dev/null; then
				kill "$tool" 2>/dev/null || true
				wait "$tool" 2>/dev/null || true
				say "node $n exited while starting (see $dir/logs/node-$n.log)"
				return 1
			fi
		done
		sleep 0.1
	done
	if ! wait "$tool"; then
		say "$(tail -n 1 "$dir/logs/setup.log")"
		return 1
	fi
}

# shellcheck source=kdc.sh
source "$KAFKA_HOME_DIR/kdc.sh"
