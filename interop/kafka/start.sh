#!/usr/bin/env bash
# start.sh: starts a real Apache Kafka KRaft cluster on 127.0.0.1 from the
# Maven Central jars (see README.md in this directory).
#
#   start.sh [-version V] [-brokers 1|3] [-dir DIR] [-sasl-ssl] [-gssapi] [-quota] [-acl] [-no-auto-create] [-telemetry] [-txn-version 1|2] [-conf KEY=VALUE]...
#
# -version V (default 4.4.0) runs another Apache Kafka release: 4.x as
# 4.4.0, 3.3 to 3.9 in KRaft mode and 2.x in ZooKeeper mode, the latter two
# without the security, quota, ACL, telemetry and txn-version options.
#
# Prints the PLAINTEXT bootstrap list as the last line of stdout and writes
# DIR/env (shell-sourceable KEY=VALUE lines). Progress goes to stderr. On
# failure it stops what it started, prints the tail of the logs and exits 1.
set -euo pipefail
# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

usage() {
	echo "usage: $0 [-version V] [-brokers 1|3] [-dir DIR] [-sasl-ssl] [-gssapi] [-quota] [-acl] [-no-auto-create] [-telemetry] [-txn-version 1|2] [-conf KEY=VALUE]..." >&2
	exit 2
}

nodes=1 dir="" sasl_ssl=0 gssapi=0 quota=0 acl=0 auto_create=1 telemetry=0 txn_version=""
version=$KAFKA_DEFAULT_VERSION
declare -a confs=()
while (($# > 0)); do
	case $1 in
	-version | --version)
		(($# >= 2)) || usage
		version=$2
		shift
		;;
	-conf | --conf)
		(($# >= 2)) || usage
		[[ $2 =~ ^[A-Za-z0-9._-]+=.*$ ]] || die "-conf wants KEY=VALUE (a broker property), not '$2'"
		confs+=("$2")
		shift
		;;
	-brokers | --brokers)
		(($# >= 2)) || usage
		nodes=$2
		shift
		;;
	-dir | --dir)
		(($# >= 2)) || usage
		dir=$2
		shift
		;;
	-sasl-ssl | --sasl-ssl) sasl_ssl=1 ;;
	-gssapi | --gssapi) gssapi=1 ;;
	-quota | --quota) quota=1 ;;
	-acl | --acl) acl=1 ;;
	-no-auto-create | --no-auto-create) auto_create=0 ;;
	-telemetry | --telemetry) telemetry=1 ;;
	-txn-version | --txn-version)
		(($# >= 2)) || usage
		txn_version=$2
		shift
		;;
	-h | -help | --help) usage ;;
	*)
		echo "kafka: unknown option $1" >&2
		usage
		;;
	esac
	shift
done
[[ $nodes == 1 || $nodes == 3 ]] || die "-brokers must be 1 or 3, not $nodes"
[[ -z $txn_version || $txn_version == 1 || $txn_version == 2 ]] || die "-txn-version must be 1 or 2, not $txn_version"
set_kafka_version "$version"
if [[ $KAFKA_MODE != kraft4 ]]; then
	# These need SamsaKafkaSetup (built against Kafka 4.x) or 4.x's
	# storage tool.
	for opt in sasl_ssl gssapi quota acl telemetry; do
		((${!opt} == 0)) || die "-${opt//_/-} needs Kafka 4.x, not $KAFKA_VERSION"
	done
	[[ -z $txn_version ]] || die "-txn-version needs Kafka 4.x (transaction.version, KIP-890), not $KAFKA_VERSION"
fi
# SamsaTelemetryCapture is built against the default version's API.
((telemetry == 0)) || [[ $KAFKA_VERSION == "$KAFKA_DEFAULT_VERSION" ]] ||
	die "-telemetry needs Kafka $KAFKA_DEFAULT_VERSION (SamsaTelemetryCapture's client telemetry API), not $KAFKA_VERSION"
if ((sasl_ssl)); then
	command -v openssl >/dev/null 2>&1 || die "-sasl-ssl needs openssl"
