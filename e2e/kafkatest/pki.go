package kafkatest

import "github.com/kmirror/kmirror/internal/testpki"

// CA is a certificate authority generated for tests (internal/testpki's). A
// cluster with TLS has its own; tests can make another one to prove that
// certificates from a foreign CA are refused.
type CA = testpki.CA

// Cert is a certificate with its private key, issued by a CA.
type Cert = testpki.Cert

// NewCA generates a CA with the given common name.
func NewCA(name string) (*CA, error) { return testpki.NewCA(name) }
