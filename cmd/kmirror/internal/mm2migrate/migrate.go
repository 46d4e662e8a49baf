package mm2migrate

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/config/raw"
	"github.com/kmirror/kmirror/core/config/security"
	"github.com/kmirror/kmirror/sdk/auth"
)

// Options of a translation.
type Options struct {
	// Flow selects the flow to translate ("A->B"). Empty: every enabled
	// flow, which must then all go into one cluster.
	Flow string
	// SecretsDir is where the passwords of sasl.jaas.config lines are to
	// be written, one file per cluster. Empty: the configuration names
	// files under DefaultSecretsDir that the operator must write.
	SecretsDir string
	// StateDir is state.dir of the result (DefaultStateDir when empty).
	StateDir string
	// From names the properties file in the result's header comment.
	From string
}

// Defaults of Options.
const (
	DefaultSecretsDir = "/etc/kmirror/secrets"
	DefaultStateDir   = "/var/lib/kmirror"
)

// Note is one line of the report: what an MM2 key became, or why it has no
// equivalent, or what the operator must do. It never holds a secret.
type Note struct {
	Key  string // the MirrorMaker 2 key, as written ("" for a general note)
	Line int    // its line in the file (0: not from one line)
	Text string
}

func (n Note) String() string {
	switch {
	case n.Key == "":
		return n.Text
	case n.Line > 0:
		return fmt.Sprintf("%s (line %d): %s", n.Key, n.Line, n.Text)
	}
	return n.Key + ": " + n.Text
}

// SecretFile is a password file the configuration names, with the
// password from the properties file. The value is an auth.Secret: it never
// prints.
type SecretFile struct {
	Path    string
	Cluster string
	Value   auth.Secret
}

// Result is a translation.
type Result struct {
	// YAML is the kmirror configuration. It holds no secret.
	YAML []byte
	// Destination is the target cluster's alias; Mirrors the names of
	// the mirrors, one per translated flow.
	Destination string
	Mirrors     []string
	// ToDo lists what the operator must do before starting kmirror.
	ToDo []Note
	// NoEquivalent lists the MM2 settings kmirror has no equivalent for,
	// each with the reason.
	NoEquivalent []Note
	// Unknown lists keys neither MirrorMaker 2 nor kmirror knows.
	Unknown []Note
	// Decisions lists choices the translation made that the operator
	// should know about.
	Decisions []Note
	// Secrets are the password files to write (when Options.SecretsDir
	// is set) or that the operator must write (ToDo says which).
	Secrets []SecretFile
	// Written lists the password files WriteSecrets wrote.
	Written []string

	// placeholders are what validation stands in for files and secrets
	// that do not exist yet: --set paths and their kind.
	placeholders []placeholder
}

type placeholder struct {
	set  string // the --set key: destination.ssl.truststore.location, mirrors.<m>.sasl.password.file
	path string // the path the configuration names ("" for a secret value)
	kind string // "password", "ca", "keystore", "secret"
}

// MM2's defaults for the filters (MirrorSourceConfig, MirrorCheckpointConfig).
var (
	mm2TopicsExcludeDefault = []string{`.*[\-\.]internal`, `.*\.replica`, `__.*`}
	mm2GroupsExcludeDefault = []string{`console-consumer-.*`, `connect-.*`, `__.*`}
)

// mm2InternalTopics are topics MirrorMaker 2 never mirrors whatever its
// filters say (ReplicationPolicy.isInternalTopic) or that only MM2 itself
// uses (heartbeats); they are always excluded.
var mm2InternalTopics = []string{`.*[\-\.]internal`, `__.*`, `\..*`, `heartbeats`, `.*\.heartbeats`}

// Flow-level keys (MirrorMaker 2's connector configuration), valid as
// "A->B.<key>" and, as a default for every flow, at the top level.
var flowHandled = map[string]bool{
	"enabled": true, "topics": true, "topics.exclude": true, "topics.blacklist": true,
	"groups": true, "groups.exclude": true, "groups.blacklist": true,
	"config.properties.exclude": true, "config.properties.blacklist": true,
	"sync.topic.configs.enabled": true, "sync.topic.acls.enabled": true,
	"emit.checkpoints.enabled": true, "sync.group.offsets.enabled": true,
	"refresh.topics.interval.seconds": true, "refresh.groups.interval.seconds": true,
	"sync.topic.configs.interval.seconds": true, "sync.topic.acls.interval.seconds": true,
	"sync.group.offsets.interval.seconds": true, "emit.checkpoints.interval.seconds": true,
}

const (
	whyOffsets   = "not needed: kmirror preserves offsets (a destination record has its source offset), so there are no offset syncs or checkpoints to keep, and consumer offsets are copied as they are"
	whyNames     = "kmirror keeps topic names (what MM2 calls IdentityReplicationPolicy); there is no prefix or separator"
	whyHeartbeat = "kmirror writes no heartbeats topic; replication health is in describe, the /metrics lag and kmirror_cluster_up"
	whyClass     = "Java classes cannot be loaded; kmirror's filter plugins (mirror.filter.plugins) decide further which topics, groups and ACLs a mirror takes"
	whyConnect   = "MirrorMaker 2's Kafka Connect worker; kmirror has no workers and keeps its state in its state store (state.dir)"
)

