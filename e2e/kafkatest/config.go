package kafkatest

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
)

// nodePorts are the ports of one node's listeners.
type nodePorts map[Listener]int

// addr is the loopback address of a port.
func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// allListeners returns the node's listeners: controller and internal first,
// then the client listeners.
func (o Options) allListeners() []Listener {
	return append([]Listener{controller, Internal}, o.listeners()...)
}

// securityProtocol returns the protocol of a listener.
func securityProtocol(l Listener) string {
	switch l {
	case controller, Internal:
		return "SASL_PLAINTEXT"
	case Proxied:
		return "PLAINTEXT"
	}
	return string(l)
}

// clusterSpec is what every node's configuration is rendered from.
type clusterSpec struct {
	opts          Options
	adminPassword string
	ports         []nodePorts // by node id
	// dataDirs by node id; tlsKeystore and tlsTruststore are set with TLS.
	dataDirs                   []string
	tlsKeystore, tlsTruststore string
	// proxyAddrs by node id, with FaultProxies: what the Proxied listener
	// advertises.
	proxyAddrs []string
	// zkConnect is the ZooKeeper server's address in ZooKeeper mode.
	zkConnect string
}

// jaasPlainAdmin is the JAAS config of the INTERNAL and CONTROLLER listeners:
// the node logs in as the admin user and accepts only the admin user.
func (s *clusterSpec) jaasPlainAdmin() string {
	return fmt.Sprintf(`org.apache.kafka.common.security.plain.PlainLoginModule required username="%s" password="%s" user_%s="%s";`,
		adminUser, s.adminPassword, adminUser, s.adminPassword)
}

