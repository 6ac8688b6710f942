module github.com/samsa-go/samsa/interop

go 1.26.0

require (
	github.com/confluentinc/confluent-kafka-go/v2 v2.11.1
	github.com/samsa-go/samsa v0.1.0
	github.com/stretchr/testify v1.12.1
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kadm v1.20.0
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
	go.opentelemetry.io/proto/otlp v1.11.1
	go.uber.org/goleak v1.3.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/go-viper/mapstructure/v2 v2.4.0 // indirect
	github.com/hamba/avro/v2 v2.31.0 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.2 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
)

require (
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/samsa-go/samsa/serde/schemaregistry v0.1.0
	github.com/samsa-go/samsa/serde/schemaregistry/avro v0.1.0
	github.com/samsa-go/samsa/serde/schemaregistry/jsonschema v0.1.0
	github.com/samsa-go/samsa/serde/schemaregistry/protobuf v0.1.0
	github.com/xdg-go/scram v1.4.0 // indirect
	github.com/xdg-go/stringprep v1.0.4 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/text v0.44.0 // indirect
	google.golang.org/protobuf v1.36.12
)

// Never published: the replace serves GOWORK=off builds; in the workspace
// (go.work) the root module is used as it is (RELEASING.md).
replace github.com/samsa-go/samsa => ../