// flowNoEquivalent are flow-level keys with no kmirror equivalent.
var flowNoEquivalent = map[string]string{
	"tasks.max":                                           "kmirror has no tasks: every partition has its own runner, and the daemon fetches from each source broker over mirror.num.replica.fetchers sessions",
	"replication.factor":                                  "kmirror creates destination topics with the destination's default replication factor (-1: the brokers' default.replication.factor); set that on the destination, or create the topics first",
	"emit.heartbeats.enabled":                             whyHeartbeat,
	"emit.heartbeats.interval.seconds":                    whyHeartbeat,
	"heartbeats.topic.replication.factor":                 whyHeartbeat,
	"emit.offset-syncs.enabled":                           whyOffsets,
	"offset-syncs.topic.replication.factor":               whyOffsets,
	"offset-syncs.topic.location":                         whyOffsets,
	"checkpoints.topic.replication.factor":                whyOffsets,
	"offset.lag.max":                                      whyOffsets,
	"replication.policy.class":                            whyNames,
	"replication.policy.separator":                        whyNames,
	"replication.policy.internal.topic.separator.enabled": whyNames,
	"topic.filter.class":                                  whyClass,
	"group.filter.class":                                  whyClass,
	"config.property.filter.class":                        whyClass,
	"refresh.topics.enabled":                              "kmirror always discovers new topics, every mirror.metadata.refresh.interval.ms",
	"refresh.groups.enabled":                              "kmirror lists groups every mirror.metadata.refresh.interval.ms; mirror.groups.include decides which it syncs",
	"consumer.poll.timeout.ms":                            "kmirror fetches as a follower replica does (replica.fetch.wait.max.ms bounds a fetch's wait)",
	"admin.timeout.ms":                                    "kmirror's requests are bounded by request.timeout.ms",
	"use.incremental.alter.configs":                       "kmirror alters topic configs with IncrementalAlterConfigs",
	"exactly.once.support":                                "kmirror writes each source batch once, idempotently and in the source's transactions, whatever this says",
	"add.source.alias.to.metrics":                         "kmirror's metrics carry the mirror name",
	"sync.group.offsets.enabled.groups":                   "",
}

// Top-level keys of MirrorMaker 2's Connect worker and driver.
var connectPrefixes = []string{
	"offset.storage.", "config.storage.", "status.storage.", "key.converter", "value.converter",
	"header.converter", "task.", "worker.", "rest.", "listeners", "config.providers",
	"dedicated.mode.", "plugin.path", "group.id", "metric.reporters", "metrics.",
}

// consumerToDaemon maps a source cluster's consumer overrides to
// kmirror's daemon keys.
var consumerToDaemon = map[string]string{
	"max.partition.fetch.bytes": "replica.fetch.max.bytes",
	"fetch.max.bytes":           "replica.fetch.response.max.bytes",
	"fetch.min.bytes":           "replica.fetch.min.bytes",
	"fetch.max.wait.ms":         "replica.fetch.wait.max.ms",
	"receive.buffer.bytes":      "replica.socket.receive.buffer.bytes",
	"request.timeout.ms":        "request.timeout.ms",
}

// translator holds one translation's state.
type translator struct {
	p        *Properties
	opt      Options
	clusters []string
	res      *Result
	used     map[string]bool // keys accounted for (translated or noted)
	daemon   []kv            // daemon keys of the result, in order
	noted    map[string]bool // note texts already given, to say each once
}

type kv struct {
	key     string
	value   any // string, []string
	comment string
}

type flow struct{ source, target string }

func (f flow) String() string { return f.source + "->" + f.target }

// Translate turns MirrorMaker 2 properties into a kmirror configuration.
// It fails when no configuration can be made (no clusters, no enabled flow,
// flows into several clusters without Options.Flow, a cluster kmirror
// cannot authenticate to); everything else is a Note.
func Translate(p *Properties, opt Options) (*Result, error) {
	if opt.StateDir == "" {
		opt.StateDir = DefaultStateDir
	}
	t := &translator{p: p, opt: opt, res: &Result{}, used: map[string]bool{}, noted: map[string]bool{}}
	list, ok := p.Get("clusters")
	if !ok {
		return nil, fmt.Errorf("no clusters key: a MirrorMaker 2 file names its clusters (clusters = A, B)")
	}
	t.used["clusters"] = true
	t.clusters = splitList(list)
	if len(t.clusters) < 2 {
		return nil, fmt.Errorf("clusters = %s names fewer than two clusters", list)
	}
	flows, err := t.selectFlows()
	if err != nil {
		return nil, err
	}
	target := flows[0].target
	t.res.Destination = target
	dest, err := t.cluster(target, "destination")
	if err != nil {
		return nil, err
	}
	var mirrors []*mapping
	for _, f := range flows {
		name := mirrorName(f)
		m, err := t.cluster(f.source, "mirrors."+name)
		if err != nil {
			return nil, err
		}
		t.flowKeys(f, name, m)
		t.consumerTuning(f.source)
		t.res.Mirrors = append(t.res.Mirrors, name)
		mirrors = append(mirrors, m)
	}
	t.producerOverrides(target)
	t.rest(flows)
	t.res.YAML = t.render(flows, dest, mirrors)
	return t.res, nil
}

