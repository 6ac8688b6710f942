// Package benchpb holds the Protobuf messages of the serializer benchmarks
// (Flat: ten scalar fields, the shape of the Avro record), generated for
// this module by the protobuf serializer's internal/testpb/gen.
package benchpb

// Run from serde/schemaregistry/protobuf:
//
//	go run ./internal/testpb/gen -out ../../../bench/serde/benchpb -package github.com/samsa-go/samsa/bench/serde/benchpb
