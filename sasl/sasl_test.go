package sasl_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/xdg-go/scram"

	"github.com/samsa-go/samsa/sasl"
)

func TestPlainMessage(t *testing.T) {
	s, first, err := sasl.Plain("alice", "s3cret").Start(context.Background(), "b:9092")
	require.NoError(t, err)
	assert.Equal(t, "\x00alice\x00s3cret", string(first))
	done, next, err := s.Step(nil)
	require.NoError(t, err)
	assert.True(t, done)
	assert.Nil(t, next)
}

func TestPlainRejectsBadCredentials(t *testing.T) {
	for _, m := range []sasl.Mechanism{sasl.Plain("", "x"), sasl.Plain("a", ""), sasl.Plain("a\x00b", "x")} {
		_, _, err := m.Start(context.Background(), "b:9092")
		assert.Error(t, err, "%v", m)
	}
}

// scramExchange runs a client mechanism against xdg-go's server side, with
// the server knowing serverPass for user.
func scramExchange(t *testing.T, m sasl.Mechanism, hash scram.HashGeneratorFcn, user, serverPass string) error {
	t.Helper()
	cl, err := hash.NewClient(user, serverPass, "")
	require.NoError(t, err)
	creds := cl.GetStoredCredentials(scram.KeyFactors{Salt: "saltsaltsalt", Iters: 4096})
	srv, err := hash.NewServer(func(u string) (scram.StoredCredentials, error) {
		if u != user {
			return scram.StoredCredentials{}, errors.New("unknown user")
		}
		return creds, nil
	})
	require.NoError(t, err)
	conv := srv.NewConversation()

	sess, msg, err := m.Start(context.Background(), "b:9092")
	require.NoError(t, err)
	for {
		challenge, err := conv.Step(string(msg))
		if err != nil {
			return err
		}
		done, next, err := sess.Step([]byte(challenge))
		if err != nil {
			return err
		}
		if done && next == nil {
			if !conv.Valid() {
				return errors.New("server did not validate")
			}
			return nil
		}
		msg = next
	}
}

func TestScram(t *testing.T) {
	tests := []struct {
		name string
		mech func(u, p string) sasl.Mechanism
		hash scram.HashGeneratorFcn
	}{
		{"SCRAM-SHA-256", sasl.ScramSHA256, scram.SHA256},
		{"SCRAM-SHA-512", sasl.ScramSHA512, scram.SHA512},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.name, tt.mech("u", "p").Name())
			assert.NoError(t, scramExchange(t, tt.mech("alice", "right"), tt.hash, "alice", "right"))
			assert.Error(t, scramExchange(t, tt.mech("alice", "wrong"), tt.hash, "alice", "right"))
		})
	}
}

func TestOAuthBearerMessage(t *testing.T) {
	calls := 0
	m := sasl.OAuthBearer(func(context.Context) (sasl.Token, error) {
		calls++
		return sasl.Token{Value: "eyJ.tok.en", Extensions: map[string]string{"logicalCluster": "lkc-1", "identityPoolId": "pool-2"}}, nil
	})
	assert.Equal(t, "OAUTHBEARER", m.Name())
	s, first, err := m.Start(context.Background(), "b:9092")
	require.NoError(t, err)
	assert.Equal(t, "n,,\x01auth=Bearer eyJ.tok.en\x01identityPoolId=pool-2\x01logicalCluster=lkc-1\x01\x01", string(first))
	done, next, err := s.Step(nil)
	require.NoError(t, err)
	assert.True(t, done)
	assert.Nil(t, next)

	// A JSON error challenge is answered with a lone kvsep.
	s, _, err = m.Start(context.Background(), "b:9092")
	require.NoError(t, err)
	done, next, err = s.Step([]byte(`{"status":"invalid_token"}`))
	require.NoError(t, err)
	assert.True(t, done)
	assert.Equal(t, []byte{1}, next)
	assert.Equal(t, 2, calls, "the callback runs once per exchange")
}

