package etcd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kmirror/kmirror/internal/etcdtest"
	"github.com/kmirror/kmirror/internal/testpki"
	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/storetest"
)

// srv is the etcd server the tests share, each under its own prefix.
var srv *etcdtest.Server

func TestMain(m *testing.M) {
	s, err := etcdtest.Start(etcdtest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv = s
	code := m.Run()
	s.Stop()
	os.Exit(code)
}

// config is the default configuration for ep, under a prefix of t's own.
func config(t *testing.T, s *etcdtest.Server) Config {
	c := DefaultConfig()
	c.Endpoints = []string{s.Endpoint}
	c.Prefix = s.Prefix(t)
	return c
}

func open(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) statestore.Store {
		return open(t, config(t, srv))
	})
}

// TestSeveralClientsOneWinsEachRound: three daemons (three clients) race a
// compare-and-set on the same keys; each round exactly one wins, and the
// losers see ErrVersionMismatch.
func TestSeveralClientsOneWinsEachRound(t *testing.T) {
	t.Parallel()
	cfg := config(t, srv)
	clients := []*Store{open(t, cfg), open(t, cfg), open(t, cfg)}
	keys := []string{statestore.PartitionKey("m", "t", 0), statestore.LeaseKey("m", "metadata-sync")}
	for _, key := range keys {
		expect := statestore.Absent
		for round := range 20 {
			errs := make([]error, len(clients))
			versions := make([]int64, len(clients))
			var wg sync.WaitGroup
			for i, c := range clients {
				wg.Go(func() {
					versions[i], errs[i] = c.Put(t.Context(), key, fmt.Appendf(nil, "client %d round %d", i, round), expect)
				})
			}
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil && winner >= 0:
					t.Fatalf("%s round %d: clients %d and %d both won", key, round, winner, i)
				case err == nil:
					winner = i
				case !errors.Is(err, statestore.ErrVersionMismatch):
					t.Fatalf("%s round %d: client %d: %v, want ErrVersionMismatch", key, round, i, err)
				}
			}
			if winner < 0 {
				t.Fatalf("%s round %d: nobody won", key, round)
			}
			if versions[winner] <= expect {
				t.Fatalf("%s round %d: version %d after %d", key, round, versions[winner], expect)
			}
			// Every client reads the winner's write.
			for i, c := range clients {
				e, err := c.Get(t.Context(), key)
				if err != nil || e.Version != versions[winner] || string(e.Value) != fmt.Sprintf("client %d round %d", winner, round) {
					t.Fatalf("%s round %d: client %d reads %q v%d (%v), want client %d's write v%d", key, round, i, e.Value, e.Version, err, winner, versions[winner])
				}
			}
			expect = versions[winner]
		}
	}
}