fi
if ((gssapi)); then
	kdc_tools_present || die "-gssapi needs $KDC_TOOLS (apt-get install krb5-kdc krb5-admin-server krb5-user)"
fi

java_bin >/dev/null
t0=$SECONDS
ensure_jars

if [[ -z $dir ]]; then
	dir=$(mktemp -d "${TMPDIR:-/tmp}/samsa-kafka.XXXXXX")
else
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	if compgen -G "$dir/node-*/pid" >/dev/null; then
		for n in $(all_nodes "$dir"); do
			node_pid "$dir" "$n" >/dev/null && die "a cluster is already running in $dir (stop.sh -dir $dir)"
		done
	fi
	[[ -z $(ls -A "$dir") ]] || die "$dir is not empty; give an empty or new directory"
fi
chmod 700 "$dir"
mkdir -p "$dir/logs"
echo "$KAFKA_VERSION" >"$dir/kafka.version"

started=0
cleanup() {
	local rc=$?
	# A subshell signalled before it dropped the inherited traps (the
	# setup tool's) must not clean up: only this shell does.
	[[ $BASHPID == "$$" ]] || exit "$rc"
	if ((started == 0)); then
		say "start failed; stopping what was started in $dir"
		stop_nodes "$dir" KILL $(all_nodes "$dir") || true
		stop_zk "$dir"
		stop_kdc "$dir"
		log_tails "$dir" 40
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Free ports: below the kernel's ephemeral range (where a client's local
# port could take one between this pick and the broker's bind), and never
# one in use by any socket (any state) on this machine.
read -r eph_low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || eph_low=32768
port_low=10000 port_high=$((eph_low - 1))
if ((port_high - port_low < 2000)); then
	port_low=20000 port_high=29999
fi
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
		p=$((port_low + (RANDOM * 32768 + RANDOM) % (port_high - port_low + 1)))
		if [[ -z ${used[$p]:-} ]]; then
			used[$p]=1
			echo "$p"
			return 0
		fi
	done
	die "no free port found"
}
secret() { head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 20; }

declare -a pport iport cport sport gport oport
voters=""
for ((n = 0; n < nodes; n++)); do
	pport[n]=$(free_port)
	iport[n]=$(free_port)
	cport[n]=$(free_port)
	sport[n]=$(free_port)
	gport[n]=$(free_port)
	oport[n]=$(free_port)
	voters+="${voters:+,}$n@127.0.0.1:${cport[n]}"
done
zk_port=""
[[ $KAFKA_MODE != zk ]] || zk_port=$(free_port)
rf=$((nodes < 3 ? nodes : 3))
min_isr=$((nodes < 2 ? nodes : 2))

# Logging: the nodes log INFO to stdout, which start_node appends to
# DIR/logs/node-N.log; the short-lived tools log WARN to stderr.
cat >"$dir/log4j2.properties" <<'EOF'
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.zstd.name = com.github.luben
logger.zstd.level = WARN
EOF
cat >"$dir/log4j2-tools.properties" <<'EOF'
status = error
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
logger.netclient.name = org.apache.kafka.clients.NetworkClient
logger.netclient.level = ERROR
EOF

admin_user=samsa-admin admin_pass=$(secret)
scram_user=samsa-scram scram_pass=$(secret)
plain_user=samsa-plain plain_pass=$(secret)
acl_user=samsa-acl acl_pass=$(secret)

