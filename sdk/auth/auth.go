// Package auth defines the contract of kmirror's credential providers: the
// plugins that give kmirror's Kafka clients (of a mirror's source cluster,
// or of the destination cluster) their SASL credentials.
//
// A [Provider] serves PLAIN and SCRAM user names and passwords and
// OAUTHBEARER tokens. kmirror asks it whenever a client authenticates a
// connection (and when a broker asks for re-authentication, KIP-368), so
// Credentials is called often, concurrently, and on the connection path:
// providers cache what they fetch (a token until shortly before it expires)
// and never call their backend once per connection.
//
// Implementations: plugins/auth/static (configured or file-based passwords,
// re-read on every call) and plugins/auth/oauth (OAUTHBEARER, OAuth 2
// client-credentials flow). Every implementation runs the conformance suite
// in package authtest.
//
// # Protocol versions
//
// [ProtocolMajor] is carried in the plugin handshake: a host refuses a
// plugin with another major version. [ProtocolMinor] and the mechanisms a
// provider serves travel in [Info], which the host reads once at launch.
// Minor versions only add: a host of minor n works with plugins of any
// minor, and asks nothing a plugin's Info does not announce.
//
// # Errors
//
// Providers return the sentinel errors below, wrapped with %w and a message
// that names what failed (the mirror, the role, the file or endpoint) and
// never a secret. Callers branch with errors.Is:
//
//   - [ErrUnsupportedMechanism]: this provider does not serve the mechanism;
//     the configuration is wrong, retrying will not help.
//   - [ErrRejected]: the credential source refused (unknown client, wrong
//     client secret, not authorized); retrying with the same configuration
//     will not help, an operator must act.
//   - [ErrUnavailable]: credentials cannot be obtained right now (an
//     unreachable or failing endpoint, a password file being rotated);
//     retry with backoff.
//   - [ErrInvalidRequest]: the host sent a malformed [Request].
//   - [ErrClosed]: the provider was closed.
//
// A canceled or expired context makes Credentials fail with an error that
// wraps ctx.Err(). The RPC transport carries these sentinels across the
// process boundary, so errors.Is works the same on the host.
package auth

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Protocol version of the auth plugin contract. See the package
// documentation.
const (
	ProtocolMajor = 1
	ProtocolMinor = 0
)

// SASL mechanisms, spelled as in Kafka's sasl.mechanism.
const (
	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
	MechanismOAuthBearer = "OAUTHBEARER"
)

// Mechanisms returns every mechanism the contract knows, in a fixed order.
func Mechanisms() []string {
	return []string{MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512, MechanismOAuthBearer}
}

// KnownMechanism reports whether m is one of Mechanisms.
func KnownMechanism(m string) bool { return slices.Contains(Mechanisms(), m) }

// Roles of the client a request is for.
const (
	// RoleSource: a client of a mirror's source cluster.
	RoleSource = "source"
	// RoleDestination: a client of the destination cluster.
	RoleDestination = "destination"
)

// Sentinel errors. See the package documentation for when each applies.
var (
	ErrUnsupportedMechanism = errors.New("auth: mechanism not supported by this provider")
	ErrRejected             = errors.New("auth: credentials rejected by the credential source")
	ErrUnavailable          = errors.New("auth: credentials temporarily unavailable")
	ErrInvalidRequest       = errors.New("auth: invalid request")
	ErrClosed               = errors.New("auth: provider closed")
	// ErrInvalidCredentials: a provider returned credentials that cannot
	// be used for the mechanism (see Credentials.Validate). It is a bug in
	// the provider or its data, not something a retry fixes.
	ErrInvalidCredentials = errors.New("auth: invalid credentials")
	// ErrInvalidConfig: a provider's configuration is invalid; returned by
	// constructors, never by Credentials.
	ErrInvalidConfig = errors.New("auth: invalid provider configuration")
	// ErrIncompatible: a provider speaks another major protocol version or
	// announces an invalid Info; the host does not use it.
	ErrIncompatible = errors.New("auth: incompatible provider")
)

// mirrorNameRE is the rule for mirror names (the same as in kmirror's
// configuration and state store keys).
var mirrorNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Request says which client needs credentials.
type Request struct {
	// Mirror is the name of the mirror the client belongs to, or "" for a
	// destination client shared by all mirrors.
	Mirror string
	// Role is RoleSource or RoleDestination.
	Role string
	// Mechanism is the SASL mechanism the client authenticates with.
	Mechanism string
}