// TestCutOffMidWrite: the etcd server stops (SIGSTOP) while a client
// writes with a short deadline, and continues after the client gave up, so
// the abandoned request may still be applied, at once or later. Another
// client then writes with the same expected version: exactly one of the
// two writes is applied, entirely, and the version rules hold for both
// clients afterwards.
func TestCutOffMidWrite(t *testing.T) {
	t.Parallel()
	own := etcdtest.StartT(t, etcdtest.Options{})
	cfg := config(t, own)
	cut := cfg
	cut.RequestTimeout = 300 * time.Millisecond
	writer, other := open(t, cut), open(t, cfg)
	const key = "mirrors/m/partitions/t/0"
	v, err := writer.Put(t.Context(), key, []byte("start"), statestore.Absent)
	if err != nil {
		t.Fatal(err)
	}
	applied := 0
	const rounds = 6
	for round := range rounds {
		before := v
		if err := own.Pause(); err != nil {
			t.Fatal(err)
		}
		cutValue := fmt.Appendf(nil, "cut %d", round)
		var cutErr error
		if round%2 == 0 {
			_, cutErr = writer.Put(t.Context(), key, cutValue, v) // ended by request_timeout
		} else {
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			_, cutErr = writer.Put(ctx, key, cutValue, v) // ended by the caller's deadline
			cancel()
		}
		if err := own.Resume(); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(cutErr, context.DeadlineExceeded) {
			t.Fatalf("round %d: Put to a stopped etcd: %v, want an error wrapping context.DeadlineExceeded", round, cutErr)
		}
		otherValue := fmt.Appendf(nil, "other %d", round)
		nv, err := other.Put(t.Context(), key, otherValue, v)
		switch {
		case err == nil:
			// The cut write had not happened; with the version it
			// expected gone, it never can.
			v = nv
		case errors.Is(err, statestore.ErrVersionMismatch):
			// The cut write happened, entirely.
			e, err := other.Get(t.Context(), key)
			if err != nil || string(e.Value) != string(cutValue) || e.Version <= v {
				t.Fatalf("round %d: the other write lost, but the key is %q v%d (%v); want the cut write at a version > %d", round, e.Value, e.Version, err, v)
			}
			v = e.Version
			otherValue = cutValue
			applied++
		default:
			t.Fatalf("round %d: Put by the other client: %v", round, err)
		}
		// The cut client's retry with the old version loses; with the
		// version it reads it wins, and both clients agree.
		e, err := writer.Get(t.Context(), key)
		if err != nil || e.Version != v || string(e.Value) != string(otherValue) {
			t.Fatalf("round %d: the cut client reads %q v%d (%v), want %q v%d", round, e.Value, e.Version, err, otherValue, v)
		}
		if _, err := writer.Put(t.Context(), key, []byte("stale"), before); !errors.Is(err, statestore.ErrVersionMismatch) {
			t.Fatalf("round %d: Put with a stale version: %v, want ErrVersionMismatch", round, err)
		}
		if v, err = writer.Put(t.Context(), key, fmt.Appendf(nil, "after %d", round), v); err != nil {
			t.Fatalf("round %d: the cut client cannot write after etcd came back: %v", round, err)
		}
		if e, err := other.Get(t.Context(), key); err != nil || e.Version != v {
			t.Fatalf("round %d: the other client reads v%d (%v), want v%d", round, e.Version, err, v)
		}
	}
	t.Logf("%d of %d cut writes were applied before the other client's", applied, rounds)
}

// TestListTenThousand: a List of 10,000 records of 1 KiB (10 MiB) comes in
// pages, complete and in order.
func TestListTenThousand(t *testing.T) {
	t.Parallel()
	s := open(t, config(t, srv))
	const n = 10_000
	versions := make([]int64, n)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				v, err := s.Put(t.Context(), statestore.PartitionKey("m", "t", int32(i)), value1K(i), statestore.Absent)
				if err != nil {
					errs <- err
					return
				}
				versions[i] = v
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	list, err := s.List(t.Context(), statestore.TopicPartitionsPrefix("m", "t"))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != n {
		t.Fatalf("List returned %d entries, want %d", len(list), n)
	}
	for i, e := range list {
		if i > 0 && e.Key <= list[i-1].Key {
			t.Fatalf("List out of order at %d: %q after %q", i, e.Key, list[i-1].Key)
		}
		_, _, p, err := statestore.ParsePartitionKey(e.Key)
		if err != nil || e.Version != versions[p] || string(e.Value) != string(value1K(int(p))) {
			t.Fatalf("entry %q: v%d (%v), want v%d and its value", e.Key, e.Version, err, versions[p])
		}
	}
}

func value1K(i int) []byte {
	return []byte(fmt.Sprintf("%-1024d", i))
}

// TestPrefixesIsolateDeployments: two deployments with their own prefixes
// share one etcd without seeing each other's keys.
func TestPrefixesIsolateDeployments(t *testing.T) {
	t.Parallel()
	base := srv.Prefix(t)
	a, b := config(t, srv), config(t, srv)
	a.Prefix, b.Prefix = base+"a/", base+"b/"
	sa, sb := open(t, a), open(t, b)
	const key = "mirrors/m/partitions/t/0"
	if _, err := sa.Put(t.Context(), key, []byte("a"), statestore.Absent); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Get(t.Context(), key); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("b reads a's key: %v", err)
	}
	if _, err := sb.Put(t.Context(), key, []byte("b"), statestore.Absent); err != nil {
		t.Fatalf("b cannot create the key a has: %v", err)
	}
	for _, c := range []struct {
		s    *Store
		want string
	}{{sa, "a"}, {sb, "b"}} {
		list, err := c.s.List(t.Context(), "")
		if err != nil || len(list) != 1 || list[0].Key != key || string(list[0].Value) != c.want {
			t.Fatalf("List of deployment %s = %v, %v", c.want, list, err)
		}
	}
	// In etcd the keys sit under the prefixes.
	resp, err := sa.client.Get(t.Context(), base, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range resp.Kvs {
		got = append(got, string(kv.Key))
	}
	if want := []string{base + "a/" + key, base + "b/" + key}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("keys in etcd = %q, want %q", got, want)
	}
}