if ((sasl_ssl)); then
	# A CA and one broker certificate (SAN 127.0.0.1 and localhost) for
	# every node, ECDSA P-256 (fast to generate); the broker reads its key
	# and chain as one PEM file.
	tls="$dir/tls"
	mkdir -p "$tls"
	{
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 -subj "/CN=samsa test CA" \
			-keyout "$tls/ca.key" -out "$dir/ca.pem"
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=localhost" \
			-keyout "$tls/broker.key" -out "$tls/broker.csr"
		printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$tls/ext.cnf"
		openssl x509 -req -in "$tls/broker.csr" -CA "$dir/ca.pem" -CAkey "$tls/ca.key" \
			-CAcreateserial -days 30 -extfile "$tls/ext.cnf" -out "$tls/broker.crt"
	} >"$dir/logs/openssl.log" 2>&1 || die "openssl failed (see $dir/logs/openssl.log)"
	cat "$tls/broker.key" "$tls/broker.crt" "$dir/ca.pem" >"$tls/broker.pem"

	# The OAUTH listener's identity provider: an RSA key whose public
	# half the brokers read as a JWKS file (kid samsa-idp); the tests'
	# token endpoint signs RS256 access tokens with the private half.
	oauth="$dir/oauth"
	mkdir -p "$oauth"
	openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$oauth/idp.key" >>"$dir/logs/openssl.log" 2>&1 ||
		die "openssl failed (see $dir/logs/openssl.log)"
	modulus=$(openssl rsa -in "$oauth/idp.key" -noout -modulus 2>>"$dir/logs/openssl.log") ||
		die "openssl failed (see $dir/logs/openssl.log)"
	n_b64=$(printf '%s' "${modulus#Modulus=}" | perl -ne 'print pack("H*", $_)' | base64 -w0 | tr '+/' '-_' | tr -d '=')
	printf '{"keys":[{"kty":"RSA","use":"sig","alg":"RS256","kid":"samsa-idp","n":"%s","e":"AQAB"}]}\n' "$n_b64" >"$oauth/jwks.json"
fi

# -gssapi: a KDC (kdc.sh) before the nodes, which log in to it with their
# keytab as their GSSAPI listener starts. samsa-short's tickets live
# krb5_short_life; the listener asks for re-authentication (KIP-368) every
# gssapi_reauth_ms, so a client producing for longer than a ticket's life
# re-authenticates with new tickets.
krb5_short_life="10 seconds" krb5_short_life_ms=10000 gssapi_reauth_ms=3000
if ((gssapi)); then
	start_kdc "$dir" "$(free_port)" "$krb5_short_life"
	echo "-Djava.security.krb5.conf=$dir/krb5/krb5.conf" >>"$dir/jvm.opts"
fi
# The OAUTH listener's JWKS is a file: URL, which Kafka 4 reads only when
# the JVM's allowed.urls lists it (CVE-2025-27817).
((sasl_ssl == 0)) || echo "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=file://$dir/oauth/jwks.json" >>"$dir/jvm.opts"

for ((n = 0; n < nodes; n++)); do
	nd="$dir/node-$n"
	mkdir -p "$nd/data"
	listeners="PLAINTEXT://127.0.0.1:${pport[n]},INTERNAL://127.0.0.1:${iport[n]}"
	advertised=$listeners
	if [[ $KAFKA_MODE == zk ]]; then
		# ZooKeeper mode: no controller listener, no KRaft settings.
		cat >"$nd/server.properties" <<EOF
