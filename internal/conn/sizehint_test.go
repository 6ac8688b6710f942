package conn

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSizeHintCoversProduceRequests: the hint is at least the encoded size
// of a Produce request at every version the producer uses, so that the
// writer allocates its buffer once, and not wildly more.
func TestSizeHintCoversProduceRequests(t *testing.T) {
	for _, shape := range []struct{ topics, parts, batch int }{{1, 1, 0}, {1, 1, 100}, {2, 500, 61}, {3, 3, 1 << 18}} {
		req := kmsg.NewPtrProduceRequest()
		txn := "txn"
		req.TransactionID = &txn
		for ti := range shape.topics {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = fmt.Sprintf("topic-with-a-long-name-%d", ti)
			for pi := range shape.parts {
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition = int32(pi)
				rp.Records = make([]byte, shape.batch)
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		const clientID = "a-client-id-longer-than-most"
		hint := sizeHint(req, len(clientID))
		for v := int16(3); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
			n := len(f.AppendRequest(nil, req, 1))
			require.GreaterOrEqual(t, hint, n, "shape %+v v%d", shape, v)
			require.Less(t, hint, n+64+len(clientID)+shape.topics*64+shape.topics*shape.parts*16, "shape %+v v%d", shape, v)
		}
	}
	require.Zero(t, sizeHint(kmsg.NewPtrMetadataRequest(), 5))
}
