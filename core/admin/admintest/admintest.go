// Package admintest holds test helpers for the admin API and its clients: a
// fake Controller that records calls and answers what the test sets, and a
// throw-away PKI (a CA, a server certificate for 127.0.0.1 and client
// certificates) written as PEM files.
package admintest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/core/admin"
)

// Call is one call the fake controller received.
type Call struct {
	Op      string // "pause", "resume", "stop", "start", "failover"
	Mirror  string
	Topics  []string
	Exclude []string      // start only
	Wait    time.Duration // failover only
	// Settings: create only.
	Settings string
	// AllowRecreate and SideTopicSuffix: failback only.
	AllowRecreate   bool
	SideTopicSuffix string
}

// Controller is a fake admin.Controller. Set its fields before the server
// starts, or through Update afterwards; read Calls to see what was asked.
type Controller struct {
	mu sync.Mutex
	// StatusValue is what Status returns.
	StatusValue admin.Status
	// Err, when set, is returned by every operation.
	Err error
	// Block makes every operation wait for its context to end and return
	// the context's error.
	Block bool
	// Result and FailoverResult are returned by successful operations;
	// their Mirror field is set to the mirror asked for.
	Result         admin.OpResult
	FailoverResult admin.FailoverResult
	FailbackResult admin.FailbackResult
	calls          []Call
}

// Update changes the controller's fields under its lock; use it once the
// controller serves requests.
func (c *Controller) Update(f func(c *Controller)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(c)
}

// Calls returns the operations received so far.
func (c *Controller) Calls() []Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Call(nil), c.calls...)
}

// Status implements admin.Controller.
func (c *Controller) Status() admin.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.StatusValue
}

func (c *Controller) op(ctx context.Context, call Call) (admin.OpResult, error) {
	c.mu.Lock()
	c.calls = append(c.calls, call)
	res, err, block := c.Result, c.Err, c.Block
	c.mu.Unlock()
	if block {
		<-ctx.Done()
		return admin.OpResult{}, ctx.Err()
	}
	if err != nil {
		return admin.OpResult{}, err
	}
	res.Mirror = call.Mirror
	return res, nil
}

// Pause implements admin.Controller.
func (c *Controller) Pause(ctx context.Context, m string, topics []string) (admin.OpResult, error) {
	return c.op(ctx, Call{Op: "pause", Mirror: m, Topics: topics})
}

// Resume implements admin.Controller.
func (c *Controller) Resume(ctx context.Context, m string, topics []string) (admin.OpResult, error) {
	return c.op(ctx, Call{Op: "resume", Mirror: m, Topics: topics})
}

// StopTopics implements admin.Controller.
func (c *Controller) StopTopics(ctx context.Context, m string, topics []string) (admin.OpResult, error) {
	return c.op(ctx, Call{Op: "stop", Mirror: m, Topics: topics})
}

// StartTopics implements admin.Controller.
func (c *Controller) StartTopics(ctx context.Context, m string, topics, exclude []string) (admin.OpResult, error) {
	return c.op(ctx, Call{Op: "start", Mirror: m, Topics: topics, Exclude: exclude})
}

// Failover implements admin.Controller.
func (c *Controller) Failover(ctx context.Context, req admin.FailoverOrder) (admin.FailoverResult, error) {
	if _, err := c.op(ctx, Call{Op: "failover", Mirror: req.Mirror, Topics: req.Topics, Wait: req.WaitForCatchUp}); err != nil {
		return admin.FailoverResult{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	res := c.FailoverResult
	res.Mirror = req.Mirror
	return res, nil
}

// CreateMirror implements admin.Controller.
func (c *Controller) CreateMirror(ctx context.Context, m string, settings []byte) (admin.OpResult, error) {
	return c.op(ctx, Call{Op: "create", Mirror: m, Settings: string(settings)})
}

// DeleteMirror implements admin.Controller.
func (c *Controller) DeleteMirror(ctx context.Context, m string) (admin.OpResult, error) {
	return c.op(ctx, Call{Op: "delete", Mirror: m})
}

// Failback implements admin.Controller.
func (c *Controller) Failback(ctx context.Context, req admin.FailbackOrder) (admin.FailbackResult, error) {
	if _, err := c.op(ctx, Call{Op: "failback", Mirror: req.Mirror, AllowRecreate: req.AllowRecreate, SideTopicSuffix: req.SideTopicSuffix}); err != nil {
		return admin.FailbackResult{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	res := c.FailbackResult
	res.Of = req.Mirror
	return res, nil
}

// PKI is a CA with a server certificate for 127.0.0.1 and localhost, and
// files for each piece, in Dir.
type PKI struct {
	Dir        string
	CAFile     string // the CA certificate
	ServerCert string // server certificate (127.0.0.1, localhost)
	ServerKey  string
	ca         *x509.Certificate
	caKey      *ecdsa.PrivateKey
	t          testing.TB
	serial     int64
}

// NewPKI creates a CA and a server certificate in a temporary directory.
func NewPKI(t testing.TB, caName string) *PKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: caName},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{Dir: t.TempDir(), ca: ca, caKey: key, t: t, serial: 1}
	p.CAFile = p.write("ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	p.ServerCert, p.ServerKey = p.issue("server", "kmirror-admin", x509.ExtKeyUsageServerAuth)
	return p
}

// ClientCert issues a client certificate with subject CN cn and returns the
// certificate and key files.
func (p *PKI) ClientCert(cn string) (certFile, keyFile string) {
	p.t.Helper()
	return p.issue("client-"+cn, cn, x509.ExtKeyUsageClientAuth)
}

func (p *PKI) issue(file, cn string, usage x509.ExtKeyUsage) (string, string) {
	p.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		p.t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		p.t.Fatal(err)
	}
	return p.write(file+".pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		p.write(file+"-key.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
}

func (p *PKI) write(name string, data []byte) string {
	p.t.Helper()
	path := filepath.Join(p.Dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		p.t.Fatal(err)
	}
	return path
}
