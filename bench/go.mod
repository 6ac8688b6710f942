module github.com/samsa-go/samsa/bench

go 1.26.0

require (
	github.com/IBM/sarama v1.61.1
	github.com/confluentinc/confluent-kafka-go/v2 v2.11.1
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b
	github.com/samsa-go/samsa v0.1.0
	github.com/segmentio/kafka-go v0.4.51
	github.com/stretchr/testify v1.12.1
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
)

require (
	github.com/bufbuild/protocompile v0.8.0 // indirect
	github.com/go-viper/mapstructure/v2 v2.4.0 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jhump/protoreflect v1.15.6 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.2 // indirect
	golang.org/x/oauth2 v0.18.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	google.golang.org/appengine v1.6.8 // indirect
	google.golang.org/genproto v0.0.0-20240325203815-454cdb8f5daa // indirect
)

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/eapache/go-resiliency v1.7.0 // indirect
	github.com/hamba/avro/v2 v2.31.0
	github.com/hashicorp/go-uuid v1.0.3 // indirect
	github.com/jcmturner/aescts/v2 v2.0.0 // indirect
	github.com/jcmturner/dnsutils/v2 v2.0.0 // indirect
	github.com/jcmturner/gofork v1.7.6 // indirect
	github.com/jcmturner/gokrb5/v8 v8.4.4 // indirect
	github.com/jcmturner/rpc/v2 v2.0.3 // indirect
	github.com/klauspost/compress v1.20.4
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/rcrowley/go-metrics v0.0.0-20250401214520-65e299d6c5c9 // indirect
	github.com/samsa-go/samsa/serde/schemaregistry v0.1.0
	github.com/samsa-go/samsa/serde/schemaregistry/avro v0.1.0
	github.com/samsa-go/samsa/serde/schemaregistry/protobuf v0.1.0
	github.com/twmb/franz-go/pkg/sr v1.8.0
	github.com/xdg-go/scram v1.4.0 // indirect
	github.com/xdg-go/stringprep v1.0.4 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/net v0.59.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.44.0 // indirect
	google.golang.org/protobuf v1.36.12
)

// Never published: the replace serves GOWORK=off builds; in the workspace
// (go.work) the root module is used as it is (RELEASING.md).
replace github.com/samsa-go/samsa => ../