// selectFlows returns the flows to translate: Options.Flow, or every
// enabled flow when they share one target.
func (t *translator) selectFlows() ([]flow, error) {
	var enabled []flow
	for _, pr := range t.p.List {
		f, rest, ok := t.splitFlowKey(pr.Key)
		if ok && rest == "enabled" && isTrue(t.get(pr.Key)) && !slices.Contains(enabled, f) {
			enabled = append(enabled, f)
		}
	}
	names := func(fs []flow) string {
		s := make([]string, len(fs))
		for i, f := range fs {
			s[i] = f.String()
		}
		return strings.Join(s, ", ")
	}
	if t.opt.Flow != "" {
		src, tgt, ok := strings.Cut(t.opt.Flow, "->")
		f := flow{strings.TrimSpace(src), strings.TrimSpace(tgt)}
		if !ok || !slices.Contains(t.clusters, f.source) || !slices.Contains(t.clusters, f.target) || f.source == f.target {
			return nil, fmt.Errorf("--flow %s: want SOURCE->TARGET with two of the clusters (%s)", t.opt.Flow, strings.Join(t.clusters, ", "))
		}
		if !slices.Contains(enabled, f) {
			t.decide("", 0, fmt.Sprintf("%s is not enabled in the file (%s.enabled = true); translated because --flow names it", f, f))
		}
		t.otherFlows(enabled, []flow{f})
		return []flow{f}, nil
	}
	switch {
	case len(enabled) == 0:
		return nil, fmt.Errorf("no flow is enabled: MirrorMaker 2 mirrors only flows set with SOURCE->TARGET.enabled = true")
	case len(targets(enabled)) > 1:
		return nil, fmt.Errorf("the enabled flows (%s) go into %d clusters; one kmirror daemon mirrors into one destination: choose a flow with --flow SOURCE->TARGET and run one kmirror per destination cluster", names(enabled), len(targets(enabled)))
	}
	t.otherFlows(enabled, enabled)
	return enabled, nil
}

func (t *translator) otherFlows(enabled, chosen []flow) {
	for _, f := range enabled {
		if slices.Contains(chosen, f) {
			continue
		}
		why := "not translated: one kmirror daemon mirrors into one destination cluster; run `kmirror config migrate --flow " + f.String() + "` for a second daemon"
		for _, c := range chosen {
			if c.source == f.target && c.target == f.source {
				why += ". It is the reverse of " + c.String() + ": kmirror keeps topic names, so a topic can be mirrored one way only; give the two daemons disjoint mirror.topics.include"
			}
		}
		t.note(&t.res.Decisions, f.String()+".enabled", why)
	}
}

func targets(fs []flow) map[string]bool {
	m := map[string]bool{}
	for _, f := range fs {
		m[f.target] = true
	}
	return m
}

// splitFlowKey splits "A->B.rest" where A and B are clusters.
func (t *translator) splitFlowKey(key string) (flow, string, bool) {
	src, after, ok := strings.Cut(key, "->")
	if !ok || !slices.Contains(t.clusters, src) {
		return flow{}, "", false
	}
	for _, c := range t.clusters {
		if rest, ok := strings.CutPrefix(after, c+"."); ok {
			return flow{src, c}, rest, true
		}
	}
	return flow{}, "", false
}

func (t *translator) get(key string) string {
	v, _ := t.p.Get(key)
	return v
}

// flowSetting returns a flow key's value: "A->B.key", else the top-level
// "key" (MM2's default for every flow).
func (t *translator) flowSetting(f flow, key string) (val, from string, ok bool) {
	for _, k := range []string{f.String() + "." + key, key} {
		if v, set := t.p.Get(k); set {
			t.used[k] = true
			return strings.TrimSpace(v), k, true
		}
	}
	return "", "", false
}

// clusterSetting returns a cluster's client key: "A.key", else the
// top-level "key" for a security key (MM2 hands top-level security keys to
// every cluster).
func (t *translator) clusterSetting(alias, key string) (val, from string, ok bool) {
	keys := []string{alias + "." + key}
	if isSecurityKey(key) {
		keys = append(keys, key)
	}
	for _, k := range keys {
		if v, set := t.p.Get(k); set {
			t.used[k] = true
			return strings.TrimSpace(v), k, true
		}
	}
	return "", "", false
}

func isSecurityKey(k string) bool {
	return k == "security.protocol" || strings.HasPrefix(k, "sasl.") || strings.HasPrefix(k, "ssl.")
}

func (t *translator) note(list *[]Note, key, text string) {
	if t.noted[key+"\x00"+text] {
		return
	}
	t.noted[key+"\x00"+text] = true
	*list = append(*list, Note{Key: key, Line: t.p.Line(key), Text: text})
}

func (t *translator) todo(key string, line int, text string) {
	if t.noted[key+"\x00"+text] {
		return // a top-level key that two clusters share
	}
	t.noted[key+"\x00"+text] = true
	t.res.ToDo = append(t.res.ToDo, Note{Key: key, Line: line, Text: text})
}

func (t *translator) decide(key string, line int, text string) {
	t.res.Decisions = append(t.res.Decisions, Note{Key: key, Line: line, Text: text})
}

