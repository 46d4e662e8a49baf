package security

import (
	"fmt"
	"strings"

	"github.com/kmirror/kmirror/core/config/value"
)

// DefaultKerberosServiceName is the Kerberos service name of Kafka brokers
// when sasl.kerberos.service.name is empty: the first part of the brokers'
// principal (kafka/broker1.example.com@EXAMPLE.COM).
const DefaultKerberosServiceName = "kafka"

// MaxKeytabBytes caps a keytab file: a keytab holds a few keys per
// principal, a few kilobytes at most.
const MaxKeytabBytes = 1 << 20

// Kerberos holds the GSSAPI settings of a cluster: the client principal,
// the keytab it logs in with and the krb5.conf that names the realm's KDCs.
// The keytab is named, never held: core/kclient reads it at every login, so
// a rotated keytab is used without a restart.
type Kerberos struct {
	// ServiceName is the first part of the brokers' principal
	// (service/host@REALM); kmirror asks the KDC for a ticket to
	// ServiceName/<broker host>.
	ServiceName string
	// Principal is the client principal, user or user@REALM (the realm
	// defaults to krb5.conf's default_realm).
	Principal string
	// KeytabFile is the path of the keytab holding Principal's keys.
	KeytabFile string
	// Krb5ConfFile is the path of the Kerberos configuration (realms,
	// KDCs, encryption types).
	Krb5ConfFile string
}

// kerberosJAAS parses sasl.jaas.config for Describe, or returns the zero
// config when it is unset or not Krb5LoginModule.
func (c *Keys) kerberosJAAS() jaasConfig {
	if !c.SASLJAASConfig.IsSet() {
		return jaasConfig{}
	}
	j, err := parseJAAS(c.SASLJAASConfig.Reveal())
	if err != nil || j.module != jaasKrb5 {
		return jaasConfig{}
	}
	return j
}

// resolveKerberos resolves GSSAPI's settings from the sasl.kerberos.* keys
// or the Krb5LoginModule options of sasl.jaas.config (jaas; its module was
// checked already), and checks the keytab and krb5.conf files. A setting
// given both ways is a problem, not a precedence rule.
func (c *Keys) resolveKerberos(jaas jaasConfig) (Kerberos, []Problem) {
	var probs []Problem
	add := func(key, format string, args ...any) {
		probs = append(probs, Problem{key, fmt.Sprintf(format, args...)})
	}
	k := Kerberos{ServiceName: c.KerberosServiceName, Principal: c.KerberosPrincipal, KeytabFile: c.KerberosKeytab, Krb5ConfFile: c.KerberosKrb5Conf}
	if jaas.module == jaasKrb5 {
		opt := jaas.options
		if v, ok := opt["useTicketCache"]; ok && strings.EqualFold(v, "true") {
			add("sasl.jaas.config", "useTicketCache=true: kmirror logs in with a keytab only (a ticket cache that kinit fills expires); set useKeyTab=true with keyTab and principal")
		}
		if v, ok := opt["useKeyTab"]; ok && !strings.EqualFold(v, "true") {
			add("sasl.jaas.config", "useKeyTab must be true: kmirror logs in with a keytab only")
		}
		for name, dst := range map[string]*string{"keyTab": &k.KeytabFile, "principal": &k.Principal} {
			if v, ok := opt[name]; ok {
				if *dst != "" {
					add("sasl.jaas.config", "sets %s, which a sasl.kerberos.* key sets too; keep one", name)
				}
				*dst = v
			}
		}
		// Kafka reads serviceName from the JAAS line when
		// sasl.kerberos.service.name is not set.
		if v, ok := opt["serviceName"]; ok {
			if k.ServiceName != "" && k.ServiceName != DefaultKerberosServiceName && k.ServiceName != v {
				add("sasl.jaas.config", "serviceName differs from sasl.kerberos.service.name; keep one")
			}
			k.ServiceName = v
		}
	}
	if k.ServiceName == "" {
		k.ServiceName = DefaultKerberosServiceName
	}
	if strings.ContainsAny(k.ServiceName, "/@ \t") {
		add("sasl.kerberos.service.name", "%s is not a service name: give only the first part of the brokers' principal (kafka for kafka/host@REALM)", value.Quote(k.ServiceName))
	}
	switch p := k.Principal; {
	case p == "":
		add("sasl.kerberos.principal", "required for GSSAPI: the principal kmirror logs in as (user or user@REALM; or principal in sasl.jaas.config)")
	case strings.Count(p, "@") > 1 || strings.HasPrefix(p, "@") || strings.HasSuffix(p, "@") || strings.ContainsAny(p, " \t"):
		add("sasl.kerberos.principal", "%s is not a Kerberos principal: use name[/instance][@REALM]", value.Quote(p))
	}
	if k.KeytabFile == "" {
		add("sasl.kerberos.keytab", "required for GSSAPI: the keytab file holding the principal's keys (kadmin ktadd; or keyTab in sasl.jaas.config)")
	} else if err := CheckKeytab(k.KeytabFile); err != nil {
		add("sasl.kerberos.keytab", "%v", err)
	}
	if k.Krb5ConfFile == "" {
		add("sasl.kerberos.krb5.conf", "required for GSSAPI: the Kerberos configuration naming the realm's KDCs")
	} else if _, err := value.ReadFile(k.Krb5ConfFile, value.MaxPEMFileBytes); err != nil {
		add("sasl.kerberos.krb5.conf", "cannot read the Kerberos configuration: %v", err)
	}
	if len(probs) > 0 {
		return Kerberos{}, probs
	}
	return k, nil
}

// CheckKeytab checks that path is a readable file in the keytab format
// (MIT's version 0x502, or the older 0x501). It reads the file but never
// shows its content: the error names the path only.
func CheckKeytab(path string) error {
	b, err := value.ReadFile(path, MaxKeytabBytes)
	if err != nil {
		return fmt.Errorf("cannot read the keytab: %v", err)
	}
	if len(b) < 2 || b[0] != 5 || (b[1] != 1 && b[1] != 2) {
		return fmt.Errorf("%s is not a keytab (it does not start with the keytab format's version 0x0502); make it with kadmin's ktadd or ktutil", path)
	}
	return nil
}