// TestLeasesAreEtcdLeases: a lease key is bound to an etcd lease of the
// TTL, which etcd expires by itself; renew rebinds it to a fresh one and
// release revokes it.
func TestLeasesAreEtcdLeases(t *testing.T) {
	t.Parallel()
	s := open(t, config(t, srv))
	if info := statestore.InfoOf(s); !info.Shared || !info.NativeLeases || info.Name != "etcd" {
		t.Fatalf("Info = %+v, want etcd, shared, native leases", info)
	}
	key := statestore.LeaseKey("m", "metadata-sync")
	boundTo := func() (clientv3.LeaseID, int64) {
		t.Helper()
		resp, err := s.kv.Get(t.Context(), key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("Get lease key: %v, %d keys", err, len(resp.Kvs))
		}
		id := clientv3.LeaseID(resp.Kvs[0].Lease)
		ttl, err := s.client.TimeToLive(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return id, ttl.GrantedTTL
	}
	a, err := s.AcquireLease(t.Context(), key, "daemon-a", 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	id1, granted := boundTo()
	if id1 == 0 || granted < 2 || a.TTL != time.Duration(granted)*time.Second {
		t.Fatalf("acquired lease bound to etcd lease %x of %ds, reported TTL %s; want a lease of at least 2s (1.5s rounded up) reported as granted", id1, granted, a.TTL)
	}
	r, err := s.RenewLease(t.Context(), key, "daemon-a", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	id2, granted := boundTo()
	if id2 == id1 || granted != 30 || r.Version <= a.Version {
		t.Fatalf("renewed lease: etcd lease %x (was %x) of %ds, version %d (was %d)", id2, id1, granted, r.Version, a.Version)
	}
	if old, err := s.client.TimeToLive(t.Context(), id1); err != nil || old.TTL != -1 {
		t.Fatalf("the etcd lease of before the renew: TTL %d (%v), want revoked (-1)", old.TTL, err)
	}
	if err := s.ReleaseLease(t.Context(), key, "daemon-a"); err != nil {
		t.Fatal(err)
	}
	if gone, err := s.client.TimeToLive(t.Context(), id2); err != nil || gone.TTL != -1 {
		t.Fatalf("etcd lease after release: TTL %d (%v), want revoked (-1)", gone.TTL, err)
	}

	// Not renewed, etcd deletes the key itself: nobody has to take it.
	if _, err := s.AcquireLease(t.Context(), key, "daemon-b", time.Second); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.GetLease(t.Context(), key)
		if errors.Is(err, statestore.ErrNotFound) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("lease not renewed still there after 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // polling for etcd's expiry
	}
	if _, err := s.RenewLease(t.Context(), key, "daemon-b", time.Second); !errors.Is(err, statestore.ErrLeaseNotHeld) {
		t.Fatalf("renew of an expired lease: %v, want ErrLeaseNotHeld", err)
	}
}

// TestLeaseRecordWithoutEtcdLease: a lease record written without an etcd
// lease (copied from another store) is held by its holder until it has
// not changed for a TTL, as generic leases are, then taken and bound to an
// etcd lease.
func TestLeaseRecordWithoutEtcdLease(t *testing.T) {
	t.Parallel()
	s := open(t, config(t, srv))
	key := statestore.LeaseKey("m", "metadata-sync")
	if _, err := statestore.NewCASLeases(s).AcquireLease(t.Context(), key, "old-daemon", time.Hour); err != nil {
		t.Fatal(err)
	}
	const ttl = 300 * time.Millisecond
	start := time.Now()
	_, err := s.AcquireLease(t.Context(), key, "daemon-b", ttl)
	if time.Since(start) < ttl && !errors.Is(err, statestore.ErrLeaseHeld) {
		t.Fatalf("first look at another holder's record: %v, want ErrLeaseHeld", err)
	}
	if l, err := s.GetLease(t.Context(), key); err != nil || l.Holder != "old-daemon" {
		t.Fatalf("GetLease = %+v, %v; want old-daemon's record", l, err)
	}
	var got statestore.Lease
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err = s.AcquireLease(t.Context(), key, "daemon-b", ttl)
		if err == nil {
			break
		}
		if !errors.Is(err, statestore.ErrLeaseHeld) || time.Now().After(deadline) {
			t.Fatalf("taking a record unchanged for its TTL: %v", err)
		}
		time.Sleep(ttl / 5) // polling: the record is taken once unchanged for a TTL
	}
	if time.Since(start) < ttl || got.Holder != "daemon-b" {
		t.Fatalf("took %+v after %s, TTL %s", got, time.Since(start), ttl)
	}
	if resp, err := s.kv.Get(t.Context(), key); err != nil || resp.Kvs[0].Lease == 0 {
		t.Fatalf("taken lease not bound to an etcd lease (%v)", err)
	}
}

func TestInvalidConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const secret = "s3cr3t-do-not-print"
	pwFile := testpki.WriteFile(t, dir, "empty-pw", "")
	cases := []struct {
		name  string
		edit  func(c *Config)
		field string
	}{
		{"no endpoints", func(c *Config) { c.Endpoints = nil }, "endpoints"},
		{"bad scheme", func(c *Config) { c.Endpoints = []string{"unix://x"} }, "endpoints"},
		{"path in endpoint", func(c *Config) { c.Endpoints = []string{"http://h:1/x"} }, "endpoints"},
		{"http with TLS", func(c *Config) { c.Endpoints = []string{"http://h:1"}; c.CAFile = "/ca.pem" }, "endpoints"},
		{"prefix without slash", func(c *Config) { c.Prefix = "kmirror" }, "prefix"},
		{"prefix with NUL", func(c *Config) { c.Prefix = "a\x00/" }, "prefix"},
		{"password without user", func(c *Config) { c.Password = auth.NewSecret(secret) }, "username"},
		{"user without password", func(c *Config) { c.Username = "u" }, "password"},
		{"password twice", func(c *Config) { c.Username = "u"; c.Password = auth.NewSecret(secret); c.PasswordFile = "/pw" }, "password_file"},
		{"cert without key", func(c *Config) { c.CertFile = "/c.pem" }, "key_file"},
		{"zero dial timeout", func(c *Config) { c.DialTimeout = 0 }, "dial_timeout"},
		{"zero request timeout", func(c *Config) { c.RequestTimeout = 0 }, "request_timeout"},
		{"tiny requests", func(c *Config) { c.MaxRequestBytes = 1000 }, "max_request_bytes"},
		{"zero page", func(c *Config) { c.ListPageSize = 0 }, "list_page_size"},
		{"missing CA file", func(c *Config) { c.CAFile = dir + "/nope.pem" }, "ca_file"},
		{"CA file without PEM", func(c *Config) { c.CAFile = pwFile }, "ca_file"},
		{"missing password file", func(c *Config) { c.Username = "u"; c.PasswordFile = dir + "/nope" }, "password_file"},
		{"empty password file", func(c *Config) { c.Username = "u"; c.PasswordFile = pwFile }, "password_file"},
	}
	for _, c := range cases {
		cfg := DefaultConfig()
		cfg.Endpoints = []string{"127.0.0.1:1"}
		c.edit(&cfg)
		s, err := Open(t.Context(), cfg)
		if s != nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: Open = %v; want ErrInvalidConfig naming %s", c.name, err, c.field)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the password is in the error: %v", c.name, err)
		}
	}
}

