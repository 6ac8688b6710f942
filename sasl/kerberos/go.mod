module github.com/samsa-go/samsa/sasl/kerberos

go 1.26.0

// A published module: github.com/samsa-go/samsa is required at a released
// version and never replaced (a user's build ignores replace directives);
// in this repository go.work builds it against the checkout. RELEASING.md.
require (
	github.com/jcmturner/gokrb5/v8 v8.4.4
	github.com/samsa-go/samsa v0.1.0
)

require (
	github.com/jcmturner/gofork v1.7.6
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/hashicorp/go-uuid v1.0.3 // indirect
	github.com/jcmturner/aescts/v2 v2.0.0 // indirect
	github.com/jcmturner/dnsutils/v2 v2.0.0 // indirect
	github.com/jcmturner/rpc/v2 v2.0.3 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.1 // indirect
	github.com/xdg-go/scram v1.4.0 // indirect
	github.com/xdg-go/stringprep v1.0.4 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/net v0.59.0 // indirect
	golang.org/x/text v0.44.0 // indirect
)

