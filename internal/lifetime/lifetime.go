// Package lifetime lets a goroutine that a library starts on a caller's
// behalf, outside the caller's own call (sasl.ClientCredentials' background
// token refresh, started from a connection's authentication), belong to the
// owner of the caller's context: the owner (a producer) puts its Group in
// the contexts it hands down, and when it closes, the Group ends those
// goroutines' context and waits for them. Without a Group in the context,
// the library runs its goroutine on its own, as before.
package lifetime

import (
	"context"
	"sync"
)

// Group is an owner's set of goroutines started through its contexts.
type Group struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// NewGroup returns an open Group.
func NewGroup() *Group {
	g := &Group{}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	return g
}

type key struct{}

// With returns ctx carrying g.
func With(ctx context.Context, g *Group) context.Context {
	return context.WithValue(ctx, key{}, g)
}

// From returns the Group ctx carries, or nil.
func From(ctx context.Context) *Group {
	g, _ := ctx.Value(key{}).(*Group)
	return g
}

// Go runs f on a goroutine of g, with a context that ends when g closes,
// and reports true; once g is closed it runs nothing and reports false.
func (g *Group) Go(f func(ctx context.Context)) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Go(func() { f(g.ctx) })
	return true
}

// Close ends the context of g's goroutines, refuses new ones and waits for
// those running. It is idempotent.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.cancel()
	g.wg.Wait()
}