func TestOAuthBearerErrors(t *testing.T) {
	boom := errors.New("idp down")
	tests := []struct {
		name string
		tok  sasl.Token
		err  error
	}{
		{"callback error", sasl.Token{}, boom},
		{"empty token", sasl.Token{}, nil},
		{"reserved key", sasl.Token{Value: "t", Extensions: map[string]string{"auth": "x"}}, nil},
		{"bad key", sasl.Token{Value: "t", Extensions: map[string]string{"a-b": "x"}}, nil},
		{"bad value", sasl.Token{Value: "t", Extensions: map[string]string{"k": "\x01"}}, nil},
		{"bad token", sasl.Token{Value: "a b"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := sasl.OAuthBearer(func(context.Context) (sasl.Token, error) { return tt.tok, tt.err })
			_, _, err := m.Start(context.Background(), "b:9092")
			require.Error(t, err)
			if tt.err != nil {
				assert.ErrorIs(t, err, tt.err)
			}
		})
	}
}

func TestSecretsNeverPrint(t *testing.T) {
	type cfg struct {
		SASL  sasl.Mechanism
		Token sasl.Token
		Ptr   *sasl.Token
	}
	tok := sasl.Token{Value: "TOKENSECRET", Extensions: map[string]string{"k": "v"}}
	mechs := []sasl.Mechanism{
		sasl.Plain("alice", "PASSSECRET"),
		sasl.ScramSHA256("alice", "PASSSECRET"),
		sasl.ScramSHA512("alice", "PASSSECRET"),
		sasl.OAuthBearer(func(context.Context) (sasl.Token, error) { return tok, nil }),
	}
	for _, m := range mechs {
		c := cfg{SASL: m, Token: tok, Ptr: &tok}
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
			for _, v := range []any{m, c, &c, tok, &tok} {
				out := fmt.Sprintf(verb, v)
				assert.NotContains(t, out, "SECRET", "%s of %T", verb, v)
				assert.NotContains(t, out, "534543524554", "%s of %T (hex)", verb, v)
			}
		}
		assert.Contains(t, fmt.Sprint(m), m.Name())
	}
	assert.Contains(t, fmt.Sprintf("%v", mechs[0]), "alice")
}

// TestMechanismsNameTheirSecrets: every mechanism of the package tells the
// connection layer what to scrub from broker text (SecretHolder): the
// password, PLAIN's whole message, the OAUTHBEARER tokens sent lately.
func TestMechanismsNameTheirSecrets(t *testing.T) {
	tokens := []string{"tok-1", "tok-2", "tok-3"}
	n := 0
	bearer := sasl.OAuthBearer(func(context.Context) (sasl.Token, error) {
		tok := tokens[min(n, len(tokens)-1)]
		n++
		return sasl.Token{Value: tok}, nil
	})
	cases := []struct {
		name   string
		mech   sasl.Mechanism
		starts int
		want   []string
	}{
		{"PLAIN", sasl.Plain("alice", "alice-pw"), 0, []string{"alice-pw", "\x00alice\x00alice-pw"}},
		{"SCRAM-SHA-256", sasl.ScramSHA256("carol", "carol-pw"), 0, []string{"carol-pw"}},
		{"SCRAM-SHA-512", sasl.ScramSHA512("carol", "carol-pw"), 0, []string{"carol-pw"}},
		{"OAUTHBEARER before any exchange", bearer, 0, nil},
		{"OAUTHBEARER keeps the last two tokens", bearer, 3, []string{"tok-3", "tok-2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for range tc.starts {
				_, _, err := tc.mech.Start(context.Background(), "b:9092")
				require.NoError(t, err)
			}
			h, ok := tc.mech.(sasl.SecretHolder)
			require.True(t, ok, "%s is not a SecretHolder", tc.name)
			assert.Equal(t, tc.want, h.Secrets())
		})
	}
}
