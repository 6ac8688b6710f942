package producer

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/kerr"
)

// seenRequest is one request a cluster received, as requestLog keeps it.
type seenRequest struct {
	broker  int32
	key     int16
	version int16
	topicID [16]byte // Produce: the first topic's id
	topic   string   // Produce: the first topic's name
}

// requestLog records every request the cluster receives, in order. It
// must be registered before any other interceptor of the "before" stage
// (it never matches, so the others still apply).
type requestLog struct {
	mu   sync.Mutex
	seen []seenRequest
}

func logRequests(c *testbroker.Cluster) *requestLog {
	l := &requestLog{}
	c.Intercept(testbroker.Interceptor{Match: func(broker int32, req kmsg.Request) bool {
		r := seenRequest{broker: broker, key: req.Key(), version: req.GetVersion()}
		if pr, ok := req.(*kmsg.ProduceRequest); ok && len(pr.Topics) > 0 {
			r.topicID, r.topic = pr.Topics[0].TopicID, strings.Clone(pr.Topics[0].Topic)
		}
		l.mu.Lock()
		l.seen = append(l.seen, r)
		l.mu.Unlock()
		return false
	}})
	return l
}

func (l *requestLog) requests() []seenRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// produces returns the Produce requests seen since request index from.
func (l *requestLog) produces(from int) []seenRequest {
	var out []seenRequest
	for _, r := range l.requests()[from:] {
		if r.key == 0 {
			out = append(out, r)
		}
	}
	return out
}

// TestRecreatedTopicNeverGetsOldRecords (issue 32, KIP-516): a topic
// deleted and recreated under the same name while records for the old one
// are in flight (a stalled Produce) and buffered behind them: none of them
// lands in the new topic (Produce v13 names the old topic id, which the
// broker no longer hosts), each fails with an error naming the topic, both
// ids and the recreation; records sent once the producer knows the new id
// go through, and the new topic holds only them. Produce v12 by name wrote
// the old records into the new topic. The stalled request's answer is the
// broker's (UNKNOWN_TOPIC_ID: retried, then failed), or MESSAGE_TOO_LARGE:
// the halves of the split batch are for the old topic too.
func TestRecreatedTopicNeverGetsOldRecords(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer int16 // the stalled request's error code; 0: the broker's answer
	}{
		{"retried", 0},
		{"split", 10},
	} {
		t.Run(tc.name, func(t *testing.T) { testRecreatedTopicNeverGetsOldRecords(t, tc.answer) })
	}
}

func testRecreatedTopicNeverGetsOldRecords(t *testing.T, answer int16) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	log := logRequests(c)
	p := newProducer(t, c, Config{MaxInFlight: 1, Linger: 100 * time.Millisecond, DeliveryTimeout: 30 * time.Second,
		RequestTimeout: 20 * time.Second, MetadataMaxAge: 100 * time.Millisecond})
	require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second)) // the topic id known
	old := oldID(t, p, "t")
	var stalled atomic.Int32
	unstall := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, Stall: true, ErrorCode: answer,
		Match: func(int32, kmsg.Request) bool { stalled.Add(1); return true }})
	defer unstall()
	ctx := context.Background()
	var fs []*Future
	send := func(v string) *Future {
		return p.Send(ctx, &Record{Topic: "t", Partition: 0, ExplicitPartition: true, Value: []byte(v)})
	}
	for i := range 4 { // one batch (Linger)
		fs = append(fs, send(fmt.Sprint("old-", i)))
	}
	require.True(t, waitFor(5*time.Second, func() bool { return stalled.Load() > 0 }), "no Produce stalled")
	for i := 4; i < 20; i++ {
		fs = append(fs, send(fmt.Sprint("old-", i)))
		if i%5 == 0 {
			time.Sleep(20 * time.Millisecond) // several batches behind the stalled request
		}
	}
	require.NoError(t, c.DeleteTopic("t"))
	require.NoError(t, c.CreateTopic("t", 1))
	waitTopicID(t, p, "t", old)
	newID := oldID(t, p, "t")
	unstall() // the broker handles the old request now: its topic id is gone
	for i, f := range fs {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := f.Wait(wctx)
		cancel()
		require.Error(t, err, "record old-%d", i)
		require.ErrorIs(t, err, kerr.UnknownTopicID, "record old-%d", i)
		for _, want := range []string{"t[0]", "deleted and recreated", uuidString(old), uuidString(newID)} {
			require.Contains(t, err.Error(), want, "record old-%d", i)
		}
	}
	var news []*Future
	for i := range 3 {
		news = append(news, send(fmt.Sprint("new-", i)))
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, p.Flush(fctx))
	for _, f := range news {
		_, err := f.Wait(fctx)
		require.NoError(t, err)
	}
	recs, err := c.Records("t", 0)
	require.NoError(t, err)
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Value))
	}
	require.Equal(t, []string{"new-0", "new-1", "new-2"}, got, "the recreated topic holds records made for the old one")
	for _, r := range log.produces(0) {
		require.Equal(t, int16(13), r.version, "Produce to broker %d", r.broker)
		require.NotEqual(t, [16]byte{}, r.topicID)
	}
}

