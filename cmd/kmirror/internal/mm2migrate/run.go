package mm2migrate

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/config/value"
)

// Exit codes of Run, as every kmirror command's.
const (
	exitOK      = 0
	exitFailure = 1 // translated, but the result does not validate, or a file could not be written
	exitUsage   = 2 // the command line or the properties file is wrong
)

// Usage is the help text of `kmirror config migrate`.
const Usage = `Usage: kmirror config migrate --from mm2.properties [--flow SOURCE->TARGET] [--out kmirror.yaml] [--secrets-dir DIR] [--state-dir DIR]

Translates a MirrorMaker 2 configuration (connect-mirror-maker.properties) into a
kmirror configuration: the clusters, the flow's topics and groups filters, its
security settings and tuning. It lists what has no equivalent in kmirror and why,
and what to do before starting kmirror (password files, PEM conversions), then
checks the result with kmirror's own validation. Passwords are never written into
the configuration: with --secrets-dir they go to one file per cluster (mode 0600),
otherwise the configuration names files you write.

One kmirror daemon mirrors into one destination cluster: when the enabled flows go
into several clusters, choose one with --flow and run one kmirror per destination.

Examples:
  kmirror config migrate --from mm2.properties --out kmirror.yaml
  kmirror config migrate --from mm2.properties --flow primary->backup --secrets-dir /etc/kmirror/secrets --out kmirror.yaml

Flags:
`

// Run is `kmirror config migrate`: flags --from, --flow, --out,
// --secrets-dir, --state-dir. The configuration goes to --out (or stdout),
// the report to stderr. It returns 0 when the result validates, 1 when it
// does not (it is still written, with the problems listed) or a file cannot
// be written, 2 for a usage error or a file that cannot be translated.
func Run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kmirror config migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "the MirrorMaker 2 properties file (required)")
	flow := fs.String("flow", "", "the flow to translate, SOURCE->TARGET (needed when the enabled flows go into several clusters)")
	out := fs.String("out", "", "where to write the kmirror configuration (default: standard output)")
	secrets := fs.String("secrets-dir", "", "write each cluster's SASL password into a file in this directory (mode 0600); default: name files under "+DefaultSecretsDir+" for you to write")
	state := fs.String("state-dir", DefaultStateDir, "state.dir of the configuration")
	fs.Usage = func() {
		fmt.Fprint(stderr, Usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kmirror config migrate: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	return Migrate(Flags{From: *from, Flow: *flow, Out: *out, SecretsDir: *secrets, StateDir: *state}, stdout, stderr)
}

// Flags are the command line of `kmirror config migrate`.
type Flags struct {
	From, Flow, Out, SecretsDir, StateDir string
}

// Migrate runs `kmirror config migrate` with flags f (Run's exit codes).
func Migrate(f Flags, stdout, stderr io.Writer) int {
	from, flow, out, secrets, state := &f.From, &f.Flow, &f.Out, &f.SecretsDir, &f.StateDir
	if *state == "" {
		*state = DefaultStateDir
	}
	if *from == "" {
		fmt.Fprintln(stderr, "kmirror config migrate: --from is required: the MirrorMaker 2 properties file")
		return exitUsage
	}
	data, err := value.ReadFile(*from, config.MaxFileBytes)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror config migrate: %v\n", err)
		return exitUsage
	}
	props, err := ParseProperties(string(data))
	if err != nil {
		fmt.Fprintf(stderr, "kmirror config migrate: %s: %v\n", *from, err)
		return exitUsage
	}
	res, err := Translate(props, Options{Flow: *flow, SecretsDir: *secrets, StateDir: *state, From: filepath.Base(*from)})
	if err != nil {
		fmt.Fprintf(stderr, "kmirror config migrate: %s: %v\n", *from, err)
		return exitUsage
	}
	if *secrets != "" {
		if err := WriteSecrets(res); err != nil {
			fmt.Fprintf(stderr, "kmirror config migrate: %v\n", err)
			return exitFailure
		}
	}
	standIns, verr := Validate(res)
	if *out == "" {
		_, err = stdout.Write(res.YAML)
	} else {
		err = os.WriteFile(*out, res.YAML, 0o644)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kmirror config migrate: write the configuration: %v\n", err)
		return exitFailure
	}
	Report(stderr, res, *out, standIns, verr)
	if verr != nil {
		return exitFailure
	}
	return exitOK
}

