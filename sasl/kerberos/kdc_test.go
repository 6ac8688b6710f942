package kerberos

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/iana/nametype"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exchange runs a whole exchange of m with the broker host against an
// acceptor holding the service keytab kt.
func exchange(t *testing.T, m *mechanism, host, serviceKeytab string) error {
	t.Helper()
	kt, err := keytab.Load(serviceKeytab)
	require.NoError(t, err)
	a := &acceptor{t: t, kt: kt, sname: types.NewPrincipalName(nametype.KRB_NT_SRV_HST, "kafka/localhost")}
	sess, first, err := m.Start(context.Background(), host+":9092")
	if err != nil {
		return err
	}
	s := sess.(*session)
	if _, _, err := s.Step(a.acceptAPReq(first)); err != nil {
		return err
	}
	done, answer, err := s.Step(a.offer(0x01))
	require.NoError(t, err)
	require.True(t, done)
	assert.Equal(t, []byte{1, 0, 0, 0}, a.checkAnswer(answer))
	return nil
}

func newMech(t *testing.T, opts Options) *mechanism {
	t.Helper()
	m, err := New(opts)
	require.NoError(t, err)
	return m.(*mechanism)
}

// TestKeytabLoginAgainstKDC logs in to a real MIT KDC with a keytab, gets
// a service ticket for kafka/localhost and authenticates to an acceptor
// holding the service's keytab, concurrently from several connections
// sharing one login.
func TestKeytabLoginAgainstKDC(t *testing.T) {
	k := startKDC(t)
	m := newMech(t, Options{Principal: "client@" + testRealm, KeytabPath: k.clientKeytab, Krb5ConfPath: k.conf})
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = exchange(t, m, "LocalHost", k.serviceKeytab) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NotNil(t, m.tgt)
	assert.Equal(t, "keytab", m.tgt.source)
	assert.Len(t, m.tickets, 1, "one service principal: kafka/localhost")
	// One login shared by the four exchanges; a service ticket for each.
	kdcLog, err := os.ReadFile(filepath.Join(k.dir, "kdc.log"))
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(kdcLog), "client@SAMSA.TEST for krbtgt/SAMSA.TEST@SAMSA.TEST"), "AS exchanges:\n%s", kdcLog)
	assert.Equal(t, 4, strings.Count(string(kdcLog), "client@SAMSA.TEST for kafka/localhost@SAMSA.TEST"), "TGS exchanges:\n%s", kdcLog)

	// No verb prints a key: neither the keytab's nor a session key.
	kt, err := keytab.Load(k.clientKeytab)
	require.NoError(t, err)
	secrets := []string{}
	for _, e := range kt.Entries {
		secrets = append(secrets, hex.EncodeToString(e.Key.KeyValue), string(e.Key.KeyValue))
	}
	secrets = append(secrets, hex.EncodeToString(m.tgt.key.KeyValue), string(m.tgt.key.KeyValue))
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		out := fmt.Sprintf(verb, m)
		for _, s := range secrets {
			assert.NotContains(t, out, s, verb)
		}
		assert.Contains(t, fmt.Sprintf("%v", m), `principal="client@SAMSA.TEST"`)
	}
}

// TestLoginFailuresAgainstKDC: each way a login or a service ticket is
// refused fails Start with an error naming the cause.
func TestLoginFailuresAgainstKDC(t *testing.T) {
	k := startKDC(t)
	dir, deadConf, _ := testFiles(t, "127.0.0.1:1", nil)
	// A keytab for a principal the KDC does not have, and one with a key
	// the KDC does not hold for client@.
	_, _, strangerKeytab := testFiles(t, "127.0.0.1:1", map[string]string{"stranger": "pw", "client": "not-the-key"})
	cases := []struct {
		name    string
		opts    Options
		host    string
		wantErr []string
	}{
		{"principal not in the keytab", Options{Principal: "nobody@" + testRealm, KeytabPath: k.clientKeytab, Krb5ConfPath: k.conf},
			"localhost", []string{"login of nobody@SAMSA.TEST"}},
		{"principal unknown to the KDC", Options{Principal: "stranger@" + testRealm, KeytabPath: strangerKeytab, Krb5ConfPath: k.conf},
			"localhost", []string{"login of stranger@SAMSA.TEST", "KDC_ERR_C_PRINCIPAL_UNKNOWN"}},
		{"stale key", Options{Principal: "client@" + testRealm, KeytabPath: strangerKeytab, Krb5ConfPath: k.conf},
			"localhost", []string{"login of client@SAMSA.TEST"}},
		{"no such service", Options{Principal: "client@" + testRealm, KeytabPath: k.clientKeytab, Krb5ConfPath: k.conf},
			"127.0.0.1", []string{"kafka/127.0.0.1@SAMSA.TEST", "KDC_ERR_S_PRINCIPAL_UNKNOWN"}},
		{"KDC down", Options{Principal: "client@" + testRealm, KeytabPath: k.clientKeytab, Krb5ConfPath: deadConf},
			"localhost", []string{"login of client@SAMSA.TEST", "KDC"}},
		{"no ticket cache", Options{UseTicketCache: true, TicketCachePath: filepath.Join(dir, "none"), Krb5ConfPath: k.conf},
			"localhost", []string{"the ticket cache", "run kinit"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMech(t, tc.opts)
			err := exchange(t, m, tc.host, k.serviceKeytab)
			require.Error(t, err)
			for _, w := range tc.wantErr {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "not-the-key")
		})
	}
}

