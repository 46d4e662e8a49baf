package mm2migrate

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/core/config"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestGolden")

// secretsInTestdata are the secret values of the testdata files: none may
// appear in a configuration, a report or an error.
var secretsInTestdata = []string{"dc1-paßword", "dc2:secret=1", "truststore-secret", "oauth-s3cr3t", "changeit"}

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = Run(args, &o, &e)
	for _, s := range secretsInTestdata {
		if strings.Contains(o.String(), s) || strings.Contains(e.String(), s) {
			t.Errorf("a secret of the properties file appears in the output of %v", args)
		}
	}
	return o.String(), e.String(), code
}

// TestGolden translates the realistic files of testdata and compares the
// configuration and the report with the golden files (go test -update
// rewrites them).
func TestGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		// Two clusters, SASL_SSL (SCRAM and PLAIN), a JKS truststore,
		// topic and group patterns, tuning, Connect keys, two typos.
		{"sasl_ssl", []string{"--from", "testdata/sasl_ssl.properties"}, 0},
		// Three clusters: mTLS with a PKCS12 keystore, OAUTHBEARER,
		// identity names, every sync switched off.
		{"three_clusters_east", []string{"--from", "testdata/three_clusters.properties", "--flow", "east->west"}, 0},
		// A Java look-ahead in topics: translated, refused by validation
		// with the RE2 hint.
		{"three_clusters_central", []string{"--from", "testdata/three_clusters.properties", "--flow", "central->west"}, 1},
		// Flows into two clusters and no --flow.
		{"three_clusters_no_flow", []string{"--from", "testdata/three_clusters.properties"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := run(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			golden(t, filepath.Join("testdata", tc.name+".yaml.golden"), stdout)
			golden(t, filepath.Join("testdata", tc.name+".report.golden"), stderr)
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it):\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

func translate(t *testing.T, file string, opt Options) *Result {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseProperties(string(data))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Translate(p, opt)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The result passes kmirror's own validation, and says what MM2 said:
// the same clusters, patterns and switches.
func TestResultValidates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res := translate(t, "testdata/sasl_ssl.properties", Options{SecretsDir: dir, StateDir: filepath.Join(dir, "state")})
	if err := WriteSecrets(res); err != nil {
		t.Fatal(err)
	}
	standIns, err := Validate(res)
	if err != nil {
		t.Fatalf("the result does not validate: %v\n%s", err, res.YAML)
	}
	if len(standIns) != 1 || standIns[0] != "/etc/kafka/ssl/truststore.pem" {
		t.Errorf("stand-ins %v, want only the truststore still to convert (the password files were written)", standIns)
	}
	// Load it as the daemon would, with a real truststore in place of the
	// one still to convert.
	out := filepath.Join(dir, "kmirror.yaml")
	if err := os.WriteFile(out, res.YAML, 0o600); err != nil {
		t.Fatal(err)
	}
	ca, err := standIn("ca")
	if err != nil {
		t.Fatal(err)
	}
	caPath := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caPath, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.Source{Path: out, Sets: []string{
		"destination.ssl.truststore.location=" + caPath,
		"mirrors.primary-to-backup.ssl.truststore.location=" + caPath,
	}})
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	m, ok := cfg.Mirror("primary-to-backup")
	if !ok {
		t.Fatalf("no mirror primary-to-backup in %s", res.YAML)
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"orders.eu", true}, {"payments-2024", true}, {"audit", true}, {"orders.test", false}, {"orders-tmp", false},
		{"backup.orders", false}, {"mm2-offset-syncs.backup.internal", false}, {"heartbeats", false}, {"other", false},
	} {
		if got := m.TopicsInclude.Match(c.name) && !m.TopicsExclude.Match(c.name); got != c.ok {
			t.Errorf("topic %s mirrored = %v, want %v", c.name, got, c.ok)
		}
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{{"billing-eu", true}, {"shipping", true}, {"billing-canary", false}, {"console-consumer-1", false}} {
		if got := m.GroupsInclude.Match(c.name) && !m.GroupsExclude.Match(c.name); got != c.ok {
			t.Errorf("group %s synced = %v, want %v", c.name, got, c.ok)
		}
	}
	if got := m.Source.SASLUsername; got != "mm2-dc1" {
		t.Errorf("source user %q, want mm2-dc1", got)
	}
	if cfg.MetadataRefreshInterval.Seconds() != 15 || cfg.ReplicaFetchMaxBytes != 2097152 || cfg.ReplicaFetchResponseMaxBytes != 52428800 {
		t.Errorf("tuning: refresh %v, fetch max %d, response max %d", cfg.MetadataRefreshInterval, cfg.ReplicaFetchMaxBytes, cfg.ReplicaFetchResponseMaxBytes)
	}
	// The passwords are in their files, readable by the owner only, and
	// nowhere in the configuration.
	for file, want := range map[string]string{"primary.sasl.password": "dc1-paßword\n", "backup.sasl.password": "dc2:secret=1\n"} {
		path := filepath.Join(dir, file)
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want the password of the JAAS line", file, got, err)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, %v; want 0600", file, fi.Mode(), err)
		}
	}
	for _, s := range secretsInTestdata {
		if strings.Contains(string(res.YAML), s) {
			t.Errorf("a secret appears in the configuration:\n%s", res.YAML)
		}
	}
}

