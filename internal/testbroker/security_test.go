package testbroker

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha512"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// librdkafkaFinal builds the client-final message librdkafka before 2.6.1
// sends: its nonce, then the whole server nonce, with the proof computed
// over that message (RFC 5802 section 3) for pass.
func librdkafkaFinal(t *testing.T, clientFirstBare, serverFirst, cnonce, pass string) string {
	t.Helper()
	attrs := map[string]string{}
	for _, kv := range strings.Split(serverFirst, ",") {
		k, v, _ := strings.Cut(kv, "=")
		attrs[k] = v
	}
	salt, err := base64.StdEncoding.DecodeString(attrs["s"])
	require.NoError(t, err)
	require.Equal(t, "4096", attrs["i"])
	salted, err := pbkdf2.Key(sha512.New, pass, salt, 4096, sha512.Size)
	require.NoError(t, err)
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha512.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	stored := sha512.Sum512(clientKey)
	withoutProof := "c=biws,r=" + cnonce + attrs["r"]
	sig := mac(stored[:], clientFirstBare+","+serverFirst+","+withoutProof)
	for i := range sig {
		sig[i] ^= clientKey[i]
	}
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(sig)
}

// TestSCRAMDoubledNonce: the test broker accepts librdkafka's doubled
// nonce with the right password, as Kafka 3.8.1 to 3.9.0 do, and still
// rejects a wrong password that way.
func TestSCRAMDoubledNonce(t *testing.T) {
	c := newTestCluster(t, Config{Brokers: 1, Security: &Security{
		Listeners: []Listener{{Protocol: SASLPlaintext}},
		Users:     []User{{Mechanism: MechScramSHA512, Name: "carol", Password: "carol-pw"}},
	}})
	for _, tt := range []struct {
		pass string
		ok   bool
	}{{"carol-pw", true}, {"wrong-pw", false}} {
		t.Run(tt.pass, func(t *testing.T) {
			w := dialBroker(t, c.Addrs()[0], "rdkafka")
			hs := kmsg.NewPtrSASLHandshakeRequest()
			hs.Version, hs.Mechanism = 1, MechScramSHA512
			require.Zero(t, w.request(hs).(*kmsg.SASLHandshakeResponse).ErrorCode)

			const cnonce = "fyko+d2lbbFgONRv9qkxdawL"
			bare := "n=carol,r=" + cnonce
			a := kmsg.NewPtrSASLAuthenticateRequest()
			a.Version, a.SASLAuthBytes = 1, []byte("n,,"+bare)
			first := w.request(a).(*kmsg.SASLAuthenticateResponse)
			require.Zero(t, first.ErrorCode)
			serverFirst := string(first.SASLAuthBytes)
			require.True(t, strings.HasPrefix(serverFirst, "r="+cnonce))

			a = kmsg.NewPtrSASLAuthenticateRequest()
			a.Version, a.SASLAuthBytes = 1, []byte(librdkafkaFinal(t, bare, serverFirst, cnonce, tt.pass))
			final := w.request(a).(*kmsg.SASLAuthenticateResponse)
			if !tt.ok {
				assert.Equal(t, ecSASLAuthenticationFailed, final.ErrorCode)
				assert.Equal(t, int64(1), c.SecurityStats().Failures)
				return
			}
			require.Zero(t, final.ErrorCode)
			assert.True(t, strings.HasPrefix(string(final.SASLAuthBytes), "v="))
			assert.Equal(t, int64(1), c.SecurityStats().Authentications)
		})
	}
}
