package interop

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// TestKcatConsumerGroup: librdkafka's balanced consumer (kcat -G) joins a
// group on the test broker, reads every record of kgo's committed
// transactions at read_committed, and commits its offsets to the end.
func TestKcatConsumerGroup(t *testing.T) {
	kcatPath(t)
	const topic, group, partitions = "kcat-group", "kcat-g", 2
	c := startCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic(topic, partitions))
	committed, _ := produceTransactions(t, c, topic, partitions, 6, func(i int) bool { return i%2 == 0 }, "kcat-group-txn")
	want := 0
	for _, vs := range committed {
		want += len(vs)
	}
	out := runKcat(t, "", "-b", strings.Join(c.Addrs(), ","), "-G", group, "-o", "beginning", "-e", "-q",
		"-X", "isolation.level=read_committed", "-X", "session.timeout.ms=6000", "-f", "%s\\n", topic)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	assert.Len(t, lines, want, "kcat read:\n%s", out)
	require.Eventually(t, func() bool {
		total := int64(0)
		for p := int32(0); p < partitions; p++ {
			off, _ := c.CommittedOffset(group, topic, p)
			hw, err := c.HighWatermark(topic, p)
			require.NoError(t, err)
			if off != hw {
				return false
			}
			total += off
		}
		return total > 0
	}, 10*time.Second, 50*time.Millisecond, "the group's offsets reach the end of each partition")
}
