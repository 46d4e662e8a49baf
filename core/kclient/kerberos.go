package kclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"

	krbclient "github.com/jcmturner/gokrb5/v8/client"
	krbconfig "github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/krberror"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/kerberos"

	"github.com/kmirror/kmirror/core/config/security"
	"github.com/kmirror/kmirror/core/config/value"
	"github.com/kmirror/kmirror/sdk/auth"
)

// ErrKerberosLogin is wrapped by the error of a GSSAPI authentication whose
// login to the KDC failed: a keytab without the principal's current keys, a
// principal the KDC does not know, an unreachable KDC.
var ErrKerberosLogin = errors.New("kerberos login failed")

// gssapi is the GSSAPI mechanism of one client. It logs in to the KDC with
// the keytab at the first authentication and keeps the Kerberos client (its
// ticket-granting ticket, and the service tickets it got) for the next
// ones; gokrb5 renews the TGT from the keytab before it expires. The keytab
// and krb5.conf are read at every authentication: when either changed, the
// next one logs in afresh with them (a rotated keytab is used without a
// restart). Close, which kgo calls when its client closes, destroys the
// Kerberos client and so ends gokrb5's renewal goroutine.
type gssapi struct {
	k   security.Kerberos
	req auth.Request

	mu     sync.Mutex
	client *krbclient.Client
	sum    [sha256.Size]byte // of the keytab and krb5.conf client logged in with
}

var _ sasl.ClosingMechanism = (*gssapi)(nil)

func newGSSAPI(k security.Kerberos, req auth.Request) *gssapi { return &gssapi{k: k, req: req} }

// Name implements sasl.Mechanism.
func (g *gssapi) Name() string { return security.MechanismGSSAPI }

// Authenticate implements sasl.Mechanism: the GSS-API exchange of franz-go's
// kerberos package with the logged-in client, for a ticket to
// <service>/<host of the broker>.
func (g *gssapi) Authenticate(ctx context.Context, host string) (sasl.Session, []byte, error) {
	c, err := g.login()
	if err != nil {
		return nil, nil, err
	}
	m := kerberos.Kerberos(func(context.Context) (kerberos.Auth, error) {
		return kerberos.Auth{Client: c, Service: g.k.ServiceName, PersistAfterAuth: true}, nil
	})
	s, first, err := m.Authenticate(ctx, host)
	if err != nil {
		svc := g.k.ServiceName + "/" + hostOnly(host)
		return nil, nil, rejected(fmt.Errorf("%v: GSSAPI as %s: no ticket for the broker's principal %s (it must exist in the KDC, and sasl.kerberos.service.name name its first part): %w", g.req, g.k.Principal, svc, err), err)
	}
	return s, first, nil
}

// Close implements sasl.ClosingMechanism.
func (g *gssapi) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.client != nil {
		g.client.Destroy()
		g.client = nil
	}
}

// login returns the logged-in Kerberos client, logging in first when there
// is none or the files changed since. A failed login keeps no client, so
// the next authentication tries again.
func (g *gssapi) login() (*krbclient.Client, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%v: GSSAPI login as %s: %w: %s", g.req, g.k.Principal, ErrKerberosLogin, fmt.Sprintf(format, args...))
	}
	// The keytab's bytes never reach an error: only its path and what
	// gokrb5 says of its structure.
	ktBytes, err := value.ReadFile(g.k.KeytabFile, security.MaxKeytabBytes)
	if err != nil {
		return nil, fail("sasl.kerberos.keytab: cannot read the keytab: %v", err)
	}
	confBytes, err := value.ReadFile(g.k.Krb5ConfFile, value.MaxPEMFileBytes)
	if err != nil {
		return nil, fail("sasl.kerberos.krb5.conf: cannot read the Kerberos configuration: %v", err)
	}
	h := sha256.New()
	h.Write(ktBytes)
	h.Write([]byte{0})
	h.Write(confBytes)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])

	g.mu.Lock()
	defer g.mu.Unlock()
	if g.client != nil && sum == g.sum {
		return g.client, nil
	}
	kt := keytab.New()
	if err := kt.Unmarshal(ktBytes); err != nil {
		return nil, fail("sasl.kerberos.keytab: %s is not a valid keytab", g.k.KeytabFile)
	}
	conf, err := krbconfig.NewFromReader(bytes.NewReader(confBytes))
	var unsupported krbconfig.UnsupportedDirective
	if err != nil && !errors.As(err, &unsupported) {
		return nil, fail("sasl.kerberos.krb5.conf: %s: %v", g.k.Krb5ConfFile, err)
	}
	user, realm := splitPrincipal(g.k.Principal)
	if realm == "" {
		realm = conf.LibDefaults.DefaultRealm
	}
	if realm == "" {
		return nil, fail("sasl.kerberos.principal has no realm and %s sets no default_realm: write the principal as user@REALM", g.k.Krb5ConfFile)
	}
	// gokrb5 does not speak FAST; Active Directory needs it off, MIT
	// KDCs do not mind.
	c := krbclient.NewWithKeytab(user, realm, kt, conf, krbclient.DisablePAFXFAST(true))
	if err := c.Login(); err != nil {
		c.Destroy()
		return nil, rejected(fail("%v (check that %s holds the principal's current keys: a new ktadd changes them, and that the KDC of realm %s in %s answers)", err, g.k.KeytabFile, realm, g.k.Krb5ConfFile), err)
	}
	if g.client != nil {
		g.client.Destroy()
	}
	g.client, g.sum = c, sum
	return c, nil
}

// rejected marks err as a refused authentication (errors.Is
// kerr.SaslAuthenticationFailed, as a broker's refusal is) unless cause,
// gokrb5's error, is a network failure: a KDC that answered no (wrong keys,
// unknown principal, clock skew) needs an operator, so the fetcher fails the
// partitions with the reason; a KDC that did not answer is retried like an
// unreachable broker.
func rejected(err, cause error) error {
	var ke krberror.Krberror
	if errors.As(cause, &ke) && ke.RootCause == krberror.NetworkingError {
		return err
	}
	return authRejected{err}
}

// authRejected is a Kerberos failure that counts as a SASL authentication
// failure; its text is the wrapped error's alone.
type authRejected struct{ error }

func (e authRejected) Unwrap() error { return e.error }

// Is makes errors.Is(err, kerr.SaslAuthenticationFailed) true.
func (e authRejected) Is(target error) bool { return target == kerr.SaslAuthenticationFailed }

// splitPrincipal splits user[/instance]@REALM at its last '@'.
func splitPrincipal(p string) (user, realm string) {
	if i := strings.LastIndexByte(p, '@'); i >= 0 {
		return p[:i], p[i+1:]
	}
	return p, ""
}

// hostOnly strips the port of a broker address.
func hostOnly(hostport string) string {
	if i := strings.LastIndexByte(hostport, ':'); i >= 0 && !strings.HasSuffix(hostport, "]") {
		return strings.Trim(hostport[:i], "[]")
	}
	return hostport
}