# Written by samsa's interop/kafka/start.sh: node $n of $nodes, Kafka $KAFKA_VERSION in ZooKeeper mode.
broker.id=$n
zookeeper.connect=127.0.0.1:$zk_port
listeners=$listeners
advertised.listeners=$advertised
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT
inter.broker.listener.name=INTERNAL
log.dirs=$nd/data
offsets.topic.replication.factor=$rf
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$min_isr
group.initial.rebalance.delay.ms=0
EOF
		((auto_create)) || echo "auto.create.topics.enable=false" >>"$nd/server.properties"
		continue
	fi
	listeners+=",CONTROLLER://127.0.0.1:${cport[n]}"
	if ((sasl_ssl)); then
		listeners+=",SASL_SSL://127.0.0.1:${sport[n]},OAUTH://127.0.0.1:${oport[n]}"
		advertised+=",SASL_SSL://127.0.0.1:${sport[n]},OAUTH://127.0.0.1:${oport[n]}"
	fi
	if ((gssapi)); then
		# Advertised as localhost: a client asks for a ticket to
		# kafka/HOST, HOST as it dials the broker.
		listeners+=",GSSAPI://127.0.0.1:${gport[n]}"
		advertised+=",GSSAPI://localhost:${gport[n]}"
	fi
	internal_proto=PLAINTEXT
	((acl)) && internal_proto=SASL_PLAINTEXT
	{
		cat <<EOF
# Written by samsa's interop/kafka/start.sh: node $n of $nodes, Kafka $KAFKA_VERSION.
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$voters
controller.listener.names=CONTROLLER
listeners=$listeners
advertised.listeners=$advertised
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:$internal_proto,CONTROLLER:$internal_proto,SASL_SSL:SASL_SSL,GSSAPI:SASL_PLAINTEXT,OAUTH:SASL_PLAINTEXT
inter.broker.listener.name=INTERNAL
log.dirs=$nd/data
offsets.topic.replication.factor=$rf
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$min_isr
group.initial.rebalance.delay.ms=0
# A restarted node can register again only once its old session expired
# (DUPLICATE_BROKER_REGISTRATION until then), and a killed one is fenced
# only then: 4 s instead of 9 s, with heartbeats every 0.5 s instead of 2 s.
broker.session.timeout.ms=4000
broker.heartbeat.interval.ms=500
EOF
		if [[ $KAFKA_MODE == kraft4 ]]; then
			echo "share.coordinator.state.topic.replication.factor=$rf"
			echo "share.coordinator.state.topic.min.isr=$min_isr"
		fi
		((auto_create)) || echo "auto.create.topics.enable=false"
		if ((telemetry)); then
			# KIP-714: the capture plugin makes the broker advertise the
			# telemetry APIs and writes each push to DIR/telemetry.
			echo "metric.reporters=SamsaTelemetryCapture"
			echo "samsa.telemetry.dir=$dir/telemetry"
		fi
		if ((acl)); then
			# The brokers and controllers talk to each other as
			# User:$admin_user over SASL PLAIN, a super user; clients on
			# PLAINTEXT are User:ANONYMOUS, which the ACLs may deny.
			jaas="org.apache.kafka.common.security.plain.PlainLoginModule required username=\"$admin_user\" password=\"$admin_pass\" user_$admin_user=\"$admin_pass\";"
			cat <<EOF
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=true
super.users=User:$admin_user
sasl.mechanism.inter.broker.protocol=PLAIN
sasl.mechanism.controller.protocol=PLAIN
listener.name.internal.sasl.enabled.mechanisms=PLAIN
listener.name.controller.sasl.enabled.mechanisms=PLAIN
listener.name.internal.plain.sasl.jaas.config=$jaas
listener.name.controller.plain.sasl.jaas.config=$jaas
EOF
		fi
		if ((sasl_ssl)); then
			# OAUTHBEARER with Kafka's default server callback, the
			# unsecured validator: it accepts unsigned JWTs (alg none)
			# and takes the principal from "sub"; the OIDC test mints
			# them from its own token endpoint. The OAUTH listener checks
			# tokens for real: RS256 against DIR/oauth/jwks.json, with
			# Kafka 4.4's required audience and issuer.
			cat <<EOF
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN,OAUTHBEARER
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$plain_user="$plain_pass" user_$acl_user="$acl_pass";
listener.name.sasl_ssl.ssl.keystore.type=PEM
listener.name.sasl_ssl.ssl.keystore.location=$dir/tls/broker.pem
listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER
listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
listener.name.oauth.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
listener.name.oauth.oauthbearer.sasl.oauthbearer.jwks.endpoint.url=file://$dir/oauth/jwks.json
listener.name.oauth.oauthbearer.sasl.oauthbearer.expected.audience=samsa-kafka
listener.name.oauth.oauthbearer.sasl.oauthbearer.expected.issuer=samsa-test-idp
EOF
		fi
		if ((gssapi)); then
			cat <<EOF
sasl.kerberos.service.name=kafka
listener.name.gssapi.sasl.enabled.mechanisms=GSSAPI
listener.name.gssapi.gssapi.sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="$dir/krb5/kafka.keytab" principal="kafka/localhost@$KRB5_REALM";
listener.name.gssapi.gssapi.connections.max.reauth.ms=$gssapi_reauth_ms
EOF
		fi
	} >"$nd/server.properties"
