package fakeregistry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/samsa-go/samsa/serde/schemaregistry"
)

// Setup starts a registry and returns it with a Client of it (fast
// retries), both closed at the end of the test.
func Setup(t *testing.T) (*Registry, *schemaregistry.Client) {
	t.Helper()
	r := New(t)
	c, err := schemaregistry.NewClient(schemaregistry.Config{URLs: []string{r.URL()}, RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return r, c
}

// RequireBoundedByContext calls construct with a Client of a registry that
// is down (refused connections, retried without end) and a context of
// 200ms, and fails the test unless construct returns an error wrapping
// context.DeadlineExceeded: a constructor waits for the registry no longer
// than its context.
func RequireBoundedByContext(t *testing.T, construct func(context.Context, *schemaregistry.Client) error) {
	t.Helper()
	r := New(t)
	r.Close()
	c, err := schemaregistry.NewClient(schemaregistry.Config{URLs: []string{r.URL()}, MaxRetries: 1000,
		RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := construct(ctx, c); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("constructing with the registry down: %v, want context.DeadlineExceeded", err)
	}
}
