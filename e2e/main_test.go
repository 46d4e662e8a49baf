package e2e

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/kmirror/kmirror/internal/oauthtest"
)

// Clusters shared by every test of the package, started by TestMain.
var (
	// source is a three-broker cluster with a PLAINTEXT listener, and the
	// PROXIED listener behind a fault proxy per broker (faults_test.go).
	source *kafkatest.Cluster
	// destination is a one-broker cluster with a PLAINTEXT listener, and
	// the PROXIED listener behind a fault proxy.
	destination *kafkatest.Cluster
	// secured is a one-broker cluster with every listener (PLAINTEXT,
	// SASL_PLAINTEXT, SSL with client certificates required, SASL_SSL), the
	// StandardAuthorizer and alice as a super user.
	secured *kafkatest.Cluster
)

// aclDestination is a one-broker cluster with SASL_PLAINTEXT and the
// StandardAuthorizer, alice a super user: the destination of the ACL sync
// tests, whose source is secured (ACLs need an authorizer on both sides).
// Few tests need it, so it starts on first use (aclDestinationCluster) and
// runMain closes it.
var (
	aclDestinationOnce sync.Once
	aclDestination     *kafkatest.Cluster
	aclDestinationErr  error
)

// aclDestinationCluster starts aclDestination on first use and returns it.
func aclDestinationCluster(t testing.TB) *kafkatest.Cluster {
	t.Helper()
	aclDestinationOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		aclDestination, aclDestinationErr = kafkatest.Start(ctx, kafkatest.Options{
			Name:       "acldestination",
			Brokers:    1,
			SASL:       &kafkatest.SASLOptions{Mechanisms: []kafkatest.Mechanism{kafkatest.ScramSHA512}, Users: map[string]string{"alice": securedUsers["alice"]}},
			Authorizer: true,
			SuperUsers: []string{"User:alice"},
		})
	})
	if aclDestinationErr != nil {
		t.Fatalf("starting the ACL destination cluster: %v", aclDestinationErr)
	}
	return aclDestination
}

// idp is the OAuth authorization server of the secured cluster's
// OAUTHBEARER listener (started by runMain before the clusters): it issues
// short-lived tokens to oauthClient, whose principal is a super user there.
var idp *oauthtest.Server

// The OAuth client kmirror logs in as, and the SCRAM user whose password the
// rotation test changes (created by that test; a super user from the start).
const (
	oauthClient, oauthSecret = "kmirror-oauth", "oauth-secret"
	rotatingUser             = "rotator"
)

// reauth is how long a SCRAM-SHA-512 or OAUTHBEARER session on the secured
// cluster's SASL listeners lasts before the client must log in again
// (connections.max.reauth.ms): credentials that change or expire are
// noticed within it.
const reauth = 6 * time.Second

// Users of the secured cluster. alice is a super user; bob and carol have no
// ACLs until a test grants them some.
var securedUsers = map[string]string{
	"alice": "alice-secret",
	"bob":   "bob-secret",
	"carol": "carol-secret",
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	began := time.Now()
	var err error
	if idp, err = oauthtest.New(20*time.Second, map[string]string{oauthClient: oauthSecret}); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer idp.Close()
	reauthMs := strconv.Itoa(int(reauth.Milliseconds()))
	specs := []struct {
		into **kafkatest.Cluster
		opts kafkatest.Options
	}{
		{&source, kafkatest.Options{Name: "source", Brokers: 3, FaultProxies: true}},
		{&destination, kafkatest.Options{Name: "destination", Brokers: 1, FaultProxies: true}},
		{&secured, kafkatest.Options{
			Name:    "secured",
			Brokers: 1,
			SASL: &kafkatest.SASLOptions{Users: securedUsers,
				Mechanisms: append(slices.Clone(kafkatest.AllMechanisms), kafkatest.OAuthBearer),
				OAuth:      &kafkatest.OAuthOptions{JWKSURL: idp.JWKSURL(), Audience: idp.Audience, Issuer: idp.Issuer}},
			TLS:        &kafkatest.TLSOptions{ClientAuth: true, ClientCerts: []string{"alice", "bob"}},
			Authorizer: true,
			SuperUsers: []string{"User:alice", "User:" + oauthClient, "User:" + rotatingUser},
			BrokerConfig: map[string]string{
				"listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms":   reauthMs,
				"listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms": reauthMs,
				"listener.name.sasl_ssl.scram-sha-512.connections.max.reauth.ms":       reauthMs,
			},
		}},
	}
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, s := range specs {
		wg.Go(func() {
			c, err := kafkatest.Start(ctx, s.opts)
			*s.into, errs[i] = c, err
		})
	}
	wg.Wait()
	defer func() {
		for _, s := range specs {
			if c := *s.into; c != nil {
				if err := c.Close(); err != nil {
					log.Printf("e2e: %v", err)
				}
			}
		}
	}()
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: starting the test clusters failed: %v\n", err)
		return 1
	}
	log.Printf("e2e: Apache Kafka %s: clusters source (3 brokers), destination (1), secured (1) up in %s",
		source.Version(), time.Since(began).Round(100*time.Millisecond))
	defer func() {
		if aclDestination != nil {
			if err := aclDestination.Close(); err != nil {
				log.Printf("e2e: %v", err)
			}
		}
	}()
	return m.Run()
}