func TestUnknownKeysAreReported(t *testing.T) {
	t.Parallel()
	res := translate(t, "testdata/sasl_ssl.properties", Options{})
	want := map[string]string{
		"primary->backup.topic.exclude": "did you mean topics.exclude?",
		"sync.topics.acl.enabled":       "did you mean sync.topic.acls.enabled?",
	}
	if len(res.Unknown) != len(want) {
		t.Errorf("unknown keys %v, want %d", res.Unknown, len(want))
	}
	for _, n := range res.Unknown {
		if w, ok := want[n.Key]; !ok || !strings.Contains(n.Text, w) || n.Line == 0 {
			t.Errorf("unknown %v: want a line and %q", n, w)
		}
	}
	// What has no equivalent is listed with the reason.
	for key, why := range map[string]string{
		"replication.policy.class":              "kmirror keeps topic names",
		"offset-syncs.topic.replication.factor": "kmirror preserves offsets",
		"checkpoints.topic.replication.factor":  "kmirror preserves offsets",
		"emit.heartbeats.enabled":               "no heartbeats topic",
		"tasks.max":                             "kmirror has no tasks",
		"replication.factor":                    "default.replication.factor",
		"backup.producer.compression.type":      "batches as they are",
		"config.storage.replication.factor":     "Connect worker",
	} {
		found := false
		for _, n := range res.NoEquivalent {
			found = found || n.Key == key && strings.Contains(n.Text, why)
		}
		if !found {
			t.Errorf("no-equivalent list lacks %s (%q): %v", key, why, res.NoEquivalent)
		}
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ props, want string }{
		{"a.bootstrap.servers=x:1\n", "no clusters key"},
		{"clusters=a,b\na.bootstrap.servers=x:1\nb.bootstrap.servers=y:1\n", "no flow is enabled"},
		{"clusters=a,b\na.bootstrap.servers=x:1\na->b.enabled=true\n", "cluster b has no b.bootstrap.servers"},
		{"clusters=a,b\na.bootstrap.servers=x:1\nb.bootstrap.servers=y:1\na->b.enabled=true\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=AWS_MSK_IAM\n", "SASL mechanism AWS_MSK_IAM, which kmirror does not support"},
	} {
		p, err := ParseProperties(tc.props)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Translate(p, Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Translate(%q) = %v, want %q", tc.props, err, tc.want)
		}
	}
	if _, stderr, code := run(t); code != 2 || !strings.Contains(stderr, "--from is required") {
		t.Errorf("no --from: exit %d, %q", code, stderr)
	}
	if _, stderr, code := run(t, "--from", "testdata/three_clusters.properties", "--flow", "east->nowhere"); code != 2 || !strings.Contains(stderr, "want SOURCE->TARGET with two of the clusters") {
		t.Errorf("bad --flow: exit %d, %q", code, stderr)
	}
}

