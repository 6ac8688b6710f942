module github.com/samsa-go/samsa

go 1.26.0

require (
	github.com/klauspost/compress v1.20.4
	github.com/pierrec/lz4/v4 v4.1.33
	github.com/stretchr/testify v1.12.1
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
	github.com/xdg-go/scram v1.4.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/xdg-go/stringprep v1.0.4 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/text v0.44.0 // indirect
)