done
# -conf KEY=VALUE: appended to every node's properties, so it wins over a
# line above with the same key.
if ((${#confs[@]} > 0)); then
	for ((n = 0; n < nodes; n++)); do
		{
			echo "# -conf"
			printf '%s\n' "${confs[@]}"
		} >>"$dir/node-$n/server.properties"
	done
fi

# Format every node's storage (one JVM for all). SCRAM users are
# written into the bootstrap metadata, so they exist from the first second.
# A cluster id is 16 random bytes in URL-safe base64. Like Kafka's
# Uuid.randomUuid, never one starting with '-': the storage tool would read
# it as an option ("--cluster-id: expected one argument"; 1 start in 64).
cluster_id=-
while [[ $cluster_id == -* ]]; do
	cluster_id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
done
declare -a fmt_args=()
if ((sasl_ssl)); then
	for u in "$scram_user=$scram_pass" "$acl_user=$acl_pass"; do
		for m in SCRAM-SHA-256 SCRAM-SHA-512; do
			fmt_args+=(--add-scram "$m=[name=${u%%=*},password=${u#*=}]")
		done
	done
fi
# The transaction.version feature (KIP-890): Kafka 4.4 finalizes 2 unless
# told otherwise at format time.
[[ -z $txn_version ]] || fmt_args+=(--feature "transaction.version=$txn_version")
declare -a configs=()
for ((n = 0; n < nodes; n++)); do
	configs+=("$dir/node-$n/server.properties")
done
case $KAFKA_MODE in
kraft4)
	run_tool "$dir" format "${configs[@]}" -- --cluster-id "$cluster_id" "${fmt_args[@]}" \
		>"$dir/logs/format.log" 2>&1 || die "formatting the storage failed (see $dir/logs/format.log)"
	;;
kraft3)
	# Kafka 3.x's own storage tool, one JVM per node (its entry point
	# exits the JVM).
	for c in "${configs[@]}"; do
		# shellcheck disable=SC2086 # TOOL_JVM_OPTS is a list of flags
		"$(java_bin)" $TOOL_JVM_OPTS -Dlog4j2.configurationFile="$dir/log4j2-tools.properties" -cp "$KAFKA_LIB/*" \
			kafka.tools.StorageTool format --cluster-id "$cluster_id" --config "$c" \
			>>"$dir/logs/format.log" 2>&1 || die "formatting the storage failed (see $dir/logs/format.log)"
	done
	;;
zk)
	start_zk "$dir" "$zk_port" || exit 1
	;;
esac
t_format=$SECONDS

all=""
for ((n = 0; n < nodes; n++)); do
	start_node "$dir" "$n"
	all+=" $n"
done

brokers="" sasl_brokers="" gssapi_brokers="" oauth_brokers=""
for ((n = 0; n < nodes; n++)); do
	brokers+="${brokers:+,}127.0.0.1:${pport[n]}"
	sasl_brokers+="${sasl_brokers:+,}127.0.0.1:${sport[n]}"
	gssapi_brokers+="${gssapi_brokers:+,}localhost:${gport[n]}"
	oauth_brokers+="${oauth_brokers:+,}127.0.0.1:${oport[n]}"
done
quota_client=samsa-quota quota_rate=2
telemetry_match=samsa-telemetry
denied_topic=samsa-denied
declare -a setup_args=(--bootstrap "$brokers" --nodes "$nodes" --timeout-sec "${SAMSA_KAFKA_START_TIMEOUT:-120}")
((quota)) && setup_args+=(--quota-client "$quota_client" --quota-rate "$quota_rate")
if ((telemetry)); then
	mkdir -p "$dir/telemetry"
	# Only clients whose id starts with samsa-telemetry are subscribed:
	# the other tests' producers push nothing.
	setup_args+=(--telemetry-subscription samsa-telemetry --telemetry-metrics org.apache.kafka.producer.
		--telemetry-interval-ms 1000 --telemetry-match "client_id=$telemetry_match.*")