func TestParseProperties(t *testing.T) {
	t.Parallel()
	p, err := ParseProperties("# comment\n! also a comment \\\n" +
		"a=1\n" +
		"  b : two words  \n" +
		"c\tthree\n" +
		"d=con\\\n    tinued\\\n  here\n" +
		"e\\ key\\:x = v\\=w\n" +
		"f=\\u00e9\\t\\\\n\n" +
		"g\n" +
		"h=x:y=z\r\n" +
		"a=last\n" +
		"i=ends\\\n")
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"a": "last", "b": "two words  ", "c": "three", "d": "continuedhere", "e key:x": "v=w",
		"f": "é\t\\n", "g": "", "h": "x:y=z", "i": "ends",
	} {
		if got, ok := p.Get(key); !ok || got != want {
			t.Errorf("%q = %q (set %v), want %q", key, got, ok, want)
		}
	}
	if l := p.Line("d"); l != 6 {
		t.Errorf("d is on line %d, want 6", l)
	}
	if d := p.Duplicates(); len(d) != 1 || d[0].Key != "a" || d[0].Line != 3 {
		t.Errorf("duplicates %v, want a on line 3", d)
	}
	if _, err := ParseProperties("k=\\u12\n"); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a malformed \\u escape: %v", err)
	}
}

// With --secrets-dir and --out, the passwords go into their files, the
// configuration into its file, and the report says so.
func TestRunWritesSecretsAndConfiguration(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secrets, out := filepath.Join(dir, "secrets"), filepath.Join(dir, "kmirror.yaml")
	stdout, stderr, code := run(t, "--from", "testdata/sasl_ssl.properties", "--secrets-dir", secrets, "--out", out, "--state-dir", filepath.Join(dir, "state"))
	if code != 0 || stdout != "" {
		t.Fatalf("exit %d, stdout %q; stderr:\n%s", code, stdout, stderr)
	}
	yaml, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(yaml), "sasl.password.file: "+filepath.Join(secrets, "primary.sasl.password")) {
		t.Errorf("configuration %s: %v\n%s", out, err, yaml)
	}
	for _, want := range []string{"Translated into " + out, "Password files written", filepath.Join(secrets, "backup.sasl.password"), "with stand-ins", "/etc/kafka/ssl/truststore.pem"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("report lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "write the SASL password") {
		t.Errorf("the report still asks for password files that were written:\n%s", stderr)
	}
}

// A Krb5LoginModule JAAS line becomes the sasl.kerberos.* keys; the keytab
// is named, not copied, and where krb5.conf was is a to-do.
func TestGSSAPIBecomesKerberosKeys(t *testing.T) {
	t.Parallel()
	p, err := ParseProperties("clusters=a,b\na.bootstrap.servers=x:1\nb.bootstrap.servers=y:1\na->b.enabled=true\n" +
		"a.security.protocol=SASL_PLAINTEXT\na.sasl.mechanism=GSSAPI\n" +
		`a.sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="/etc/mm2/mm2.keytab" principal="mm2@EXAMPLE.COM" serviceName="kafka";` + "\n")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Translate(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"sasl.mechanism: GSSAPI", "sasl.kerberos.keytab: /etc/mm2/mm2.keytab", "sasl.kerberos.principal: mm2@EXAMPLE.COM", "sasl.kerberos.service.name: kafka"} {
		if !strings.Contains(string(res.YAML), want) {
			t.Errorf("the result lacks %q:\n%s", want, res.YAML)
		}
	}
	var noted bool
	for _, n := range res.ToDo {
		noted = noted || strings.Contains(n.Text, "sasl.kerberos.krb5.conf")
	}
	if !noted {
		t.Errorf("no to-do about krb5.conf: %v", res.ToDo)
	}
}