// String describes the request for error messages: `mirror "m" source
// (SCRAM-SHA-512)`.
func (r Request) String() string {
	if r.Mirror == "" {
		return fmt.Sprintf("%s (%s)", r.Role, r.Mechanism)
	}
	return fmt.Sprintf("mirror %q %s (%s)", r.Mirror, r.Role, r.Mechanism)
}

// Validate checks the request: a known role, a mirror name that is empty or
// matches [A-Za-z0-9_-]+, and a mechanism. An unknown mechanism yields
// ErrUnsupportedMechanism, anything else ErrInvalidRequest.
func (r Request) Validate() error {
	switch {
	case r.Role != RoleSource && r.Role != RoleDestination:
		return fmt.Errorf("%w: role %q is not %q or %q", ErrInvalidRequest, r.Role, RoleSource, RoleDestination)
	case r.Mirror != "" && !mirrorNameRE.MatchString(r.Mirror):
		return fmt.Errorf("%w: mirror name %q: use letters, digits, '-' and '_' only", ErrInvalidRequest, r.Mirror)
	case r.Mechanism == "":
		return fmt.Errorf("%w: no mechanism", ErrInvalidRequest)
	case !KnownMechanism(r.Mechanism):
		return fmt.Errorf("%w: %q (known: %s)", ErrUnsupportedMechanism, r.Mechanism, strings.Join(Mechanisms(), ", "))
	}
	return nil
}

// Credentials are what a client authenticates with.
//
// Printing or encoding Credentials never shows the password or the token
// (both are Secrets).
type Credentials struct {
	// Username is the SASL user name (PLAIN, SCRAM). For OAUTHBEARER it
	// is optional and, when set, sent as the authorization identity.
	Username string
	// Password is the SASL password (PLAIN, SCRAM).
	Password Secret
	// Token is the OAUTHBEARER access token.
	Token Secret
	// Expiry is when the credentials stop being valid. Required for
	// OAUTHBEARER (kmirror re-authenticates before it); zero for
	// credentials that do not expire.
	Expiry time.Time
	// Extensions are SASL extensions: OAUTHBEARER key/value pairs (RFC
	// 7628 §3.1) or SCRAM extensions such as tokenauth=true for delegation
	// tokens. Not allowed with PLAIN. Providers return a map the caller
	// may keep and modify.
	Extensions map[string]string
}

// ExpiresWithin reports whether the credentials expire before now+d.
// Credentials without an Expiry never do.
func (c Credentials) ExpiresWithin(now time.Time, d time.Duration) bool {
	return !c.Expiry.IsZero() && !now.Add(d).Before(c.Expiry)
}

var (
	// RFC 6750 §2.1 b64token.
	tokenRE = regexp.MustCompile(`^[A-Za-z0-9\-._~+/]+=*$`)
	// RFC 7628 §3.1 key and value (as Kafka checks them).
	extKeyRE   = regexp.MustCompile(`^[A-Za-z]+$`)
	extValueRE = regexp.MustCompile(`^[\x21-\x7E \t\r\n]+$`)
)

