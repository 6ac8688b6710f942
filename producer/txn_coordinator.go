// The protocol side of transactions: finding coordinators, their
// connections, InitProducerId with the transactional id, AddPartitionsToTxn
// as part of the send gate, AddOffsetsToTxn + TxnOffsetCommit, EndTxn, and
// the IO goroutine's transaction state (txnIO).

package producer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/metadata"
	"github.com/samsa-go/samsa/sasl"
)

// Coordinator key types of FindCoordinator.
const (
	groupKey int8 = 0
	txnKey   int8 = 1
)

// concurrentTxnBackoff is the retry backoff after CONCURRENT_TRANSACTIONS
// (the coordinator is still completing the previous transaction), as the
// Java client's 20 ms.
const concurrentTxnBackoff = 20 * time.Millisecond

// txnMaxVersions caps the versions a transactional producer uses, on its
// Produce connections and the coordinators'. Each request of the
// transaction flows is then sent at its flow's version (txn_version.go):
// Produce v12, EndTxn v5 and TxnOffsetCommit v5 opt into KIP-890's
// transaction version 2 (implicit adds, an epoch bump per transaction), so
// a producer of version 1 sends v11, v4 and v4. AddPartitionsToTxn v4+ is
// for brokers only; TxnOffsetCommit v6 names topics by id (KIP-516).
// Produce v13, by topic id, runs version 2's flow too: sent at version 2
// (produceMax).
var txnMaxVersions = map[int16]int16{
	0:  produceMaxV2ByID,     // Produce
	24: 3,                    // AddPartitionsToTxn
	26: endTxnMaxV2,          // EndTxn
	28: txnOffsetCommitMaxV2, // TxnOffsetCommit
}

// Kafka error codes the transaction protocol reads that kerr has no name
// for.
const (
	codeCoordinatorLoadInProgress = 14
	codeCoordinatorNotAvailable   = 15
	codeNotCoordinator            = 16
	codeIllegalGeneration         = 22
	codeUnknownMemberID           = 25
	codeRebalanceInProgress       = 27
	codeGroupAuthorizationFailed  = 30
	codeUnsupportedForMsgFormat   = 43
	codeInvalidTxnState           = 48
	codeInvalidProducerIDMapping  = 49
	codeInvalidTransactionTimeout = 50
	codeOperationNotAttempted     = 55
	codeFencedInstanceID          = 82
	codeUnknownProducerID         = 59
)

func hasCode(err error, codes ...int16) bool {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return false
	}
	for _, c := range codes {
		if ke.Code == c {
			return true
		}
	}
	return false
}

// fencedErr is ErrProducerFenced, fatal, naming the cause.
func fencedErr(what string, cause error) *txnError {
	return &txnError{err: fmt.Errorf("%w: %s: %w", ErrProducerFenced, what, cause), fatal: true}
}

// classifyTxn sorts a coordinator's error for request what: nil for
// retriable ones (the caller retries), else the abortable or fatal
// txnError, following the Java client's TransactionManager (4.x).
// UNKNOWN_PRODUCER_ID from AddPartitionsToTxn, AddOffsetsToTxn and EndTxn
// is abortable with an epoch bump (Java's abortableErrorIfPossible; the
// caller makes it fatal when the coordinator cannot bump, txnClient.classify);
// from any other request it is an unhandled code: fatal.
// INVALID_PRODUCER_ID_MAPPING is fatal everywhere (Java since 4.0,
// KAFKA-18019; see IsFatal).
func classifyTxn(what string, err error) *txnError {
	switch {
	case hasCode(err, codeUnknownProducerID) && bumpsOnUnknownProducerID(what):
		return &txnError{err: fmt.Errorf("%s: %w", what, err), bump: true}
	case errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch):
		return fencedErr(what, err)
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed), errors.Is(err, kerr.UnsupportedVersion),
		errors.Is(err, kerr.ClusterAuthorizationFailed),
		hasCode(err, codeInvalidTxnState, codeInvalidProducerIDMapping, codeInvalidTransactionTimeout, codeUnsupportedForMsgFormat):
		return &txnError{err: fmt.Errorf("%s: %w", what, err), fatal: true}
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.TransactionAbortable),
		hasCode(err, codeGroupAuthorizationFailed, codeIllegalGeneration, codeUnknownMemberID, codeFencedInstanceID):
		return &txnError{err: fmt.Errorf("%s: %w", what, err)}
	case isCoordinatorMove(err), errors.Is(err, kerr.ConcurrentTransactions),
		hasCode(err, codeOperationNotAttempted, codeRebalanceInProgress), kerr.IsRetriable(err):
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return &txnError{err: fmt.Errorf("%s: %w", what, err), fatal: true} // an unhandled code, as Java
	}
	return nil // a connection error: retried
}

// bumpsOnUnknownProducerID reports whether UNKNOWN_PRODUCER_ID in the
// answer to request what is abortable with an epoch bump: the requests
// Java's TransactionManager answers it with abortableErrorIfPossible.
func bumpsOnUnknownProducerID(what string) bool {
	return what == "" || what == "AddPartitionsToTxn" || what == "AddOffsetsToTxn" || strings.HasPrefix(what, "EndTxn")
}