// TestUnreachable: Open gives up after dial_timeout and says where it
// looked.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.Endpoints = []string{"127.0.0.1:1"}
	cfg.DialTimeout = 300 * time.Millisecond
	start := time.Now()
	_, err := Open(t.Context(), cfg)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(err.Error(), "dial_timeout") {
		t.Fatalf("Open of a closed port: %v; want an error naming the endpoint and dial_timeout", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Open took %s with a dial timeout of 300ms", d)
	}
}

// TestTLSClientCertificates: against an etcd that requires client
// certificates, kmirror connects with the CA and its certificate, and
// neither without a certificate nor trusting another CA.
func TestTLSClientCertificates(t *testing.T) {
	t.Parallel()
	pki := testpki.New(t, "etcd-ca")
	own := etcdtest.StartT(t, etcdtest.Options{CertFile: pki.Server.CertFile, KeyFile: pki.Server.KeyFile, CAFile: pki.CAFile})
	client := pki.IssueClient(t, "kmirror")
	cfg := config(t, own)
	cfg.CAFile, cfg.CertFile, cfg.KeyFile = pki.CAFile, client.CertFile, client.KeyFile
	storetest.Run(t, func(t *testing.T) statestore.Store {
		c := cfg
		c.Prefix = own.Prefix(t)
		return open(t, c)
	})

	noCert := cfg
	noCert.CertFile, noCert.KeyFile = "", ""
	noCert.DialTimeout = time.Second
	if s, err := Open(t.Context(), noCert); err == nil {
		s.Close()
		t.Fatal("Open without a client certificate succeeded")
	}
	foreign := testpki.New(t, "foreign-ca")
	wrongCA := cfg
	wrongCA.CAFile = foreign.CAFile
	wrongCA.DialTimeout = time.Second
	if s, err := Open(t.Context(), wrongCA); err == nil {
		s.Close()
		t.Fatal("Open trusting another CA succeeded")
	}
	plain := cfg
	plain.CAFile, plain.CertFile, plain.KeyFile = "", "", ""
	plain.Endpoints = []string{strings.Replace(own.Endpoint, "https://", "http://", 1)}
	plain.DialTimeout = time.Second
	if s, err := Open(t.Context(), plain); err == nil {
		s.Close()
		t.Fatal("Open without TLS of a TLS etcd succeeded")
	}
}

