package conn

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/kerr"
)

// maxApiVersionsVersion is the ApiVersions version we start with: v3 added
// the client software name and version (KIP-511) and flexible encoding; v4
// changed only the error for an unsupported version. identityApiVersions,
// v5 (KIP-1242), adds the cluster and node the client means to reach: it is
// sent only with Config.Expect, so that a broker before Kafka 4.4 costs no
// second ApiVersions round trip when there is nothing to check.
const (
	maxApiVersionsVersion = 4
	identityApiVersions   = 5
)

// ErrClusterMismatch is wrapped by the error of a broker that belongs to
// another cluster, or is another node, than the one the client means to
// reach: a Dial whose ApiVersions v5 answer is REBOOTSTRAP_REQUIRED
// (KIP-1242), or, in package metadata, a Metadata answer for another
// cluster.
var ErrClusterMismatch = errors.New("broker belongs to another cluster")

// Identity is the broker a dial means to reach (Config.Expect): node NodeID
// of cluster ClusterID. The zero value (no ClusterID) checks nothing.
type Identity struct {
	ClusterID string
	NodeID    int32
}

// negotiate runs the ApiVersions handshake synchronously on c.nc, before the
// goroutines start, and fills c.versions. Without TLS (secure false), an
// answer that starts like a TLS record is a TLS listener's (a Kafka broker
// answers a plaintext request on its SSL listener with a TLS alert): the
// error says so, and wraps ErrAuthentication.
//
// KIP-511: a broker that does not know our ApiVersions version answers with
// UNSUPPORTED_VERSION in a v0 body whose key list holds at least the
// ApiVersions versions it supports; we then retry with the highest of them.
func (c *Conn) negotiate(secure bool) error {
	br := bufio.NewReaderSize(c.nc, 4096)
	expect := c.cfg.Expect
	checking := expect.ClusterID != "" && expect.NodeID >= 0
	version := int16(maxApiVersionsVersion)
	if checking {
		version = identityApiVersions
	}
	version = min(version, (*kmsg.ApiVersionsRequest)(nil).MaxVersion())
	for attempt := 0; ; attempt++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = version
		req.ClientSoftwareName = c.cfg.SoftwareName
		req.ClientSoftwareVersion = c.cfg.SoftwareVersion
		if checking && version >= identityApiVersions {
			// Both or neither: a broker answers INVALID_REQUEST
			// to one alone.
			req.ClusterID = kmsg.StringPtr(expect.ClusterID)
			req.NodeID = expect.NodeID
		}
		corr := c.corr
		c.corr++
		if _, err := c.nc.Write(c.format.AppendRequest(nil, req, corr)); err != nil {
			return c.handshakeErr(err)
		}
		if !secure && attempt == 0 {
			if head, err := br.Peek(4); err == nil && looksLikeTLS(head) {
				return mismatch(c.addr, speaksTLS, fmt.Errorf("the answer starts with % x, a TLS record", head))
			}
		}
		body, err := readFrameMax(br, smallResponseMax)
		if err != nil {
			return c.handshakeErr(err)
		}
		// ApiVersions responses always use header v0.
		got, rest, err := parseResponseHeader(body, false)
		if err != nil {
			return fmt.Errorf("conn: %s: ApiVersions: %w", c.addr, err)
		}
		if got != corr {
			return fmt.Errorf("conn: %s: %w: ApiVersions response correlation id %d, want %d", c.addr, kerr.NetworkException, got, corr)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = version
		// The error code is the first field of every version; with
		// UNSUPPORTED_VERSION the rest of the body should be v0. Some
		// brokers (librdkafka's mock cluster) send a short form that
		// decodes as neither v0 nor the version asked: the code alone
		// is enough to fall back to v0, as librdkafka and Java do.
		unsupported := len(rest) >= 2 && int16(binary.BigEndian.Uint16(rest)) == kerr.UnsupportedVersion.Code
		if unsupported {
			resp.Version = 0
		}
		if err := resp.ReadFrom(rest); err != nil {
			if !unsupported || attempt > 0 {
				return fmt.Errorf("conn: %s: ApiVersions handshake: %w: cannot decode the ApiVersions v%d response: %w", c.addr, kerr.NetworkException, resp.Version, err)
			}
			*resp = kmsg.ApiVersionsResponse{ErrorCode: kerr.UnsupportedVersion.Code}
		}
		if resp.ErrorCode == kerr.UnsupportedVersion.Code && attempt == 0 {
			next := int16(-1)
			for _, k := range resp.ApiKeys {
				if k.ApiKey == apiVersionsKey {
					next = k.MaxVersion
				}
			}
			if next < 0 || next >= version {
				next = 0 // every broker answers ApiVersions v0
			}
			c.cfg.Logger.Debug("broker does not support our ApiVersions version; retrying", "addr", c.addr, "tried", version, "retry", next)
			version = next
			continue
		}
		if err := kerr.ForCode(resp.ErrorCode); err != nil {
			if checking && version >= identityApiVersions && errors.Is(err, kerr.RebootstrapRequired) {
				// KIP-1242: not the node, or not the cluster, we
				// dialed; nothing may be written here.
				return fmt.Errorf("conn: %s: %w: it is not node %d of cluster %q (ApiVersions v%d: %w; restart the producer to move to another cluster)", c.addr, ErrClusterMismatch, expect.NodeID, BrokerText(c.cfg.SASL, expect.ClusterID), version, err)
			}
			return fmt.Errorf("conn: %s: ApiVersions handshake (v%d): %w", c.addr, version, err)
		}
		c.identified = checking && version >= identityApiVersions
		c.versions = negotiatedVersions(resp.ApiKeys, c.cfg.MaxVersions)
		c.release = brokerRelease(resp.ApiKeys)
		f := finalizedFeatures(resp)
		c.features.Store(&f)
		return nil
	}
}