// Validate checks that c can be used for mechanism. The error wraps
// ErrInvalidCredentials (ErrUnsupportedMechanism for an unknown mechanism)
// and never contains a secret.
//
//   - PLAIN, SCRAM-*: a Username and a Password, no Token; neither may
//     contain a NUL byte; PLAIN takes no Extensions.
//   - OAUTHBEARER: a Token of RFC 6750 token characters, an Expiry, no
//     Password; a Username, if any, contains neither ',' nor '=' nor NUL.
//   - Extensions: keys of ASCII letters other than "auth", non-empty
//     values of printable ASCII, space, tab, CR and LF.
func (c Credentials) Validate(mechanism string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w for %s: %s", ErrInvalidCredentials, mechanism, fmt.Sprintf(format, args...))
	}
	switch mechanism {
	case MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512:
		switch {
		case c.Username == "":
			return bad("no username")
		case !c.Password.IsSet():
			return bad("no password for user %q", c.Username)
		case c.Token.IsSet():
			return bad("a token is set; tokens are for %s", MechanismOAuthBearer)
		case strings.IndexByte(c.Username, 0) >= 0:
			return bad("username %q contains a NUL byte", c.Username)
		case strings.IndexByte(c.Password.Reveal(), 0) >= 0:
			return bad("the password of user %q contains a NUL byte", c.Username)
		case mechanism == MechanismPlain && len(c.Extensions) > 0:
			return bad("extensions are not supported with %s", MechanismPlain)
		}
	case MechanismOAuthBearer:
		switch {
		case !c.Token.IsSet():
			return bad("no token")
		case !tokenRE.MatchString(c.Token.Reveal()):
			return bad("the token contains characters not allowed in a bearer token (RFC 6750 §2.1)")
		case c.Expiry.IsZero():
			return bad("no expiry; a token must say when it expires")
		case c.Password.IsSet():
			return bad("a password is set; passwords are for PLAIN and SCRAM")
		case strings.ContainsAny(c.Username, ",=\x00"):
			return bad("authorization identity %q contains ',', '=' or NUL", c.Username)
		}
	default:
		return fmt.Errorf("%w: %q", ErrUnsupportedMechanism, mechanism)
	}
	for k, v := range c.Extensions {
		switch {
		case !extKeyRE.MatchString(k):
			return bad("extension key %q: use ASCII letters only", k)
		case k == "auth":
			return bad("extension key %q is reserved", k)
		case !extValueRE.MatchString(v):
			return bad("extension %q: the value is empty or has characters outside printable ASCII, space, tab, CR, LF", k)
		}
	}
	return nil
}

// Info describes a provider. The host reads it once, at launch.
type Info struct {
	// Name identifies the provider in logs and metrics
	// (plugin.auth.<name>): lower-case letters, digits, '-' and '_'.
	Name string
	// Version is the provider's own version, free-form, for logs.
	Version string
	// ProtocolMajor and ProtocolMinor are the protocol version the
	// provider implements: set them to this package's constants.
	ProtocolMajor int
	ProtocolMinor int
	// Mechanisms the provider serves, as configured. Credentials for any
	// other mechanism fail with ErrUnsupportedMechanism.
	Mechanisms []string
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// Supports reports whether the provider serves mechanism.
func (i Info) Supports(mechanism string) bool { return slices.Contains(i.Mechanisms, mechanism) }

// Validate checks what a host relies on: a valid name, ProtocolMajor equal
// to this package's, and a non-empty list of distinct known mechanisms. The
// error wraps ErrIncompatible.
func (i Info) Validate() error {
	switch {
	case !nameRE.MatchString(i.Name):
		return fmt.Errorf("%w: name %q: use lower-case letters, digits, '-' and '_', starting with a letter or digit", ErrIncompatible, i.Name)
	case i.ProtocolMajor != ProtocolMajor:
		return fmt.Errorf("%w: provider %q speaks auth protocol %d.%d, this host speaks %d.x", ErrIncompatible, i.Name, i.ProtocolMajor, i.ProtocolMinor, ProtocolMajor)
	case i.ProtocolMinor < 0:
		return fmt.Errorf("%w: provider %q: negative protocol minor version %d", ErrIncompatible, i.Name, i.ProtocolMinor)
	case len(i.Mechanisms) == 0:
		return fmt.Errorf("%w: provider %q announces no mechanism", ErrIncompatible, i.Name)
	}
	for n, m := range i.Mechanisms {
		if !KnownMechanism(m) {
			return fmt.Errorf("%w: provider %q announces unknown mechanism %q", ErrIncompatible, i.Name, m)
		}
		if slices.Contains(i.Mechanisms[:n], m) {
			return fmt.Errorf("%w: provider %q announces mechanism %q twice", ErrIncompatible, i.Name, m)
		}
	}
	return nil
}

// Provider supplies credentials to kmirror's Kafka clients.
//
// All methods are safe for concurrent use.
type Provider interface {
	// Info describes the provider. It does not change over the
	// provider's life and works after Close.
	Info() Info

	// Credentials returns the credentials for req. The result passes
	// Validate(req.Mechanism), and a token's Expiry lies in the future.
	// While nothing was rotated and a token is not close to its expiry,
	// repeated calls return the same credentials without contacting any
	// backend. Errors wrap the sentinels of this package (see the
	// package documentation) and never contain a secret.
	Credentials(ctx context.Context, req Request) (Credentials, error)

	// Close releases the provider. Afterwards Credentials fails with
	// ErrClosed. Close is idempotent. For a provider served by a plugin,
	// Close on the host closes the plugin's provider (the Close rpc); the
	// host stops the plugin process afterwards (docs/plugins.md).
	Close() error
}
