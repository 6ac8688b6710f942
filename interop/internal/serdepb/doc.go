// Package serdepb holds the Protobuf messages of the real Schema Registry
// tests: the same descriptors as the protobuf serializer's tests
// (serde/schemaregistry/protobuf/internal/testpb/gen), generated for this
// module, which cannot import that internal package.
package serdepb

// Run from serde/schemaregistry/protobuf:
//
//	go run ./internal/testpb/gen -out ../../../interop/internal/serdepb -package github.com/samsa-go/samsa/interop/internal/serdepb