// mapping is a section of the result: keys in order, with comments.
type mapping struct {
	comment string
	entries []kv
}

func (m *mapping) add(key string, value any, comment string) {
	m.entries = append(m.entries, kv{key, value, comment})
}

// cluster translates one cluster's client keys. setPrefix is where --set
// reaches the section (destination, mirrors.<name>), label how errors
// name it.
func (t *translator) cluster(alias, setPrefix string) (*mapping, error) {
	m := &mapping{comment: "cluster " + alias + " of the MirrorMaker 2 file"}
	servers, from, ok := t.clusterSetting(alias, "bootstrap.servers")
	if !ok {
		return nil, fmt.Errorf("cluster %s has no %s.bootstrap.servers", alias, alias)
	}
	m.add("bootstrap.servers", splitList(servers), "")
	t.refs(from)
	if v, _, ok := t.clusterSetting(alias, "client.id"); ok {
		m.add("client.id", v, "")
	}
	protocol := "PLAINTEXT"
	if v, from, ok := t.clusterSetting(alias, "security.protocol"); ok {
		protocol = strings.ToUpper(v)
		t.refs(from)
	}
	if protocol != "PLAINTEXT" {
		m.add("security.protocol", protocol, "")
	}
	if strings.HasPrefix(protocol, "SASL_") {
		if err := t.sasl(alias, setPrefix, m); err != nil {
			return nil, err
		}
	}
	if protocol == "SSL" || protocol == "SASL_SSL" {
		t.tls(alias, setPrefix, m)
	}
	// The other client keys kmirror knows under the same name, where the
	// protocol uses them.
	sasl, tls := strings.HasPrefix(protocol, "SASL_"), protocol == "SSL" || protocol == "SASL_SSL"
	for _, k := range config.Keys {
		if k.Scope != config.ScopeCluster || k.Secret || slices.Contains(handledClusterKeys, k.Name) ||
			strings.HasPrefix(k.Name, "sasl.") && !sasl || strings.HasPrefix(k.Name, "ssl.") && !tls {
			continue
		}
		if v, from, ok := t.clusterSetting(alias, k.Name); ok {
			m.add(k.Name, v, "")
			t.refs(from)
		}
	}
	for _, u := range config.Unsupported {
		if u.Scope != config.ScopeCluster {
			continue
		}
		if _, from, ok := t.clusterSetting(alias, u.Name); ok {
			t.note(&t.res.NoEquivalent, from, u.Reason)
		}
	}
	return m, nil
}

// handledClusterKeys are translated by cluster itself, not passed through.
var handledClusterKeys = []string{
	"bootstrap.servers", "client.id", "security.protocol", "sasl.mechanism", "sasl.jaas.config",
	"sasl.username", "sasl.password.file", "sasl.oauthbearer.client.id",
	"ssl.truststore.location", "ssl.truststore.type", "ssl.keystore.location", "ssl.keystore.type",
	"sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.scope",
}

// refs notes a value that is a config provider reference (${file:…}),
// which kmirror cannot resolve.
func (t *translator) refs(key string) {
	if v := t.get(key); strings.Contains(v, "${") {
		t.todo(key, t.p.Line(key), "the value is a Kafka config provider reference (${provider:path:key}), which kmirror does not resolve: put the value itself in the configuration, or a secret in a file")
	}
}

