package schemaregistry

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/producer"
)

// TestProducerLeavesEveryKey: producer.ConfigFromProperties accepts every
// key this package reads, so that one properties file serves both (the
// producer keeps its own list; this test keeps the two in step).
func TestProducerLeavesEveryKey(t *testing.T) {
	props := map[string]string{"bootstrap.servers": "127.0.0.1:9092", sslPrefix + "truststore.type": "PEM"}
	for k := range clientKeys {
		props[k] = "1"
	}
	for k := range serializerKeys {
		props[k] = "true"
	}
	_, err := producer.ConfigFromProperties(props)
	require.NoError(t, err)
}
