package kerberos

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/jcmturner/gofork/encoding/asn1"
	"github.com/jcmturner/gokrb5/v8/asn1tools"
	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/asnAppTag"
	"github.com/jcmturner/gokrb5/v8/iana/chksumtype"
	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/iana/flags"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/iana/msgtype"
	"github.com/jcmturner/gokrb5/v8/iana/nametype"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// acceptor plays the broker's side of the exchange with gokrb5's pieces
// and the service's keytab, as Java's GSSAPI server would.
type acceptor struct {
	t         *testing.T
	kt        *keytab.Keytab
	sname     types.PrincipalName
	key       types.EncryptionKey // the session key, from the ticket
	subkey    *types.EncryptionKey
	auth      types.Authenticator
	repKey    *types.EncryptionKey // encrypts the AP-REP instead of the session key
	badEcho   bool                 // the AP-REP echoes another time
	wantCName string               // the client's name, if set
}

const testRealm = "SAMSA.TEST"

func newAcceptor(t *testing.T) *acceptor {
	kt := keytab.New()
	require.NoError(t, kt.AddEntry("kafka/localhost", testRealm, "service-password", time.Now(), 1, etypeID.AES256_CTS_HMAC_SHA1_96))
	return &acceptor{t: t, kt: kt, sname: types.NewPrincipalName(nametype.KRB_NT_SRV_HST, "kafka/localhost"), wantCName: "client"}
}

// ticket is what a KDC would issue the client for the service.
func (a *acceptor) ticket(etype int32) (messages.Ticket, types.EncryptionKey, types.PrincipalName) {
	if etype != etypeID.AES256_CTS_HMAC_SHA1_96 {
		require.NoError(a.t, a.kt.AddEntry("kafka/localhost", testRealm, "service-password", time.Now(), 1, etype))
	}
	cname := types.NewPrincipalName(nametype.KRB_NT_PRINCIPAL, "client")
	now := time.Now().UTC()
	tkt, key, err := messages.NewTicket(cname, testRealm, a.sname, testRealm, types.NewKrbFlags(), a.kt, etype, 1, now, now, now.Add(time.Hour), now.Add(time.Hour))
	require.NoError(a.t, err)
	return tkt, key, cname
}

// acceptAPReq checks the client's first message and returns the AP-REP
// token.
func (a *acceptor) acceptAPReq(msg []byte) []byte {
	t := a.t
	tokID, inner, err := parseContextToken(msg)
	require.NoError(t, err)
	require.Equal(t, []byte{1, 0}, tokID, "an AP-REQ")
	var req messages.APReq
	require.NoError(t, req.Unmarshal(inner))
	assert.True(t, types.IsFlagSet(&req.APOptions, flags.APOptionMutualRequired), "mutual authentication asked")
	require.NoError(t, req.Ticket.DecryptEncPart(a.kt, &a.sname))
	a.key = req.Ticket.DecryptedEncPart.Key
	require.NoError(t, req.DecryptAuthenticator(a.key))
	a.auth = req.Authenticator
	assert.Equal(t, chksumtype.GSSAPI, a.auth.Cksum.CksumType)
	require.Len(t, a.auth.Cksum.Checksum, 24)
	assert.Equal(t, uint32(16), binary.LittleEndian.Uint32(a.auth.Cksum.Checksum[:4]))
	assert.Equal(t, uint32(gssapi.ContextFlagMutual|gssapi.ContextFlagConf|gssapi.ContextFlagInteg),
		binary.LittleEndian.Uint32(a.auth.Cksum.Checksum[20:24]))
	if a.wantCName != "" {
		assert.Equal(t, a.wantCName, a.auth.CName.PrincipalNameString())
	}

	part := messages.EncAPRepPart{CTime: a.auth.CTime, Cusec: a.auth.Cusec, SequenceNumber: 4242}
	if a.subkey != nil {
		part.Subkey = *a.subkey
	}
	if a.badEcho {
		part.Cusec = (part.Cusec + 1) % 1000000
	}
	b, err := asn1.Marshal(part)
	require.NoError(t, err)
	b = asn1tools.AddASNAppTag(b, asnAppTag.EncAPRepPart)
	encKey := a.key
	if a.repKey != nil {
		encKey = *a.repKey
	}
	ed, err := crypto.GetEncryptedData(b, encKey, keyusage.AP_REP_ENCPART, 0)
	require.NoError(t, err)
	rep, err := asn1.Marshal(messages.APRep{PVNO: 5, MsgType: msgtype.KRB_AP_REP, EncPart: ed})
	require.NoError(t, err)
	return contextToken(tokAPRep, asn1tools.AddASNAppTag(rep, asnAppTag.APREP))
}