func (t *translator) sasl(alias, setPrefix string, m *mapping) error {
	mech := "GSSAPI" // Kafka's default
	if v, _, ok := t.clusterSetting(alias, "sasl.mechanism"); ok {
		mech = strings.ToUpper(v)
	}
	switch mech {
	case config.MechanismPlain, config.MechanismSCRAMSHA256, config.MechanismSCRAMSHA512, config.MechanismOAuthBearer, config.MechanismGSSAPI:
	default:
		return fmt.Errorf("cluster %s uses SASL mechanism %s, which kmirror does not support (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER and GSSAPI are); give kmirror a listener with one of those", alias, mech)
	}
	m.add("sasl.mechanism", mech, "")
	jaas, jaasKey, ok := t.clusterSetting(alias, "sasl.jaas.config")
	if !ok {
		what := "its sasl.username and sasl.password.file (or the sasl.oauthbearer.* keys)"
		if mech == config.MechanismGSSAPI {
			what = "its sasl.kerberos.principal and sasl.kerberos.keytab (kmirror logs in with a keytab)"
		}
		t.todo(alias+".sasl.jaas.config", 0, fmt.Sprintf("cluster %s has no sasl.jaas.config: set %s by hand", alias, what))
		return nil
	}
	if strings.Contains(jaas, "${") {
		t.refs(jaasKey)
		return nil
	}
	module, opts, err := security.ParseJAAS(jaas)
	if err != nil {
		t.todo(jaasKey, t.p.Line(jaasKey), "cannot read the JAAS line ("+err.Error()+"): set the cluster's credentials by hand")
		return nil
	}
	if mech == config.MechanismGSSAPI {
		t.kerberos(alias, jaasKey, module, opts, m)
		return nil
	}
	if mech == config.MechanismOAuthBearer {
		if id := opts["clientId"]; id != "" {
			m.add("sasl.oauthbearer.client.id", id, "")
		}
		if url, _, ok := t.clusterSetting(alias, "sasl.oauthbearer.token.endpoint.url"); ok {
			m.add("sasl.oauthbearer.token.endpoint.url", url, "")
		}
		if s := opts["scope"]; s != "" {
			m.add("sasl.oauthbearer.scope", s, "")
		}
		env := config.EnvName(config.ScopeCluster, "sasl.oauthbearer.client.secret", "")
		if setPrefix != "destination" {
			env = config.EnvName(config.ScopeMirror, "sasl.oauthbearer.client.secret", strings.TrimPrefix(setPrefix, "mirrors."))
		}
		t.todo(jaasKey, t.p.Line(jaasKey), fmt.Sprintf("the OAuth client secret of cluster %s (clientSecret in its JAAS line) is not written into the configuration: give it to kmirror in the environment variable %s", alias, env))
		t.res.placeholders = append(t.res.placeholders, placeholder{set: setPrefix + ".sasl.oauthbearer.client.secret", kind: "secret"})
		return nil
	}
	if module == "OAuthBearerLoginModule" {
		t.todo(jaasKey, t.p.Line(jaasKey), "the JAAS login module is OAuthBearerLoginModule but sasl.mechanism is "+mech+": set the credentials by hand")
		return nil
	}
	m.add("sasl.username", opts["username"], "")
	dir, written := t.opt.SecretsDir, true
	if dir == "" {
		dir, written = DefaultSecretsDir, false
	}
	path := filepath.Join(dir, fileName(alias)+".sasl.password")
	m.add("sasl.password.file", path, "the password of the JAAS line, kept out of this file")
	t.res.Secrets = append(t.res.Secrets, SecretFile{Path: path, Cluster: alias, Value: auth.NewSecret(opts["password"])})
	if !written {
		t.todo(jaasKey, t.p.Line(jaasKey), fmt.Sprintf("write the SASL password of cluster %s (the password option of this JAAS line) into %s, readable by kmirror only (chmod 600); or run again with --secrets-dir DIR to have it written", alias, path))
		t.res.placeholders = append(t.res.placeholders, placeholder{set: setPrefix + ".sasl.password.file", path: path, kind: "password"})
	}
	return nil
}

func (t *translator) tls(alias, setPrefix string, m *mapping) {
	store := func(kind string) {
		loc, locKey, ok := t.clusterSetting(alias, "ssl."+kind+".location")
		if !ok {
			return
		}
		typ := "JKS" // Kafka's default
		if v, _, ok := t.clusterSetting(alias, "ssl."+kind+".type"); ok {
			typ = strings.ToUpper(v)
		}
		what := "ca"
		if kind == "keystore" {
			what = "keystore"
		}
		if typ == "PEM" {
			m.add("ssl."+kind+".location", loc, "")
			t.res.placeholders = append(t.res.placeholders, placeholder{set: setPrefix + ".ssl." + kind + ".location", path: loc, kind: what})
			return
		}
		pem := strings.TrimSuffix(loc, filepath.Ext(loc)) + ".pem"
		m.add("ssl."+kind+".location", pem, fmt.Sprintf("converted from the %s %s %s", typ, kind, loc))
		p12 := loc
		var steps []string
		if typ == "JKS" {
			p12 = strings.TrimSuffix(loc, filepath.Ext(loc)) + ".p12"
			steps = append(steps, fmt.Sprintf("keytool -importkeystore -srckeystore %s -srcstoretype JKS -destkeystore %s -deststoretype PKCS12", loc, p12))
		}
		if kind == "truststore" {
			steps = append(steps, fmt.Sprintf("openssl pkcs12 -in %s -nokeys -out %s", p12, pem))
		} else {
			steps = append(steps, fmt.Sprintf("openssl pkcs12 -in %s -nodes -out %s && chmod 600 %s", p12, pem, pem))
		}
		text := fmt.Sprintf("kmirror reads PEM only: convert the %s %s to PEM: %s", typ, kind, strings.Join(steps, "; "))
		if kind == "keystore" {
			text += " (the key is written unencrypted: kmirror does not read encrypted keys; protect the file instead)"
		}
		t.todo(locKey, t.p.Line(locKey), text)
		t.res.placeholders = append(t.res.placeholders, placeholder{set: setPrefix + ".ssl." + kind + ".location", path: pem, kind: what})
	}
	store("truststore")
	store("keystore")
}