fi
if ((acl)); then
	deny="User:ANONYMOUS"
	((sasl_ssl)) && deny+=",User:$acl_user"
	setup_args+=(--denied-topic "$denied_topic" --deny-principals "$deny" --rf "$rf")
fi
if [[ $KAFKA_MODE == kraft4 ]]; then
	setup_tool "$dir" "$all" "${setup_args[@]}" || exit 1
fi
for n in $all; do
	wait_started "$dir" "$n" || exit 1
done

{
	echo "SAMSA_KAFKA_DIR=$dir"
	echo "SAMSA_KAFKA_BROKERS=$brokers"
	echo "SAMSA_KAFKA_NODES=$nodes"
	echo "SAMSA_KAFKA_VERSION=$KAFKA_VERSION"
	[[ $KAFKA_MODE != kraft4 ]] || echo "SAMSA_KAFKA_TXN_VERSION=${txn_version:-2}"
	[[ $KAFKA_MODE != zk ]] || echo "SAMSA_KAFKA_ZOOKEEPER=127.0.0.1:$zk_port"
	if ((sasl_ssl)); then
		echo "SAMSA_KAFKA_SASL_SSL_BROKERS=$sasl_brokers"
		echo "SAMSA_KAFKA_CA=$dir/ca.pem"
		echo "SAMSA_KAFKA_SCRAM_USER=$scram_user"
		echo "SAMSA_KAFKA_SCRAM_PASSWORD=$scram_pass"
		echo "SAMSA_KAFKA_PLAIN_USER=$plain_user"
		echo "SAMSA_KAFKA_PLAIN_PASSWORD=$plain_pass"
		echo "SAMSA_KAFKA_OAUTH_BROKERS=$oauth_brokers"
		echo "SAMSA_KAFKA_OAUTH_IDP_KEY=$dir/oauth/idp.key"
		echo "SAMSA_KAFKA_OAUTH_IDP_KID=samsa-idp"
		echo "SAMSA_KAFKA_OAUTH_AUDIENCE=samsa-kafka"
		echo "SAMSA_KAFKA_OAUTH_ISSUER=samsa-test-idp"
	fi
	if ((telemetry)); then
		echo "SAMSA_KAFKA_TELEMETRY_DIR=$dir/telemetry"
		echo "SAMSA_KAFKA_TELEMETRY_CLIENT_ID_PREFIX=$telemetry_match"
	fi
	if ((gssapi)); then
		echo "SAMSA_KAFKA_GSSAPI_BROKERS=$gssapi_brokers"
		echo "SAMSA_KAFKA_GSSAPI_REAUTH_MS=$gssapi_reauth_ms"
		echo "SAMSA_KRB5_CONFIG=$dir/krb5/krb5.conf"
		echo "SAMSA_KRB5_REALM=$KRB5_REALM"
		echo "SAMSA_KRB5_CLIENT_KEYTAB=$dir/krb5/client.keytab"
		echo "SAMSA_KRB5_CLIENT_PRINCIPAL=samsa-client@$KRB5_REALM"
		echo "SAMSA_KRB5_SHORT_PRINCIPAL=samsa-short@$KRB5_REALM"
		echo "SAMSA_KRB5_SHORT_LIFE_MS=$krb5_short_life_ms"
	fi
	if ((quota)); then
		echo "SAMSA_KAFKA_QUOTA_CLIENT_ID=$quota_client"
		echo "SAMSA_KAFKA_QUOTA_RATE=$quota_rate"
	fi
	if ((acl)); then
		echo "SAMSA_KAFKA_DENIED_TOPIC=$denied_topic"
		if ((sasl_ssl)); then
			echo "SAMSA_KAFKA_ACL_USER=$acl_user"
			echo "SAMSA_KAFKA_ACL_PASSWORD=$acl_pass"
		fi
	fi
} >"$dir/env"
started=1
say "$nodes-node Kafka $KAFKA_VERSION cluster up in $((SECONDS - t0))s (storage formatted after $((t_format - t0))s); env in $dir/env, logs in $dir/logs"
echo "$brokers"
