package doctor

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// dns resolves every bootstrap host; it returns the addresses to dial
// (host:port), or false when none resolves.
func (r *clusterRun) dns(ctx context.Context) ([]string, bool) {
	var ok, bad []string
	var addrs []string
	for _, hp := range r.cl.BootstrapServers {
		host, port, err := net.SplitHostPort(hp)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", hp, err))
			continue
		}
		if net.ParseIP(host) != nil {
			addrs = append(addrs, hp)
			ok = append(ok, host)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, r.opts.StepTimeout)
		ips, err := net.DefaultResolver.LookupHost(cctx, host)
		cancel()
		if err != nil || len(ips) == 0 {
			bad = append(bad, fmt.Sprintf("%s does not resolve (%v)", host, dnsReason(err)))
			continue
		}
		addrs = append(addrs, net.JoinHostPort(host, port))
		ok = append(ok, fmt.Sprintf("%s → %s", host, strings.Join(ips, ",")))
	}
	if len(bad) > 0 {
		r.fail(StepDNS, strings.Join(bad, "; "), "check the host names in "+r.key("bootstrap.servers")+" and this host's DNS (resolv.conf, /etc/hosts)")
	} else {
		r.pass(StepDNS, strings.Join(ok, "; "))
	}
	return addrs, len(addrs) > 0
}

func dnsReason(err error) string {
	var de *net.DNSError
	if errors.As(err, &de) {
		if de.IsNotFound {
			return "no such host"
		}
		return de.Err
	}
	if err == nil {
		return "no address"
	}
	return err.Error()
}

// tcp connects to every address; it returns the addresses that answered.
func (r *clusterRun) tcp(ctx context.Context, addrs []string) []string {
	var up, down []string
	for _, a := range addrs {
		d := net.Dialer{Timeout: r.opts.StepTimeout}
		c, err := d.DialContext(ctx, "tcp", a)
		if err != nil {
			down = append(down, fmt.Sprintf("%s: %s", a, dialReason(err)))
			continue
		}
		_ = c.Close()
		up = append(up, a)
	}
	switch {
	case len(down) > 0:
		r.fail(StepTCP, "cannot connect to "+strings.Join(down, "; "),
			"check that a broker listens on that port (the listener of "+r.key("security.protocol")+" "+r.report.Security+"), and firewalls between this host and the cluster; fix or remove the address in "+r.key("bootstrap.servers"))
	default:
		r.pass(StepTCP, "connected to "+strings.Join(up, ", "))
	}
	return up
}

// dialReason is a dial error without Go's "dial tcp" prefix.
func dialReason(err error) string {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}

