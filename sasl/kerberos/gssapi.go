package kerberos

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jcmturner/gofork/encoding/asn1"
	"github.com/jcmturner/gokrb5/v8/asn1tools"
	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/chksumtype"
	"github.com/jcmturner/gokrb5/v8/iana/flags"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
)

// The GSS-API messages of one SASL GSSAPI exchange (RFC 4752) with the
// Kerberos V5 mechanism (RFC 4121), as Kafka's Java client sends them:
//
//	client: InitialContextToken{krb5 OID, 0x0100, AP-REQ}  (mutual authentication asked)
//	broker: InitialContextToken{krb5 OID, 0x0200, AP-REP}  (checked against the authenticator)
//	client: an empty message
//	broker: a wrap token (0x0504) of 4 bytes: the security layers it offers, its max buffer size
//	client: a wrap token of 4 bytes: 0x01 (no security layer), max size 0, no authorization id
//	broker: empty: authenticated
//
// A broker that sends no AP-REP (mutual authentication not done) may send
// the wrap token at once; its checksum, made with the session key, still
// proves that it read the ticket.

// krb5OID is the DER encoding of the Kerberos V5 mechanism's OID,
// 1.2.840.113554.1.2.2.
var krb5OID = []byte{0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02}

// The token ids of RFC 4121 (4.1 and 4.2.6.2) and RFC 1964's wrap token.
var (
	tokAPReq      = []byte{0x01, 0x00}
	tokAPRep      = []byte{0x02, 0x00}
	tokKRBError   = []byte{0x03, 0x00}
	tokWrap       = []byte{0x05, 0x04}
	tokWrapRFC964 = []byte{0x02, 0x01}
)

// Wrap token flags (RFC 4121 4.2.2).
const (
	flagSentByAcceptor = 0x01
	flagSealed         = 0x02
	flagAcceptorSubkey = 0x04
)

// SASL GSSAPI security layers (RFC 4752 3.3).
const layerNone = 0x01

// contextFlags are the GSS-API flags asked for in the authenticator's
// checksum, as Java's GSSAPI client asks: mutual authentication,
// confidentiality and integrity (the broker offers and the client takes no
// security layer anyway).
const contextFlags = gssapi.ContextFlagMutual | gssapi.ContextFlagConf | gssapi.ContextFlagInteg

// session is one exchange: the service ticket's session key, and the
// authenticator the broker's AP-REP must echo.
type session struct {
	key       types.EncryptionKey // the session key, or the acceptor's subkey once the AP-REP names one
	subkey    bool                // key is the acceptor's subkey
	ctime     time.Time
	cusec     int
	seq       uint64 // the authenticator's sequence number, the client's first
	sawAPRep  bool
	gotLayers bool
}

// newSession builds the AP-REQ for ticket and returns the session and the
// client's first message.
func newSession(crealm string, cname types.PrincipalName, ticket messages.Ticket, key types.EncryptionKey) (*session, []byte, error) {
	auth, err := types.NewAuthenticator(crealm, cname)
	if err != nil {
		return nil, nil, fmt.Errorf("kerberos: the authenticator: %w", err)
	}
	// RFC 4121 4.1.1: the checksum of type 0x8003 carries the channel
	// bindings (none: 16 zero bytes) and the context flags, little-endian.
	ck := make([]byte, 24)
	binary.LittleEndian.PutUint32(ck[0:4], 16)
	binary.LittleEndian.PutUint32(ck[20:24], contextFlags)
	auth.Cksum = types.Checksum{CksumType: chksumtype.GSSAPI, Checksum: ck}
	req, err := messages.NewAPReq(ticket, key, auth)
	if err != nil {
		return nil, nil, fmt.Errorf("kerberos: the AP-REQ: %w", err)
	}
	types.SetFlag(&req.APOptions, flags.APOptionMutualRequired)
	b, err := req.Marshal()
	if err != nil {
		return nil, nil, fmt.Errorf("kerberos: the AP-REQ: %w", err)
	}
	s := &session{key: key, ctime: auth.CTime, cusec: auth.Cusec, seq: uint64(auth.SeqNumber)}
	return s, contextToken(tokAPReq, b), nil
}