// classify is classifyTxn, with an error that asks an epoch bump made
// fatal when the transaction coordinator cannot bump (InitProducerId
// below v3, brokers before 2.5), as Java's canBumpEpoch decides.
func (c *txnClient) classify(what string, err error) *txnError {
	te := classifyTxn(what, err)
	if te != nil && te.bump && c.initPIDMax.Load() < 3 {
		te.fatal, te.bump = true, false
		te.err = fmt.Errorf("%w (the coordinator cannot bump the producer epoch: InitProducerId v%d)", te.err, c.initPIDMax.Load())
	}
	return te
}

func isCoordinatorMove(err error) bool {
	return hasCode(err, codeNotCoordinator, codeCoordinatorNotAvailable, codeCoordinatorLoadInProgress)
}

// txnClient sends the transaction protocol's requests to the coordinators.
// Its methods run on the goroutines that ask (short-lived ones the IO
// goroutine starts, or a caller of CommitTransaction); mu guards the
// coordinator addresses and connections and is never held across I/O.
type txnClient struct {
	p   *Producer
	cfg conn.Config

	mu     sync.Mutex
	coords map[coordKey]coordinator
	conns  map[string]*conn.Conn
	closed bool

	// features is the cluster's transaction.version, from every
	// connection of the producer (txn_version.go).
	features *txnFeatures
	// initPIDMax is the highest InitProducerId version the transaction
	// coordinator's connection serves (-1 before one is dialed): 3+ can
	// bump an epoch (KIP-360).
	initPIDMax atomic.Int32
}

type coordKey struct {
	typ int8
	key string
}

// coordinator is a FindCoordinator answer: the node and its address.
type coordinator struct {
	addr string
	node int32
}

func newTxnClient(p *Producer, cfg conn.Config) *txnClient {
	c := &txnClient{p: p, cfg: cfg, coords: map[coordKey]coordinator{}, conns: map[string]*conn.Conn{}, features: newTxnFeatures()}
	c.initPIDMax.Store(-1)
	return c
}

// close closes the coordinator connections (Producer.Close).
func (c *txnClient) close() {
	c.mu.Lock()
	conns := c.conns
	c.conns, c.closed = map[string]*conn.Conn{}, true
	c.mu.Unlock()
	for _, cn := range conns {
		cn.Close()
	}
}

