package auth

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// gssapiKeys are the cluster keys of a GSSAPI client of c that logs in as
// kmirror with the keytab at path, as flat sasl.kerberos.* keys (jaas
// false) or as the Krb5LoginModule line a Java client would use.
func gssapiKeys(c *kafkatest.Cluster, path string, jaas bool, indent string) string {
	keys := []string{
		"bootstrap.servers: " + c.BootstrapServers(kafkatest.SASLPlaintext),
		"security.protocol: SASL_PLAINTEXT",
		"sasl.mechanism: GSSAPI",
		"sasl.kerberos.krb5.conf: " + kdcSrv.krb5conf,
	}
	if jaas {
		keys = append(keys, fmt.Sprintf(`sasl.jaas.config: 'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="%s" principal="%s" serviceName="kafka";'`, path, clientPrincipal))
	} else {
		keys = append(keys, "sasl.kerberos.service.name: kafka", "sasl.kerberos.principal: "+clientPrincipal, "sasl.kerberos.keytab: "+path)
	}
	return indent + strings.Join(keys, "\n"+indent) + "\n"
}

// copyKeytab copies the keytab at from to name in dir, replacing it
// atomically (as an operator's rotation would), and returns its path.
func copyKeytab(t testing.TB, from, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path+".new", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	return path
}

// createTopic creates topic on the source with partitions partitions.
func createTopic(t testing.TB, ctx context.Context, topic string, partitions int32) {
	t.Helper()
	resp, err := adminOf(t, source).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s on the source: %v", topic, err)
	}
}

// produce writes round's records to every partition of topic on the
// source: plain records with keys, two headers and timestamps an hour old,
// and transactions across partitions, every third one aborted. It returns
// how many records it wrote.
func produce(t testing.TB, ctx context.Context, topic string, partitions int32, round int) int {
	t.Helper()
	cl := client(t, source, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	n := 0
	for i := range 30 {
		rec := &kgo.Record{Partition: int32(i) % partitions, Key: fmt.Appendf(nil, "r%d-plain-%d", round, i),
			Value:     fmt.Appendf(nil, "plain-%d-%s", i, strings.Repeat("k", i)),
			Headers:   []kgo.RecordHeader{{Key: "seq", Value: fmt.Appendf(nil, "%d", i)}, {Key: "empty"}},
			Timestamp: base.Add(time.Duration(i) * time.Second)}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatalf("producing to %s: %v", topic, err)
		}
		n++
	}
	tx := client(t, source, kgo.TransactionalID(fmt.Sprintf("%s-tx%d", topic, round)), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 6 {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := range partitions {
			rec := &kgo.Record{Partition: p, Key: fmt.Appendf(nil, "r%d-tx%d-%d", round, i, p), Value: []byte("transactional"),
				Headers: []kgo.RecordHeader{{Key: "txn", Value: fmt.Appendf(nil, "%d", i)}}}
			if err := tx.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatalf("producing to %s in a transaction: %v", topic, err)
			}
			n++
		}
		if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(i%3 != 0)); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// checkNoSecret fails the test if the daemon's log holds any of the keys of
// the test's keytabs (raw, hex or base64, as a careless log line would show
// them) or a keytab file itself.
func checkNoSecret(t testing.TB, logged string) {
	t.Helper()
	if logged == "" {
		t.Fatal("the daemon logged nothing: the check would prove nothing")
	}
	for _, path := range []string{clientKeytab, staleKeytab} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		kt := keytab.New()
		if err := kt.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		forms := []string{base64.StdEncoding.EncodeToString(b), hex.EncodeToString(b)}
		for _, e := range kt.Entries {
			v := e.Key.KeyValue
			forms = append(forms, string(v), hex.EncodeToString(v), strings.ToUpper(hex.EncodeToString(v)),
				base64.StdEncoding.EncodeToString(v), base64.RawStdEncoding.EncodeToString(v), fmt.Sprint(v))
		}
		for _, f := range forms {
			if strings.Contains(logged, f) {
				t.Fatalf("kmirror's log holds a key of %s", filepath.Base(path))
			}
		}
	}
}

