package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// What TestMain starts for every test.
var (
	kdcSrv              *kdc
	source, destination *kafkatest.Cluster
	// clientKeytab holds kmirror's current keys; staleKeytab the keys
	// kmirror had before the last ktadd, which the KDC no longer accepts.
	clientKeytab, staleKeytab string
	// userPassword is the PLAIN and SCRAM-SHA-256 password of user on
	// both clusters.
	userPassword string
)

// user is kmirror's PLAIN and SCRAM user; certName names the client
// certificate both clusters issue it (CN=kmirror, User:kmirror).
const (
	user     = "alice"
	certName = "kmirror"
)

// clientPrincipal is the principal kmirror logs in as: User:kmirror to the
// brokers (the default sasl.kerberos.principal.to.local.rules).
const clientPrincipal = "kmirror@" + realm

// reauth is the brokers' connections.max.reauth.ms: a GSSAPI session logs
// in again within it, so a changed keytab is used (or fails) that soon.
const reauth = 5 * time.Second

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	kdcSrv, err = startKDC(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "auth: starting the KDC: %v\n", err)
		return 1
	}
	defer kdcSrv.close()
	brokerKeytab, err := principals(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "auth: %v\n", err)
		return 1
	}
	pw := make([]byte, 12)
	_, _ = rand.Read(pw)
	userPassword = "pw-" + hex.EncodeToString(pw)
	// Every listener: PLAINTEXT (the tests' own clients), SASL_PLAINTEXT
	// and SASL_SSL with GSSAPI, PLAIN and SCRAM-SHA-256, and SSL that
	// requires a client certificate.
	opts := func(name string) kafkatest.Options {
		return kafkatest.Options{
			Name: name,
			SASL: &kafkatest.SASLOptions{
				Mechanisms: []kafkatest.Mechanism{kafkatest.GSSAPI, kafkatest.Plain, kafkatest.ScramSHA256},
				Kerberos:   &kafkatest.KerberosOptions{Krb5Conf: kdcSrv.krb5conf, Keytab: brokerKeytab, Principal: "kafka/127.0.0.1@" + realm},
				Users:      map[string]string{user: userPassword},
			},
			TLS:          &kafkatest.TLSOptions{ClientAuth: true, ClientCerts: []string{certName}},
			BrokerConfig: map[string]string{"connections.max.reauth.ms": strconv.Itoa(int(reauth.Milliseconds()))},
		}
	}
	// Both clusters start at once: a JVM takes a while on a busy machine.
	var wg sync.WaitGroup
	var srcErr, dstErr error
	wg.Go(func() { source, srcErr = kafkatest.Start(ctx, opts("krb-source")) })
	wg.Go(func() { destination, dstErr = kafkatest.Start(ctx, opts("krb-destination")) })
	wg.Wait()
	for _, c := range []*kafkatest.Cluster{source, destination} {
		if c != nil {
			defer func() {
				if err := c.Close(); err != nil {
					log.Printf("auth: %v", err)
				}
			}()
		}
	}
	if srcErr != nil || dstErr != nil {
		fmt.Fprintf(os.Stderr, "auth: starting the clusters: source: %v; destination: %v\n", srcErr, dstErr)
		return 1
	}
	log.Printf("auth: KDC of %s and two Apache Kafka %s clusters with GSSAPI, PLAIN, SCRAM-SHA-256 and mTLS listeners", realm, source.Version())
	return m.Run()
}

// principals creates the brokers' service principal and kmirror's, and
// their keytabs; it returns the brokers'.
func principals(ctx context.Context) (brokerKeytab string, err error) {
	for _, p := range []string{"kafka/127.0.0.1", "kmirror"} {
		if err := kdcSrv.addPrincipal(ctx, p); err != nil {
			return "", err
		}
	}
	if brokerKeytab, err = kdcSrv.keytab(ctx, "kafka/127.0.0.1", "kafka.keytab"); err != nil {
		return "", err
	}
	// The stale keytab first: the second ktadd gives kmirror new keys.
	if staleKeytab, err = kdcSrv.keytab(ctx, "kmirror", "kmirror-stale.keytab"); err != nil {
		return "", err
	}
	if clientKeytab, err = kdcSrv.keytab(ctx, "kmirror", "kmirror.keytab"); err != nil {
		return "", err
	}
	return brokerKeytab, nil
}