// coordinator returns k's coordinator, asking any broker
// (FindCoordinator) when it is not known.
func (c *txnClient) coordinator(ctx context.Context, k coordKey) (coordinator, error) {
	c.mu.Lock()
	co, ok := c.coords[k]
	c.mu.Unlock()
	if ok {
		return co, nil
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorType, req.CoordinatorKeys = k.key, k.typ, []string{k.key}
	r, err := c.p.meta.Do(ctx, req)
	if err != nil {
		return coordinator{}, err
	}
	resp := r.(*kmsg.FindCoordinatorResponse)
	code, msg, host, port, node := resp.ErrorCode, resp.ErrorMessage, resp.Host, resp.Port, resp.NodeID
	if resp.Version >= 4 {
		if len(resp.Coordinators) == 0 {
			return coordinator{}, fmt.Errorf("FindCoordinator %q: no coordinator in the answer", k.key)
		}
		co := resp.Coordinators[0]
		code, msg, host, port, node = co.ErrorCode, co.ErrorMessage, co.Host, co.Port, co.NodeID
	}
	// The broker's message and host reach errors and logs: the message
	// bounded and scrubbed, a host that cannot be one refused (retried
	// like a broken connection).
	if err := conn.BrokerError(c.cfg.SASL, code, msg); err != nil {
		return coordinator{}, fmt.Errorf("FindCoordinator %q: %w", k.key, err)
	}
	if err := conn.CheckHost(host); err != nil {
		return coordinator{}, fmt.Errorf("FindCoordinator %q: %w", k.key, err)
	}
	co = coordinator{addr: net.JoinHostPort(host, strconv.Itoa(int(port))), node: node}
	c.mu.Lock()
	c.coords[k] = co
	c.mu.Unlock()
	return co, nil
}

// forget drops k's coordinator (it moved) so that the next request finds it
// again.
func (c *txnClient) forget(k coordKey) {
	c.mu.Lock()
	delete(c.coords, k)
	c.mu.Unlock()
}

// conn returns the connection to k's coordinator, finding it and dialing
// it first if needed.
func (c *txnClient) conn(ctx context.Context, k coordKey) (*conn.Conn, error) {
	co, err := c.coordinator(ctx, k)
	if err != nil {
		return nil, err
	}
	addr := co.addr
	c.mu.Lock()
	cn, closed := c.conns[addr], c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if cn != nil {
		select {
		case <-cn.Done():
			// Closed while idle (ConnMaxIdle, or the broker's own
			// idle timeout): dial anew rather than fail a request.
			c.mu.Lock()
			if c.conns[addr] == cn {
				delete(c.conns, addr)
			}
			c.mu.Unlock()
			cn.Close()
		default:
			return cn, nil
		}
	}
	cfg := c.cfg
	id := c.p.meta.ClusterID()
	if id != "" && !c.p.cfg.DisableMetadataClusterCheck && co.node >= 0 {
		// KIP-1242: a broker that is not this node of our cluster
		// refuses the handshake, and nothing is written to it.
		cfg.Expect = conn.Identity{ClusterID: id, NodeID: co.node}
	}
	cn, err = conn.Dial(ctx, addr, cfg)
	if err == nil && cfg.Expect.ClusterID != "" && !cn.Identified() {
		// A broker before Kafka 4.4 cannot check ApiVersions v5: its
		// Metadata answer says which cluster it is of.
		if err = checkClusterOf(ctx, cn, cfg.Expect.ClusterID, cfg.SASL); err != nil {
			cn.Close()
		}
	}
	if err != nil {
		c.forget(k)
		if errors.Is(err, ErrClusterMismatch) {
			// The address leads elsewhere now: look for our
			// cluster at the bootstrap brokers.
			c.p.meta.Rebootstrap()
		}
		return nil, err
	}
	c.features.observe(cn)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch old := c.conns[addr]; {
	case c.closed:
		cn.Close()
		return nil, ErrClosed
	case old != nil:
		cn.Close()
		return old, nil
	}
	c.conns[addr] = cn
	return cn, nil
}

// checkClusterOf asks cn's broker for Metadata of no topic and fails,
// wrapping ErrClusterMismatch, unless its answer names cluster id: the
// check of a connection to a broker before Kafka 4.4, which cannot check
// ApiVersions v5 (KIP-1242), before anything else is written on it. One
// round trip per new connection, off the per-record path.
func checkClusterOf(ctx context.Context, cn *conn.Conn, id string, mech sasl.Mechanism) error {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // none (nil is all, v1+)
	r, err := cn.Do(ctx, req)
	if err != nil {
		return fmt.Errorf("%s: checking its cluster: %w", cn.Addr(), err)
	}
	if got := r.(*kmsg.MetadataResponse).ClusterID; got == nil || *got != id {
		name := "none"
		if got != nil {
			name = strconv.Quote(conn.BrokerText(mech, *got))
		}
		return fmt.Errorf("%s: %w: it answers for cluster %s, this producer's cluster is %q (nothing was written there; restart the producer to move to another cluster)", cn.Addr(), ErrClusterMismatch, name, id)
	}
	return nil
}

// do sends req to k's coordinator once, at most at version max (-1: the
// highest both sides serve). A request that found its connection open but
// closed for ConnMaxIdle before a byte of it was written (ErrNotSent,
// conn.ErrIdleClosed) goes to a new connection to the same coordinator at
// once: idleness costs a reconnect, not a retry.
func (c *txnClient) do(ctx context.Context, k coordKey, req kmsg.Request, max int16) (kmsg.Response, error) {
	for redialed := false; ; redialed = true {
		cn, err := c.conn(ctx, k)
		if err != nil {
			return nil, err
		}
		addr := cn.Addr()
		if k.typ == txnKey {
			c.initPIDMax.Store(int32(cn.MaxVersion(22))) // InitProducerId
		}
		resp, err := cn.DoMax(ctx, req, max)
		if err != nil && cn.Err() != nil {
			c.mu.Lock()
			if c.conns[addr] == cn {
				delete(c.conns, addr)
			}
			c.mu.Unlock()
			cn.Close()
			if !redialed && ctx.Err() == nil && errors.Is(err, conn.ErrIdleClosed) && errors.Is(err, conn.ErrNotSent) {
				continue
			}
			c.forget(k)
		}
		return resp, err
	}
}

// call sends the request build makes (afresh per attempt, at most at
// version max; -1: the highest both sides serve) to k's coordinator until
// code, reading its answer, returns nil or an error classifyTxn does not
// retry, or ctx ends. Coordinator moves find the coordinator again;
// CONCURRENT_TRANSACTIONS retries after 20 ms, other retriable errors with
// the producer's backoff.
func (c *txnClient) call(ctx context.Context, what string, k coordKey, max int16, build func() kmsg.Request, code func(kmsg.Response) error) error {
	for attempt := 1; ; attempt++ {
		resp, err := c.do(ctx, k, build(), max)
		if err == nil {
			err = code(resp)
		}
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("%s: %w (last error: %w)", what, cerr, err)
		}
		if errors.Is(err, ErrClosed) || errors.Is(err, metadata.ErrClosed) {
			return fmt.Errorf("%s: %w", what, err)
		}
		if te := c.classify(what, err); te != nil {
			return te
		}
		if isCoordinatorMove(err) {
			c.forget(k)
		}
		wait := c.backoff(attempt)
		if errors.Is(err, kerr.ConcurrentTransactions) {
			wait = concurrentTxnBackoff
		}
		c.p.log.Debug("transaction request failed; retrying", "request", what, "err", err, "attempt", attempt, "backoff", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %w)", what, ctx.Err(), err)
		}
	}
}

// backoff is the producer's exponential backoff with jitter (KIP-580).
func (c *txnClient) backoff(attempt int) time.Duration {
	d := c.p.cfg.RetryBackoff << min(attempt-1, 16)
	if d <= 0 || d > c.p.cfg.RetryBackoffMax {
		d = c.p.cfg.RetryBackoffMax
	}
	return d*4/5 + time.Duration(rand.Int64N(int64(d)*2/5+1))
}

func (c *txnClient) txnCoord() coordKey { return coordKey{txnKey, c.p.cfg.TransactionalID} }