// wrapKey is the key of the wrap tokens: the acceptor's subkey if it sent
// one.
func (a *acceptor) wrapKey() types.EncryptionKey {
	if a.subkey != nil {
		return *a.subkey
	}
	return a.key
}

// offer is the broker's wrap token offering layers.
func (a *acceptor) offer(layers byte) []byte {
	et, err := crypto.GetEtype(a.wrapKey().KeyType)
	require.NoError(a.t, err)
	wt := gssapi.WrapToken{Flags: flagSentByAcceptor, EC: uint16(et.GetHMACBitLength() / 8), SndSeqNum: 4242, Payload: []byte{layers, 0x01, 0x00, 0x00}}
	if a.subkey != nil {
		wt.Flags |= flagAcceptorSubkey
	}
	require.NoError(a.t, wt.SetCheckSum(a.wrapKey(), keyusage.GSSAPI_ACCEPTOR_SEAL))
	b, err := wt.Marshal()
	require.NoError(a.t, err)
	return b
}

// checkAnswer verifies the client's wrap token and returns its payload.
func (a *acceptor) checkAnswer(b []byte) []byte {
	var wt gssapi.WrapToken
	require.NoError(a.t, wt.Unmarshal(b, false))
	ok, err := wt.Verify(a.wrapKey(), keyusage.GSSAPI_INITIATOR_SEAL)
	require.NoError(a.t, err)
	require.True(a.t, ok)
	assert.Equal(a.t, uint64(a.auth.SeqNumber), wt.SndSeqNum, "the client's first sequence number")
	assert.Equal(a.t, a.subkey != nil, wt.Flags&flagAcceptorSubkey != 0)
	return wt.Payload
}

// rotate moves a wrap token's data right by rrc, as RFC 4121 allows.
func rotate(tok []byte, rrc int) []byte {
	out := append([]byte{}, tok[:16]...)
	data := tok[16:]
	n := len(data)
	out = append(out, data[n-rrc:]...)
	out = append(out, data[:n-rrc]...)
	binary.BigEndian.PutUint16(out[6:8], uint16(rrc))
	return out
}

// TestGSSAPIExchangeAgainstAcceptor runs the client's side of RFC 4752
// against an acceptor made of gokrb5's pieces: the AP-REQ it verifies, the
// AP-REP and the layer offer the client verifies, and the client's answer,
// no security layer and max size 0, that it verifies in turn.
func TestGSSAPIExchangeAgainstAcceptor(t *testing.T) {
	cases := []struct {
		name     string
		etype    int32
		subkey   bool
		noAPRep  bool // the broker sends no AP-REP
		emptyRep bool // ... but an empty message first
		rrc      int
	}{
		{name: "aes256 with AP-REP", etype: etypeID.AES256_CTS_HMAC_SHA1_96},
		{name: "aes128", etype: etypeID.AES128_CTS_HMAC_SHA1_96},
		{name: "aes128-sha256", etype: etypeID.AES128_CTS_HMAC_SHA256_128},
		{name: "acceptor subkey", etype: etypeID.AES256_CTS_HMAC_SHA1_96, subkey: true},
		{name: "no AP-REP", etype: etypeID.AES256_CTS_HMAC_SHA1_96, noAPRep: true},
		{name: "empty context answer", etype: etypeID.AES256_CTS_HMAC_SHA1_96, noAPRep: true, emptyRep: true},
		{name: "rotated wrap token", etype: etypeID.AES256_CTS_HMAC_SHA1_96, rrc: 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAcceptor(t)
			tkt, key, cname := a.ticket(tc.etype)
			if tc.subkey {
				sk := types.EncryptionKey{KeyType: key.KeyType, KeyValue: bytes.Repeat([]byte{0x5a}, len(key.KeyValue))}
				a.subkey = &sk
			}
			s, first, err := newSession(testRealm, cname, tkt, key)
			require.NoError(t, err)
			rep := a.acceptAPReq(first)
			if !tc.noAPRep {
				done, msg, err := s.Step(rep)
				require.NoError(t, err)
				assert.False(t, done)
				assert.Empty(t, msg, "an empty message after the AP-REP")
			}
			if tc.emptyRep {
				done, msg, err := s.Step(nil)
				require.NoError(t, err)
				assert.False(t, done)
				assert.Empty(t, msg)
			}
			offer := a.offer(0x07) // all three layers, as a broker allowing auth-conf would
			if tc.rrc > 0 {
				offer = rotate(offer, tc.rrc)
			}
			done, answer, err := s.Step(offer)
			require.NoError(t, err)
			assert.True(t, done, "the answer ends the client's part")
			assert.Equal(t, []byte{0x01, 0, 0, 0}, a.checkAnswer(answer), "no security layer, max size 0, no authorization id")

			_, _, err = s.Step(nil)
			assert.ErrorContains(t, err, "after the exchange ended")
		})
	}
}

