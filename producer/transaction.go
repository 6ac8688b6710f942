// Transactions (KIP-98, KIP-447): the user's API and the transaction state
// machine. The protocol side (coordinators, AddPartitionsToTxn, EndTxn) is
// in txn_coordinator.go.

package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

const defaultTransactionTimeout = 60 * time.Second

var (
	// ErrProducerFenced is returned by the transaction methods, and fails
	// Sends and buffered records, once another producer with the same
	// Config.TransactionalID took over (PRODUCER_FENCED, or
	// INVALID_PRODUCER_EPOCH from the transaction coordinator). It is
	// fatal (IsFatal): the producer can only be closed.
	ErrProducerFenced = errors.New("producer: fenced by a newer producer with the same transactional id")

	// ErrTransactionAborted fails the records of a transaction that
	// AbortTransaction aborted before they were sent, and the records
	// still buffered when the transaction became abortable or fatal (then
	// wrapping that error too). Records already in flight when the abort
	// began complete with the broker's answer; none of them is visible to
	// read_committed consumers.
	ErrTransactionAborted = errors.New("producer: transaction aborted")

	// ErrNoTransaction is returned by CommitTransaction, AbortTransaction
	// and SendOffsetsToTransaction when no transaction is open, and fails
	// the Future of a record a transactional producer is given outside a
	// transaction (the record takes no memory and is not sent). On a
	// producer without Config.TransactionalID every transaction method
	// returns it.
	ErrNoTransaction = errors.New("producer: no transaction is open")

	// ErrTransactionInProgress is returned by BeginTransaction while a
	// transaction is open or being committed or aborted, by
	// AbortTransaction while a commit is in progress (call
	// CommitTransaction again to finish it), and by CommitTransaction,
	// AbortTransaction and SendOffsetsToTransaction while another of them
	// runs on another goroutine. Nothing is lost: the open
	// transaction is unaffected.
	ErrTransactionInProgress = errors.New("producer: a transaction is in progress")
)

// txnError is an error that ended the current transaction (abortable) or
// the producer's transactional life (fatal). IsAbortable and IsFatal read
// it.
type txnError struct {
	err   error
	fatal bool
	// bump: abortable, and the epoch must be bumped (InitProducerId with
	// the current producer id and epoch, KIP-360) before the next
	// transaction, as Java's abortableErrorIfPossible asks.
	bump bool
}

func (e *txnError) Error() string { return e.err.Error() }
func (e *txnError) Unwrap() error { return e.err }

// IsAbortable reports whether err, returned by a transaction method
// (CommitTransaction, SendOffsetsToTransaction, BeginTransaction) or
// completing a record of a transaction, means the current transaction can
// no longer commit but the producer can go on: call AbortTransaction, then
// begin a new transaction. Following the Java client, abortable are
// records that failed (after the producer's own retries, e.g.
// TOPIC_AUTHORIZATION_FAILED or a delivery timeout),
// TOPIC_AUTHORIZATION_FAILED and GROUP_AUTHORIZATION_FAILED from the
// coordinators, a group generation that moved on (ILLEGAL_GENERATION,
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID from TxnOffsetCommit),
// TRANSACTION_ABORTABLE from any request (KIP-890: Kafka's answer when it
// cannot verify that a partition is in the transaction), and
// INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE and sequence errors on Produce
// (a transaction the coordinator timed out), and UNKNOWN_PRODUCER_ID from
// AddPartitionsToTxn, AddOffsetsToTxn or EndTxn when the coordinator can
// bump the epoch (InitProducerId v3+, Kafka 2.5+; fatal otherwise), after
// which the next transaction runs under a bumped epoch. After
// INVALID_PRODUCER_EPOCH the abort also bumps the epoch: with
// InitProducerId at transaction version 1 (KIP-360/KIP-588), with its own
// EndTxn at version 2 (KIP-890),
// where the abort of a transaction the coordinator timed out succeeds and
// the producer goes on. At version 2 a zombie (a producer whose epoch a
// newer one with the same TransactionalID fenced) learns it first from an
// abortable INVALID_PRODUCER_EPOCH on Produce; its AbortTransaction then
// returns ErrProducerFenced.
func IsAbortable(err error) bool {
	var te *txnError
	return errors.As(err, &te) && !te.fatal
}