// TestUnknownTopicIDRefreshesMetadata: a Produce answer of
// UNKNOWN_TOPIC_ID (a broker that does not know the topic id yet) is
// retried after a metadata refresh, as Java does for every
// InvalidMetadataException, and the record of the topic, which still
// exists, goes through once.
func TestUnknownTopicIDRefreshesMetadata(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	log := logRequests(c)
	p := newProducer(t, c, Config{DeliveryTimeout: 10 * time.Second, RequestTimeout: 5 * time.Second})
	require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second))
	from := len(log.requests())
	c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, ErrorCode: 100}) // UNKNOWN_TOPIC_ID
	require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second))
	var keys []int16
	for _, r := range log.requests()[from:] {
		keys = append(keys, r.key)
	}
	first := slices.Index(keys, 0)
	require.GreaterOrEqual(t, first, 0, "no Produce: %v", keys)
	second := first + 1 + slices.Index(keys[first+1:], 0)
	require.Greater(t, second, first, "no second Produce: %v", keys)
	require.Contains(t, keys[first:second], int16(3), "UNKNOWN_TOPIC_ID retried without a Metadata request: %v", keys)
	n, err := c.HighWatermark("t", 0)
	require.NoError(t, err)
	require.Equal(t, int64(2), n, "each record once")
}

// TestLeaderHintToUnknownBroker (KIP-951): a partition's leader moves to a
// broker the producer has never seen (its Metadata answers leave broker 2
// out); the NOT_LEADER_OR_FOLLOWER answer's CurrentLeader and
// NodeEndpoints move the partition there while every Metadata request
// stalls: no Metadata round trip was needed.
func TestLeaderHintToUnknownBroker(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 3})
	require.NoError(t, c.CreateTopic("t", 1))
	require.NoError(t, c.MoveLeader("t", 0, 0))
	log := logRequests(c)
	c.Intercept(testbroker.Interceptor{Keys: []int16{3}, After: true, Rewrite: func(resp kmsg.Response) {
		r := resp.(*kmsg.MetadataResponse)
		r.Brokers = slices.DeleteFunc(r.Brokers, func(b kmsg.MetadataResponseBroker) bool { return b.NodeID == 2 })
	}})
	p := newProducer(t, c, Config{DeliveryTimeout: 5 * time.Second, RequestTimeout: 2 * time.Second})
	require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second))
	_, known := p.meta.Snapshot().Brokers[2]
	require.False(t, known, "the producer's metadata lists broker 2")
	var metas atomic.Int32
	unstall := c.Intercept(testbroker.Interceptor{Keys: []int16{3}, Stall: true,
		Match: func(int32, kmsg.Request) bool { metas.Add(1); return true }})
	defer unstall()
	require.NoError(t, c.MoveLeader("t", 0, 2))
	from := len(log.requests())
	require.NoError(t, sendTo(t, p, "t", 0, 4*time.Second), "the record did not reach the new leader without metadata")
	var to []int32
	for _, r := range log.produces(from) {
		to = append(to, r.broker)
	}
	require.Equal(t, []int32{0, 2}, to, "Produce requests by broker")
	hw, err := c.HighWatermark("t", 0)
	require.NoError(t, err)
	require.Equal(t, int64(2), hw)
	t.Logf("%d Metadata requests stalled meanwhile", metas.Load())
}