// contextToken wraps a Kerberos message in RFC 2743's InitialContextToken:
// [APPLICATION 0] { OID, token id, message }.
func contextToken(tokID, msg []byte) []byte {
	inner := make([]byte, 0, len(krb5OID)+len(tokID)+len(msg))
	inner = append(inner, krb5OID...)
	inner = append(inner, tokID...)
	inner = append(inner, msg...)
	return asn1tools.AddASNAppTag(inner, 0)
}

// parseContextToken returns the token id and the message of an
// InitialContextToken of the Kerberos mechanism.
func parseContextToken(b []byte) (tokID, msg []byte, err error) {
	var raw asn1.RawValue
	rest, err := asn1.Unmarshal(b, &raw)
	if err != nil || len(rest) != 0 || raw.Class != asn1.ClassApplication || raw.Tag != 0 || !raw.IsCompound {
		return nil, nil, errors.New("not a GSS-API context token")
	}
	body := raw.Bytes
	if !bytes.HasPrefix(body, krb5OID) {
		return nil, nil, errors.New("a GSS-API context token of another mechanism than Kerberos V5")
	}
	body = body[len(krb5OID):]
	if len(body) < 2 {
		return nil, nil, errors.New("a GSS-API context token without a token id")
	}
	return body[:2], body[2:], nil
}

// Step takes the broker's messages: the AP-REP (or nothing), then the
// wrap token offering security layers.
func (s *session) Step(challenge []byte) (bool, []byte, error) {
	switch {
	case s.gotLayers:
		return false, nil, errors.New("kerberos: the broker sent a message after the exchange ended")
	case !s.sawAPRep && len(challenge) == 0:
		// Context complete without an AP-REP: the wrap token comes next.
		s.sawAPRep = true
		return false, []byte{}, nil
	case !s.sawAPRep && len(challenge) > 0 && challenge[0] == 0x60:
		if err := s.checkAPRep(challenge); err != nil {
			return false, nil, err
		}
		s.sawAPRep = true
		return false, []byte{}, nil
	}
	s.sawAPRep = true
	reply, err := s.negotiateLayer(challenge)
	if err != nil {
		return false, nil, err
	}
	s.gotLayers = true
	return true, reply, nil
}

// checkAPRep checks the broker's AP-REP: it decrypts with the session key
// and echoes the authenticator's time. An acceptor subkey in it keys the
// wrap tokens from then on (RFC 4121 4.2.2). A KRB-ERROR becomes the
// error.
func (s *session) checkAPRep(b []byte) error {
	tokID, msg, err := parseContextToken(b)
	if err != nil {
		return fmt.Errorf("kerberos: the broker's answer to the AP-REQ: %w", err)
	}
	switch {
	case bytes.Equal(tokID, tokKRBError):
		var kerr messages.KRBError
		if err := kerr.Unmarshal(msg); err != nil {
			return errors.New("kerberos: the broker refused the AP-REQ with a KRB-ERROR that does not parse")
		}
		return fmt.Errorf("kerberos: the broker refused the AP-REQ: %s", krbErrorText(kerr))
	case !bytes.Equal(tokID, tokAPRep):
		return fmt.Errorf("kerberos: the broker answered the AP-REQ with token id %x, not an AP-REP", tokID)
	}
	var rep messages.APRep
	if err := rep.Unmarshal(msg); err != nil {
		return errors.New("kerberos: the broker's AP-REP does not parse")
	}
	plain, err := crypto.DecryptEncPart(rep.EncPart, s.key, keyusage.AP_REP_ENCPART)
	if err != nil {
		return errors.New("kerberos: the broker's AP-REP does not decrypt with the session key: it is not the service the ticket is for")
	}
	var part messages.EncAPRepPart
	if err := part.Unmarshal(plain); err != nil {
		return errors.New("kerberos: the broker's AP-REP does not parse once decrypted")
	}
	if part.CTime.Unix() != s.ctime.Unix() || part.Cusec != s.cusec {
		return errors.New("kerberos: the broker's AP-REP does not echo the authenticator's time")
	}
	if part.Subkey.KeyType != 0 && len(part.Subkey.KeyValue) > 0 {
		s.key, s.subkey = part.Subkey, true
	}
	return nil
}

