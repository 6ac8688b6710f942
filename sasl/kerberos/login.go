package kerberos

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/credentials"
	"github.com/jcmturner/gokrb5/v8/iana/nametype"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
)

// The ticket-granting ticket's life here. No goroutine renews it in the
// background (gokrb5's Client.Login would start one per login, left
// running after the producer closes): the exchange that finds it due
// replaces it, while other exchanges wait for that login or, if the old
// ticket is still good, go on with it. Due means past RenewWindowFactor
// plus up to RenewJitter of its lifetime, as Java's refresh thread
// computes it, and at least MinTimeBeforeRelogin after the last login;
// a ticket within a tenth of its lifetime (at most a minute) of its end
// is no longer good and is replaced whatever MinTimeBeforeRelogin says.
//
// Replacing it: from the keytab, a new AS exchange (the keytab read
// again); from a ticket cache, the cache is read again (a kinit since
// picked up), and a ticket still due there is renewed with the KDC when
// it is renewable (kept in memory: the cache file is never written), else
// the keytab, if configured, logs in; else the old ticket serves until it
// is no longer good, and then the exchange fails.

// tgt is a ticket-granting ticket and what its exchanges need.
type tgt struct {
	client     *client.Client // for TGS exchanges: krb5.conf and the client's name; holds no session (no goroutine)
	cname      types.PrincipalName
	realm      string
	ticket     messages.Ticket
	key        types.EncryptionKey
	start, end time.Time
	renewTill  time.Time
	refreshAt  time.Time // when it is due
	source     string    // "keytab" or "ticket cache"
	cacheMod   time.Time // the cache file's modification time, when from a cache
}

// goodUntil is when the ticket stops serving new exchanges.
func (t *tgt) goodUntil() time.Time {
	return t.end.Add(-min(t.end.Sub(t.start)/10, time.Minute))
}

// loginFlight is a login under way; err is set before done is closed.
type loginFlight struct {
	done chan struct{}
	err  error
}

// serviceTicket is a service ticket and its session key.
type serviceTicket struct {
	ticket messages.Ticket
	key    types.EncryptionKey
	start  time.Time
	end    time.Time
}