// TestStaleLeaderHintIgnored (KIP-951): a CurrentLeader whose leader epoch
// is not newer than the one the producer knows is ignored (Java's
// Metadata.updatePartitionLeadership): no Produce goes to the broker it
// names; the record goes to the live leader after a metadata refresh.
func TestStaleLeaderHintIgnored(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delta int32 // the hint's epoch minus the known one
	}{
		{"older epoch", -1},
		{"same epoch", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 2})
			require.NoError(t, c.CreateTopic("t", 1))
			for _, to := range []int32{1, 0} { // epoch 2 or more, led by broker 0
				require.NoError(t, c.MoveLeader("t", 0, to))
			}
			_, epoch, err := c.Leader("t", 0)
			require.NoError(t, err)
			log := logRequests(c)
			p := newProducer(t, c, Config{DeliveryTimeout: 5 * time.Second, RequestTimeout: 2 * time.Second})
			require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second))
			c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Times: 1, After: true, Rewrite: func(resp kmsg.Response) {
				r := resp.(*kmsg.ProduceResponse)
				rp := &r.Topics[0].Partitions[0]
				rp.ErrorCode, rp.BaseOffset = 6, -1 // NOT_LEADER_OR_FOLLOWER
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = 1, epoch+tc.delta
				b := kmsg.NewProduceResponseBroker()
				b.NodeID, b.Host, b.Port = 1, "127.0.0.1", 1 // not broker 1's port: never dialled if ignored
				r.Brokers = append(r.Brokers[:0], b)
			}})
			from := len(log.requests())
			require.NoError(t, sendTo(t, p, "t", 0, 4*time.Second))
			for _, r := range log.produces(from) {
				require.Equal(t, int32(0), r.broker, "a Produce went to the stale hint's broker")
			}
		})
	}
}

// TestProduceVersionByTopicID: Produce goes at v13 by topic id where the
// broker offers it, and at v12 by name to a broker capped at v12 (Kafka
// before 4.1) or for metadata without topic ids (the zero id); the records
// land either way.
func TestProduceVersionByTopicID(t *testing.T) {
	for _, tc := range []struct {
		name        string
		capV12      bool
		zeroIDs     bool
		wantVersion int16
	}{
		{"v13 where offered", false, false, 13},
		{"broker capped at v12", true, false, 12},
		{"metadata without topic ids", false, true, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 2))
			log := logRequests(c)
			if tc.capV12 {
				c.Intercept(testbroker.Interceptor{Keys: []int16{18}, After: true, Rewrite: func(resp kmsg.Response) {
					r := resp.(*kmsg.ApiVersionsResponse)
					for i := range r.ApiKeys {
						if r.ApiKeys[i].ApiKey == 0 {
							r.ApiKeys[i].MaxVersion = 12
						}
					}
				}})
			}
			if tc.zeroIDs {
				rewriteMetadata(c, 0, func(r *kmsg.MetadataResponse) {
					for i := range r.Topics {
						r.Topics[i].TopicID = [16]byte{}
					}
				})
			}
			p := newProducer(t, c, Config{DeliveryTimeout: 5 * time.Second, RequestTimeout: 2 * time.Second})
			for part := range int32(2) {
				require.NoError(t, sendTo(t, p, "t", part, 10*time.Second))
			}
			produces := log.produces(0)
			require.NotEmpty(t, produces)
			for _, r := range produces {
				require.Equal(t, tc.wantVersion, r.version)
				if tc.wantVersion >= 13 {
					require.NotEqual(t, [16]byte{}, r.topicID)
				} else {
					require.Equal(t, "t", r.topic)
				}
			}
			for part := range int32(2) {
				hw, err := c.HighWatermark("t", part)
				require.NoError(t, err)
				require.Equal(t, int64(1), hw)
			}
		})
	}
}

