package auth

import (
	"context"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// tlsKeys are the cluster keys of a TLS client of c's listener l that
// trusts the cluster's CA and, with cert, presents kmirror's certificate.
func tlsKeys(c *kafkatest.Cluster, l kafkatest.Listener, cert bool) []string {
	keys := []string{
		"bootstrap.servers: " + c.BootstrapServers(l),
		"security.protocol: " + string(l),
		"ssl.truststore.location: " + c.CAFile(),
	}
	if cert {
		keys = append(keys, "ssl.keystore.location: "+c.ClientCert(certName).KeystoreFile)
	}
	return keys
}

// kmirror mirrors record by record with each other mechanism on either
// side: a PLAIN source over SASL_SSL to a destination that takes its client
// certificate, and a source that takes its client certificate to a
// SCRAM-SHA-256 destination whose password comes from a file. Neither the
// password nor the client's private key reaches the daemon's log.
func TestMirrorWithPasswordsAndClientCertificates(t *testing.T) {
	t.Parallel()
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte(userPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		topic         string
		source, dest  []string
		sourceSecrets bool // the source is given the password
	}{
		{
			name:  "PLAIN source, mTLS destination",
			topic: "auth-plain-mtls",
			source: append(tlsKeys(source, kafkatest.SASLSSL, false),
				"sasl.mechanism: PLAIN", "sasl.username: "+user, "sasl.password: "+userPassword),
			dest: tlsKeys(destination, kafkatest.SSL, true),
		},
		{
			name:   "mTLS source, SCRAM-SHA-256 destination",
			topic:  "auth-mtls-scram",
			source: tlsKeys(source, kafkatest.SSL, true),
			dest: append(tlsKeys(destination, kafkatest.SASLSSL, false),
				"sasl.mechanism: SCRAM-SHA-256", "sasl.username: "+user, "sasl.password.file: "+pwFile),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			const partitions = 2
			createTopic(t, ctx, tc.topic, partitions)
			produced := produce(t, ctx, tc.topic, partitions, 1)
			d := startKmirror(t, "destination:\n  "+strings.Join(tc.dest, "\n  ")+"\n"+
				"mirrors:\n  - name: m\n    "+strings.Join(tc.source, "\n    ")+"\n    mirror.topics.include: "+tc.topic+"\n")
			produced += produce(t, ctx, tc.topic, partitions, 2)
			d.waitMirrored(t, ctx, tc.topic, partitions)
			if n := verifyTopic(t, ctx, tc.topic, partitions); n != produced {
				t.Fatalf("the source holds %d records, %d were produced", n, produced)
			}
			t.Logf("%s: %d records identical on both clusters", tc.topic, produced)
			checkNoPasswordOrKey(t, d.log())
		})
	}
}

// checkNoPasswordOrKey fails the test if the daemon's log holds the
// password or any line of the client certificate's private key.
func checkNoPasswordOrKey(t testing.TB, logged string) {
	t.Helper()
	if logged == "" {
		t.Fatal("the daemon logged nothing: the check would prove nothing")
	}
	if strings.Contains(logged, userPassword) {
		t.Fatal("the SASL password appears in kmirror's log")
	}
	for _, c := range []*kafkatest.Cluster{source, destination} {
		block, _ := pem.Decode(c.ClientCert(certName).KeyPEM)
		if block == nil {
			t.Fatal("the client key is not PEM")
		}
		for _, line := range strings.Split(string(c.ClientCert(certName).KeyPEM), "\n") {
			if len(line) > 16 && !strings.HasPrefix(line, "-----") && strings.Contains(logged, line) {
				t.Fatalf("a line of the client's private key (of cluster %s) appears in kmirror's log", c.Name())
			}
		}
	}
}