// Report writes what the operator must know about a translation: where
// it went, what to do, what has no equivalent, unknown keys, and the
// validation's outcome. It never shows a secret.
func Report(w io.Writer, res *Result, out string, standIns []string, verr error) {
	where := out
	if where == "" {
		where = "standard output"
	}
	fmt.Fprintf(w, "Translated into %s: destination %s, mirrors %v.\n", where, res.Destination, res.Mirrors)
	section := func(title string, notes []Note) {
		if len(notes) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		for _, n := range notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
	if len(res.Written) > 0 {
		fmt.Fprintf(w, "\nPassword files written (mode 0600; keep them readable by kmirror's user only):\n")
		for _, p := range res.Written {
			fmt.Fprintf(w, "  - %s\n", p)
		}
	}
	section("To do before starting kmirror", res.ToDo)
	section("Decisions the translation made", res.Decisions)
	section("No equivalent in kmirror (not translated)", res.NoEquivalent)
	section("Unknown keys (not translated)", res.Unknown)
	switch {
	case verr != nil:
		fmt.Fprintf(w, "\nThe result does not pass kmirror's validation; fix these in the configuration:\n%v\n", verr)
	case len(standIns) > 0:
		fmt.Fprintf(w, "\nThe result passes kmirror's validation, with stand-ins for what does not exist here yet (run `kmirror config validate` on kmirror's host once it does):\n")
		for _, s := range standIns {
			fmt.Fprintf(w, "  - %s\n", s)
		}
	default:
		fmt.Fprintln(w, "\nThe result passes kmirror's validation.")
	}
}

// WriteSecrets writes the password files of a translation made with
// Options.SecretsDir, each readable by its owner only.
func WriteSecrets(res *Result) error {
	for _, s := range res.Secrets {
		if err := os.MkdirAll(filepath.Dir(s.Path), 0o700); err != nil {
			return fmt.Errorf("password file of cluster %s: %w", s.Cluster, err)
		}
		f, err := os.OpenFile(s.Path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return fmt.Errorf("password file of cluster %s: %w", s.Cluster, err)
		}
		_, err = io.WriteString(f, s.Value.Reveal()+"\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("password file of cluster %s: %w", s.Cluster, err)
		}
		res.Written = append(res.Written, s.Path)
	}
	return nil
}

// Validate checks a translation with kmirror's own validation
// (config.Parse). Files the configuration names that do not exist here
// (password files to write, PEM files to convert or copy) and secrets to
// be given in the environment are stood in for by temporary ones through
// --set overrides, so that the rest of the configuration is checked now;
// standIns names them.
func Validate(res *Result) (standIns []string, err error) {
	dir, err := os.MkdirTemp("", "kmirror-migrate-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var sets []string
	made := map[string]string{} // path named → its stand-in
	for i, p := range res.placeholders {
		if p.kind == "secret" {
			sets = append(sets, p.set+"=placeholder")
			standIns = append(standIns, "the value of "+p.set)
			continue
		}
		if _, err := os.Stat(p.path); err == nil {
			continue // it exists: check the real one
		}
		if path, ok := made[p.path]; ok {
			sets = append(sets, p.set+"="+path)
			continue
		}
		content, err := standIn(p.kind)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, fmt.Sprintf("%d-%s", i, p.kind))
		if err := os.WriteFile(path, content, 0o600); err != nil {
			return nil, err
		}
		sets = append(sets, p.set+"="+path)
		made[p.path] = path
		standIns = append(standIns, p.path)
	}
	_, err = config.Parse(res.YAML, "yaml", nil, sets)
	return standIns, err
}

// standIn returns a file that passes the checks of its kind.
func standIn(kind string) ([]byte, error) {
	if kind == "password" {
		return []byte("placeholder\n"), nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kmirror config migrate stand-in"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if kind == "keystore" {
		k, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, err
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k})...)
	}
	return out, nil
}
