package testbroker

import (
	"encoding/binary"
	"errors"
	"github.com/samsa-go/samsa/internal/testutil"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// discardConn is a net.Conn that swallows writes, for driving a conn's
// request path without a socket.
type discardConn struct{}

func (discardConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (discardConn) Write(b []byte) (int, error)      { return len(b), nil }
func (discardConn) Close() error                     { return nil }
func (discardConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (discardConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (discardConn) SetDeadline(time.Time) error      { return nil }
func (discardConn) SetReadDeadline(time.Time) error  { return nil }
func (discardConn) SetWriteDeadline(time.Time) error { return nil }

// seedRequests returns well-formed requests (without the size prefix) of
// every served API at a few versions, for the fuzz corpus.
func seedRequests(t testing.TB) [][]byte {
	batch := testBatch{n: 2}.build(t)
	var seeds [][]byte
	add := func(req kmsg.Request, versions ...int16) {
		for _, v := range versions {
			req.SetVersion(v)
			b := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz")).AppendRequest(nil, req, 1)
			seeds = append(seeds, b[4:])
		}
	}
	add(produceRequest(9, -1, "t", map[int32][]byte{0: batch}), 3, 9, 11)
	add(fetchRequest(11, "t", 0, 0, -1, 0), 4, 11, 12)
	md := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("auto")
	md.Topics = append(md.Topics, rt)
	md.AllowAutoTopicCreation = true
	add(md, 0, 4, 9, 12)
	add(kmsg.NewPtrApiVersionsRequest(), 0, 3)
	add(kmsg.NewPtrInitProducerIDRequest(), 0, 4)
	add(createTopicsRequest(0, "n", 2, 3), 0, 5, 7)
	lo := kmsg.NewPtrListOffsetsRequest()
	lot := kmsg.NewListOffsetsRequestTopic()
	lot.Topic = "t"
	lot.Partitions = append(lot.Partitions, kmsg.NewListOffsetsRequestTopicPartition())
	lo.Topics = append(lo.Topics, lot)
	add(lo, 1, 6)
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "t", 3
	cp.Topics = append(cp.Topics, cpt)
	add(cp, 0, 2)
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TopicNames = []string{"n-0"}
	add(dt, 0, 4)
	for _, s := range txnSeedRequests(t) {
		add(s.req, s.versions...)
	}
	return seeds
}

// FuzzRequest feeds arbitrary bytes to a connection's request path
// (header parsing, decoding, dispatch, handlers, response encoding): it may
// return an error, which closes the connection, but must never panic.
func FuzzRequest(f *testing.F) {
	for _, s := range seedRequests(f) {
		f.Add(s)
		f.Add(s[:len(s)/2])
	}
	c, err := New(Config{Brokers: 1, AllowAutoTopicCreation: true})
	require.NoError(f, err)
	defer c.Close()
	require.NoError(f, c.CreateTopic("t", 2))
	var mu sync.Mutex // one conn's scratch state is single-goroutine
	cn := newConn(c.brokers[0], discardConn{})
	cn.cancel() // waits (long polls, throttles) end at once
	f.Fuzz(func(t *testing.T, req []byte) {
		mu.Lock()
		defer mu.Unlock()
		_ = cn.handle(req)
	})
}

// TestMalformedRequestsCloseConnection: over TCP, each malformed request
// closes its connection with a logged error; the broker keeps serving.
func TestMalformedRequestsCloseConnection(t *testing.T) {
	var logs syncBuffer
	c := newTestCluster(t, Config{Brokers: 1, SocketRequestMaxBytes: 1 << 20,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	frame := func(body []byte) []byte {
		return binary.BigEndian.AppendUint32(nil, uint32(len(body))) // size prefix
	}
	valid := seedRequests(t)[0]
	cases := []struct {
		name string
		raw  []byte
	}{
		{"negative size", []byte{0xff, 0xff, 0xff, 0xf0}},
		{"size above socket.request.max.bytes", binary.BigEndian.AppendUint32(nil, 2<<20)},
		{"shorter than a header", append(frame([]byte{0, 3, 0}), 0, 3, 0)},
		{"client id overruns", append(frame(make([]byte, 12)), 0, 3, 0, 1, 0, 0, 0, 1, 0x7f, 0, 0, 0)},
		{"unknown key", append(frame(make([]byte, 12)), 0x0f, 0xff, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0)},
		{"unsupported version", append(frame(make([]byte, 12)), 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0)},
		{"truncated body", append(frame(valid[:len(valid)-7]), valid[:len(valid)-7]...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := dialBroker(t, c.Addrs()[0], "bad")
			_, err := w.nc.Write(tc.raw)
			require.NoError(t, err)
			_ = w.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = w.br.ReadByte()
			// The broker reads no further than the size prefix (KIP-72),
			// so a request it refuses may still have unread bytes in its
			// socket when it closes: the client then sees a reset
			// instead of an EOF. Either way the connection is closed.
			if !errors.Is(err, syscall.ECONNRESET) {
				assert.ErrorIs(t, err, io.EOF, "connection closed")
			}

			ok := dialBroker(t, c.Addrs()[0], "good")
			assert.Zero(t, ok.request(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse).ErrorCode)
		})
	}
	assert.Contains(t, logs.String(), "closing connection")
}

type syncBuffer = testutil.SyncBuffer

// versionedRequest is a seed request and the versions to encode it at.
type versionedRequest struct {
	req      kmsg.Request
	versions []int16
}

// txnSeedRequests are seeds of the group and transaction APIs, in the
// order a consume-transform-produce loop sends them.
func txnSeedRequests(t testing.TB) []versionedRequest {
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKey, fc.CoordinatorKeys = CoordinatorTransaction, "fz", []string{"fz", "g"}
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = kmsg.StringPtr("fz"), 60000
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = "fz", 1, 0
	ap.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
	ap4 := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap4.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{{TransactionalID: "fz", ProducerID: 1,
		VerifyOnly: true, Topics: []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "t", Partitions: []int32{0}}}}}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.Group = "fz", 1, "g"
	txnBatch := testBatch{n: 2, idem: true, txn: true, pid: 1}.build(t)
	toc := kmsg.NewPtrTxnOffsetCommitRequest()
	toc.TransactionalID, toc.Group, toc.ProducerID, toc.Generation, toc.MemberID = "fz", "g", 1, -1, ""
	toc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 2}}}}
	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID, et.ProducerID, et.Commit = "fz", 1, true
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group = "g"
	of.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}}
	rc := fetchRequest(11, "t", 0, 0, -1, 0)
	rc.IsolationLevel = 1
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group, jg.ProtocolType, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = "g", "consumer", 10000, 0
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1}}}
	sg := kmsg.NewPtrSyncGroupRequest()
	sg.Group, sg.MemberID, sg.Generation = "g", "m", 1
	sg.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: "m", MemberAssignment: []byte{1}}}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID = "g", "m"
	lg := kmsg.NewPtrLeaveGroupRequest()
	lg.Group, lg.MemberID = "g", "m"
	lg.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "g", -1
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	return []versionedRequest{
		{jg, []int16{0, 4, 9}},
		{sg, []int16{0, 5}},
		{hb, []int16{0, 4}},
		{lg, []int16{0, 3, 5}},
		{oc, []int16{0, 2, 8}},
		{fc, []int16{0, 3, 4, 6}},
		{ip, []int16{0, 3, 5}},
		{ap, []int16{0, 3}},
		{ap4, []int16{4, 5}},
		{ao, []int16{0, 3, 4}},
		{produceRequest(9, -1, "t", map[int32][]byte{0: txnBatch}), []int16{3, 9}},
		{toc, []int16{0, 3, 4}},
		{rc, []int16{4, 11}},
		{et, []int16{0, 3, 4}},
		{of, []int16{1, 7, 8, 9}},
	}
}
