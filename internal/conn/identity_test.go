package conn

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/kerr"
)

// KIP-1242: with Config.Expect the handshake is ApiVersions v5 naming the
// cluster and node dialed; a broker that is not that node of that cluster
// answers REBOOTSTRAP_REQUIRED and Dial fails with ErrClusterMismatch
// before any other request. Without Expect, or with a broker before v5,
// the handshake is what it was (v4, no check).
func TestDialChecksIdentity(t *testing.T) {
	cl, err := testbroker.New(testbroker.Config{Brokers: 2, ClusterID: "cluster-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var mu sync.Mutex
	var versions []int16 // ApiVersions versions received, in order
	cl.Intercept(testbroker.Interceptor{Keys: []int16{18}, Match: func(_ int32, req kmsg.Request) bool {
		mu.Lock()
		versions = append(versions, req.GetVersion())
		mu.Unlock()
		return false
	}})
	cases := []struct {
		name     string
		expect   Identity
		noV5     bool // the broker answers v5 with UNSUPPORTED_VERSION, as before Kafka 4.4
		mismatch bool
		versions []int16
	}{
		{"no expectation", Identity{}, false, false, []int16{4}},
		{"the node dialed", Identity{ClusterID: "cluster-a", NodeID: 1}, false, false, []int16{5}},
		{"another cluster", Identity{ClusterID: "cluster-b", NodeID: 1}, false, true, []int16{5}},
		{"another node", Identity{ClusterID: "cluster-a", NodeID: 0}, false, true, []int16{5}},
		{"a broker before v5", Identity{ClusterID: "cluster-b", NodeID: 1}, true, false, []int16{5, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			versions = nil
			mu.Unlock()
			if tc.noV5 {
				remove := cl.Intercept(testbroker.Interceptor{Keys: []int16{18}, ErrorCode: kerr.UnsupportedVersion.Code,
					Match: func(_ int32, req kmsg.Request) bool { return req.GetVersion() >= 5 }})
				defer remove()
			}
			c, err := Dial(context.Background(), cl.Addrs()[1], Config{Expect: tc.expect})
			if c != nil {
				defer c.Close()
			}
			mu.Lock()
			got := append([]int16(nil), versions...)
			mu.Unlock()
			if len(got) != len(tc.versions) || got[0] != tc.versions[0] {
				t.Fatalf("ApiVersions versions %v, want %v", got, tc.versions)
			}
			if !tc.mismatch {
				if err != nil {
					t.Fatalf("Dial: %v", err)
				}
				if want := tc.expect.ClusterID != "" && !tc.noV5; c.Identified() != want {
					t.Fatalf("Identified() = %v, want %v", c.Identified(), want)
				}
				return
			}
			if !errors.Is(err, ErrClusterMismatch) || !errors.Is(err, kerr.RebootstrapRequired) {
				t.Fatalf("Dial error %v, want ErrClusterMismatch and REBOOTSTRAP_REQUIRED", err)
			}
			if !strings.Contains(err.Error(), tc.expect.ClusterID) {
				t.Fatalf("Dial error %q does not name the cluster expected", err)
			}
			if !strings.Contains(err.Error(), "restart the producer to move to another cluster") {
				t.Fatalf("Dial error %q does not say a restart moves to another cluster", err)
			}
		})
	}
}
