# Every Go module in the repository: the library at the root, the adapter
# modules (observe/samsaprom, observe/samsaotel, sasl/awsmskiam,
# sasl/kerberos), and the modules that hold interop tests, peer benchmarks
# and the release check (their dependencies never reach the library's
# users). go.work at the root joins them, so each builds against this
# checkout.
MODULES := $(patsubst %/go.mod,%,$(shell find . -name go.mod -not -path './.git/*' | sort))

GO ?= go

.PHONY: test test-modules vet fmt-check bench release-check

# test runs every test of every module with the race detector, with two
# real Apache Kafka clusters up when java and mvn are on PATH (a 1-node one
# with SASL_SSL, a quota and ACLs, and a 3-node one; see
# interop/kafka/README.md); without them it says the real-Kafka tests are
# skipped. The clusters are stopped afterwards, also on failure. Apicurio
# Registry runs beside them for the Schema Registry tests (see
# interop/registry/README.md), stopped afterwards too.
test:
	@interop/kafka/with-clusters.sh interop/registry/with-registry.sh $(MAKE) --no-print-directory test-modules

# test-modules runs the tests without starting Kafka.
test-modules:
	@set -e; for m in $(MODULES); do \
		echo "== go test -race $$m"; \
		(cd $$m && $(GO) test -race -count=1 -timeout 20m ./...); \
	done

vet:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) vet ./...); done

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# bench runs the library's micro-benchmarks once; see README for benchstat.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# release-check builds a module proxy from the work tree (the root module
# and each public submodule at v0.1.0, or VERSION=...) and, as a user
# outside the repository, go-gets every public module from it and builds
# the README's Quick start and a program per adapter; it fails on a
# replace or exclude in a published go.mod. See RELEASING.md.
release-check:
	@scripts/release-check.sh
