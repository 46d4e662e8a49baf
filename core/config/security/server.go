package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/core/config/value"
)

// ServerTLS resolves the admin API's listener keys (admin.tls.cert.file,
// admin.tls.key.file, admin.tls.client.ca.file) into its TLS configuration,
// or nil when certFile is empty. With clientCAFile, client certificates are
// verified against it when given (ClientAuth is VerifyClientCertIfGiven).
// Every problem names its key; none quotes key material.
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, []Problem) {
	var probs []Problem
	switch {
	case certFile != "" && keyFile == "":
		probs = append(probs, Problem{"admin.tls.key.file", "required with admin.tls.cert.file: the private key of the admin API's certificate"})
	case certFile == "" && keyFile != "":
		probs = append(probs, Problem{"admin.tls.cert.file", "required with admin.tls.key.file: the admin API's certificate chain"})
	}
	if clientCAFile != "" && certFile == "" {
		probs = append(probs, Problem{"admin.tls.client.ca.file", "needs admin.tls.cert.file and admin.tls.key.file: client certificates are verified only over TLS"})
	}
	if len(probs) > 0 || certFile == "" {
		return nil, probs
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	certPEM, err := value.ReadFile(certFile, value.MaxPEMFileBytes)
	if err != nil {
		probs = append(probs, Problem{"admin.tls.cert.file", fmt.Sprintf("cannot read the certificate: %v", err)})
	}
	keyPEM, kerr := value.ReadFile(keyFile, value.MaxPEMFileBytes)
	if kerr != nil {
		probs = append(probs, Problem{"admin.tls.key.file", fmt.Sprintf("cannot read the private key: %v", kerr)})
	}
	if err == nil && kerr == nil {
		switch certs, perr := parseCerts(certPEM); {
		case perr != nil:
			probs = append(probs, Problem{"admin.tls.cert.file", fmt.Sprintf("file %s: %v", certFile, perr)})
		case len(certs) == 0:
			probs = append(probs, Problem{"admin.tls.cert.file", "file " + certFile + " holds no PEM certificate (expected -----BEGIN CERTIFICATE----- blocks)"})
		}
		switch findKey(keyPEM) {
		case keyNone:
			probs = append(probs, Problem{"admin.tls.key.file", "file " + keyFile + " holds no PEM private key (expected a -----BEGIN PRIVATE KEY----- block)"})
		case keyEncrypted:
			probs = append(probs, Problem{"admin.tls.key.file", "file " + keyFile + " holds an encrypted private key, which is not supported: decrypt it (openssl pkey -in key.pem -out key-plain.pem) and protect the file with permissions"})
		}
		if len(probs) == 0 {
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				// The error of X509KeyPair never quotes key material.
				probs = append(probs, Problem{"admin.tls.key.file", fmt.Sprintf("certificate and private key do not form a pair: %v", err)})
			} else {
				tc.Certificates = []tls.Certificate{pair}
			}
		}
	}
	if clientCAFile != "" {
		pool, p := loadCAFile("admin.tls.client.ca.file", clientCAFile)
		probs = append(probs, p...)
		tc.ClientCAs = pool
		tc.ClientAuth = tls.VerifyClientCertIfGiven
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return tc, nil
}

// LoadCertPool reads a PEM file of CA certificates (for example the CA a
// `kmirror` CLI uses to verify the admin API).
func LoadCertPool(path string) (*x509.CertPool, error) {
	pool, probs := loadCAFile("", path)
	if len(probs) > 0 {
		return nil, errors.New(probs[0].Reason)
	}
	return pool, nil
}

func loadCAFile(key, path string) (*x509.CertPool, []Problem) {
	data, err := value.ReadFile(path, value.MaxPEMFileBytes)
	if err != nil {
		return nil, []Problem{{key, fmt.Sprintf("cannot read the CA file: %v", err)}}
	}
	certs, err := parseCerts(data)
	if err != nil {
		return nil, []Problem{{key, fmt.Sprintf("file %s: %v", path, err)}}
	}
	if len(certs) == 0 {
		return nil, []Problem{{key, "file " + path + " holds no PEM certificate (expected -----BEGIN CERTIFICATE----- blocks)"}}
	}
	pool := x509.NewCertPool()
	for _, ct := range certs {
		pool.AddCert(ct)
	}
	return pool, nil
}