// flowKeys translates one flow's filters and sync switches into mirror
// keys, and its intervals into the daemon's refresh interval.
func (t *translator) flowKeys(f flow, name string, m *mapping) {
	m.comment = fmt.Sprintf("flow %s: source cluster %s", f, f.source)
	m.entries = append([]kv{{"name", name, ""}}, m.entries...)

	include := []string{".*"} // MM2's default
	if v, _, ok := t.flowSetting(f, "topics"); ok {
		include = splitList(v)
	}
	m.add("mirror.topics.include", include, "")

	exclude, comment := mm2TopicsExcludeDefault, "MirrorMaker 2's default topics.exclude"
	if v, _, ok := t.flowSetting(f, "topics.exclude"); ok {
		exclude, comment = splitList(v), "topics.exclude"
	} else if v, from, ok := t.flowSetting(f, "topics.blacklist"); ok {
		exclude, comment = splitList(v), "topics.blacklist"
		t.decide(from, t.p.Line(from), "topics.blacklist is MM2's old name of topics.exclude; translated as such")
	}
	exclude = appendNew(exclude, mm2InternalTopics...)
	if cls := t.get("replication.policy.class"); !strings.Contains(cls, "IdentityReplicationPolicy") {
		// MM2 does not mirror a topic back into the cluster it came from
		// (A->B skips B.orders on A); with prefixed names such a topic is a
		// copy made by a flow from the target.
		sep := "."
		if v, ok := t.p.Get("replication.policy.separator"); ok {
			sep = v
		}
		exclude = appendNew(exclude, regexp.QuoteMeta(f.target+sep)+".*")
	}
	m.add("mirror.topics.exclude", exclude, comment+"; plus the topics MirrorMaker 2 never mirrors (internal, heartbeats"+
		", and copies of the target's own topics)")

	groupsIncl := []string{".*"}
	if v, _, ok := t.flowSetting(f, "groups"); ok {
		groupsIncl = splitList(v)
	}
	groupsExcl := mm2GroupsExcludeDefault
	if v, _, ok := t.flowSetting(f, "groups.exclude"); ok {
		groupsExcl = splitList(v)
	} else if v, from, ok := t.flowSetting(f, "groups.blacklist"); ok {
		groupsExcl = splitList(v)
		t.decide(from, t.p.Line(from), "groups.blacklist is MM2's old name of groups.exclude; translated as such")
	}
	syncOffsets, soFrom, _ := t.flowSetting(f, "sync.group.offsets.enabled")
	checkpoints, cpFrom, cpSet := t.flowSetting(f, "emit.checkpoints.enabled")
	if !cpSet {
		checkpoints = "true" // MM2's default
	}
	switch {
	case isTrue(syncOffsets):
		m.add("mirror.groups.include", groupsIncl, "")
		m.add("mirror.groups.exclude", groupsExcl, "")
	case isTrue(checkpoints):
		m.add("mirror.groups.include", groupsIncl, "")
		m.add("mirror.groups.exclude", groupsExcl, "")
		key := soFrom
		if key == "" {
			key = cpFrom
		}
		t.decide(key, t.p.Line(key), fmt.Sprintf("%s: MirrorMaker 2 only emitted checkpoints (sync.group.offsets.enabled is false), which consumers had to translate at failover. kmirror copies the committed offsets of the groups in scope as they are (the offsets are the same on both clusters), skipping groups active on the destination; to leave the destination's groups alone as MM2 did, set mirror.groups.include to \"\"", f))
	default:
		m.add("mirror.groups.include", "", "MirrorMaker 2 neither synced group offsets nor emitted checkpoints for this flow")
	}

	if v, _, ok := t.flowSetting(f, "sync.topic.acls.enabled"); ok && !isTrue(v) {
		m.add("mirror.acl.include", "", "sync.topic.acls.enabled = false")
	} else {
		m.add("mirror.acl.include", []string{"TOPIC;*;READ;ALLOW", "TOPIC;*;DESCRIBE;ALLOW", "TOPIC;*;DESCRIBE_CONFIGS;ALLOW", "TOPIC;*;*;DENY"},
			"what MirrorMaker 2 syncs: topic ACLs but ALLOW WRITE")
		t.note(&t.res.Decisions, "sync.topic.acls.enabled", "MirrorMaker 2 syncs topic ACLs except ALLOW WRITE and turns ALLOW ALL into READ; kmirror copies bindings as they are, so the translation includes topic READ, DESCRIBE and DESCRIBE_CONFIGS ALLOW bindings and every topic DENY binding (an ALLOW ALL binding is not copied; add TOPIC;*;ALL;ALLOW to mirror.acl.include if you want it, as ALL)")
	}

	if v, from, ok := t.flowSetting(f, "sync.topic.configs.enabled"); ok && !isTrue(v) {
		m.add("mirror.topic.properties.exclude", []string{".*"}, "sync.topic.configs.enabled = false: no topic config is copied")
		t.decide(from, t.p.Line(from), "kmirror still keeps each destination topic's max.message.bytes at least the source's unless it is excluded, and .* excludes it too: the destination's limit is then yours to keep")
	} else if v, _, ok := t.flowSetting(f, "config.properties.exclude"); ok {
		m.add("mirror.topic.properties.exclude", splitList(v), "")
	} else if v, from, ok := t.flowSetting(f, "config.properties.blacklist"); ok {
		m.add("mirror.topic.properties.exclude", splitList(v), "")
		t.decide(from, t.p.Line(from), "config.properties.blacklist is MM2's old name of config.properties.exclude; translated as such")
	}

	// One interval drives every kmirror sync loop: the shortest MM2 one.
	var shortest int64
	var shortestKey string
	for _, k := range []string{"refresh.topics.interval.seconds", "refresh.groups.interval.seconds", "sync.topic.configs.interval.seconds", "sync.topic.acls.interval.seconds", "sync.group.offsets.interval.seconds", "emit.checkpoints.interval.seconds"} {
		v, from, ok := t.flowSetting(f, k)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			t.note(&t.res.NoEquivalent, from, "not a positive number of seconds; ignored")
			continue
		}
		if shortest == 0 || n < shortest {
			shortest, shortestKey = n, from
		}
	}
	if shortest > 0 {
		t.setDaemon("mirror.metadata.refresh.interval.ms", strconv.FormatInt(shortest*1000, 10), shortestKey,
			"one interval drives every kmirror sync loop (topics, configs, groups, ACLs): the shortest MM2 interval set, "+shortestKey)
	}

	for _, pr := range t.p.List {
		k := strings.TrimPrefix(pr.Key, f.String()+".")
		if why := flowNoEquivalent[k]; why != "" && !(k == "replication.policy.class" && strings.Contains(pr.Value, "IdentityReplicationPolicy")) {
			t.used[pr.Key] = true
			t.note(&t.res.NoEquivalent, pr.Key, why)
		}
	}
	if v := t.get("replication.policy.class"); strings.Contains(v, "IdentityReplicationPolicy") {
		t.note(&t.res.Decisions, "replication.policy.class", "MirrorMaker 2 already kept topic names (IdentityReplicationPolicy), as kmirror does: the destination topics it wrote have the names kmirror will use (see docs/migrating-from-mirrormaker2.md: they must be deleted before kmirror copies them again)")
	}
}