func (c *Conn) handshakeErr(err error) error {
	de := ioErr(c.addr, "ApiVersions handshake", err)
	if closedByPeer(err) {
		// Closed without an answer (and, in plaintext, without a TLS
		// record): no Kafka broker does that to ApiVersions, so say
		// what librdkafka says of it.
		if c.cfg.TLS == nil {
			de.what += closedInPlaintext
		} else {
			de.what += closedInTLS
		}
	}
	return de
}

// looksLikeTLS reports whether the first 4 bytes of an answer are the start
// of a TLS record rather than a response size: an alert (0x15) or a
// handshake (0x16) record of version 3.0 to 3.4 (SSL 3.0 to TLS 1.3). As a
// size that is over 352 MB, more than any Kafka response.
func looksLikeTLS(b []byte) bool {
	return len(b) >= 3 && (b[0] == 0x15 || b[0] == 0x16) && b[1] == 0x03 && b[2] <= 0x04
}

// finalizedFeatures returns the finalized features of an ApiVersions
// answer: none (Epoch -1) before v3 or when the broker reports none.
func finalizedFeatures(resp *kmsg.ApiVersionsResponse) Features {
	f := Features{Epoch: -1}
	if resp.Version < 3 || resp.FinalizedFeaturesEpoch < 0 {
		return f
	}
	f.Epoch = resp.FinalizedFeaturesEpoch
	for _, ff := range resp.FinalizedFeatures {
		if f.Levels == nil {
			f.Levels = make(map[string]int16, len(resp.FinalizedFeatures))
		}
		f.Levels[ff.Name] = ff.MaxVersionLevel
	}
	return f
}

// brokerRelease names the Apache Kafka releases whose brokers offer the
// highest Produce version of keys, for errors about an API the broker
// lacks: an ApiVersions answer carries no release (4.x's none at all), so,
// like kgo's kversion, the release is derived from the versions offered.
// Produce's max grew in 0.11 (v3), 1.0 (v5), 2.0, 2.1, 2.4, 2.8, 3.7, 3.8,
// 4.0 and 4.1 (v13).
func brokerRelease(keys []kmsg.ApiVersionsResponseApiKey) string {
	produceMax := int16(-1)
	for _, k := range keys {
		if k.ApiKey == produceKey {
			produceMax = k.MaxVersion
		}
	}
	switch {
	case produceMax < 0:
		return "no Kafka release (no Produce)"
	case produceMax < 3:
		return "Kafka older than 0.11"
	case produceMax == 3:
		return "Kafka 0.11"
	case produceMax <= 5:
		return "Kafka 1.0 or 1.1"
	case produceMax == 6:
		return "Kafka 2.0"
	case produceMax == 7:
		return "Kafka 2.1 to 2.3"
	case produceMax == 8:
		return "Kafka 2.4 to 2.7"
	case produceMax == 9:
		return "Kafka 2.8 to 3.6"
	case produceMax == 10:
		return "Kafka 3.7"
	case produceMax == 11:
		return "Kafka 3.8 or 3.9"
	case produceMax == 12:
		return "Kafka 4.0"
	default:
		return "Kafka 4.1 or later"
	}
}

// negotiatedVersions returns, per API key, the highest version that kmsg and
// the broker both support, within caps; -1 where there is none.
func negotiatedVersions(keys []kmsg.ApiVersionsResponseApiKey, caps map[int16]int16) []int16 {
	n := 0
	for _, k := range keys {
		if int(k.ApiKey) >= n {
			n = int(k.ApiKey) + 1
		}
	}
	out := make([]int16, n)
	for i := range out {
		out[i] = -1
	}
	for _, k := range keys {
		if k.ApiKey < 0 {
			continue
		}
		ours := kmsg.RequestForKey(k.ApiKey)
		if ours == nil {
			continue
		}
		v := min(ours.MaxVersion(), k.MaxVersion)
		if cp, ok := caps[k.ApiKey]; ok {
			v = min(v, cp)
		}
		if v < k.MinVersion || v < 0 {
			v = -1
		}
		out[k.ApiKey] = v
	}
	return out
}

// readFrame reads one size-prefixed frame of at most maxResponseSize bytes
// and returns its body.
func readFrame(r io.Reader) ([]byte, error) { return readFrameMax(r, maxResponseSize) }

// readFrameMax reads one size-prefixed frame of at most limit bytes, with
// memory growing as its bytes arrive (readBody), and returns its body.
func readFrameMax(r io.Reader, limit int32) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > limit {
		return nil, fmt.Errorf("invalid response size %d, the limit is %d (is this a Kafka listener?)", n, limit)
	}
	return readBody(r, int(n))
}

// ModuleVersion returns the samsa module version from the build info (the
// default SoftwareVersion), or "devel".
func ModuleVersion() string { return moduleVersion() }

// moduleVersion returns the samsa module version from the build info, or
// "devel".
func moduleVersion() string {
	const path = "github.com/samsa-go/samsa"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Path == path && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return bi.Main.Version
		}
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "devel"
}

// sanitizeSoftware makes s match the broker's pattern for client software
// names and versions (KIP-511): [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
func sanitizeSoftware(s string) string {
	b := []byte(s)
	for i, ch := range b {
		ok := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '.'
		if !ok {
			b[i] = '-'
		}
	}
	out := strings.Trim(string(b), "-.")
	if out == "" {
		return "unknown"
	}
	return out
}