// initProducerID asks the transaction coordinator for the producer id and
// epoch: a new one (pid -1), or a bump of the current one (KIP-360).
func (c *txnClient) initProducerID(ctx context.Context, pid int64, epoch int16) (int64, int16, error) {
	var id int64
	var ep int16
	err := c.call(ctx, "InitProducerId", c.txnCoord(), -1, func() kmsg.Request {
		req := kmsg.NewPtrInitProducerIDRequest()
		tid := c.p.cfg.TransactionalID
		req.TransactionalID = &tid
		req.TransactionTimeoutMillis = int32(c.p.cfg.TransactionTimeout / time.Millisecond)
		req.ProducerID, req.ProducerEpoch = pid, epoch
		return req
	}, func(r kmsg.Response) error {
		resp := r.(*kmsg.InitProducerIDResponse)
		id, ep = resp.ProducerID, resp.ProducerEpoch
		if err := kerr.ForCode(resp.ErrorCode); err != nil || id >= 0 {
			return err
		}
		// A buggy coordinator: retried with backoff, not asked again at
		// once forever.
		return fmt.Errorf("the coordinator answered no producer id (%d, epoch %d)", id, ep)
	})
	return id, ep, err
}

// txnInfo is what a caller ending a transaction learns from the IO
// goroutine: the producer id and epoch, and whether the coordinator knows
// of the transaction at all.
type txnInfo struct {
	pid     int64
	epoch   int16
	started bool
	maybe   bool  // not started, but an AddOffsetsToTxn's or TxnOffsetCommit's outcome is unknown (txnIO.maybeStarted)
	v2      bool  // the transaction runs transaction version 2 (txnIO.v2)
	bump    bool  // an epoch bump was pending (idempotence.needBump) when the caller asked
	err     error // the producer could not get an id (fatal), or, to a needID waiter, why the transaction can only abort
}

// end ends the transaction with EndTxn (commit or abort) when the
// coordinator knows of it, and then tells the IO goroutine it ended, with
// the producer id and epoch an EndTxn v5 answered (transaction version 2:
// every commit or abort bumps the epoch, or gives a new producer id once
// the epoch is exhausted). It runs on the caller of CommitTransaction or
// AbortTransaction.
func (c *txnClient) end(ctx context.Context, p *Producer, commit bool) error {
	s := p.txnSink
	info, err := s.txnQuery(ctx, false, true)
	if err != nil {
		return err
	}
	if info.err != nil {
		return info.err
	}
	next := producerIDEpoch{id: -1, epoch: -1}
	if info.started || info.maybe {
		what := "EndTxn(abort)"
		if commit {
			what = "EndTxn(commit)"
		}
		max := endTxnMaxV1
		if info.v2 {
			max = endTxnMaxV2
		}
		err = c.call(ctx, what, c.txnCoord(), max, func() kmsg.Request {
			req := kmsg.NewPtrEndTxnRequest()
			req.TransactionalID = c.p.cfg.TransactionalID
			req.ProducerID, req.ProducerEpoch, req.Commit = info.pid, info.epoch, commit
			return req
		}, func(r kmsg.Response) error {
			resp := r.(*kmsg.EndTxnResponse)
			err := kerr.ForCode(resp.ErrorCode)
			if err != nil && !info.started && hasCode(err, codeInvalidTxnState) {
				// Only maybe started: the coordinator never got the
				// AddOffsetsToTxn (or TxnOffsetCommit), and has no
				// transaction to end.
				return nil
			}
			if err == nil && resp.Version >= 5 && resp.ProducerID >= 0 {
				next = producerIDEpoch{id: resp.ProducerID, epoch: resp.ProducerEpoch}
			}
			return err
		})
		var te *txnError
		if errors.As(err, &te) && te.bump {
			// UNKNOWN_PRODUCER_ID: the epoch is bumped once the
			// transaction is aborted (KIP-360). As in Java, an abort
			// answered so fails too, and is called again; an abort that
			// began with the bump already pending (called again, or
			// after an AddPartitionsToTxn answered so) ends through the
			// bump instead, as Java's abort ends with its InitProducerId:
			// the coordinator does not know the producer id, so no
			// EndTxn can succeed, and the bump (KIP-360, at the next
			// safe point, before any record of the next transaction) is
			// what fences the transaction's writes.
			_ = s.callIO(context.WithoutCancel(ctx), func() { s.txnAskBump(te) }) // ErrClosed: nothing left to bump
			if !commit && info.bump {
				p.log.Info("abort ends through an epoch bump: the coordinator does not know the producer id", "transactional_id", c.p.cfg.TransactionalID, "err", err)
				if err := s.callIO(ctx, func() { s.txnEnded(next) }); err != nil {
					return err
				}
				// The abort's result is the bump's, as Java's is its
				// InitProducerId's: wait for the producer id.
				bumped, err := s.txnQuery(ctx, true, false)
				if err != nil {
					return err
				}
				return bumped.err
			}
		}
		if err != nil {
			return err
		}
	}
	c.refreshFeatures(ctx)
	return s.callIO(ctx, func() { s.txnEnded(next) })
}

// producerIDEpoch is a producer id and epoch; id -1 for none.
type producerIDEpoch struct {
	id    int64
	epoch int16
}