// kmirror mirrors from a GSSAPI source to a GSSAPI destination, logging in
// to the KDC with a keytab on both (the source's keys in Kafka's
// Krb5LoginModule form, the destination's as sasl.kerberos.* keys): plain
// and transactional records written before and while it runs arrive
// identical, offsets, keys, values, headers, timestamps and markers, and no
// key of the keytab reaches the log.
func TestMirrorBetweenGSSAPIClusters(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	const topic, partitions = "krb-orders", 3
	createTopic(t, ctx, topic, partitions)
	produced := produce(t, ctx, topic, partitions, 1)

	d := startKmirror(t, "destination:\n"+gssapiKeys(destination, clientKeytab, false, "  ")+
		"mirrors:\n  - name: krb\n"+gssapiKeys(source, clientKeytab, true, "    ")+
		"    mirror.topics.include: "+topic+"\n")
	produced += produce(t, ctx, topic, partitions, 2)
	d.waitMirrored(t, ctx, topic, partitions)
	if n := verifyTopic(t, ctx, topic, partitions); n != produced {
		t.Fatalf("the source holds %d records, %d were produced", n, produced)
	}
	t.Logf("%s: %d records in %d partitions identical on both clusters, mirrored over GSSAPI", topic, produced, partitions)

	st, _ := d.describe()
	for _, m := range st.Mirrors {
		for _, c := range m.Clusters {
			if !c.Reachable {
				t.Errorf("mirror %s: the %s is unreachable: %s", m.Name, c.Cluster, c.LastError)
			}
		}
	}
	if !strings.Contains(d.log(), "GSSAPI") && !strings.Contains(d.log(), "kmirror@"+realm) {
		t.Log("the daemon's log does not mention GSSAPI (fine: nothing failed)")
	}
	checkNoSecret(t, d.log())
}

// A keytab whose keys the KDC no longer accepts (written before the last
// ktadd) fails, clearly and without taking the daemon down: a mirror that
// starts with one says why it cannot reach its source, and a running
// mirror whose keytab is replaced by one fails its partition at the next
// login (the broker's session ends within connections.max.reauth.ms).
// With the right keytab back, the partition resumes and every record
// arrives; no key of either keytab reaches the log.
func TestWrongKeytabFailsUntilReplaced(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	const topic, partitions = "krb-rotate", 1
	createTopic(t, ctx, topic, partitions)
	produced := produce(t, ctx, topic, partitions, 1)

	dir := t.TempDir()
	srcKeytab := copyKeytab(t, clientKeytab, dir, "source.keytab")
	d := startKmirror(t, "destination:\n"+gssapiKeys(destination, clientKeytab, false, "  ")+
		"mirrors:\n"+
		"  - name: rotate\n"+gssapiKeys(source, srcKeytab, false, "    ")+"    mirror.topics.include: "+topic+"\n"+
		"  - name: stale\n"+gssapiKeys(source, staleKeytab, false, "    ")+"    mirror.topics.include: krb-never\n")

	// The mirror with the stale keytab from the start: its source is
	// unreachable, and describe says it is the Kerberos login.
	d.waitFor(t, ctx, "mirror stale reporting its failed login", func(st admin.Status) (bool, string) {
		for _, m := range st.Mirrors {
			if m.Name != "stale" {
				continue
			}
			var said []string
			for _, c := range m.Clusters {
				said = append(said, c.Cluster+": "+c.LastError)
			}
			for _, e := range m.Errors {
				said = append(said, e.Loop+": "+e.Cause)
			}
			all := strings.Join(said, "; ")
			return strings.Contains(all, "GSSAPI login as "+clientPrincipal), all
		}
		return false, "no mirror stale"
	})

	d.waitMirrored(t, ctx, topic, partitions)

	// The keytab is replaced with the stale one: the next login fails the
	// partition with the reason.
	copyKeytab(t, staleKeytab, dir, "source.keytab")
	produced += produce(t, ctx, topic, partitions, 2)
	st := d.waitFor(t, ctx, topic+"[0] FAILED", func(st admin.Status) (bool, string) {
		ps, _ := partitionStatus(st, topic, 0)
		return ps.State == "FAILED", ps.State + " " + ps.LastError
	})
	ps, _ := partitionStatus(st, topic, 0)
	if reason := ps.LastError; !strings.Contains(reason, "GSSAPI") && !strings.Contains(strings.ToLower(reason), "sasl") {
		t.Fatalf("%s[0] FAILED with reason %q; want the GSSAPI login's", topic, reason)
	}
	t.Logf("with the stale keytab: %s[0] FAILED: %s", topic, ps.LastError)

	// The right keytab back: the partition resumes, nothing is lost.
	copyKeytab(t, clientKeytab, dir, "source.keytab")
	d.waitMirrored(t, ctx, topic, partitions)
	if n := verifyTopic(t, ctx, topic, partitions); n != produced {
		t.Fatalf("the source holds %d records, %d were produced", n, produced)
	}
	if !d.running() {
		t.Fatal("kmirror exited")
	}
	checkNoSecret(t, d.log())
}