// nodeConfig renders the broker properties of node id.
func (s *clusterSpec) nodeConfig(id int) map[string]string {
	o := s.opts
	n := o.Brokers
	minISR := strconv.Itoa(min(2, n))
	rf := strconv.Itoa(n)

	cfg := map[string]string{
		"process.roles":                                    "broker,controller",
		"node.id":                                          strconv.Itoa(id),
		"controller.listener.names":                        string(controller),
		"inter.broker.listener.name":                       string(Internal),
		"sasl.mechanism.controller.protocol":               string(Plain),
		"sasl.mechanism.inter.broker.protocol":             string(Plain),
		"log.dirs":                                         s.dataDirs[id],
		"num.partitions":                                   "1",
		"default.replication.factor":                       rf,
		"min.insync.replicas":                              "1",
		"auto.create.topics.enable":                        "false",
		"offsets.topic.replication.factor":                 rf,
		"offsets.topic.num.partitions":                     "5",
		"transaction.state.log.replication.factor":         rf,
		"transaction.state.log.min.isr":                    minISR,
		"transaction.state.log.num.partitions":             "5",
		"share.coordinator.state.topic.replication.factor": rf,
		"share.coordinator.state.topic.min.isr":            minISR,
		"share.coordinator.state.topic.num.partitions":     "5",
		"group.initial.rebalance.delay.ms":                 "0",
		// Fewer threads and a small cleaner buffer keep a node within
		// -Xmx512m and light on a 2-core machine.
		"num.network.threads":               "2",
		"num.io.threads":                    "2",
		"background.threads":                "2",
		"num.replica.fetchers":              "1",
		"num.recovery.threads.per.data.dir": "1",
		"log.cleaner.threads":               "1",
		"log.cleaner.dedupe.buffer.size":    strconv.Itoa(16 << 20),
	}

	var voters, listeners, advertised, protoMap []string
	for vid, p := range s.ports {
		voters = append(voters, fmt.Sprintf("%d@%s", vid, addr(p[controller])))
	}
	for _, l := range o.allListeners() {
		a := addr(s.ports[id][l])
		listeners = append(listeners, fmt.Sprintf("%s://%s", l, a))
		switch l {
		case controller:
		case Proxied:
			advertised = append(advertised, fmt.Sprintf("%s://%s", l, s.proxyAddrs[id]))
		default:
			advertised = append(advertised, fmt.Sprintf("%s://%s", l, a))
		}
		protoMap = append(protoMap, fmt.Sprintf("%s:%s", l, securityProtocol(l)))
	}
	cfg["controller.quorum.voters"] = strings.Join(voters, ",")
	cfg["listeners"] = strings.Join(listeners, ",")
	cfg["advertised.listeners"] = strings.Join(advertised, ",")
	cfg["listener.security.protocol.map"] = strings.Join(protoMap, ",")

	for _, l := range []Listener{controller, Internal} {
		p := "listener.name." + strings.ToLower(string(l)) + "."
		cfg[p+"sasl.enabled.mechanisms"] = string(Plain)
		cfg[p+"plain.sasl.jaas.config"] = s.jaasPlainAdmin()
	}

	if o.SASL != nil {
		users := slices.Sorted(maps.Keys(o.SASL.Users))
		var plainUsers strings.Builder
		for _, u := range users {
			fmt.Fprintf(&plainUsers, ` user_%s="%s"`, u, o.SASL.Users[u])
		}
		var mechs []string
		for _, m := range o.SASL.Mechanisms {
			mechs = append(mechs, string(m))
		}
		for _, l := range o.listeners() {
			if !l.sasl() {
				continue
			}
			p := "listener.name." + strings.ToLower(string(l)) + "."
			cfg[p+"sasl.enabled.mechanisms"] = strings.Join(mechs, ",")
			for _, m := range o.SASL.Mechanisms {
				mp := p + strings.ToLower(string(m)) + ".sasl.jaas.config"
				switch {
				case m.scram():
					cfg[mp] = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
				case m == GSSAPI:
					k := o.SASL.Kerberos
					cfg[mp] = fmt.Sprintf(`com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="%s" principal="%s";`, k.Keytab, k.Principal)
					cfg["sasl.kerberos.service.name"] = k.ServiceName
				case m == OAuthBearer:
					cfg[mp] = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
					cfg[p+"oauthbearer.sasl.server.callback.handler.class"] = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
				default:
					cfg[mp] = "org.apache.kafka.common.security.plain.PlainLoginModule required" + plainUsers.String() + ";"
				}
			}
		}
	}

	if o.SASL != nil && o.SASL.OAuth != nil {
		cfg["sasl.oauthbearer.jwks.endpoint.url"] = o.SASL.OAuth.JWKSURL
		if o.SASL.OAuth.Audience != "" {
			cfg["sasl.oauthbearer.expected.audience"] = o.SASL.OAuth.Audience
		}
		if o.SASL.OAuth.Issuer != "" {
			cfg["sasl.oauthbearer.expected.issuer"] = o.SASL.OAuth.Issuer
		}
	}

	if o.TLS != nil {
		cfg["ssl.keystore.type"] = "PEM"
		cfg["ssl.keystore.location"] = s.tlsKeystore
		cfg["ssl.truststore.type"] = "PEM"
		cfg["ssl.truststore.location"] = s.tlsTruststore
		// CN=alice (the whole DN of a harness certificate) becomes User:alice.
		cfg["ssl.principal.mapping.rules"] = "RULE:^CN=([^,]+)(,.*)?$/$1/,DEFAULT"
		cfg["ssl.client.auth"] = "none"
		if o.TLS.ClientAuth {
			cfg["listener.name.ssl.ssl.client.auth"] = "required"
		}
	}

	if o.Authorizer {
		cfg["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
		cfg["super.users"] = strings.Join(append([]string{"User:" + adminUser}, o.SuperUsers...), ";")
	}

	if s.zkConnect != "" {
		zooKeeperNode(cfg, id, s.zkConnect)
	}
	maps.Copy(cfg, o.BrokerConfig)
	maps.Copy(cfg, o.NodeConfig[id])
	return cfg
}

// scramArgs are the StorageTool format arguments that create every SASL
// user's SCRAM credentials.
func (o Options) scramArgs() []string {
	if o.SASL == nil {
		return nil
	}
	var args []string
	for _, m := range o.SASL.Mechanisms {
		if !m.scram() {
			continue
		}
		for _, u := range slices.Sorted(maps.Keys(o.SASL.Users)) {
			args = append(args, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", m, u, o.SASL.Users[u]))
		}
	}
	return args
}

// writeProperties writes cfg as a Java properties file, keys sorted.
func writeProperties(path string, cfg map[string]string) error {
	var b strings.Builder
	b.WriteString("# Written by kmirror's e2e harness (e2e/kafkatest).\n")
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		b.WriteString(escapeProperty(k, true))
		b.WriteByte('=')
		b.WriteString(escapeProperty(cfg[k], false))
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("kafkatest: write %s: %w", path, err)
	}
	return nil
}

// escapeProperty escapes what java.util.Properties would otherwise read
// differently: backslashes and line breaks anywhere, and in keys the
// separators.
func escapeProperty(s string, key bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case key && (r == '=' || r == ':' || r == ' ' || r == '#' || r == '!'):
			b.WriteRune('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