// TestRecreationSeenThroughAnswersWithoutIDs: Metadata answers without
// topic ids (a broker not upgraded yet) while the topic is deleted and
// recreated do not make the producer forget the old id: the next answer
// with ids shows the recreation, and the records buffered for the old
// topic fail instead of going to the new one.
func TestRecreationSeenThroughAnswersWithoutIDs(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	p := newProducer(t, c, Config{Linger: 30 * time.Second, DeliveryTimeout: time.Minute, MetadataMaxAge: 50 * time.Millisecond})
	ctx := context.Background()
	warm := p.Send(ctx, &Record{Topic: "t", Value: []byte("warm")})
	require.NoError(t, p.Flush(ctx))
	_, err := warm.Wait(ctx)
	require.NoError(t, err)
	old := oldID(t, p, "t")
	var zeroed atomic.Int32
	unzero := c.Intercept(testbroker.Interceptor{Keys: []int16{3}, After: true, Rewrite: func(resp kmsg.Response) {
		r := resp.(*kmsg.MetadataResponse)
		for i := range r.Topics {
			r.Topics[i].TopicID = [16]byte{}
		}
		zeroed.Add(1)
	}})
	defer unzero()
	require.True(t, waitFor(5*time.Second, func() bool { return zeroed.Load() >= 2 }), "no Metadata answer without ids")
	var olds []*Future
	for i := range 5 {
		olds = append(olds, p.Send(ctx, &Record{Topic: "t", Value: []byte(fmt.Sprint("old-", i))}))
	}
	require.NoError(t, c.DeleteTopic("t"))
	require.NoError(t, c.CreateTopic("t", 1))
	n := zeroed.Load()
	require.True(t, waitFor(5*time.Second, func() bool { return zeroed.Load() >= n+2 }), "no answer without ids after the recreation")
	unzero()
	for i, f := range olds {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := f.Wait(wctx)
		cancel()
		require.ErrorIs(t, err, kerr.UnknownTopicID, "record old-%d", i)
		require.Contains(t, err.Error(), uuidString(old), "record old-%d", i)
	}
	hw, err := c.HighWatermark("t", 0)
	require.NoError(t, err)
	require.Zero(t, hw, "the recreated topic got records made for the old one")
}

// TestRetiredTopicIDAnswerIgnored: after a topic's recreation (id A, then
// B), a Metadata answer naming A again (a lagging broker: the metadata
// connection moved to one after an idle close or in a rolling restart) is
// stale, however often it comes: topic ids are never reused. The records
// buffered for the new topic are not failed as made for a recreated one,
// and they are delivered. Taking the answer failed them ("topic id B, now
// A"), and the next answer naming B failed those after them again.
func TestRetiredTopicIDAnswerIgnored(t *testing.T) {
	for _, tc := range []struct {
		name  string
		times int // stale answers naming the old id
	}{
		{"once", 1},
		{"past staleAnswersAccepted", 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testbroker.Config{Brokers: 1})
			require.NoError(t, c.CreateTopic("t", 1))
			p := newProducer(t, c, Config{Linger: 400 * time.Millisecond, DeliveryTimeout: 20 * time.Second,
				RequestTimeout: 5 * time.Second, MetadataMaxAge: 20 * time.Millisecond})
			require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second))
			old := oldID(t, p, "t")
			require.NoError(t, c.DeleteTopic("t"))
			require.NoError(t, c.CreateTopic("t", 1))
			waitTopicID(t, p, "t", old)
			newID := oldID(t, p, "t")
			var rewritten atomic.Int32
			c.Intercept(testbroker.Interceptor{Keys: []int16{3}, After: true, Times: tc.times, Rewrite: func(resp kmsg.Response) {
				r := resp.(*kmsg.MetadataResponse)
				for i := range r.Topics {
					if r.Topics[i].Topic != nil && *r.Topics[i].Topic == "t" {
						r.Topics[i].TopicID = old
					}
				}
				rewritten.Add(1)
			}})
			ctx := context.Background()
			var fs []*Future
			for i := range 5 { // buffered (Linger) while the stale answers come
				fs = append(fs, p.Send(ctx, &Record{Topic: "t", Partition: 0, ExplicitPartition: true, Value: []byte(fmt.Sprint("new-", i))}))
			}
			require.True(t, waitFor(5*time.Second, func() bool { return rewritten.Load() >= int32(tc.times) }), "the stale answers did not come")
			for i := 5; i < 8; i++ {
				fs = append(fs, p.Send(ctx, &Record{Topic: "t", Partition: 0, ExplicitPartition: true, Value: []byte(fmt.Sprint("new-", i))}))
			}
			for i, f := range fs {
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := f.Wait(wctx)
				cancel()
				require.NoError(t, err, "record new-%d", i)
			}
			require.Equal(t, newID, oldID(t, p, "t"), "the producer took the retired id")
			hw, err := c.HighWatermark("t", 0)
			require.NoError(t, err)
			require.Equal(t, int64(8), hw)
		})
	}
}