// setDaemon sets a daemon key of the result; the first setting wins, a
// different later one is noted.
func (t *translator) setDaemon(key, value, from, comment string) {
	for _, d := range t.daemon {
		if d.key == key {
			if d.value != value {
				t.note(&t.res.Decisions, from, fmt.Sprintf("%s is one daemon-wide key in kmirror; kept %v, not %s", key, d.value, value))
			}
			return
		}
	}
	t.daemon = append(t.daemon, kv{key, value, comment})
}

// consumerTuning translates a source cluster's consumer overrides.
func (t *translator) consumerTuning(alias string) {
	for _, pr := range t.p.List {
		k, ok := strings.CutPrefix(pr.Key, alias+".consumer.")
		if !ok {
			continue
		}
		t.used[pr.Key] = true
		if dk, ok := consumerToDaemon[k]; ok {
			t.setDaemon(dk, strings.TrimSpace(pr.Value), pr.Key, "from "+pr.Key)
			continue
		}
		if isSecurityKey(k) {
			t.note(&t.res.Decisions, pr.Key, "kmirror has one set of credentials per cluster: the cluster's own keys were used")
			continue
		}
		t.note(&t.res.NoEquivalent, pr.Key, "kmirror fetches as a follower replica does, not as a consumer: only the fetch sizes, wait and socket buffer (replica.fetch.*) translate")
	}
	for _, pr := range t.p.List {
		if strings.HasPrefix(pr.Key, alias+".admin.") || strings.HasPrefix(pr.Key, alias+".producer.") {
			t.used[pr.Key] = true
			t.note(&t.res.NoEquivalent, pr.Key, "kmirror has one client per cluster; its settings are the cluster's keys")
		}
	}
}

// producerOverrides notes the target's producer overrides.
func (t *translator) producerOverrides(alias string) {
	for _, pr := range t.p.List {
		rest, ok := strings.CutPrefix(pr.Key, alias+".")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(rest, "producer."):
			t.used[pr.Key] = true
			t.note(&t.res.NoEquivalent, pr.Key, "kmirror appends the source's record batches as they are (compression, batching, timestamps), always idempotently with acks=all; there is no producer to tune")
		case strings.HasPrefix(rest, "admin."), strings.HasPrefix(rest, "consumer."):
			t.used[pr.Key] = true
			t.note(&t.res.NoEquivalent, pr.Key, "kmirror has one client per cluster; its settings are the cluster's keys")
		}
	}
}

// rest accounts for every key not translated yet: no equivalent, keys of
// other flows and clusters, unknown.
func (t *translator) rest(flows []flow) {
	for _, pr := range t.p.List {
		if t.used[pr.Key] {
			continue
		}
		key := pr.Key
		if f, rest, ok := t.splitFlowKey(key); ok {
			if !slices.Contains(flows, f) {
				continue // a flow not translated: said once in Decisions
			}
			if flowHandled[rest] {
				continue
			}
			if _, ok := flowNoEquivalent[rest]; ok {
				continue
			}
			if strings.HasPrefix(rest, "producer.override.") || strings.HasPrefix(rest, "consumer.override.") {
				t.note(&t.res.NoEquivalent, key, "kmirror has one client per cluster; its settings are the cluster's keys")
				continue
			}
			t.note(&t.res.Unknown, key, "not a MirrorMaker 2 flow setting kmirror knows; not translated"+suggest(rest))
			continue
		}
		if alias, rest, ok := t.splitClusterKey(key); ok {
			if !t.involved(alias, flows) {
				continue
			}
			if isSecurityKey(rest) {
				switch {
				case !knownSecurityKey(rest):
					t.note(&t.res.Unknown, key, "not a client security key kmirror knows; not translated")
				case rest == "ssl.key.password":
					t.note(&t.res.NoEquivalent, key, "kmirror reads unencrypted PEM keys only (convert the key as the to-do says; the value is not shown or written)")
				case strings.HasSuffix(rest, "password"):
					t.note(&t.res.NoEquivalent, key, "PEM files have no password (the value is not shown or written)")
				default:
					t.note(&t.res.NoEquivalent, key, "not used: cluster "+alias+"'s security.protocol does not use it")
				}
				continue
			}
			t.note(&t.res.Unknown, key, "not a client key kmirror knows; not translated")
			continue
		}
		switch {
		case flowHandled[key]:
			// A default for flows: used where a translated flow reads it.
		case isSecurityKey(key):
			if strings.HasSuffix(key, ".password") {
				t.note(&t.res.NoEquivalent, key, "PEM files have no store password (the value is not shown or written)")
			}
		case hasAnyPrefix(key, connectPrefixes):
			t.note(&t.res.NoEquivalent, key, whyConnect)
		default:
			if _, ok := flowNoEquivalent[key]; !ok {
				t.note(&t.res.Unknown, key, "not a MirrorMaker 2 setting kmirror knows; not translated"+suggest(key))
			}
		}
	}
	for _, d := range t.p.Duplicates() {
		t.note(&t.res.Decisions, d.Key, fmt.Sprintf("given more than once (line %d is overridden by the last, as in Java)", d.Line))
	}
}