// IsFatal reports whether err, returned by a transaction method or
// completing a record, ends the transactional producer: only Close is left.
// Fatal are ErrProducerFenced (PRODUCER_FENCED, and INVALID_PRODUCER_EPOCH
// from the transaction coordinator), TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
// INVALID_TXN_STATE from the coordinator, UNSUPPORTED_VERSION, UNSUPPORTED_FOR_MESSAGE_FORMAT,
// INVALID_PRODUCER_ID_MAPPING, INVALID_TRANSACTION_TIMEOUT and any other
// error the coordinator answers EndTxn or InitProducerId with.
//
// INVALID_PRODUCER_ID_MAPPING is what a producer idle longer than the
// broker's transactional.id.expiration.ms (default 7 days) gets from its
// next transaction's first request (AddPartitionsToTxn, AddOffsetsToTxn,
// or Produce at transaction version 2): the coordinator forgot the
// transactional id. It is fatal, as in the Java client since 4.0
// (KAFKA-18019): a zombie (an instance fenced by a newer one before both
// idled) cannot be told from the live instance then, and recovering would
// let it write again, duplicating what the new instance processed. Close
// the producer and create a new one with the same TransactionalID: its
// InitProducerId gets a new producer id, and an application that reads
// its input offsets again on restart keeps exactly-once.
func IsFatal(err error) bool {
	var te *txnError
	return errors.As(err, &te) && te.fatal || errors.Is(err, ErrProducerFenced)
}

// txnState is the transaction state machine (see DESIGN.md,
// "Transactions"):
//
//	uninit ─Begin─► inTxn ─Commit─► committing ─EndTxn ok─► ready ─Begin─► inTxn
//	                  │                 │ record failed / abortable
//	                  ├──── error ──────┴──────► abortable ─Abort─► aborting ─► ready
//	                  └─Abort─► aborting
//	any ─ fatal error ─► fatal (only Close)
type txnState int32

const (
	txnUninit     txnState = iota // no Begin yet: InitProducerId not asked for
	txnReady                      // no transaction open
	txnInTxn                      // open: Sends are taken
	txnCommitting                 // CommitTransaction in progress (again after its ctx ended)
	txnAborting                   // AbortTransaction in progress
	txnAbortable                  // an abortable error: only AbortTransaction
	txnFatal                      // a fatal error: only Close
)

func (s txnState) String() string {
	return [...]string{"uninitialized", "ready", "in transaction", "committing", "aborting", "abortable error", "fatal error"}[s]
}

// txnManager is a transactional producer's state machine, shared by the
// callers of the transaction methods, Send (which reads state), the
// completion goroutine (a failed record makes the transaction abortable)
// and the IO goroutine (protocol errors). mu serializes the transitions
// and is a leaf, never held across I/O or a wait.
type txnManager struct {
	p  *Producer
	id string

	mu    sync.Mutex
	state atomic.Int32 // txnState; written under mu, read without it
	err   atomic.Pointer[txnError]
	// ops is held by the transaction method running (Commit, Abort,
	// SendOffsets), while it waits; another one fails at once with
	// ErrTransactionInProgress. BeginTransaction only transitions.
	ops sync.Mutex

	client *txnClient
}

func newTxnManager(p *Producer, c *txnClient) *txnManager {
	return &txnManager{p: p, id: p.cfg.TransactionalID, client: c}
}

func (t *txnManager) load() txnState { return txnState(t.state.Load()) }

// sendErr is Send's check: nil while a transaction is open.
func (t *txnManager) sendErr() error {
	switch st := t.load(); st {
	case txnInTxn:
		return nil
	case txnAbortable, txnFatal:
		return t.lastErr()
	default:
		return fmt.Errorf("%w: transactional producer %q is %v: call BeginTransaction first", ErrNoTransaction, t.id, st)
	}
}