// TestLeaderHintWithSeveralBatchesInFlight (KIP-951): three batches of a
// partition are in flight to its leader when the leader moves; each answer
// is NOT_LEADER_OR_FOLLOWER naming the same new leader and epoch. The
// first moves the partition; the others, whose hint is no newer, leave it
// there (the answering broker is no longer its leader), so every record
// reaches the new leader while Metadata stalls. The second answer reset
// the leader to none and the hint was refused as stale: the partition
// waited for a Metadata answer.
func TestLeaderHintWithSeveralBatchesInFlight(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 2})
	require.NoError(t, c.CreateTopic("t", 1))
	require.NoError(t, c.MoveLeader("t", 0, 0))
	p := newProducer(t, c, Config{BatchSize: 200, Linger: time.Millisecond, DeliveryTimeout: 30 * time.Second,
		RequestTimeout: 20 * time.Second})
	require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second))
	unstallMeta := c.Intercept(testbroker.Interceptor{Keys: []int16{3}, Stall: true})
	defer unstallMeta()
	unstall := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Brokers: []int32{0}, Stall: true})
	defer unstall()
	ctx := context.Background()
	var fs []*Future
	for i := range 4 { // 150 bytes: each seals the batch before it (BatchSize); the last lingers
		fs = append(fs, p.Send(ctx, &Record{Topic: "t", Partition: 0, ExplicitPartition: true, Value: []byte(fmt.Sprintf("%d-%s", i, strings.Repeat("x", 150)))}))
		if i == 0 {
			continue
		}
		i--
		require.True(t, waitFor(5*time.Second, func() bool {
			n := 0
			_ = p.txnSink.callIO(ctx, func() { n = len(p.txnSink.topics["t"].parts[0].inflight) })
			return n > i
		}), "batch %d not in flight", i)
	}
	require.NoError(t, c.MoveLeader("t", 0, 1))
	unstall()
	for i, f := range fs {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := f.Wait(wctx)
		cancel()
		require.NoError(t, err, "record %d did not reach the new leader without metadata", i)
	}
	hw, err := c.HighWatermark("t", 0)
	require.NoError(t, err)
	require.Equal(t, int64(1+len(fs)), hw)
}