func (t *translator) splitClusterKey(key string) (string, string, bool) {
	best := ""
	for _, c := range t.clusters {
		if strings.HasPrefix(key, c+".") && len(c) > len(best) {
			best = c
		}
	}
	if best == "" {
		return "", "", false
	}
	return best, key[len(best)+1:], true
}

func (t *translator) involved(alias string, flows []flow) bool {
	for _, f := range flows {
		if f.source == alias || f.target == alias {
			return true
		}
	}
	return false
}

// kerberos maps a Krb5LoginModule JAAS line to the sasl.kerberos.* keys
// (docs/configuration.md, "Kerberos (GSSAPI)"). The keytab is named, not
// copied; what the JVM took from elsewhere (krb5.conf) is a to-do.
func (t *translator) kerberos(alias, jaasKey, module string, opts map[string]string, m *mapping) {
	line := t.p.Line(jaasKey)
	if module != "Krb5LoginModule" {
		t.todo(jaasKey, line, "the JAAS login module is "+module+" but sasl.mechanism is GSSAPI: set sasl.kerberos.principal and sasl.kerberos.keytab by hand")
		return
	}
	if !strings.EqualFold(opts["useKeyTab"], "true") || opts["keyTab"] == "" {
		t.todo(jaasKey, line, fmt.Sprintf("cluster %s logs in without a keytab (a ticket cache, kinit): kmirror logs in with a keytab only; make one (kadmin ktadd -k FILE PRINCIPAL) and set sasl.kerberos.keytab", alias))
	} else {
		m.add("sasl.kerberos.keytab", opts["keyTab"], "keyTab of the JAAS line; readable by kmirror only")
	}
	if p := opts["principal"]; p != "" {
		m.add("sasl.kerberos.principal", p, "")
	} else {
		t.todo(jaasKey, line, fmt.Sprintf("cluster %s's JAAS line has no principal: set sasl.kerberos.principal", alias))
	}
	if sn := opts["serviceName"]; sn != "" {
		if _, _, set := t.clusterSetting(alias, "sasl.kerberos.service.name"); !set {
			m.add("sasl.kerberos.service.name", sn, "serviceName of the JAAS line")
		}
	}
	t.todo(jaasKey, line, fmt.Sprintf("cluster %s: MirrorMaker 2's JVM read krb5.conf from -Djava.security.krb5.conf (default /etc/krb5.conf); if it was elsewhere, set sasl.kerberos.krb5.conf", alias))
}

func knownSecurityKey(k string) bool {
	for _, key := range config.Keys {
		if key.Scope == config.ScopeCluster && key.Name == k {
			return true
		}
	}
	for _, u := range config.Unsupported {
		if u.Name == k {
			return true
		}
	}
	switch k {
	case "ssl.truststore.password", "ssl.keystore.password", "ssl.key.password", "sasl.kerberos.service.name":
		return true
	}
	return false
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func appendNew(list []string, more ...string) []string {
	out := slices.Clone(list)
	for _, m := range more {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// splitList splits MM2's comma-separated lists, dropping empty entries.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func isTrue(s string) bool { return strings.EqualFold(strings.TrimSpace(s), "true") }

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// mirrorName is the mirror's name: SOURCE-to-TARGET, in kmirror's name
// grammar.
func mirrorName(f flow) string {
	return unsafeName.ReplaceAllString(f.source, "-") + "-to-" + unsafeName.ReplaceAllString(f.target, "-")
}

// fileName turns a cluster alias into a file name.
func fileName(alias string) string { return unsafeName.ReplaceAllString(alias, "_") }

// suggest words a "did you mean" for a misspelt flow key.
func suggest(key string) string {
	var known []string
	for k := range flowHandled {
		known = append(known, k)
	}
	for k := range flowNoEquivalent {
		known = append(known, k)
	}
	slices.Sort(known)
	if s := raw.Suggest(key, known); s != "" {
		return "; did you mean " + s + "?"
	}
	return ""
}