// krbErrorText is a KRB-ERROR's code, name and text: no key material.
func krbErrorText(e messages.KRBError) string {
	t := e.Error()
	if len(t) > 300 {
		t = t[:300] + "…"
	}
	return t
}

// negotiateLayer checks the broker's wrap token and answers it: no
// security layer, max size 0, no authorization id.
func (s *session) negotiateLayer(b []byte) ([]byte, error) {
	payload, err := s.unwrap(b)
	if err != nil {
		return nil, err
	}
	if len(payload) != 4 {
		return nil, fmt.Errorf("kerberos: the broker's security-layer message has %d bytes, not 4", len(payload))
	}
	if payload[0]&layerNone == 0 {
		return nil, fmt.Errorf("kerberos: the broker requires a SASL security layer (offered 0x%02x: integrity or confidentiality, its javax.security.sasl.qop), which samsa does not support; allow \"auth\"", payload[0])
	}
	return s.wrap([]byte{layerNone, 0, 0, 0})
}

// unwrap verifies an RFC 4121 wrap token from the broker, without
// confidentiality, and returns its payload.
func (s *session) unwrap(b []byte) ([]byte, error) {
	if len(b) >= 2 && bytes.Equal(b[:2], tokWrapRFC964) {
		return nil, errors.New("kerberos: the broker's wrap token is RFC 1964's (a DES or RC4 session key), which is not supported: give the broker's principal AES keys")
	}
	if len(b) < gssapi.HdrLen || !bytes.Equal(b[:2], tokWrap) || b[3] != 0xff {
		return nil, errors.New("kerberos: the broker's security-layer message is not a GSS-API wrap token")
	}
	fl := b[2]
	switch {
	case fl&flagSentByAcceptor == 0:
		return nil, errors.New("kerberos: the broker's wrap token is not marked as the acceptor's")
	case fl&flagSealed != 0:
		return nil, errors.New("kerberos: the broker's wrap token is encrypted (a confidentiality layer), which is not supported")
	case fl&flagAcceptorSubkey != 0 && !s.subkey:
		return nil, errors.New("kerberos: the broker's wrap token uses an acceptor subkey it never sent")
	}
	// Undo the right rotation (RRC, RFC 4121 4.2.5) of what follows the
	// header, then read it as a token without rotation.
	data := b[gssapi.HdrLen:]
	if rrc := int(binary.BigEndian.Uint16(b[6:8])); rrc != 0 && len(data) > 0 {
		rrc %= len(data)
		data = append(append([]byte{}, data[rrc:]...), data[:rrc]...)
	}
	flat := append(append([]byte{}, b[:gssapi.HdrLen]...), data...)
	binary.BigEndian.PutUint16(flat[6:8], 0)
	var wt gssapi.WrapToken
	if err := wt.Unmarshal(flat, true); err != nil {
		return nil, errors.New("kerberos: the broker's wrap token does not parse")
	}
	if ok, _ := wt.Verify(s.key, keyusage.GSSAPI_ACCEPTOR_SEAL); !ok {
		return nil, errors.New("kerberos: the broker's wrap token does not verify with the session key")
	}
	return wt.Payload, nil
}

// wrap makes the client's wrap token for payload: integrity only, the
// client's sequence number, the acceptor's subkey flag when its subkey is
// used.
func (s *session) wrap(payload []byte) ([]byte, error) {
	et, err := crypto.GetEtype(s.key.KeyType)
	if err != nil {
		return nil, fmt.Errorf("kerberos: the session key's type %d: %w", s.key.KeyType, err)
	}
	wt := gssapi.WrapToken{EC: uint16(et.GetHMACBitLength() / 8), SndSeqNum: s.seq, Payload: payload}
	if s.subkey {
		wt.Flags = flagAcceptorSubkey
	}
	if err := wt.SetCheckSum(s.key, keyusage.GSSAPI_INITIATOR_SEAL); err != nil {
		return nil, fmt.Errorf("kerberos: the wrap token's checksum: %w", err)
	}
	return wt.Marshal()
}
