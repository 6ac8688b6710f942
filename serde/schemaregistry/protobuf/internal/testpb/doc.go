// Package testpb holds the generated Go code of the protobuf package's test
// messages (see gen/main.go, which describes the .proto files).
package testpb

//go:generate go run ./gen -out . -package github.com/samsa-go/samsa/serde/schemaregistry/protobuf/internal/testpb