// TestOldTopicAnswerMovesNoLeader: the answer to a batch made for a topic
// before its recreation (a broker still hosting the old topic id answers
// NOT_LEADER_OR_FOLLOWER with the old partition's CurrentLeader, at epoch
// 4) fails that batch and says nothing of the new topic's partition: its
// records still reach its leader. The hint moved the new partition to the
// old one's leader at epoch 4, after which the new topic's metadata (epoch
// 1) was skipped as stale: the partition stayed leaderless.
func TestOldTopicAnswerMovesNoLeader(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 2})
	require.NoError(t, c.CreateTopic("t", 1))
	require.NoError(t, c.MoveLeader("t", 0, 0))
	p := newProducer(t, c, Config{DeliveryTimeout: 30 * time.Second, RequestTimeout: 20 * time.Second,
		MetadataMaxAge: 100 * time.Millisecond})
	require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second))
	old := oldID(t, p, "t")
	host, port, err := net.SplitHostPort(c.Addrs()[1])
	require.NoError(t, err)
	portN, err := strconv.Atoi(port)
	require.NoError(t, err)
	unstall := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, Brokers: []int32{0}, Times: 1, After: true, Stall: true,
		Rewrite: func(resp kmsg.Response) {
			r := resp.(*kmsg.ProduceResponse)
			rp := &r.Topics[0].Partitions[0]
			rp.ErrorCode, rp.BaseOffset = 6, -1 // NOT_LEADER_OR_FOLLOWER, the old partition's leader
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = 1, 4
			b := kmsg.NewProduceResponseBroker()
			b.NodeID, b.Host, b.Port = 1, host, int32(portN)
			r.Brokers = append(r.Brokers[:0], b)
		}})
	defer unstall()
	ctx := context.Background()
	f := p.Send(ctx, &Record{Topic: "t", Partition: 0, ExplicitPartition: true, Value: []byte("old")})
	require.True(t, waitFor(5*time.Second, func() bool {
		n := 0
		_ = p.txnSink.callIO(ctx, func() { n = len(p.txnSink.topics["t"].parts[0].inflight) })
		return n > 0
	}), "the old record not in flight")
	require.NoError(t, c.DeleteTopic("t"))
	require.NoError(t, c.CreateTopic("t", 1))
	require.NoError(t, c.MoveLeader("t", 0, 0)) // the new topic led by broker 0, epoch 1 or so
	waitTopicID(t, p, "t", old)
	unstall()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = f.Wait(wctx)
	require.ErrorIs(t, err, kerr.UnknownTopicID)
	require.NoError(t, sendTo(t, p, "t", 0, 5*time.Second), "the new topic's partition lost its leader")
	hw, err := c.HighWatermark("t", 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), hw)
}

// TestHostileLeaderHintsBounded (KIP-951): a broker answering every
// Produce with NOT_LEADER_OR_FOLLOWER and a new leader under a fresh node
// id and a newer epoch each time (pointing back at itself), while Metadata
// stalls. Where the broker checks the node id the client dialed (KIP-1242)
// the dial fails with ErrClusterMismatch: the hint's broker is dropped,
// without a rebootstrap. Where it claims any id, the producer learns at
// most maxHintedBrokers of them. Either way, the next metadata snapshot
// drops them, and the record is delivered to the real leader once the
// hints stop. Before: every answer minted a broker for good (its stats, a
// dial), at round-trip rate, and the hint's epoch made the partition skip
// the real leader's metadata as stale.
func TestHostileLeaderHintsBounded(t *testing.T) {
	for _, tc := range []struct {
		name      string
		nodeCheck bool
	}{
		{"broker checks node ids", true},
		{"broker claims any node id", false},
	} {
		t.Run(tc.name, func(t *testing.T) { testHostileLeaderHintsBounded(t, tc.nodeCheck) })
	}
}