// fail records err as the transaction's error: abortable (from an open or
// committing transaction) or fatal (from any state). An abortable error
// while aborting, or after a fatal one, changes nothing. It reports whether
// the state changed.
func (t *txnManager) fail(err error, fatal bool) bool {
	t.mu.Lock()
	st := t.load()
	switch {
	case st == txnFatal:
		t.mu.Unlock()
		return false
	case fatal:
	case st == txnInTxn || st == txnCommitting:
	default:
		t.mu.Unlock()
		return false
	}
	te := &txnError{err: err, fatal: fatal}
	to := txnFatal
	if !fatal {
		te.err = fmt.Errorf("producer: the transaction must be aborted: %w", err)
		to = txnAbortable
	}
	t.err.Store(te) // before the state: a reader that sees the state finds its error
	t.state.Store(int32(to))
	t.mu.Unlock()
	// Logged once per transition, after the lock (a handler is user
	// code), as Java's TransactionManager logs "Transiting to fatal
	// (abortable) error state".
	if fatal {
		t.p.log.Error("transactional producer failed for good: only Close is left (a new producer with the same transactional id can go on)", "transactional_id", t.id, "err", err)
	} else {
		t.p.log.Info("transaction must be aborted", "transactional_id", t.id, "err", err)
	}
	t.p.acc.Kick() // the IO goroutine fails what is still buffered
	return true
}

// recordFailed is called by the completion goroutine for every record of
// the producer that failed: a transaction with a failed record cannot
// commit.
func (t *txnManager) recordFailed(err error) {
	if !errors.Is(err, ErrTransactionAborted) && !IsFatal(err) {
		t.fail(err, false)
	}
}

// rejected is called for a record Send refused: unless it was refused for
// the transaction's state, the record was part of the open transaction,
// which can then no longer commit (as Java's send failing makes the
// transaction abortable).
func (t *txnManager) rejected(err error) {
	if !errors.Is(err, ErrNoTransaction) && !IsAbortable(err) && !IsFatal(err) {
		t.recordFailed(err)
	}
}

// transition moves from one of from to to, under mu; otherwise it returns
// the error for the state found.
func (t *txnManager) transition(method string, to txnState, from ...txnState) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.load()
	for _, f := range from {
		if st == f {
			t.state.Store(int32(to))
			return nil
		}
	}
	return t.stateErr(method, st)
}

// stateErr is the error of a method called in state st.
func (t *txnManager) stateErr(method string, st txnState) error {
	switch st {
	case txnFatal:
		return t.lastErr()
	case txnAbortable:
		if method == "BeginTransaction" || method == "CommitTransaction" || method == "SendOffsetsToTransaction" || method == "Close" {
			return t.lastErr()
		}
	case txnUninit, txnReady:
		return fmt.Errorf("%w: %s: transactional producer %q has no open transaction", ErrNoTransaction, method, t.id)
	}
	return fmt.Errorf("%w: %s: the producer is %v", ErrTransactionInProgress, method, st)
}

// checkTxn returns the producer's transaction manager, or the error of a
// transaction method called on a producer without one or after Close.
func (p *Producer) checkTxn(method string) (*txnManager, error) {
	if p.txn == nil {
		return nil, fmt.Errorf("%w: %s: the producer has no Config.TransactionalID", ErrNoTransaction, method)
	}
	if p.eos != nil {
		return nil, fmt.Errorf("%w: %s: the spool's exactly-once mode runs the producer's transactions", ErrNoTransaction, method)
	}
	if p.closed.Load() {
		return nil, fmt.Errorf("%w: %s", ErrClosed, method)
	}
	return p.txn, nil
}

// BeginTransaction opens a transaction: from now until CommitTransaction or
// AbortTransaction, the records given to Send belong to it. It does no
// network I/O: the first call starts getting the transactional producer id
// (FindCoordinator, InitProducerId, which also aborts what an earlier
// producer with this TransactionalID left open) in the background, and
// records wait for it like they wait for metadata.
//
// It returns ErrNoTransaction on a producer without Config.TransactionalID,
// ErrTransactionInProgress while a transaction is open or ending, the
// abortable error (IsAbortable) while the last transaction still needs
// AbortTransaction, the fatal error (IsFatal, e.g. ErrProducerFenced) once
// the producer can only be closed, and ErrClosed after Close.
func (p *Producer) BeginTransaction() error {
	t, err := p.checkTxn("BeginTransaction")
	if err != nil {
		return err
	}
	first := t.load() == txnUninit
	if err := t.transition("BeginTransaction", txnInTxn, txnUninit, txnReady); err != nil {
		return err
	}
	if first {
		p.acc.Kick() // the IO goroutine asks for the producer id
	}
	return nil
}