// tlsChecks handshakes with the first reachable broker and checks the
// certificate chain against the configured truststore, the host name (when
// ssl.endpoint.identification.algorithm is https) and the expiry. It
// reports whether the client can go on.
func (r *clusterRun) tlsChecks(ctx context.Context, addr string) bool {
	t, err := r.cl.TLS()
	if err != nil {
		r.fail(StepTLSChain, "the TLS settings cannot be loaded: "+err.Error(), "fix the ssl.* keys of this cluster (see docs/configuration.md, TLS)")
		return false
	}
	host, _, _ := net.SplitHostPort(addr)
	cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: t.MinVersion, MaxVersion: t.MaxVersion, ServerName: host} //nolint:gosec // verified below, step by step
	if net.ParseIP(host) != nil {
		cfg.ServerName = ""
	}
	if t.Certificate != nil {
		cfg.Certificates = []tls.Certificate{*t.Certificate}
	}
	cctx, cancel := context.WithTimeout(ctx, r.opts.StepTimeout)
	defer cancel()
	conn, err := (&tls.Dialer{Config: cfg, NetDialer: &net.Dialer{Timeout: r.opts.StepTimeout}}).DialContext(cctx, "tcp", addr)
	if err != nil {
		r.fail(StepTLSChain, fmt.Sprintf("TLS handshake with %s failed: %s", addr, dialReason(err)),
			"is this a TLS listener? "+r.key("security.protocol")+" "+r.report.Security+" needs the port of the brokers' SSL or SASL_SSL listener; a broker that requires client certificates needs ssl.keystore.location")
		return false
	}
	state := conn.(*tls.Conn).ConnectionState()
	_ = conn.Close()
	if len(state.PeerCertificates) == 0 {
		r.fail(StepTLSChain, addr+" sent no certificate", "configure a certificate on the brokers' TLS listener")
		return false
	}
	leaf := state.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range state.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	now := r.opts.Now()
	ok := true
	_, verr := leaf.Verify(x509.VerifyOptions{Roots: t.Roots, Intermediates: inter, CurrentTime: now})
	var ua x509.UnknownAuthorityError
	var ie x509.CertificateInvalidError
	store := "the system's trusted CAs (no truststore configured)"
	if t.Roots != nil {
		store = r.key("ssl.truststore.location")
	}
	switch {
	case verr == nil:
		r.pass(StepTLSChain, fmt.Sprintf("%s: certificate of %s, issued by %s, trusted", addr, subject(leaf), issuer(leaf)))
	case errors.As(verr, &ua):
		ok = false
		r.fail(StepTLSChain, fmt.Sprintf("%s: the certificate of %s is signed by %s, which %s does not trust", addr, subject(leaf), issuer(leaf), store),
			"set "+r.key("ssl.truststore.location")+" to a PEM file of the CA that signed the brokers' certificates (docs/configuration.md says how to convert a JKS truststore)")
	case errors.As(verr, &ie) && ie.Reason == x509.Expired:
		// Reported by the expiry step below.
	default:
		ok = false
		r.fail(StepTLSChain, fmt.Sprintf("%s: the certificate of %s is not valid: %v", addr, subject(leaf), verr), "have the brokers' certificate reissued by a CA in "+store)
	}
	switch {
	case !t.VerifyHostname:
		r.skip(StepTLSHostname, r.key("ssl.endpoint.identification.algorithm")+" is empty: the host name is not checked (only the chain)")
	case leaf.VerifyHostname(host) == nil:
		r.pass(StepTLSHostname, fmt.Sprintf("the certificate names %s", host))
	default:
		ok = false
		r.fail(StepTLSHostname, fmt.Sprintf("the certificate of %s does not name %s (it names %s)", addr, host, certNames(leaf)),
			"use a name the certificate holds in "+r.key("bootstrap.servers")+", or have the certificate reissued with "+host+" in its subject alternative names")
	}
	days := int(leaf.NotAfter.Sub(now).Hours() / 24)
	switch {
	case now.After(leaf.NotAfter):
		ok = false
		r.fail(StepTLSExpiry, fmt.Sprintf("the certificate of %s expired on %s (%d days ago)", addr, leaf.NotAfter.UTC().Format(time.DateOnly), -days),
			"renew the brokers' certificate")
	case now.Before(leaf.NotBefore):
		ok = false
		r.fail(StepTLSExpiry, fmt.Sprintf("the certificate of %s is valid only from %s", addr, leaf.NotBefore.UTC().Format(time.RFC3339)),
			"check this host's clock, or the certificate's validity")
	case leaf.NotAfter.Sub(now) < r.opts.ExpiryWarning:
		r.warn(StepTLSExpiry, fmt.Sprintf("the certificate of %s expires in %d day(s), on %s", addr, days, leaf.NotAfter.UTC().Format(time.DateOnly)),
			"renew the brokers' certificate before then")
	default:
		r.pass(StepTLSExpiry, fmt.Sprintf("the certificate expires in %d days, on %s", days, leaf.NotAfter.UTC().Format(time.DateOnly)))
	}
	return ok
}

func subject(c *x509.Certificate) string {
	if c.Subject.CommonName != "" {
		return "CN=" + c.Subject.CommonName
	}
	return c.Subject.String()
}

func issuer(c *x509.Certificate) string {
	if c.Issuer.CommonName != "" {
		return "CN=" + c.Issuer.CommonName
	}
	return c.Issuer.String()
}

// certNames lists the names a certificate is valid for.
func certNames(c *x509.Certificate) string {
	names := append([]string(nil), c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 {
		return "no subject alternative name"
	}
	return strings.Join(names, ", ")
}