// TestTicketCacheAgainstKDC reads kinit's ticket cache, checks its
// principal, and reads it again after another kinit.
func TestTicketCacheAgainstKDC(t *testing.T) {
	k := startKDC(t)
	cache := filepath.Join(k.dir, "cc")
	k.kinit(t, cache, "client@"+testRealm)

	t.Setenv("KRB5CCNAME", "FILE:"+cache)
	m := newMech(t, Options{UseTicketCache: true, Krb5ConfPath: k.conf})
	require.NoError(t, exchange(t, m, "localhost", k.serviceKeytab))
	first := m.tgt
	assert.Equal(t, "ticket cache", first.source)
	assert.Equal(t, "client", first.cname.PrincipalNameString())

	// A kinit for another principal is picked up at the next exchange.
	time.Sleep(10 * time.Millisecond) // a new modification time
	k.kinit(t, cache, "renewable@"+testRealm)
	require.NoError(t, exchange(t, m, "localhost", k.serviceKeytab))
	assert.NotSame(t, first, m.tgt)
	assert.Equal(t, "renewable", m.tgt.cname.PrincipalNameString())

	// Principal must match the cache's.
	m = newMech(t, Options{UseTicketCache: true, Principal: "client", Krb5ConfPath: k.conf})
	err := exchange(t, m, "localhost", k.serviceKeytab)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is for renewable@SAMSA.TEST, not client")

	// With a keytab too, the keytab logs in when the cache cannot serve.
	require.NoError(t, os.Remove(cache))
	m = newMech(t, Options{UseTicketCache: true, Principal: "client", KeytabPath: k.clientKeytab, Krb5ConfPath: k.conf})
	require.NoError(t, exchange(t, m, "localhost", k.serviceKeytab))
	assert.Equal(t, "keytab", m.tgt.source)
}

// TestTicketRenewedBeforeExpiry moves the mechanism's clock past each
// ticket's renewal point: a keytab logs in again, a renewable ticket
// cache's ticket is renewed with the KDC, and the exchanges go on; within
// MinTimeBeforeRelogin of a login the ticket is kept while it is good.
func TestTicketRenewedBeforeExpiry(t *testing.T) {
	k := startKDC(t)
	cache := filepath.Join(k.dir, "cc-renewable")
	k.kinit(t, cache, "renewable@"+testRealm, "-l", "1h", "-r", "2h")
	cases := []struct {
		name       string
		opts       Options
		wantSource string
		renewed    bool // from the KDC: a later end
	}{
		{"keytab", Options{Principal: "client@" + testRealm, KeytabPath: k.clientKeytab}, "keytab", false},
		{"renewable ticket cache", Options{UseTicketCache: true, TicketCachePath: cache}, "ticket cache", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Krb5ConfPath = k.conf
			m := newMech(t, tc.opts)
			var mu sync.Mutex
			offset := time.Duration(0)
			m.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return time.Now().Add(offset) }
			advance := func(d time.Duration) { mu.Lock(); offset += d; mu.Unlock() }

			require.NoError(t, exchange(t, m, "localhost", k.serviceKeytab))
			first := m.tgt
			life := first.end.Sub(first.start)
			at := first.refreshAt.Sub(first.start)
			assert.True(t, at >= life*8/10-time.Second && at <= life*85/100+time.Second, "due at 80%%-85%% of its life: %v of %v", at, life)

			// Just before the renewal point: the same ticket.
			advance(first.refreshAt.Sub(m.now()) - time.Second)
			require.NoError(t, exchange(t, m, "localhost", k.serviceKeytab))
			assert.Same(t, first, m.tgt)

			// Past it: replaced.
			advance(2 * time.Second)
			require.NoError(t, exchange(t, m, "localhost", k.serviceKeytab))
			second := m.tgt
			require.NotSame(t, first, second)
			assert.Equal(t, tc.wantSource, second.source)
			if tc.renewed {
				assert.NotEqual(t, first.ticket.EncPart.Cipher, second.ticket.EncPart.Cipher, "a new ticket from the KDC")
				assert.False(t, second.end.Before(first.end))
			}
		})
	}
}

// TestReloginWaitsMinTime: a ticket that is due but good is kept within
// MinTimeBeforeRelogin of the last login; one no longer good is replaced
// whatever it says.
func TestReloginWaitsMinTime(t *testing.T) {
	k := startKDC(t)
	m := newMech(t, Options{Principal: "client@" + testRealm, KeytabPath: k.clientKeytab, Krb5ConfPath: k.conf,
		MinTimeBeforeRelogin: 24 * time.Hour})
	offset := time.Duration(0)
	m.now = func() time.Time { return time.Now().Add(offset) }
	require.NoError(t, exchange(t, m, "localhost", k.serviceKeytab))
	first := m.tgt
	offset = first.refreshAt.Sub(time.Now()) + time.Second
	require.NoError(t, exchange(t, m, "localhost", k.serviceKeytab))
	assert.Same(t, first, m.tgt, "due, good, and logged in less than MinTimeBeforeRelogin ago")

	offset = first.goodUntil().Sub(time.Now()) + time.Second
	require.NoError(t, exchange(t, m, "localhost", k.serviceKeytab))
	assert.NotSame(t, first, m.tgt, "no longer good")
	assert.False(t, strings.Contains(fmt.Sprint(m), "KeyValue"))
}