// TestGSSAPIExchangeRefusals: what the client refuses in the broker's
// messages, each with an error that says why.
func TestGSSAPIExchangeRefusals(t *testing.T) {
	krbErr := func(a *acceptor) []byte {
		e := messages.NewKRBError(a.sname, testRealm, 31, "integrity check failed") // KRB_AP_ERR_BAD_INTEGRITY
		b, err := e.Marshal()
		require.NoError(t, err)
		return contextToken(tokKRBError, b)
	}
	tamper := func(b []byte) []byte {
		b = append([]byte{}, b...)
		b[len(b)-1] ^= 0xff
		return b
	}
	cases := []struct {
		name    string
		apRep   func(a *acceptor, first []byte) []byte // nil: no AP-REP step
		offer   func(a *acceptor) []byte
		wantErr string
	}{
		{name: "KRB-ERROR instead of AP-REP", apRep: func(a *acceptor, _ []byte) []byte { return krbErr(a) },
			wantErr: "the broker refused the AP-REQ"},
		{name: "AP-REP of another key", apRep: func(a *acceptor, first []byte) []byte {
			a.repKey = &types.EncryptionKey{KeyType: etypeID.AES256_CTS_HMAC_SHA1_96, KeyValue: bytes.Repeat([]byte{1}, 32)}
			return a.acceptAPReq(first)
		}, wantErr: "does not decrypt with the session key"},
		{name: "AP-REP of another authenticator", apRep: func(a *acceptor, first []byte) []byte {
			a.badEcho = true
			return a.acceptAPReq(first)
		}, wantErr: "does not echo the authenticator's time"},
		{name: "other mechanism's token", apRep: func(*acceptor, []byte) []byte {
			return asn1tools.AddASNAppTag([]byte{0x06, 0x03, 0x2b, 0x06, 0x01, 0x02, 0x00}, 0)
		}, wantErr: "another mechanism"},
		{name: "layers: integrity only", offer: func(a *acceptor) []byte { return a.offer(0x02) },
			wantErr: "requires a SASL security layer"},
		{name: "tampered wrap token", offer: func(a *acceptor) []byte { return tamper(a.offer(0x01)) },
			wantErr: "does not verify with the session key"},
		{name: "sealed wrap token", offer: func(a *acceptor) []byte {
			b := a.offer(0x01)
			b[2] |= flagSealed
			return b
		}, wantErr: "encrypted"},
		{name: "initiator's wrap token", offer: func(a *acceptor) []byte {
			b := a.offer(0x01)
			b[2] &^= flagSentByAcceptor
			return b
		}, wantErr: "not marked as the acceptor's"},
		{name: "RFC 1964 token", offer: func(*acceptor) []byte { return append([]byte{0x02, 0x01}, make([]byte, 30)...) },
			wantErr: "RFC 1964"},
		{name: "garbage", offer: func(*acceptor) []byte { return []byte("hello") }, wantErr: "not a GSS-API wrap token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAcceptor(t)
			tkt, key, cname := a.ticket(etypeID.AES256_CTS_HMAC_SHA1_96)
			s, first, err := newSession(testRealm, cname, tkt, key)
			require.NoError(t, err)
			var stepErr error
			if tc.apRep != nil {
				_, _, stepErr = s.Step(tc.apRep(a, first))
			} else {
				rep := a.acceptAPReq(first)
				_, _, err := s.Step(rep)
				require.NoError(t, err)
				_, _, stepErr = s.Step(tc.offer(a))
			}
			require.Error(t, stepErr)
			assert.Contains(t, stepErr.Error(), tc.wantErr)
			assert.NotContains(t, stepErr.Error(), "Computed", "no checksum in the error")
		})
	}
}