func testHostileLeaderHintsBounded(t *testing.T, nodeCheck bool) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", 1))
	if !nodeCheck {
		c.Intercept(testbroker.Interceptor{Keys: []int16{18}, After: true, Rewrite: func(resp kmsg.Response) {
			resp.(*kmsg.ApiVersionsResponse).ErrorCode = 0 // any node id
		}})
	}
	p := newProducer(t, c, Config{DeliveryTimeout: 30 * time.Second, RequestTimeout: 5 * time.Second,
		MetadataMaxAge: 200 * time.Millisecond})
	require.NoError(t, sendTo(t, p, "t", 0, 10*time.Second))
	host, port, err := net.SplitHostPort(c.Addrs()[0])
	require.NoError(t, err)
	portN, err := strconv.Atoi(port)
	require.NoError(t, err)
	const hostile = 60
	var n atomic.Int32
	stop := c.Intercept(testbroker.Interceptor{Keys: []int16{0}, After: true, Times: hostile, Rewrite: func(resp kmsg.Response) {
		k := n.Add(1)
		r := resp.(*kmsg.ProduceResponse)
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				rp := &r.Topics[i].Partitions[j]
				rp.ErrorCode, rp.BaseOffset = 6, -1 // NOT_LEADER_OR_FOLLOWER
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = 100+k, 100+k
			}
		}
		b := kmsg.NewProduceResponseBroker()
		b.NodeID, b.Host, b.Port = 100+k, host, int32(portN)
		r.Brokers = append(r.Brokers[:0], b)
	}})
	defer stop()
	unstallMeta := c.Intercept(testbroker.Interceptor{Keys: []int16{3}, Stall: true}) // no snapshot drops them meanwhile
	defer unstallMeta()
	brokers := func() int {
		var m int
		_ = p.txnSink.callIO(context.Background(), func() { m = len(p.txnSink.brokers) })
		return m
	}
	ctx := context.Background()
	f := p.Send(ctx, &Record{Topic: "t", Partition: 0, ExplicitPartition: true, Value: []byte("v")})
	most := 0
	deadline := time.Now().Add(3 * time.Second)
	for n.Load() < hostile && time.Now().Before(deadline) {
		most = max(most, brokers())
		time.Sleep(time.Millisecond)
	}
	stop()
	most = max(most, brokers())
	t.Logf("%d hostile answers, at most %d brokers", n.Load(), most)
	require.LessOrEqual(t, most, 1+maxHintedBrokers, "brokers learned from hints")
	unstallMeta()
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err = f.Wait(wctx)
	require.NoError(t, err, "the record after %d hostile answers", n.Load())
	require.True(t, waitFor(5*time.Second, func() bool { return brokers() == 1 }), "hint brokers not dropped: %d brokers", brokers())
}

// TestRecordSentAfterRecreationFailureGoesToNewTopic: a record sent by a
// caller that has already seen a record fail because its topic was
// recreated is made for the new topic, and is delivered there. The
// recreation takes every partition's buffered batches before it completes
// any of them; before, it completed partition by partition, and a record
// sent from the first failure's callback to a later partition was swept up
// with that partition's old batches and failed with UNKNOWN_TOPIC_ID (the
// interop comparison with kafka-clients 4.4 on real Kafka found it).
func TestRecordSentAfterRecreationFailureGoesToNewTopic(t *testing.T) {
	const partitions = 200
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("t", partitions))
	p := newProducer(t, c, Config{Linger: time.Minute, DeliveryTimeout: 2 * time.Minute, MetadataMaxAge: 50 * time.Millisecond})
	ctx := context.Background()
	send := func(part int32, v string, cb func(RecordMetadata, error)) {
		p.SendCallback(ctx, &Record{Topic: "t", Partition: part, ExplicitPartition: true, Value: []byte(v)}, cb)
	}
	warm := p.Send(ctx, &Record{Topic: "t", Value: []byte("warm")})
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, p.Flush(fctx))
	_, err := warm.Wait(fctx)
	require.NoError(t, err) // the topic id known
	old := oldID(t, p, "t")
	var mu sync.Mutex
	var oldErrs []error
	newErr := make(chan error, 1)
	var all sync.WaitGroup
	for part := range int32(partitions) {
		all.Add(1)
		send(part, fmt.Sprint("old-", part), func(_ RecordMetadata, err error) {
			defer all.Done()
			mu.Lock()
			oldErrs = append(oldErrs, err)
			mu.Unlock()
			if part == 0 {
				// Seen the first failure: send to the last partition,
				// whose old batch may not be failed yet.
				send(partitions-1, "new", func(_ RecordMetadata, err error) { newErr <- err })
			}
		})
	}
	require.NoError(t, c.DeleteTopic("t"))
	require.NoError(t, c.CreateTopic("t", partitions))
	waitTopicID(t, p, "t", old)
	all.Wait()
	mu.Lock()
	for _, err := range oldErrs {
		require.ErrorIs(t, err, kerr.UnknownTopicID)
	}
	mu.Unlock()
	require.NoError(t, p.Flush(fctx))
	require.NoError(t, <-newErr, "the record sent after the first failure")
	recs, err := c.Records("t", partitions-1)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, "new", string(recs[0].Value))
}