// sendOffsets adds the group to the transaction (AddOffsetsToTxn), then
// commits the offsets to the group coordinator (TxnOffsetCommit); at
// transaction version 2, TxnOffsetCommit v5 alone does both.
func (c *txnClient) sendOffsets(ctx context.Context, p *Producer, offsets map[string]map[int32]TxnOffset, g GroupMetadata) error {
	s := p.txnSink
	info, err := s.txnQuery(ctx, true, false)
	if err != nil {
		return err
	}
	if info.err != nil {
		return info.err
	}
	tid := c.p.cfg.TransactionalID
	if info.v2 {
		// Transaction version 2: TxnOffsetCommit v5 adds the group
		// itself (Java skips AddOffsetsToTxn too). Its outcome is unknown
		// until it answers: the transaction then may have begun.
		if len(offsets) == 0 {
			return nil
		}
		if err := s.callIO(context.WithoutCancel(ctx), func() { s.txn.maybeStarted = true }); err != nil {
			return err
		}
		err := c.txnOffsetCommit(ctx, offsets, g, info)
		if err == nil {
			err = s.callIO(context.WithoutCancel(ctx), func() { s.txn.started = true })
		}
		return err
	}
	err = c.call(ctx, "AddOffsetsToTxn", c.txnCoord(), -1, func() kmsg.Request {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = tid, info.pid, info.epoch, g.GroupID
		return req
	}, func(r kmsg.Response) error {
		return kerr.ForCode(r.(*kmsg.AddOffsetsToTxnResponse).ErrorCode)
	})
	if err != nil {
		if ctx.Err() != nil {
			// Ended by ctx with a request out: the coordinator may have
			// taken it and opened the transaction, which must then be
			// ended, or it stays open until TransactionTimeout and its
			// abort fences the next one.
			_ = s.callIO(context.WithoutCancel(ctx), func() { s.txn.maybeStarted = true })
		}
		return err
	}
	// The coordinator knows of the transaction now: it must be ended, so
	// this is recorded even if ctx just ended (else a Commit would skip
	// EndTxn and the coordinator keep the transaction open).
	if err := s.callIO(context.WithoutCancel(ctx), func() { s.txn.started = true }); err != nil {
		return err
	}
	return c.txnOffsetCommit(ctx, offsets, g, info)
}

