package producer

import (
	"context"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/sasl"
)

// TestBugPanickingTokenFuncCrashesProcess: a SASL OAUTHBEARER token
// callback (user code, like a partitioner or a callback) that panics.
//
// Interleaving: the metadata client (and the IO goroutine's dial
// goroutines, and a connection's writer at re-authentication) call
// Mechanism.Start from internal/conn's saslExchange
// (internal/conn/sasl.go: mech.Start(ctx, c.addr)) with no recover: the
// panic kills the whole process, instead of failing the exchange with
// ErrAuthentication as a token error does (sasl.ClientCredentials itself
// recovers a panicking HTTP client for that reason). The scenario runs in
// a child process, which must exit normally.
func TestBugPanickingTokenFuncCrashesProcess(t *testing.T) {
	if os.Getenv("SAMSA_BUG_TOKEN_PANIC_CHILD") == "1" {
		panickingTokenScenario(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBugPanickingTokenFuncCrashesProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SAMSA_BUG_TOKEN_PANIC_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		lines := string(out)
		if len(lines) > 600 {
			lines = lines[:600]
		}
		t.Fatalf("the producer's process crashed on a panicking token callback (%v):\n%s", err, lines)
	}
}

func panickingTokenScenario(t *testing.T) {
	cl, err := testbroker.New(testbroker.Config{Security: &testbroker.Security{
		Listeners: []testbroker.Listener{{Protocol: testbroker.Plaintext}, {Protocol: testbroker.SASLPlaintext}},
		Users:     []testbroker.User{{Mechanism: testbroker.MechOAuthBearer, Name: "dave", Password: "tok"}},
	}})
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.CreateTopic("tok", 1))
	p, err := New(Config{
		Brokers: cl.ListenerAddrs(testbroker.SASLPlaintext),
		SASL: sasl.OAuthBearer(func(context.Context) (sasl.Token, error) {
			panic("token callback bug")
		}),
		MaxBlock: 2 * time.Second,
	})
	require.NoError(t, err)
	ctx := context.Background()
	f := p.Send(ctx, &Record{Topic: "tok", Value: []byte("v")})
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = f.Wait(wctx)
	require.Error(t, err) // ErrAuthentication or ErrDeliveryTimeout: anything but a crash
	require.NoError(t, p.Close(ctx))
}

// closingHook calls Close (with a 1s context) from the first call of the
// hook method its kind names, on the goroutine the producer calls it on,
// and reports Close's return on done.
type closingHook struct {
	p    atomic.Pointer[Producer]
	kind string
	once atomic.Bool
	done chan error
}

func (h *closingHook) fire(kind string) {
	if kind != h.kind || h.p.Load() == nil || !h.once.CompareAndSwap(false, true) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	h.done <- h.p.Load().Close(ctx)
}

func (h *closingHook) OnBatchWritten(BatchWritten)                        { h.fire("batch") }
func (h *closingHook) OnMetadataRefreshed(MetadataRefresh)                { h.fire("metadata") }
func (h *closingHook) OnBrokerResponseRead(BrokerInfo, ResponseRead)      { h.fire("response") }
func (h *closingHook) OnBrokerConnected(BrokerInfo, time.Duration, error) { h.fire("connected") }

// TestBugCloseFromHookDeadlocks: a hook that calls Close. Close detects
// only the completion goroutine (goroutineID() == completer.goid, then
// closes in the background); hooks also run on the IO goroutine
// (HookBatchWritten, HookBrokerConnected), the metadata refresh goroutine
// (HookMetadataRefreshed) and a connection's reader (HookBrokerResponseRead).
//
// Interleaving (IO goroutine): handleResponse → observeBatch → the hook →
// Close: flush waits for the IO goroutine (ctx ends after 1s), then
// close(quit) and <-p.ioDone, which is the goroutine running Close: it
// never returns, whatever its context, and the producer is dead. The same
// for Close from the metadata goroutine (meta.Close waits for it) and from
// a connection's reader (the IO goroutine's shutdown waits for that
// connection's answers). The hooks doc forbids none of this; Close's doc
// promises it returns once ctx ends.
func TestBugCloseFromHookDeadlocks(t *testing.T) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("hk", 1))
	for _, kind := range []string{"batch", "connected", "metadata", "response"} {
		t.Run(kind, func(t *testing.T) {
			h := &closingHook{kind: kind, done: make(chan error, 1)}
			p, err := New(Config{Brokers: c.Addrs(), Hooks: []Hook{h}, RetryBackoff: 10 * time.Millisecond})
			require.NoError(t, err)
			h.p.Store(p)
			// No Close in a cleanup: it would hang the test binary (the bug).
			p.Send(context.Background(), &Record{Topic: "hk", Value: []byte("v")})
			select {
			case <-h.done:
			case <-time.After(6 * time.Second):
				t.Fatalf("Close(ctx with a 1s deadline) called from a %s hook has not returned after 6s", kind)
			}
		})
	}
}

// TestBugPanickingOnDataLossCrashesProcess: Config.OnDataLoss (user code,
// DESIGN.md invariant 9 lists it with partitioners, callbacks and hooks)
// runs on the IO goroutine from sink.checkLogStart
// (producer/sink_response.go: s.cfg.OnDataLoss(e)) with no recover,
// unlike every other user callback: a panic in it kills the process.
//
// Interleaving: 10 records acknowledged, DeleteRecords moves the log start
// past them, the next Produce answer carries the new log start: the IO
// goroutine calls OnDataLoss, which panics. Run in a child process, which
// must exit normally.
func TestBugPanickingOnDataLossCrashesProcess(t *testing.T) {
	if os.Getenv("SAMSA_BUG_DATALOSS_PANIC_CHILD") == "1" {
		panickingDataLossScenario(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBugPanickingOnDataLossCrashesProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SAMSA_BUG_DATALOSS_PANIC_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		lines := string(out)
		if len(lines) > 600 {
			lines = lines[:600]
		}
		t.Fatalf("the producer's process crashed on a panicking OnDataLoss (%v):\n%s", err, lines)
	}
}

func panickingDataLossScenario(t *testing.T) {
	c, err := testbroker.New(testbroker.Config{})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.CreateTopic("loss", 1))
	p, err := New(Config{Brokers: c.Addrs(), OnDataLoss: func(*DataLossError) { panic("OnDataLoss bug") }})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var fs []*Future
	for range 10 {
		fs = append(fs, p.Send(ctx, &Record{Topic: "loss", Value: []byte("v")}))
	}
	for _, f := range fs {
		_, err := f.Wait(ctx)
		require.NoError(t, err)
	}
	require.NoError(t, c.DeleteRecordsBefore("loss", 0, 10))
	_, err = p.Send(ctx, &Record{Topic: "loss", Value: []byte("after")}).Wait(ctx)
	require.NoError(t, err)
	require.NoError(t, p.Close(ctx))
}