// TestPasswordAuth: with etcd's authentication on, kmirror works as a user
// whose role may read and write its prefix; a wrong password, no
// credentials or a user without a role on the prefix fail at Open with an
// error that says so and never holds the password.
func TestPasswordAuth(t *testing.T) {
	t.Parallel()
	own := etcdtest.StartT(t, etcdtest.Options{})
	const rootPW, kmirrorPW, wrongPW = "root-pw-7f3a", "kmirror-pw-91c2", "wrong-pw-5d0e"
	prefix := own.Prefix(t)
	admin, err := clientv3.New(clientv3.Config{Endpoints: []string{own.Endpoint}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := t.Context()
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", rootPW); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.RoleAdd(ctx, "kmirror"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "kmirror", prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := admin.UserAdd(ctx, "kmirror", kmirrorPW); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "kmirror", "kmirror"); return err },
		func() error { _, err := admin.UserAdd(ctx, "nobody", kmirrorPW); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("set up etcd authentication: %v", err)
		}
	}

	cfg := config(t, own)
	cfg.Prefix = prefix
	cfg.Username, cfg.Password = "kmirror", auth.NewSecret(kmirrorPW)
	storetest.Run(t, func(t *testing.T) statestore.Store {
		c := cfg
		c.Prefix = prefix + fmt.Sprintf("%s/", strings.ReplaceAll(t.Name(), "/", "_"))
		return open(t, c)
	})
	pwFile := testpki.WriteFile(t, t.TempDir(), "pw", kmirrorPW+"\n")
	fromFile := cfg
	fromFile.Password, fromFile.PasswordFile = auth.Secret{}, pwFile
	open(t, fromFile)

	fail := func(name string, c Config, want ...string) {
		t.Helper()
		s, err := Open(t.Context(), c)
		if err == nil {
			s.Close()
			t.Fatalf("%s: Open succeeded", name)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", name, err, w)
			}
		}
		for _, pw := range []string{rootPW, kmirrorPW, wrongPW} {
			if strings.Contains(err.Error(), pw) {
				t.Errorf("%s: error holds a password: %v", name, err)
			}
		}
	}
	wrong := cfg
	wrong.Password = auth.NewSecret(wrongPW)
	fail("wrong password", wrong, `user "kmirror" was refused`, "check username and password")
	anonymous := cfg
	anonymous.Username, anonymous.Password = "", auth.Secret{}
	fail("no credentials", anonymous, "set username and password")
	nobody := cfg
	nobody.Username = "nobody"
	fail("user without a role", nobody, `user "nobody" lacks a permission`)
}

// TestCredentialsUnusedWithoutEtcdAuth: as every etcd client, the store
// connects with credentials to an etcd whose authentication is off, and
// works.
func TestCredentialsUnusedWithoutEtcdAuth(t *testing.T) {
	t.Parallel()
	cfg := config(t, srv)
	cfg.Username, cfg.Password = "kmirror", auth.NewSecret("unused-pw-3b9f")
	s := open(t, cfg)
	if _, err := s.Put(t.Context(), "k", []byte("v"), statestore.Absent); err != nil {
		t.Fatalf("Put: %v", err)
	}
}