// txnOffsetCommit sends the offsets to the group coordinator: v5 at
// transaction version 2, which adds the group to the transaction, else at
// most v4 after AddOffsetsToTxn. Without offsets it sends nothing.
func (c *txnClient) txnOffsetCommit(ctx context.Context, offsets map[string]map[int32]TxnOffset, g GroupMetadata, info txnInfo) error {
	if len(offsets) == 0 {
		return nil
	}
	tid := c.p.cfg.TransactionalID
	max := txnOffsetCommitMaxV1
	if info.v2 {
		max = txnOffsetCommitMaxV2
	}
	return c.call(ctx, "TxnOffsetCommit", coordKey{groupKey, g.GroupID}, max, func() kmsg.Request {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = tid, g.GroupID, info.pid, info.epoch
		req.Generation, req.MemberID = g.GenerationID, g.MemberID
		if req.Generation == 0 && g.MemberID == "" {
			req.Generation = -1
		}
		if g.GroupInstanceID != "" {
			inst := g.GroupInstanceID
			req.InstanceID = &inst
		}
		for topic, parts := range offsets {
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = topic
			for part, o := range parts {
				rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch = part, o.Offset, o.LeaderEpoch
				if o.Metadata != "" {
					md := o.Metadata
					rp.Metadata = &md
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		return req
	}, func(r kmsg.Response) error {
		for _, rt := range r.(*kmsg.TxnOffsetCommitResponse).Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ForCode(rp.ErrorCode); err != nil {
					return fmt.Errorf("%s[%d]: %w", conn.BrokerText(c.cfg.SASL, rt.Topic), rp.Partition, err) // the broker's echo
				}
			}
		}
		return nil
	})
}

// txnIO is the IO goroutine's part of a transactional producer: which
// partitions the current transaction has (added) or is adding, and who
// waits for the adds to settle. Only the IO goroutine touches it.
type txnIO struct {
	t *txnManager

	added   map[*ioPart]struct{} // in the current transaction
	queued  map[*ioPart]struct{} // in pending or adding
	pending []*ioPart            // to add in the next AddPartitionsToTxn
	adding  []*ioPart            // in the AddPartitionsToTxn in flight
	started bool                 // the coordinator knows of the transaction: an add succeeded (as Java's transactionStarted)
	// maybeStarted: an AddOffsetsToTxn ended by its caller's ctx may have
	// opened the transaction on the coordinator: EndTxn is sent anyway
	// (INVALID_TXN_STATE then means there was none), and no epoch bump
	// goes meanwhile.
	maybeStarted bool
	// v2: the transaction runs transaction version 2 (KIP-890): no
	// AddPartitionsToTxn, Produce v12 adds each partition, and EndTxn v5
	// bumps the epoch. Chosen between transactions (txnPickVersion).
	v2      bool
	waiters []txnWaiter // txnQuery callers, answered once no add is in flight
	gen     uint64      // transactions ended (txnEnded): an add answered after its transaction ended adds nothing
}

func newTxnIO(t *txnManager) *txnIO {
	return &txnIO{t: t, added: map[*ioPart]struct{}{}, queued: map[*ioPart]struct{}{}}
}

// txnGate is the transactional part of the send gate (mayDrain): a
// partition's batches go out only while a transaction is open or
// committing, and only once the partition is in the transaction; until
// then it waits for the next AddPartitionsToTxn, which lists it again. At
// transaction version 2 the Produce request adds the partition itself: the
// batch goes, and the transaction counts as started (the coordinator may
// add the partition even if the batch then fails), so that EndTxn is sent.
func (s *sink) txnGate(ip *ioPart) bool {
	x := s.txn
	if st := x.t.load(); st != txnInTxn && st != txnCommitting {
		return false
	}
	if x.v2 {
		x.started = true
		return true
	}
	if _, ok := x.added[ip]; ok {
		return true
	}
	s.txnWant(ip)
	return false
}

// txnWant queues ip for the next AddPartitionsToTxn unless it is in the
// transaction or queued already. The send gate calls it, and so does a
// batch opening (as the Java client adds a partition at its first Send):
// the add then overlaps the batch's linger instead of delaying its send.
func (s *sink) txnWant(ip *ioPart) {
	x := s.txn
	if ip == nil || x.v2 {
		return
	}
	if st := x.t.load(); st != txnInTxn && st != txnCommitting {
		return
	}
	if _, ok := x.added[ip]; ok {
		return
	}
	if _, ok := x.queued[ip]; !ok {
		x.queued[ip] = struct{}{}
		x.pending = append(x.pending, ip)
	}
}

// txnStep runs every IO step of a transactional producer: it fails what
// is buffered while the transaction aborts (or cannot commit), sends
// AddPartitionsToTxn for the partitions waiting, and answers txnQuery.
func (s *sink) txnStep() {
	x := s.txn
	switch st := x.t.load(); st {
	case txnAborting:
		s.txnSweep(fmt.Errorf("%w: the record was not sent before AbortTransaction", ErrTransactionAborted))
	case txnAbortable, txnFatal:
		s.txnSweep(fmt.Errorf("%w: %w", ErrTransactionAborted, x.t.lastErr()))
	}
	s.txnAddPartitions()
	s.txnAnswer()
}

// txnSweep fails every record of the producer that is not in flight:
// parked, in batches, or waiting to be resent.
func (s *sink) txnSweep(err error) {
	s.failUnsent(err, true)
}

// txnAddPartitions sends one AddPartitionsToTxn for every partition
// waiting, unless one is in flight or an epoch bump is pending: the bump
// goes first, so that the transaction runs under the new epoch. It runs in
// the background and retries coordinator moves and CONCURRENT_TRANSACTIONS
// itself.
func (s *sink) txnAddPartitions() {
	x := s.txn
	if len(x.adding) > 0 || len(x.pending) == 0 || x.v2 || !s.idem.canSend() || s.idem.needBump {
		return
	}
	if st := x.t.load(); st != txnInTxn && st != txnCommitting {
		return
	}
	x.adding, x.pending = x.pending, x.adding[:0]
	byTopic := map[string][]int32{}
	for _, ip := range x.adding {
		byTopic[ip.topic.name] = append(byTopic[ip.topic.name], ip.acc.ID)
	}
	pid, epoch, tid, gen := s.idem.producerID, s.idem.epoch, s.cfg.TransactionalID, x.gen
	nAsked := len(x.adding) // x is the IO goroutine's: the request's goroutine reads only copies
	c := s.p.txn.client
	s.background.Go(func() {
		err := c.call(s.p.closing, "AddPartitionsToTxn", c.txnCoord(), -1, func() kmsg.Request {
			req := kmsg.NewPtrAddPartitionsToTxnRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch = tid, pid, epoch
			for topic, parts := range byTopic {
				rt := kmsg.NewAddPartitionsToTxnRequestTopic()
				rt.Topic, rt.Partitions = topic, parts
				req.Topics = append(req.Topics, rt)
			}
			return req
		}, func(r kmsg.Response) error {
			resp := r.(*kmsg.AddPartitionsToTxnResponse)
			if err := kerr.ForCode(resp.ErrorCode); err != nil { // v4+
				return err
			}
			// Report the worst partition error: a fatal or abortable
			// one before the retriable ones (OPERATION_NOT_ATTEMPTED
			// comes with the partition that failed).
			var retry error
			type tp struct {
				topic     string
				partition int32
			}
			answered := map[tp]bool{}
			for _, rt := range resp.Topics {
				asked := byTopic[rt.Topic]
				for _, rp := range rt.Partitions {
					if slices.Contains(asked, rp.Partition) {
						answered[tp{rt.Topic, rp.Partition}] = true
					}
					err := kerr.ForCode(rp.ErrorCode)
					if err == nil {
						continue
					}
					err = fmt.Errorf("%s[%d]: %w", conn.BrokerText(c.cfg.SASL, rt.Topic), rp.Partition, err) // the broker's echo
					if classifyTxn("", err) != nil {
						return err
					}
					retry = err
				}
			}
			if retry == nil && len(answered) != nAsked {
				// A partition left out of the answer is not known to be
				// in the transaction: its records must not be sent yet.
				// Adding the same partitions again is harmless, so the
				// request is retried.
				retry = fmt.Errorf("the answer covers %d of the %d partitions asked for", len(answered), nAsked)
			}
			return retry
		})
		s.post(func() { s.txnAdded(gen, err) })
	})
}

// txnAdded handles the end of an AddPartitionsToTxn: the partitions are in
// the transaction and may send, or the transaction failed.
func (s *sink) txnAdded(gen uint64, err error) {
	x := s.txn
	adding := x.adding
	x.adding = adding[:0]
	if gen != x.gen {
		clear(adding)
		return // its transaction has ended (txnQuery waits for adds, so only defensively)
	}
	var te *txnError
	for _, ip := range adding {
		delete(x.queued, ip)
		if err == nil {
			x.added[ip] = struct{}{}
			s.markReady(ip)
		}
	}
	clear(adding)
	switch {
	case err == nil:
		x.started = true
	case errors.As(err, &te):
		x.t.fail(te.err, te.fatal)
		s.txnAskBump(te)
	default: // the producer is closing
		x.t.fail(err, false)
	}
}

// txnAskBump asks the epoch bump an abortable coordinator error calls for
// (txnError.bump: UNKNOWN_PRODUCER_ID, KIP-360): it goes once nothing of
// the transaction is open at the coordinator (txnMayBump), so the next
// transaction runs under the new epoch. At transaction version 2 the
// abort's EndTxn bumps it instead, as in Java.
func (s *sink) txnAskBump(te *txnError) {
	if te.bump && !te.fatal && !s.txn.v2 {
		s.idem.needBump = true
	}
}

// txnWaiter is a txnQuery caller; needID: it needs the producer id even
// if the coordinator does not know of the transaction yet; drain: it ends
// the transaction, and waits until no Produce is in flight.
type txnWaiter struct {
	ch     chan<- txnInfo
	needID bool
	drain  bool
}

// txnQuery waits until no AddPartitionsToTxn is in flight (and, when
// needID or for a transaction the coordinator knows, the producer has its
// id; when drain, until no Produce is in flight either), and returns the
// producer id and epoch. It runs on the caller's goroutine.
//
// EndTxn asks with drain: a Produce still in flight, even one whose
// records already failed at their delivery timeout (expireInflight), could
// otherwise be written after the marker, into the next transaction (the
// Java client too waits for in-flight requests before EndTxn).
func (s *sink) txnQuery(ctx context.Context, needID, drain bool) (txnInfo, error) {
	ch := make(chan txnInfo, 1)
	w := txnWaiter{ch: ch, needID: needID, drain: drain}
	if err := s.callIO(ctx, func() { s.txn.waiters = append(s.txn.waiters, w); s.txnAnswer() }); err != nil {
		return txnInfo{}, err
	}
	select {
	case info := <-ch:
		return info, nil
	case <-ctx.Done():
		return txnInfo{}, ctx.Err()
	case <-s.p.ioDone:
		return txnInfo{}, ErrClosed
	}
}

// txnAnswer answers the txnQuery callers once the adds are settled (and,
// for drain, no Produce is in flight).
func (s *sink) txnAnswer() {
	x := s.txn
	if len(x.waiters) == 0 || len(x.adding) > 0 {
		return
	}
	info := txnInfo{pid: s.idem.producerID, epoch: s.idem.epoch, started: x.started, maybe: x.maybeStarted, v2: x.v2, bump: s.idem.needBump}
	state := x.t.load()
	fatal := state == txnFatal
	if fatal {
		info.err = x.t.lastErr()
	}
	// A needID waiter (SendOffsetsToTransaction) of a transaction that can
	// only abort now is told so at once: the epoch bump it would wait for
	// goes only once the transaction is aborted, which AbortTransaction
	// cannot do while SendOffsetsToTransaction holds the transaction's
	// operations.
	abortable := state == txnAbortable
	noID := s.idem.producerID < 0 || s.idem.requesting
	bumping := s.idem.needBump && !x.started // AddOffsetsToTxn waits for the bump too
	keep := x.waiters[:0]
	for _, w := range x.waiters {
		if abortable && w.needID {
			ai := info
			ai.err = x.t.lastErr()
			w.ch <- ai
			continue
		}
		if !fatal && ((noID && (x.started || w.needID)) || (w.needID && bumping) || (w.drain && s.inflight > 0)) {
			keep = append(keep, w) // wait for the id, or for the Produce requests
			continue
		}
		w.ch <- info
	}
	clear(x.waiters[len(keep):])
	x.waiters = keep
}

// txnEnded resets the IO goroutine's transaction once EndTxn succeeded (or
// none was needed), and makes the producer ready for the next one. The
// transition runs here, on the IO goroutine, between two steps: a step
// that read the state as aborting (and fails what is buffered) never
// overlaps the next transaction's Sends. An EndTxn v5 answered the next
// producer id and epoch (next.id >= 0): the producer adopts them, with
// sequences from 0, which is all an epoch bump asked for meanwhile would
// give. Then the next transaction's version is chosen (txnPickVersion). A
// pending epoch bump may go now (txnMayBump).
func (s *sink) txnEnded(next producerIDEpoch) {
	x := s.txn
	if id := s.idem; next.id >= 0 {
		if next.id != id.producerID || next.epoch != id.epoch {
			s.p.log.Debug("EndTxn bumped the producer epoch", "id", next.id, "epoch", next.epoch, "previous_id", id.producerID, "previous_epoch", id.epoch)
		}
		id.producerID, id.epoch = next.id, next.epoch
		id.needBump, id.needNewID = false, false
		s.resetSequences()
	}
	s.txnPickVersion(false)
	x.t.ended()
	clear(x.added)
	clear(x.queued)
	clear(x.pending)
	x.pending = x.pending[:0]
	x.started, x.maybeStarted = false, false
	x.gen++
}

// txnMayBump reports whether an epoch bump asked for (needBump) may go now:
// nothing is in flight, and no transaction the coordinator knows of is
// open (none began, or one began that has added nothing yet). Whenever
// needBump is set, even by an answer that arrives after the abort ended,
// the bump thus happens at the next safe point; InitProducerId with the
// current epoch during a transaction the coordinator knows of would abort
// it with a fencing bump.
func (s *sink) txnMayBump() bool {
	x := s.txn
	if !s.idem.needBump || s.inflight > 0 || len(x.adding) > 0 {
		return false
	}
	switch x.t.load() {
	case txnReady:
		return true
	case txnInTxn, txnCommitting:
		// Committing too: the caller may begin and commit before the
		// IO goroutine sees the bump asked for between transactions
		// (txnPickVersion, an abort's), and the commit's records wait
		// for it (mayDrain).
		return !x.started && !x.maybeStarted
	}
	return false
}

// callIO runs f on the IO goroutine and waits for it.
func (s *sink) callIO(ctx context.Context, f func()) error {
	done := make(chan struct{})
	select {
	case s.admin <- func() { f(); close(done) }:
	case <-s.p.quit:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-s.p.ioDone:
		return ErrClosed
	}
}

// txnEnsureProducerID is ensureProducerID for a transactional producer:
// the id comes from the transaction coordinator, once BeginTransaction was
// first called, and an epoch bump (after a sequence gap or
// INVALID_PRODUCER_EPOCH) waits for the abort and goes through
// InitProducerId with the current id and epoch (KIP-360).
func (s *sink) txnEnsureProducerID() {
	id, x := s.idem, s.txn
	st := x.t.load()
	if id.requesting || st == txnFatal || st == txnUninit || s.now.Before(id.retryAt) {
		return
	}
	pid, epoch := int64(-1), int16(-1)
	switch {
	case id.producerID < 0:
	case s.txnMayBump():
		pid, epoch = id.producerID, id.epoch
	default:
		return
	}
	id.requesting = true
	c := s.p.txn.client
	s.background.Go(func() {
		npid, nepoch, err := c.initProducerID(s.p.closing, pid, epoch)
		s.post(func() { s.txnProducerID(npid, nepoch, err) })
	})
}

func (s *sink) txnProducerID(pid int64, epoch int16, err error) {
	id := s.idem
	id.requesting = false
	if err != nil {
		var te *txnError
		if errors.As(err, &te) {
			s.txn.t.fail(te.err, true) // no id, no transaction: fatal
			return
		}
		id.failures++
		id.lastErr = fmt.Errorf("InitProducerId failed: %w", err)
		id.retryAt = s.now.Add(s.backoff(id.failures))
		return
	}
	bumped := id.producerID >= 0
	id.producerID, id.epoch = pid, epoch
	id.needBump, id.needNewID, id.failures, id.lastErr = false, false, 0, nil
	if !bumped {
		s.txnPickVersion(true)
	}
	if x := s.txn; bumped {
		// The coordinator knows of no transaction under the new epoch:
		// partitions are added again. A bump never runs inside a
		// transaction it knows of (txnMayBump); if one did, the
		// coordinator aborted that transaction.
		if x.started {
			x.t.fail(fmt.Errorf("%w: the epoch bump aborted the transaction", ErrTransactionAborted), false)
		}
		clear(x.added)
		x.started, x.maybeStarted = false, false
	}
	s.resetSequences()
	s.p.log.Debug("transactional producer id", "id", pid, "epoch", epoch)
}

// txnProduceError handles the Produce errors that concern the transaction,
// for b of ip, and reports whether it did: PRODUCER_FENCED (fatal),
// INVALID_PRODUCER_EPOCH and TRANSACTION_ABORTABLE (abortable: the
// coordinator aborted the transaction, e.g. after its timeout, and the
// abort bumps the epoch), sequence errors (abortable, with an epoch bump),
// INVALID_TXN_STATE (abortable), TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
// CLUSTER_AUTHORIZATION_FAILED and INVALID_PRODUCER_ID_MAPPING (fatal), as
// the Java client's TransactionManager.handleFailedBatch. The batch fails
// with the error; the producer does not retry it.
//
// CONCURRENT_TRANSACTIONS is retried instead: Kafka 4.4 answers it to a
// Produce v12 whose partition the leader could not add to the transaction
// while the coordinator still completes the previous one (writing its
// markers), and Java's ConcurrentTransactionsException is retriable (as
// kerr's is since it follows kafka-clients 4.4; handled here so that a
// transactional batch retries it whatever kerr's flag).
func (s *sink) txnProduceError(br *ioBroker, ip *ioPart, b *batch, err error) bool {
	where := fmt.Sprintf("Produce %s[%d] on broker %d", ip.topic.name, ip.acc.ID, br.id)
	var te *txnError
	switch {
	case errors.Is(err, kerr.ConcurrentTransactions):
		// Not appended: the batch keeps its sequence.
		s.retryOrFail(ip, b, fmt.Errorf("%s: %w", where, err))
		return true
	case errors.Is(err, kerr.ProducerFenced):
		te = fencedErr(where, err)
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed),
		hasCode(err, codeInvalidProducerIDMapping):
		te = &txnError{err: fmt.Errorf("%s: %w", where, err), fatal: true}
	case hasCode(err, codeInvalidTxnState): // the coordinator ended the transaction (kfake, after its timeout)
		te = &txnError{err: fmt.Errorf("%s: %w", where, err)}
	case errors.Is(err, kerr.InvalidProducerEpoch), errors.Is(err, kerr.TransactionAbortable),
		hasCode(err, codeUnknownProducerID), isSequenceError(err):
		te = &txnError{err: fmt.Errorf("%s: %w", where, err)}
		// At transaction version 2 the abort's EndTxn bumps the epoch
		// (Java asks no bump of its own then either).
		s.idem.needBump = s.idem.needBump || !s.txn.v2
	default:
		return false
	}
	s.txn.t.fail(te.err, te.fatal)
	s.fail(ip, b, te)
	return true
}
