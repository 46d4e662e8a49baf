package auth

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// realm is the Kerberos realm of the tests.
const realm = "KMIRROR.TEST"

// kdc is an MIT Kerberos KDC (krb5kdc) of realm, with its database in dir,
// serving TCP and UDP on a loopback port.
type kdc struct {
	dir      string
	krb5conf string // the clients' krb5.conf (kmirror's and the brokers')
	env      []string
	cmd      *exec.Cmd
	done     chan struct{} // closed when krb5kdc exits
	log      bytes.Buffer  // krb5kdc's stdout and stderr; read after done
}

// sbin finds a Kerberos program on PATH or in /usr/sbin, where Debian
// installs them (not on every user's PATH).
func sbin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	p := filepath.Join("/usr/sbin", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found on PATH or in /usr/sbin: install krb5-kdc and krb5-admin-server (make deps)", name)
	}
	return p, nil
}

// startKDC writes krb5.conf and kdc.conf in a new directory, creates the
// database and runs krb5kdc until close.
func startKDC(ctx context.Context) (*kdc, error) {
	dir, err := os.MkdirTemp("", "kmirror-kdc-")
	if err != nil {
		return nil, err
	}
	k := &kdc{dir: dir, krb5conf: filepath.Join(dir, "krb5.conf"), done: make(chan struct{})}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	// TCP for every client (udp_preference_limit = 1); no DNS, and no
	// host name canonicalisation, so that the brokers' principal is
	// kafka/127.0.0.1, the host they advertise.
	krb5conf := fmt.Sprintf(`[libdefaults]
 default_realm = %[1]s
 dns_lookup_kdc = false
 dns_lookup_realm = false
 dns_canonicalize_hostname = false
 rdns = false
 udp_preference_limit = 1
 ticket_lifetime = 1h
[realms]
 %[1]s = {
  kdc = 127.0.0.1:%[2]d
 }
`, realm, port)
	kdcconf := fmt.Sprintf(`[kdcdefaults]
 kdc_ports = %[2]d
 kdc_tcp_ports = %[2]d
[realms]
 %[1]s = {
  database_name = %[3]s/principal
  key_stash_file = %[3]s/stash
  acl_file = %[3]s/kadm5.acl
  default_principal_flags = +preauth
 }
[logging]
 kdc = FILE:%[3]s/kdc.log
`, realm, port, dir)
	if err := os.WriteFile(k.krb5conf, []byte(krb5conf), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "kdc.conf"), []byte(kdcconf), 0o644); err != nil {
		return nil, err
	}
	k.env = append(os.Environ(), "KRB5_CONFIG="+k.krb5conf, "KRB5_KDC_PROFILE="+filepath.Join(dir, "kdc.conf"))
	master := make([]byte, 16)
	_, _ = rand.Read(master)
	if err := k.run(ctx, "kdb5_util", "create", "-s", "-r", realm, "-P", hex.EncodeToString(master)); err != nil {
		return nil, err
	}
	bin, err := sbin("krb5kdc")
	if err != nil {
		return nil, err
	}
	k.cmd = exec.Command(bin, "-n", "-r", realm)
	k.cmd.Env = k.env
	k.cmd.Stdout, k.cmd.Stderr = &k.log, &k.log
	if err := kafkatest.StartProcess(k.cmd); err != nil {
		return nil, fmt.Errorf("krb5kdc: %w", err)
	}
	go func() { // owned by k: ends when krb5kdc exits (close kills it)
		_ = k.cmd.Wait()
		close(k.done)
	}()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return k, nil
		}
		select {
		case <-k.done:
			return nil, fmt.Errorf("krb5kdc exited: %s", k.log.String())
		case <-ctx.Done():
			k.close()
			return nil, fmt.Errorf("krb5kdc does not serve %s: %w", addr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// run runs a Kerberos admin program (kdb5_util, kadmin.local) with the
// KDC's configuration.
func (k *kdc) run(ctx context.Context, name string, args ...string) error {
	bin, err := sbin(name)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = k.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, args[0], err, out)
	}
	// kadmin.local exits 0 when a query fails; its message says so.
	if s := string(out); strings.Contains(s, " while ") || strings.Contains(s, "usage:") {
		return fmt.Errorf("%s %s: %s", name, strings.Join(args, " "), s)
	}
	return nil
}

// admin runs one kadmin.local query.
func (k *kdc) admin(ctx context.Context, query string) error {
	return k.run(ctx, "kadmin.local", "-r", realm, "-q", query)
}

// addPrincipal creates principal (without the realm) with a random key.
func (k *kdc) addPrincipal(ctx context.Context, principal string) error {
	return k.admin(ctx, "addprinc -randkey "+principal)
}

// keytab writes principal's keys to a new keytab file name in dir and
// returns its path. ktadd gives the principal new random keys (a new kvno),
// so a keytab written before holds keys the KDC no longer accepts.
func (k *kdc) keytab(ctx context.Context, principal, name string) (string, error) {
	path := filepath.Join(k.dir, name)
	return path, k.admin(ctx, "ktadd -k "+path+" "+principal)
}

// close stops krb5kdc and removes its directory.
func (k *kdc) close() {
	if k.cmd != nil && k.cmd.Process != nil {
		_ = k.cmd.Process.Kill()
		<-k.done
	}
	_ = os.RemoveAll(k.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
