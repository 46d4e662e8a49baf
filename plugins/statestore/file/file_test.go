package file

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/storetest"
)

// lockHelperEnv makes the test binary act as a second process that holds a
// store open; see TestMain.
const lockHelperEnv = "KMIRROR_FILESTORE_TEST_HOLD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(lockHelperEnv); dir != "" {
		holdLock(dir)
		return
	}
	os.Exit(m.Run())
}

// holdLock opens the store in dir, reports "locked" on stdout and keeps the
// store open until stdin reaches EOF (the parent closes it or dies).
func holdLock(dir string) {
	s, err := Open(dir)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	s.Close()
	os.Exit(0)
}

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) statestore.Store {
		return open(t, t.TempDir())
	})
}

func TestReopenKeepsDataAndVersions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := t.Context()
	s := open(t, dir)
	keys := []string{"mirrors/m/partitions/t.1/0", "mirrors/m/partitions/t.1/1", "x", strings.Repeat("long/", 60)}
	versions := map[string]int64{}
	for _, k := range keys {
		v, err := s.Put(ctx, k, []byte("v:"+k), statestore.Absent)
		if err != nil {
			t.Fatal(err)
		}
		versions[k] = v
	}
	// The deleted key holds the highest version handed out so far.
	gone, err := s.Put(ctx, "gone", []byte("bye"), statestore.Absent)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "gone", gone); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, dir)
	for _, k := range keys {
		e, err := s.Get(ctx, k)
		if err != nil {
			t.Fatalf("after reopen Get(%.30q): %v", k, err)
		}
		if string(e.Value) != "v:"+k || e.Version != versions[k] {
			t.Fatalf("after reopen %.30q = (%q, v%d), want v%d", k, e.Value, e.Version, versions[k])
		}
	}
	if _, err := s.Get(ctx, "gone"); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("deleted key after reopen: %v, want ErrNotFound", err)
	}
	list, err := s.List(ctx, "mirrors/m/")
	if err != nil || len(list) != 2 {
		t.Fatalf("List after reopen = %v, %v; want 2 entries", list, err)
	}
	// Versions continue above everything handed out before, including the
	// deleted key's: a writer holding "gone"@gone must never match again.
	v, err := s.Put(ctx, "gone", []byte("again"), statestore.Absent)
	if err != nil {
		t.Fatal(err)
	}
	if v <= gone {
		t.Fatalf("re-created key got version %d, not above its pre-restart version %d", v, gone)
	}
	if _, err := s.Put(ctx, "gone", []byte("stale"), gone); !errors.Is(err, statestore.ErrVersionMismatch) {
		t.Fatalf("Put with pre-delete version after restart: %v, want ErrVersionMismatch", err)
	}
	v2, err := s.Put(ctx, keys[0], []byte("new"), versions[keys[0]])
	if err != nil {
		t.Fatalf("CAS with a version read before restart: %v", err)
	}
	if v2 <= v {
		t.Fatalf("version %d after restart not above %d", v2, v)
	}
}

func TestCrashBeforeRenameKeepsOldValue(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := t.Context()
	s := open(t, dir)
	const key = "mirrors/m/partitions/orders/3"
	v, err := s.Put(ctx, key, []byte("old"), statestore.Absent)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	// What a crash between writing the temporary file and renaming it
	// leaves behind: a complete new version, and a truncated one.
	full := filepath.Join(dir, dataDirName, tmpPrefix+"123")
	if err := os.WriteFile(full, encodeEntry(key, []byte("new"), v+1), 0o600); err != nil {
		t.Fatal(err)
	}
	torn := filepath.Join(dir, dataDirName, tmpPrefix+"456")
	if err := os.WriteFile(torn, encodeEntry(key, []byte("newer"), v+2)[:9], 0o600); err != nil {
		t.Fatal(err)
	}
	rootTmp := filepath.Join(dir, tmpPrefix+"789")
	if err := os.WriteFile(rootTmp, []byte("99999"), 0o600); err != nil {
		t.Fatal(err)
	}

	s = open(t, dir)
	e, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if string(e.Value) != "old" || e.Version != v {
		t.Fatalf("after crash before rename got (%q, v%d), want (old, v%d)", e.Value, e.Version, v)
	}
	for _, p := range []string{full, torn, rootTmp} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("leftover temporary file %s not removed by Open (stat: %v)", p, err)
		}
	}
	if _, err := s.Put(ctx, key, []byte("next"), v); err != nil {
		t.Fatalf("CAS after recovery: %v", err)
	}
}

func TestLockWithinProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := open(t, dir)
	_, err := Open(dir)
	if !errors.Is(err, statestore.ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	abs, _ := filepath.Abs(dir)
	for _, want := range []string{abs, "pid " + strconv.Itoa(os.Getpid()), "this process"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("lock error %q does not mention %q", err, want)
		}
	}
	// The failed Open must not have disturbed the holder.
	if _, err := first.Put(t.Context(), "k", []byte("v"), statestore.Absent); err != nil {
		t.Fatalf("holder after a failed contender: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir)
	if _, err := s.Get(t.Context(), "k"); err != nil {
		t.Fatalf("Open after the holder closed: %v", err)
	}
}

// Not parallel: starting the helper process forks this one, and until the
// child execs it shares every open file, so a store another test closes
// meanwhile would stay locked (flock) for a moment. Go runs this test to
// its end before the parallel ones resume.
func TestLockAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper process: %q, %v", line, err)
	}

	_, err = Open(dir)
	if !errors.Is(err, statestore.ErrLocked) {
		t.Fatalf("Open while another process holds the store: %v, want ErrLocked", err)
	}
	if want := "pid " + strconv.Itoa(cmd.Process.Pid); !strings.Contains(err.Error(), want) {
		t.Errorf("lock error %q does not name the holder (%s)", err, want)
	}

	// A holder killed without cleanup leaves no stale lock.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	s := open(t, dir)
	if _, err := s.Put(t.Context(), "k", []byte("v"), statestore.Absent); err != nil {
		t.Fatalf("store after the holder died: %v", err)
	}
}

func TestDamagedFileStopsOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	const key = "mirrors/m/partitions/t/0"
	if _, err := s.Put(t.Context(), key, []byte("some state"), statestore.Absent); err != nil {
		t.Fatal(err)
	}
	s.Close()
	path := filepath.Join(dir, dataDirName, fileName(key))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-6] ^= 0x40 // inside the value
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("Open with a damaged file: %v; want an error naming %s and the checksum", err, path)
	}
}

func TestForeignFilesRefused(t *testing.T) {
	t.Parallel()
	t.Run("UnknownFileInData", func(t *testing.T) {
		dir := t.TempDir()
		open(t, dir).Close()
		stray := filepath.Join(dir, dataDirName, "notes.txt")
		if err := os.WriteFile(stray, []byte("hello"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), stray) {
			t.Fatalf("Open with a foreign file: %v; want an error naming %s", err, stray)
		}
	})
	t.Run("MisplacedKeyFile", func(t *testing.T) {
		dir := t.TempDir()
		open(t, dir).Close()
		moved := filepath.Join(dir, dataDirName, "b")
		if err := os.WriteFile(moved, encodeEntry("a", []byte("x"), 1), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "belongs in file") {
			t.Fatalf("Open with a key file under the wrong name: %v", err)
		}
	})
	t.Run("NonEmptyDirectory", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "important.doc"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dir)
		if err == nil || !strings.Contains(err.Error(), "not empty") {
			t.Fatalf("Open on a foreign non-empty directory: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, dataDirName)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("Open littered a foreign directory with %s", dataDirName)
		}
	})
	t.Run("OtherFormat", func(t *testing.T) {
		dir := t.TempDir()
		open(t, dir).Close()
		if err := os.WriteFile(filepath.Join(dir, formatName), []byte("kmirror file state store, format 9\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "format 9") {
			t.Fatalf("Open with another format: %v", err)
		}
	})
}

func TestOpenCreatesPrivateDirectory(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "a", "state")
	s := open(t, dir)
	if s.Dir() != dir {
		t.Fatalf("Dir() = %s, want %s", s.Dir(), dir)
	}
	if _, err := s.Put(t.Context(), "k", []byte("secret-ish"), statestore.Absent); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, dataDirName)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o700 {
			t.Errorf("%s has mode %o, want 700", p, perm)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, dataDirName, fileName("k")))
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("key file has mode %o, want 600", perm)
	}
}

func TestFileNames(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"mirrors/m_1-a/partitions/my.topic-x_y/12": "mirrors%2Fm_1-a%2Fpartitions%2Fmy.topic-x_y%2F12",
		".hidden":  "%2Ehidden",
		"..":       "%2E.",
		"a%2Fb":    "a%252Fb",
		"#x":       "%23x",
		"ü":        "%C3%BC",
		"LOCK":     "LOCK",
		"sp ace\n": "sp%20ace%0A",
	}
	for key, want := range cases {
		if got := fileName(key); got != want {
			t.Errorf("fileName(%q) = %q, want %q", key, got, want)
		}
	}
	long := strings.Repeat("t", 250)
	name := fileName(long)
	if !strings.HasPrefix(name, hashedPrefix) || len(name) > maxNameLen || name == fileName(long+"x") {
		t.Errorf("fileName of a %d-byte key = %q; want a distinct hashed name", len(long), name)
	}
	// A Kafka topic name at its maximum length (249) under the partition
	// layout must still get a usable file name.
	key := statestore.PartitionKey("mirror", strings.Repeat("t", 249), 2147483647)
	if n := fileName(key); len(n) > 255 {
		t.Errorf("file name for a maximal partition key is %d bytes", len(n))
	}
}

// BenchmarkPut measures a durable partition-record-sized write (fsync of
// the file and of the directory), sequentially and from parallel writers on
// distinct keys.
func BenchmarkPut(b *testing.B) {
	value := []byte(strings.Repeat("x", 300))
	run := func(b *testing.B, s *Store, key string) {
		var v int64
		for b.Loop() {
			var err error
			if v, err = s.Put(b.Context(), key, value, v); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("Sequential", func(b *testing.B) {
		s, err := Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		run(b, s, "mirrors/m/partitions/t/0")
	})
	b.Run("Parallel", func(b *testing.B) {
		s, err := Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		var n atomic.Int64
		b.SetParallelism(16) // many partitions transition at once; fsyncs overlap
		b.RunParallel(func(pb *testing.PB) {
			key := statestore.PartitionKey("m", "t", int32(n.Add(1)))
			var v int64
			for pb.Next() {
				var err error
				if v, err = s.Put(b.Context(), key, value, v); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
