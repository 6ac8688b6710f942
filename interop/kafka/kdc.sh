# kdc.sh: the Kerberos realm of start.sh's -gssapi, an MIT KDC in
# DIR/krb5. Sourced by lib.sh, never run.
# shellcheck shell=bash

# KDC_TOOLS are MIT Kerberos' programs -gssapi runs (Debian: krb5-kdc,
# krb5-admin-server), found on PATH or in /usr/sbin.
KDC_TOOLS="krb5kdc kdb5_util kadmin.local"
KRB5_REALM=SAMSA.TEST

# kdc_tool NAME prints the path of one of KDC_TOOLS, or fails.
kdc_tool() {
	if command -v "$1" 2>/dev/null; then
		return 0
	elif [[ -x /usr/sbin/$1 ]]; then
		echo "/usr/sbin/$1"
	else
		return 1
	fi
}

# kdc_tools_present reports whether every one of KDC_TOOLS is installed.
kdc_tools_present() {
	local t
	for t in $KDC_TOOLS; do
		kdc_tool "$t" >/dev/null || return 1
	done
}

# start_kdc DIR PORT SHORT_LIFE creates realm KRB5_REALM in DIR/krb5 with
# the principals kafka/localhost (the brokers), samsa-client, and
# samsa-short (its tickets live SHORT_LIFE, e.g. "10 seconds"), their
# keytabs kafka.keytab and client.keytab (both clients), and starts
# krb5kdc on 127.0.0.1:PORT (TCP and UDP; krb5.conf has clients use TCP),
# logging to DIR/logs/kdc.log. KRB5_CONFIG and KRB5_KDC_PROFILE point at
# DIR/krb5 for its tools: /etc is neither read nor written. About a second.
start_kdc() {
	local dir=$1 port=$2 short_life=$3
	local k="$dir/krb5" kdc
	kdc_tools_present || die "-gssapi needs $KDC_TOOLS (apt-get install krb5-kdc krb5-admin-server krb5-user)"
	mkdir -p "$k"
	cat >"$k/krb5.conf" <<EOF
[libdefaults]
  default_realm = $KRB5_REALM
  dns_lookup_kdc = false
  dns_lookup_realm = false
  dns_canonicalize_hostname = false
  rdns = false
  udp_preference_limit = 1
[realms]
  $KRB5_REALM = {
    kdc = 127.0.0.1:$port
  }
[domain_realm]
  localhost = $KRB5_REALM
EOF
	cat >"$k/kdc.conf" <<EOF
[kdcdefaults]
  kdc_listen = 127.0.0.1:$port
  kdc_tcp_listen = 127.0.0.1:$port
[realms]
  $KRB5_REALM = {
    database_name = $k/principal
    key_stash_file = $k/stash
    acl_file = $k/kadm5.acl
    max_life = 1d
    max_renewable_life = 7d
    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
  }
[logging]
  kdc = FILE:$dir/logs/kdc.log
  default = FILE:$dir/logs/kdc.log
EOF
	: >"$k/kadm5.acl"
	export KRB5_CONFIG="$k/krb5.conf" KRB5_KDC_PROFILE="$k/kdc.conf"
	{
		"$(kdc_tool kdb5_util)" create -s -r "$KRB5_REALM" -P "$(head -c 18 /dev/urandom | base64)" &&
			"$(kdc_tool kadmin.local)" <<EOF
addprinc -randkey kafka/localhost@$KRB5_REALM
addprinc -randkey samsa-client@$KRB5_REALM
addprinc -randkey -maxlife "$short_life" samsa-short@$KRB5_REALM
ktadd -k $k/kafka.keytab kafka/localhost@$KRB5_REALM
ktadd -k $k/client.keytab samsa-client@$KRB5_REALM samsa-short@$KRB5_REALM
EOF
	} >"$dir/logs/kdc-setup.log" 2>&1 || die "creating the Kerberos realm failed (see $dir/logs/kdc-setup.log)"
	[[ -s $k/kafka.keytab && -s $k/client.keytab ]] || die "kadmin.local wrote no keytab (see $dir/logs/kdc-setup.log)"
	kdc=$(kdc_tool krb5kdc)
	setsid "$kdc" -n -P "$k/kdc.pid" </dev/null >>"$dir/logs/kdc.log" 2>&1 &
	disown "$!"
	local i
	for ((i = 0; i < 200; i++)); do
		if kdc_pid "$dir" >/dev/null && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			return 0
		fi
		sleep 0.05
	done
	die "the KDC did not start on 127.0.0.1:$port (see $dir/logs/kdc.log)"
}

# kdc_pid DIR prints DIR's KDC's pid if it is alive and ours.
kdc_pid() {
	local f="$1/krb5/kdc.pid" pid
	[[ -s $f ]] || return 1
	pid=$(<"$f")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "$f" || return 1
	echo "$pid"
}

# stop_kdc DIR stops DIR's KDC, if it runs, and waits for it to exit.
stop_kdc() {
	local pid i
	pid=$(kdc_pid "$1") || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		kdc_pid "$1" >/dev/null || return 0
		sleep 0.05
	done
	kill -KILL "$pid" 2>/dev/null || true
}