// currentTGT returns a ticket-granting ticket that is good, logging in
// first if none is held or the one held is due.
func (m *mechanism) currentTGT(ctx context.Context) (*tgt, error) {
	for {
		m.mu.Lock()
		t := m.tgt
		m.mu.Unlock()
		changed := t != nil && m.cacheChanged(t) // a stat, without the lock

		m.mu.Lock()
		if m.tgt != t {
			m.mu.Unlock()
			continue
		}
		now := m.now()
		good := t != nil && now.Before(t.goodUntil())
		if good && now.Before(t.refreshAt) && !changed {
			m.mu.Unlock()
			return t, nil
		}
		if fl := m.refreshing; fl != nil {
			m.mu.Unlock()
			if good {
				return t, nil // another exchange is replacing it
			}
			select {
			case <-fl.done:
				if fl.err != nil {
					return nil, fl.err // that login's failure is this exchange's too
				}
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if good && !changed && !m.lastLogin.IsZero() && now.Sub(m.lastLogin) < m.opts.MinTimeBeforeRelogin {
			m.mu.Unlock()
			return t, nil
		}
		fl := &loginFlight{done: make(chan struct{})}
		m.refreshing, m.lastLogin = fl, now
		m.mu.Unlock()

		nt, err := m.login(t)

		m.mu.Lock()
		if err == nil {
			m.tgt = nt
		}
		fl.err = err
		m.refreshing = nil
		close(fl.done)
		m.mu.Unlock()
		switch {
		case err == nil:
			m.opts.Logger.Debug("kerberos: logged in", "principal", nt.cname.PrincipalNameString()+"@"+nt.realm,
				"from", nt.source, "until", nt.end, "replace_at", nt.refreshAt)
			return nt, nil
		case good:
			m.opts.Logger.Warn("kerberos: replacing the ticket-granting ticket failed; the current one serves until it expires",
				"principal", m.opts.Principal, "expires", t.end, "err", err)
			return t, nil
		default:
			return nil, err
		}
	}
}

// cacheChanged reports whether t came from a ticket cache that was
// written since (a kinit): then it is read again.
func (m *mechanism) cacheChanged(t *tgt) bool {
	if t.source != "ticket cache" {
		return false
	}
	st, err := os.Stat(m.cachePath)
	return err == nil && !st.ModTime().Equal(t.cacheMod)
}

// login gets a new ticket-granting ticket; old is the one held, if any.
// It runs without m.mu: it talks to the KDC.
func (m *mechanism) login(old *tgt) (*tgt, error) {
	if !m.opts.UseTicketCache {
		return m.keytabLogin()
	}
	t, cacheErr := m.cacheLogin(old)
	if cacheErr == nil || m.opts.KeytabPath == "" {
		return t, cacheErr
	}
	t, err := m.keytabLogin()
	if err != nil {
		return nil, fmt.Errorf("%w; and from the keytab: %w", cacheErr, err)
	}
	return t, nil
}

// keytabLogin is an AS exchange with the keytab's key.
func (m *mechanism) keytabLogin() (*tgt, error) {
	kt, err := readKeytab(m.opts.KeytabPath)
	if err != nil {
		return nil, err
	}
	cl := client.NewWithKeytab(m.user, m.realm, kt, m.krb5, client.DisablePAFXFAST(true))
	req, err := messages.NewASReqForTGT(m.realm, m.krb5, cl.Credentials.CName())
	if err != nil {
		return nil, fmt.Errorf("kerberos: login of %s: %w", m.opts.Principal, err)
	}
	rep, err := cl.ASExchange(m.realm, req, 0)
	if err != nil {
		return nil, fmt.Errorf("kerberos: login of %s with the keytab %s: %w", m.opts.Principal, m.opts.KeytabPath, err)
	}
	p := rep.DecryptedEncPart
	return m.newTGT(cl, cl.Credentials.CName(), m.realm, rep.Ticket, p.Key, p.AuthTime, p.StartTime, p.EndTime, p.RenewTill, "keytab"), nil
}

// cacheLogin reads the ticket cache again, and renews its ticket with the
// KDC if it is due and renewable.
func (m *mechanism) cacheLogin(old *tgt) (*tgt, error) {
	st, err := os.Stat(m.cachePath)
	if err != nil {
		return nil, fmt.Errorf("kerberos: the ticket cache: %w (run kinit)", err)
	}
	t := old
	if old == nil || old.source != "ticket cache" || !st.ModTime().Equal(old.cacheMod) {
		if t, err = m.readCache(st.ModTime()); err != nil {
			return nil, err
		}
	}
	now := m.now()
	if now.Before(t.refreshAt) {
		return t, nil
	}
	if now.Before(t.renewTill) && now.Before(t.end) {
		spn := types.PrincipalName{NameType: nametype.KRB_NT_SRV_INST, NameString: []string{"krbtgt", t.realm}}
		_, rep, err := t.client.TGSREQGenerateAndExchange(spn, t.realm, t.ticket, t.key, true)
		if err != nil {
			return nil, fmt.Errorf("kerberos: renewing the ticket of the cache %s: %w", m.cachePath, err)
		}
		p := rep.DecryptedEncPart
		nt := m.newTGT(t.client, t.cname, t.realm, rep.Ticket, p.Key, p.AuthTime, p.StartTime, p.EndTime, p.RenewTill, "ticket cache")
		nt.cacheMod = t.cacheMod
		return nt, nil
	}
	if !now.Before(t.goodUntil()) {
		return nil, fmt.Errorf("kerberos: the ticket in the cache %s expires at %s and cannot be renewed (run kinit)", m.cachePath, t.end.Format(time.RFC3339))
	}
	return t, nil // due, but neither renewable nor replaceable: serves while good
}

// readCache loads the ticket cache's ticket-granting ticket.
func (m *mechanism) readCache(mod time.Time) (t *tgt, err error) {
	defer func() {
		if recover() != nil { // gokrb5's parser indexes without bound checks
			t, err = nil, fmt.Errorf("kerberos: the ticket cache %s does not parse", m.cachePath)
		}
	}()
	cc, err := credentials.LoadCCache(m.cachePath)
	if err != nil {
		return nil, fmt.Errorf("kerberos: the ticket cache %s does not parse (only MIT's FILE format, version 4, is read)", m.cachePath)
	}
	cname, realm := cc.GetClientPrincipalName(), cc.GetClientRealm()
	if m.user != "" && (cname.PrincipalNameString() != m.user || realm != m.realm) {
		return nil, fmt.Errorf("kerberos: the ticket cache %s is for %s@%s, not %s", m.cachePath, cname.PrincipalNameString(), realm, m.opts.Principal)
	}
	cred, ok := cc.GetEntry(types.PrincipalName{NameType: nametype.KRB_NT_SRV_INST, NameString: []string{"krbtgt", realm}})
	if !ok {
		return nil, fmt.Errorf("kerberos: the ticket cache %s holds no ticket-granting ticket for %s (run kinit)", m.cachePath, realm)
	}
	var tkt messages.Ticket
	if err := tkt.Unmarshal(cred.Ticket); err != nil {
		return nil, fmt.Errorf("kerberos: the ticket cache %s: its ticket does not parse", m.cachePath)
	}
	cl := client.NewWithPassword(cname.PrincipalNameString(), realm, "", m.krb5, client.DisablePAFXFAST(true))
	t = m.newTGT(cl, cname, realm, tkt, cred.Key, cred.AuthTime, cred.StartTime, cred.EndTime, cred.RenewTill, "ticket cache")
	t.cacheMod = mod
	return t, nil
}

// newTGT builds a tgt and draws when it is due.
func (m *mechanism) newTGT(cl *client.Client, cname types.PrincipalName, realm string, tkt messages.Ticket, key types.EncryptionKey,
	auth, start, end, renewTill time.Time, source string) *tgt {
	if start.IsZero() {
		start = auth
	}
	life := end.Sub(start)
	f := m.opts.RenewWindowFactor + m.opts.RenewJitter*m.jitter()
	return &tgt{
		client: cl, cname: cname, realm: realm, ticket: tkt, key: key,
		start: start, end: end, renewTill: renewTill, source: source,
		refreshAt: start.Add(time.Duration(float64(life) * f)),
	}
}

// serviceTicket asks the KDC for a ticket to SERVICE/host in the client's
// realm (or the realm its referrals lead to). If the KDC cannot be
// reached, the last ticket for that principal serves while it has a tenth
// of its lifetime left, as Java's cached service tickets do.
func (m *mechanism) serviceTicket(t *tgt, host string) (serviceTicket, error) {
	spn := types.PrincipalName{NameType: nametype.KRB_NT_SRV_HST, NameString: []string{m.opts.ServiceName, host}}
	name := spn.PrincipalNameString()
	_, rep, err := t.client.TGSREQGenerateAndExchange(spn, t.realm, t.ticket, t.key, false)
	now := m.now()
	if err != nil {
		m.mu.Lock()
		last, ok := m.tickets[name]
		m.mu.Unlock()
		if ok && now.Before(last.end.Add(-last.end.Sub(last.start)/10)) {
			m.opts.Logger.Warn("kerberos: no new service ticket; using the last one", "service", name, "expires", last.end, "err", err)
			return last, nil
		}
		return serviceTicket{}, fmt.Errorf("kerberos: a service ticket for %s@%s: %w", name, t.realm, err)
	}
	p := rep.DecryptedEncPart
	st := serviceTicket{ticket: rep.Ticket, key: p.Key, start: p.StartTime, end: p.EndTime}
	if st.start.IsZero() {
		st.start = p.AuthTime
	}
	m.mu.Lock()
	if m.tickets == nil {
		m.tickets = map[string]serviceTicket{}
	}
	m.tickets[name] = st
	m.mu.Unlock()
	return st, nil
}