// CommitTransaction commits the open transaction: it sends every record
// of it at once (as Flush does) and waits until each is acknowledged, then
// asks the transaction coordinator to commit (EndTxn), retrying
// CONCURRENT_TRANSACTIONS and coordinator moves. When it returns nil, the
// transaction's records and offsets (SendOffsetsToTransaction) are visible
// to read_committed consumers, and a new transaction may begin.
//
// When ctx ends first it returns ctx.Err() and the commit stays in
// progress: call CommitTransaction again to finish it (or Close). If a
// record of the transaction failed, or the coordinator answered with an
// abortable error, it returns that error (IsAbortable): call
// AbortTransaction. A fatal error (IsFatal, ErrProducerFenced) leaves only
// Close. Without an open transaction it returns ErrNoTransaction; from a
// callback, or a hook on one of the producer's goroutines (see Flush),
// ErrFlushInCallback.
func (p *Producer) CommitTransaction(ctx context.Context) error {
	return p.endTransaction(ctx, true)
}

// AbortTransaction aborts the open transaction, or one that became
// abortable: records of it not yet sent fail with ErrTransactionAborted,
// records in flight are awaited (their futures complete with the broker's
// answer), and then the coordinator aborts it (EndTxn), so that
// read_committed consumers never see its records. If an error asked for
// it (INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID, a sequence gap), the
// producer's epoch is bumped afterwards (InitProducerId with the current
// id and epoch, KIP-360), in the background. Then a new transaction may
// begin.
//
// When ctx ends first it returns ctx.Err() and the abort stays in
// progress: call AbortTransaction again. So too when the coordinator
// answers the abort with an abortable error (IsAbortable, e.g.
// UNKNOWN_PRODUCER_ID), as Java's abortTransaction throws it. An abort
// that begins with that epoch bump already asked for (called again, or
// after an AddPartitionsToTxn answered UNKNOWN_PRODUCER_ID) and is answered
// UNKNOWN_PRODUCER_ID again ends through the bump, and returns the bump's
// result, as Java's abort returns its InitProducerId's (if ctx ends while
// it waits for the bump, the transaction has ended all the same: a fatal
// outcome of the bump then comes with the next transaction's first call,
// and AbortTransaction again returns ErrNoTransaction). It returns
// ErrNoTransaction without a transaction, ErrTransactionInProgress while a commit is in
// progress, and the fatal error (IsFatal) once only Close is left; from a
// callback, or a hook on one of the producer's goroutines (see Flush),
// ErrFlushInCallback.
func (p *Producer) AbortTransaction(ctx context.Context) error {
	return p.endTransaction(ctx, false)
}

func (p *Producer) endTransaction(ctx context.Context, commit bool) error {
	method, to, from := "AbortTransaction", txnAborting, []txnState{txnInTxn, txnAbortable, txnAborting}
	if commit {
		method, to, from = "CommitTransaction", txnCommitting, []txnState{txnInTxn, txnCommitting}
	}
	t, err := p.checkTxn(method)
	if err != nil {
		return err
	}
	if where := p.ownGoroutine(); where != "" {
		return fmt.Errorf("%w: %s called from %s would wait for that goroutine", ErrFlushInCallback, method, where)
	}
	if !t.ops.TryLock() {
		return fmt.Errorf("%w: %s: another transaction method is running", ErrTransactionInProgress, method)
	}
	defer t.ops.Unlock()
	return p.endTxnLocked(ctx, t, method, commit, to, from...)
}

