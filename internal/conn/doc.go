// Package conn is one pipelined connection to a Kafka broker.
//
// # Connecting
//
// Dial opens the connection (Config.Dialer, for a proxy, TLS or tests; by
// default each address the host resolves to is tried in turn, Java's
// client.dns.lookup=use_all_dns_ips), sets the socket's buffer sizes when
// asked (Config.SendBufferBytes, ReceiveBufferBytes) and runs the
// ApiVersions handshake (v4 first; on UNSUPPORTED_VERSION with a v0 body it
// retries once with the highest version the broker lists, as KIP-511 says).
// Config.DialTimeout bounds both steps; with Config.Setups, an address's
// consecutive failed setups double it, with jitter, up to
// Config.DialTimeoutMax (Java's socket.connection.setup.timeout.max.ms).
// CanonicalAddrs gives the bootstrap addresses of Java's
// resolve_canonical_bootstrap_servers_only (dial.go). From then on MaxVersion reports, per
// API key, the highest version kmsg and the broker both support, and Send
// uses it. Dial refuses brokers without Produce v3 (Kafka 0.11).
//
// # TLS and SASL
//
// Config.TLS runs a TLS handshake right after the connect (a config
// without ServerName verifies the broker's certificate against its host).
// Config.SASL then authenticates after ApiVersions with SaslHandshake v1
// and SaslAuthenticate (v0 to v2, kmsg structs), and the writer
// re-authenticates (KIP-368) at 85% to 95% of the session lifetime the
// broker returned, and at least a second (a quarter of a session shorter
// than 4 s) before it ends, before writing its next request: requests
// already in flight stay there (the broker answers them in order before
// the new SaslHandshake, as Java's client also expects), and new ones wait
// in the queue until the exchange is over. Trust failures (a certificate that
// does not verify, a TLS alert, SASL_AUTHENTICATION_FAILED, an unsupported
// mechanism) wrap ErrAuthentication, not kerr.NetworkException; a broker
// that closes the connection during the handshake is a network error.
//
// # Why a dial failed
//
// Dial's errors name the broker and the cause (dialerr.go): "cannot connect
// to broker 127.0.0.1:9: connection refused (nothing is listening there)",
// "no such host", "timed out after 10s" (and in which handshake), never
// NETWORK_EXCEPTION's "the broker disconnected before responding". They wrap
// kerr.NetworkException (retried) and the underlying error. Two listener
// mismatches wrap ErrAuthentication instead, as Java reports a failed TLS
// handshake: a plaintext client whose ApiVersions request is answered with
// a TLS record (a Kafka broker's SSL listener sends an alert) is told that
// the listener speaks TLS (security.protocol=SSL or SASL_SSL); a TLS client
// whose handshake gets a non-TLS record, or that the broker closes when a
// second, plaintext connection to it gets an ApiVersions answer (a
// plaintext listener drops a ClientHello as an oversized request; the
// probe tells it from a TLS broker shedding connections), is told that it
// does not (security.protocol=PLAINTEXT or SASL_PLAINTEXT). A third is
// found after Dial: a SASL listener answers ApiVersions, then closes the
// connection at the first other request of a client without SASL. When a
// connection without Config.SASL is closed before any answer past the
// handshake, the reader asks a second connection for a SaslHandshake v1
// (bounded by Config.DialTimeout and by Close): an answer listing
// mechanisms makes the pending requests fail with an error that wraps
// ErrAuthentication, names the mechanisms and says to set
// security.protocol=SASL_PLAINTEXT or SASL_SSL; any other outcome leaves
// the network error as it was.
//
// # Pipelining
//
// Send queues a request and returns at once. One writer goroutine encodes
// requests into a reused buffer (kmsg.RequestFormatter: api key, version,
// correlation id, client id and, for flexible versions, the header's tagged
// fields) and writes them through a bufio.Writer, flushing when the queue is
// empty. One reader goroutine reads responses, matches each to the oldest
// request in flight by correlation id (Kafka answers in order on a
// connection; a mismatch breaks the connection) and calls its callback. No
// lock is held across I/O and no goroutine is started per request.
//
// # Timeouts and failures
//
// A request written more than Config.RequestTimeout ago without a response
// breaks the connection: Kafka cannot cancel a request, so the connection is
// closed and every pending request fails with an error wrapping ErrTimeout.
// A broken connection fails every pending request with an error wrapping
// kerr.NetworkException and the cause; Close fails them with ErrClosed. In
// every case each callback runs exactly once, and in send order: the writer
// hands back what it holds (a request it was encoding, acks=0 requests not
// yet flushed), and the last of the two goroutines to exit fails everything
// pending, oldest first, after every answer the reader delivered; a request
// sent meanwhile is failed after them. The writer counts the bytes the
// socket took and notes where each request starts in that stream, so a
// request no byte of which reached the socket (queued behind others, a
// throttle or a re-authentication) fails with an error that also wraps
// ErrNotSent: its owner may send it again as never sent; any other failed
// request may have been processed. Only acks=0 requests complete out of
// that order, when written. Done and Err tell the owner
// that the connection is gone; reconnecting (with Backoff) is the owner's job.
//
// # Throttling (KIP-219)
//
// When a response carries ThrottleTimeMs > 0 and its version says the broker
// throttles after responding (Produce v6+, Metadata v6+, ...), the writer
// holds further requests until the throttle has passed; they are not failed
// and their timeout starts when they are written. Every throttle is logged
// (a connection's first at Info, later ones at Debug) and reported to
// Config.OnThrottle; ThrottledUntil exposes the end.
//
// # Observing requests
//
// Config.OnWrite and Config.OnRead are called on the writer and reader
// goroutines for every request written and response read, with its size and
// timings, without a lock held; the producer feeds its metrics and hooks
// from them.
package conn
