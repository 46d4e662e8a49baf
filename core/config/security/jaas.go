package security

import (
	"fmt"
	"strings"
)

// Login module class names kmirror understands in sasl.jaas.config, by their
// simple class name (so shaded copies in other packages work too).
const (
	jaasPlain  = "PlainLoginModule"
	jaasScram  = "ScramLoginModule"
	jaasOAuth  = "OAuthBearerLoginModule"
	jaasKrb5   = "Krb5LoginModule"
	jaasFormat = `<LoginModule class> required key="value" ... ;`
)

// jaasConfig is one parsed JAAS login module entry.
type jaasConfig struct {
	module  string // simple class name
	options map[string]string
}

func jaasModuleFor(mechanism string) string {
	switch mechanism {
	case MechanismPlain:
		return jaasPlain
	case MechanismOAuthBearer:
		return jaasOAuth
	case MechanismGSSAPI:
		return jaasKrb5
	}
	return jaasScram
}

// parseJAAS parses Kafka's sasl.jaas.config form:
//
//	org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";
//
// Values may be double-quoted (with \" and \\ escapes) or bare words.
// Errors name option keys and positions but never values: the text holds a
// password.
func parseJAAS(s string) (jaasConfig, error) {
	p := &jaasParser{s: s}
	p.space()
	class := p.word()
	if class == "" {
		return jaasConfig{}, fmt.Errorf("expected a login module class name; the format is %s", jaasFormat)
	}
	simple := class[strings.LastIndex(class, ".")+1:]
	switch simple {
	case jaasPlain, jaasScram, jaasOAuth, jaasKrb5:
	default:
		// The class is not echoed: a pasted password would be shown.
		return jaasConfig{}, fmt.Errorf("the login module is not supported; use org.apache.kafka.common.security.plain.PlainLoginModule, org.apache.kafka.common.security.scram.ScramLoginModule, org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule or com.sun.security.auth.module.Krb5LoginModule")
	}
	p.space()
	flag := p.word()
	switch strings.ToLower(flag) {
	case "required", "requisite", "sufficient", "optional":
	default:
		return jaasConfig{}, fmt.Errorf("expected a control flag (required) after the login module at offset %d; the format is %s", p.i, jaasFormat)
	}
	cfg := jaasConfig{module: simple, options: map[string]string{}}
	for {
		p.space()
		if p.done() {
			return jaasConfig{}, fmt.Errorf("missing the terminating ';'; the format is %s", jaasFormat)
		}
		if p.peek() == ';' {
			p.i++
			p.space()
			if !p.done() {
				return jaasConfig{}, fmt.Errorf("unexpected text after ';' at offset %d: only one login module is allowed", p.i)
			}
			return cfg, nil
		}
		key := p.word()
		if key == "" {
			return jaasConfig{}, fmt.Errorf("expected an option name at offset %d", p.i)
		}
		p.space()
		if p.done() || p.peek() != '=' {
			return jaasConfig{}, fmt.Errorf("expected '=' after %s at offset %d", optionName(key), p.i)
		}
		p.i++
		p.space()
		val, err := p.value()
		if err != nil {
			return jaasConfig{}, fmt.Errorf("%s: %v", optionName(key), err)
		}
		if _, dup := cfg.options[key]; dup {
			return jaasConfig{}, fmt.Errorf("%s is given twice", optionName(key))
		}
		cfg.options[key] = val
	}
}

type jaasParser struct {
	s string
	i int
}

func (p *jaasParser) done() bool { return p.i >= len(p.s) }
func (p *jaasParser) peek() byte { return p.s[p.i] }

func (p *jaasParser) space() {
	for !p.done() && strings.IndexByte(" \t\r\n", p.peek()) >= 0 {
		p.i++
	}
}

// word reads a bare token: anything up to white space, '=', ';' or '"'.
func (p *jaasParser) word() string {
	start := p.i
	for !p.done() && strings.IndexByte(" \t\r\n=;\"", p.peek()) < 0 {
		p.i++
	}
	return p.s[start:p.i]
}

func (p *jaasParser) value() (string, error) {
	if p.done() {
		return "", fmt.Errorf("missing value")
	}
	if p.peek() != '"' {
		v := p.word()
		if v == "" {
			return "", fmt.Errorf("missing value at offset %d", p.i)
		}
		return v, nil
	}
	p.i++
	var b strings.Builder
	for !p.done() {
		ch := p.peek()
		p.i++
		switch ch {
		case '"':
			return b.String(), nil
		case '\\':
			if p.done() {
				return "", fmt.Errorf("unterminated quoted value")
			}
			b.WriteByte(p.peek())
			p.i++
		default:
			b.WriteByte(ch)
		}
	}
	return "", fmt.Errorf("unterminated quoted value")
}

// optionName names an option for an error message. Only well-known option
// names are shown: an unknown "name" may be a password typed without its key.
func optionName(key string) string {
	switch key {
	case "username", "password", "clientId", "clientSecret", "scope", "tokenauth", "unsecuredLoginStringClaim_sub",
		"useKeyTab", "keyTab", "principal", "serviceName", "storeKey", "useTicketCache", "doNotPrompt", "debug":
		return "option " + key
	}
	return "an option"
}

// ParseJAAS parses a sasl.jaas.config value as kmirror reads it: the login
// module's simple class name (PlainLoginModule, ScramLoginModule,
// OAuthBearerLoginModule or Krb5LoginModule) and its options. The options hold the password:
// the caller keeps them out of logs and output. Errors never quote the
// text. `kmirror config migrate` uses it to turn MirrorMaker 2's JAAS
// lines into sasl.username and a password file.
func ParseJAAS(s string) (module string, options map[string]string, err error) {
	c, err := parseJAAS(s)
	if err != nil {
		return "", nil, err
	}
	return c.module, c.options, nil
}
