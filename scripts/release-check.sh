#!/usr/bin/env bash
# release-check proves, as a user would, that the published modules work
# when tagged at VERSION (default v0.1.0): it builds a file-system module
# proxy from the work tree (scripts/releasecheck: the root module and each
# public submodule at its own tag path, refused if a go.mod has a replace
# or exclude directive), then, in an empty module outside the repository
# with no go.work, `go get`s every public module from that proxy and
# builds the README's Quick start and one program per adapter module
# (scripts/releasecheck/testdata/user), and `go run`s the test broker
# command by path@version. RELEASING.md says when to run it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
start=$(date +%s)

VERSION=${VERSION:-v0.1.0}
# The modules users import, tagged at path/VERSION ("." is the root, tag
# VERSION): the directories of RELEASING.md's table, the one list of them.
mapfile -t public < <(sed -n 's/^| `github.com\/samsa-go\/samsa[^`]*` | `\([^`]*\)` |.*/\1/p' RELEASING.md)
if [ "${#public[@]}" -lt 2 ] || [ "${public[0]}" != . ]; then
	echo "release-check: RELEASING.md's table of published modules is unreadable (got: ${public[*]:-nothing})" >&2
	exit 1
fi
# The modules nothing publishes: tests, benchmarks and this check.
private=(interop bench scripts/releasecheck)

# A new module must be put in one of the lists.
while IFS= read -r -d '' gomod; do
	dir=$(dirname "$gomod")
	case " ${public[*]} ${private[*]} " in
	*" $dir "*) ;;
	*)
		echo "release-check: $gomod is neither in RELEASING.md's table of published modules nor in scripts/release-check.sh's private list: is it published?" >&2
		exit 1
		;;
	esac
done < <(git ls-files --cached --others --exclude-standard -z -- 'go.mod' '*/go.mod')

tmp=$(mktemp -d "${TMPDIR:-/tmp}/samsa-release-check.XXXXXX")
cleanup() {
	chmod -R u+w "$tmp" 2>/dev/null || true # the module cache is read-only
	rm -rf "$tmp"
}
trap cleanup EXIT

echo "== module proxy of the work tree at $VERSION"
(cd scripts/releasecheck && go build -o "$tmp/releasecheck" .)
"$tmp/releasecheck" proxy -root "$root" -version "$VERSION" -out "$tmp/proxy" "${public[@]}"

user="$tmp/user"
mkdir -p "$user/quickstart"
cp -R scripts/releasecheck/testdata/user/. "$user/"
"$tmp/releasecheck" quickstart README.md >"$user/quickstart/main.go"

# A user's environment: no workspace, no local replace, the samsa modules
# from the proxy above (not in the public checksum database, so not checked
# against it), everything else from the module cache or the usual proxy.
# The module cache is a new one, so no earlier run's samsa@VERSION is used.
proxy="file://$tmp/proxy"
cache=$(go env GOMODCACHE)
if [ -d "$cache/cache/download" ]; then
	proxy="$proxy,file://$cache/cache/download"
fi
upstream=$(go env GOPROXY)
if [ -n "$upstream" ] && [ "$upstream" != off ]; then
	proxy="$proxy,$upstream"
fi
export GOWORK=off GOFLAGS=-mod=mod GOPROXY="$proxy" GONOSUMDB=github.com/samsa-go/samsa \
	GOPRIVATE= GONOPROXY= GOMODCACHE="$tmp/modcache"

cd "$user"
echo "== go get every public module in $user"
go mod init example.com/samsauser >/dev/null 2>&1
mods=()
for dir in "${public[@]}"; do
	if [ "$dir" = . ]; then
		mods+=("github.com/samsa-go/samsa@$VERSION")
	else
		mods+=("github.com/samsa-go/samsa/$dir@$VERSION")
	fi
done
go get "${mods[@]}" >"$tmp/get.log" 2>&1 || {
	cat "$tmp/get.log" >&2
	exit 1
}

# Every samsa module must come from the proxy at VERSION, none replaced.
got=$(go list -m -f '{{.Path}} {{.Version}}{{if .Replace}} replaced{{end}}' all | grep '^github.com/samsa-go/')
want=$(for m in "${mods[@]}"; do echo "${m%@*} ${m#*@}"; done | sort)
if [ "$got" != "$want" ]; then
	printf 'release-check: the user module resolved\n%s\nwant\n%s\n' "$got" "$want" >&2
	exit 1
fi

echo "== go build the Quick start and the adapter programs"
go build -trimpath ./...

echo "== go run github.com/samsa-go/samsa/internal/testbroker/cmd/testbroker@$VERSION -h"
GOFLAGS= go run -trimpath "github.com/samsa-go/samsa/internal/testbroker/cmd/testbroker@$VERSION" -h >"$tmp/testbroker-help" 2>&1 || {
	cat "$tmp/testbroker-help" >&2
	exit 1
}
grep -q -- '-brokers' "$tmp/testbroker-help" || {
	echo "release-check: the test broker's -h does not list -brokers:" >&2
	cat "$tmp/testbroker-help" >&2
	exit 1
}

echo "release-check: ok ($VERSION, $(($(date +%s) - start))s)"
