package lifetime

import (
	"context"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCloseEndsAndWaitsForGoroutines: Close ends the context of the
// goroutines started with Go and returns once they have returned; Go after
// Close runs nothing.
func TestCloseEndsAndWaitsForGoroutines(t *testing.T) {
	g := NewGroup()
	if From(context.Background()) != nil || From(With(context.Background(), g)) != g {
		t.Fatal("From does not find the Group With put in the context")
	}
	var ended atomic.Int32
	started := make(chan struct{}, 3)
	for range 3 {
		if !g.Go(func(ctx context.Context) {
			started <- struct{}{}
			<-ctx.Done()
			ended.Add(1)
		}) {
			t.Fatal("Go refused on an open Group")
		}
	}
	for range 3 {
		<-started
	}
	g.Close()
	if n := ended.Load(); n != 3 {
		t.Fatalf("Close returned with %d of 3 goroutines ended", n)
	}
	if g.Go(func(context.Context) { t.Error("ran after Close") }) {
		t.Fatal("Go accepted after Close")
	}
	g.Close() // idempotent
}