// endOnClose ends the transaction Close finds open, as Java's producer
// does on close: an open or abortable transaction is aborted (its records
// not yet sent fail with ErrTransactionAborted), and a commit left in
// progress (CommitTransaction returned ctx.Err()) is finished, or aborted
// if it can no longer commit. Without it the coordinator would keep the
// transaction open until TransactionTimeout, and read_committed consumers
// of its partitions would stall behind it until then. A transaction method
// running on another goroutine is waited for first, and what it leaves
// open is then ended. Close calls it after refusing Sends, before its
// flush. It is bounded by ctx and by TransactionTimeout: past that the
// coordinator aborts the transaction itself, so waiting longer (an
// unreachable coordinator, a partition never added) gains nothing.
func (p *Producer) endOnClose(ctx context.Context) error {
	t := p.txn
	if t == nil {
		return nil
	}
	bound := fmt.Errorf("the transaction did not end within TransactionTimeout (%v); its coordinator aborts it", p.cfg.TransactionTimeout)
	ctx, cancel := context.WithTimeoutCause(ctx, p.cfg.TransactionTimeout, bound)
	defer cancel()
	// The error of a wait that ended: the caller's ctx, or ours (not
	// context.DeadlineExceeded, which would say the caller's ctx ended).
	ended := func(err error) error {
		if err != nil && ctx.Err() != nil && context.Cause(ctx) == bound {
			return fmt.Errorf("producer: Close: %w", bound)
		}
		return err
	}
	for !t.ops.TryLock() {
		// Another goroutine's transaction method (sync.Mutex has no
		// wait bounded by a context).
		select {
		case <-ctx.Done():
			return ended(ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	defer t.ops.Unlock()
	switch st := t.load(); st {
	case txnCommitting:
		p.log.Info("finishing the commit in progress: the producer is closing", "transactional_id", t.id)
		err := p.endTxnLocked(ctx, t, "Close", true, txnCommitting, txnCommitting)
		if err == nil || ctx.Err() != nil || t.load() != txnAbortable {
			return ended(err)
		}
		p.log.Info("aborting the transaction, which can no longer commit: the producer is closing", "transactional_id", t.id, "err", err)
		if aerr := p.endTxnLocked(ctx, t, "Close", false, txnAborting, txnAbortable); aerr != nil {
			// The abort's error first, so that IsFatal sees it.
			return ended(fmt.Errorf("%w (aborting the commit in progress, which could not succeed: %v)", aerr, err))
		}
		return fmt.Errorf("%w by Close: the commit in progress could not succeed: %v", ErrTransactionAborted, err)
	case txnInTxn, txnAbortable, txnAborting:
		p.log.Info("aborting the open transaction: the producer is closing", "transactional_id", t.id, "state", st.String())
		return ended(p.endTxnLocked(ctx, t, "Close", false, txnAborting, txnInTxn, txnAbortable, txnAborting))
	}
	return nil
}

// endTxnLocked is CommitTransaction (commit) or AbortTransaction with
// t.ops held: the transition to to (from one of from), the wait for the
// transaction's records, and EndTxn.
func (p *Producer) endTxnLocked(ctx context.Context, t *txnManager, method string, commit bool, to txnState, from ...txnState) error {
	if err := t.transition(method, to, from...); err != nil {
		return err
	}
	if !commit {
		p.acc.Kick() // the IO goroutine fails what was not sent
	}
	// Every record of the transaction, sent or buffered: Sends are
	// refused from the transition on (a Send counts itself in pending
	// before it reads the state, so one that saw the transaction open is
	// waited for here).
	p.flushing.Add(1)
	err := p.awaitKicking(ctx, p.txnRecordsDone())
	p.flushing.Add(-1)
	if err != nil {
		return err
	}
	if commit {
		if st := t.load(); st != txnCommitting {
			return t.stateErr(method, st) // a record failed: abortable
		}
	}
	err = t.client.end(ctx, p, commit)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		var te *txnError
		if errors.As(err, &te) {
			t.fail(te.err, te.fatal)
			if te.fatal {
				return t.lastErr()
			}
			if st := t.load(); st == txnAborting {
				// The abort failed (abortable): the caller calls it
				// again, and is told why.
				return fmt.Errorf("producer: AbortTransaction must be called again: %w", te)
			}
			return t.stateErr(method, t.load())
		}
		return err
	}
	if t.load() == txnFatal {
		return t.lastErr()
	}
	return nil // ended: txnEnded made the producer ready
}

// txnRecordsDone is closed once every record of the transaction has
// completed: every record buffered, or with the exactly-once spool the
// driver's round (its Sends' records wait in its queue, outside the
// transaction).
func (p *Producer) txnRecordsDone() <-chan struct{} {
	if p.eos != nil {
		return p.eos.txnRecordsDone()
	}
	return p.whenIdle()
}

// ended moves a transaction whose EndTxn succeeded (or was not needed) to
// ready; the IO goroutine calls it (txnEnded). A commit that got an
// abortable error meanwhile committed all the same.
func (t *txnManager) ended() {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch t.load() {
	case txnCommitting, txnAborting, txnAbortable:
		t.state.Store(int32(txnReady))
	}
}

// GroupMetadata identifies the consumer group member whose offsets
// SendOffsetsToTransaction commits, for KIP-447 fencing: the coordinator
// refuses the commit of a member from an older generation. With kgo, fill
// it from GroupMetadata() (generation and member id) and the group and
// instance ids the client was given; with other consumers, from their
// group metadata. GenerationID -1 (or 0, the zero value) with an empty
// MemberID skips the fencing (the pre-KIP-447 behaviour).
type GroupMetadata struct {
	GroupID         string
	GenerationID    int32
	MemberID        string
	GroupInstanceID string // static membership (KIP-345); empty if none
}

// TxnOffset is the offset to commit for one partition: the offset of the
// next record to consume (the last one processed + 1), with its leader
// epoch (-1 if unknown) and optional metadata. kgo's
// UncommittedOffsets gives EpochOffset{Epoch, Offset} per partition.
type TxnOffset struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// SendOffsetsToTransaction adds consumer offsets to the open transaction
// (KIP-447, for consume-transform-produce): they are committed for
// group.GroupID if and only if the transaction commits. offsets maps topic
// → partition → offset. It asks the transaction coordinator to add the
// group (AddOffsetsToTxn), then sends the offsets to the group coordinator
// (TxnOffsetCommit) with the member's generation and ids, and returns once
// both answered, retrying coordinator moves and CONCURRENT_TRANSACTIONS.
// At transaction version 2 (see Config.TransactionalID) TxnOffsetCommit
// adds the group itself, and is the only request.
//
// It returns ctx.Err() if ctx ends first (the transaction stays open; call
// it again or abort), ErrNoTransaction without an open transaction, an
// abortable error (IsAbortable: GROUP_AUTHORIZATION_FAILED, a stale
// generation or member, UNKNOWN_PRODUCER_ID from AddOffsetsToTxn) or a
// fatal one (IsFatal, e.g. INVALID_PRODUCER_ID_MAPPING once the
// coordinator expired the transactional id).
func (p *Producer) SendOffsetsToTransaction(ctx context.Context, offsets map[string]map[int32]TxnOffset, group GroupMetadata) error {
	t, err := p.checkTxn("SendOffsetsToTransaction")
	if err != nil {
		return err
	}
	if group.GroupID == "" {
		return fmt.Errorf("%w: SendOffsetsToTransaction: empty group id", ErrInvalidRecord)
	}
	if !t.ops.TryLock() {
		return fmt.Errorf("%w: SendOffsetsToTransaction: another transaction method is running", ErrTransactionInProgress)
	}
	defer t.ops.Unlock()
	if st := t.load(); st != txnInTxn {
		return t.stateErr("SendOffsetsToTransaction", st)
	}
	err = t.client.sendOffsets(ctx, p, offsets, group)
	var te *txnError
	if errors.As(err, &te) {
		t.fail(te.err, te.fatal)
		if te.bump {
			s := p.txnSink
			_ = s.callIO(context.WithoutCancel(ctx), func() { s.txnAskBump(te) }) // ErrClosed: nothing left to bump
		}
		return t.lastErr()
	}
	return err
}

// lastErr returns the transaction's abortable or fatal error (never a nil
// pointer in an interface).
func (t *txnManager) lastErr() error {
	if e := t.err.Load(); e != nil {
		return e
	}
	return fmt.Errorf("producer: transactional producer %q failed", t.id)
}
