// Package file is kmirror's default state store: a local directory that
// implements statestore.Store durably, with one file per key.
//
// # Layout
//
//	<dir>/LOCK         flock(2)ed by the open Store; holds the holder's pid
//	<dir>/FORMAT       format marker, written when the directory is created
//	<dir>/HIGHWATER    highest version handed out before the last Delete
//	<dir>/data/<name>  one file per key
//
// # Why one file per key
//
// kmirror writes a partition's record on every state transition, for
// thousands of partitions, and offset maps of map-mode partitions grow. One
// file per key keeps a Put proportional to the size of that key's value and
// lets writes to different keys proceed in parallel; a snapshot plus
// write-ahead log would make Put cheap too, but needs compaction that rewrites
// everything and one log every writer serializes on. A directory with tens of
// thousands of files is routine for Linux file systems.
//
// # Durability
//
// Put writes the new content to a temporary file in data/, fsyncs it, renames
// it over the key's file and fsyncs data/. A crash at any point leaves either
// the old or the new content, never a mix; temporary files left by a crash are
// removed by the next Open. Every file carries its key, its version and a
// CRC-32C, and Open verifies all of them, so a damaged file stops the daemon
// with a message naming the file instead of silently losing state.
//
// Versions come from one store-wide counter. On Open the counter resumes from
// the highest version found in data/ and in HIGHWATER, which Delete updates
// before it removes a file, so a version is never handed out twice to a key,
// even across Delete and restart.
//
// # File names
//
// A key maps to a file name by keeping [A-Za-z0-9_-] and '.' (except as the
// first byte) and writing every other byte as %XX. Kafka topic and mirror
// names therefore appear as they are, with '/' as %2F. Names that would be
// longer than 200 bytes are replaced by '#' followed by the SHA-256 of the
// key; the key inside the file is authoritative either way. The mapping
// assumes a case-sensitive file system (Linux).
//
// # Exclusive use
//
// Open takes flock(LOCK_EX|LOCK_NB) on <dir>/LOCK, so two daemons (or two
// Stores in one process) cannot share a directory; the lock dies with the
// process, so a killed daemon never leaves a stale lock behind.
package file

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/kmirror/kmirror/sdk/statestore"
)

const (
	lockName      = "LOCK"
	formatName    = "FORMAT"
	highwaterName = "HIGHWATER"
	dataDirName   = "data"
	tmpPrefix     = ".tmp-"
	hashedPrefix  = "#"
	maxNameLen    = 200

	formatContent = "kmirror file state store, format 1\n"
)

// magic starts every key file; the last byte is the file format version.
var magic = [4]byte{'k', 'm', 's', 1}

// headerLen is magic + version (int64) + key length (uint32).
const headerLen = 4 + 8 + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Store is a statestore.Store in a local directory. Create it with Open.
type Store struct {
	dir     string
	dataDir string
	lock    *os.File
	dirFile *os.File // data/, kept open to fsync it after renames

	// closeMu is held shared by every operation and exclusively by Close,
	// so Close waits for operations in flight.
	closeMu sync.RWMutex
	closed  bool

	counter atomic.Int64 // last version handed out

	mu   sync.Mutex           // guards keys
	keys map[string]*keyState // every key seen since Open, including deleted ones

	highMu    sync.Mutex // serializes HIGHWATER writes
	highwater int64      // last value written to HIGHWATER

	// io holds a token for each write in progress (at most maxWrites).
	io chan struct{}
}

// maxWrites bounds the writes (and deletes) that run their fsyncs at once.
// A goroutine blocked in fsync holds an OS thread, and the Go runtime never
// ends the threads it made: when 10,000 partitions start, an unbounded
// store made 700 threads (about 30 MiB of thread and signal stacks, kept
// for the life of the process). ext4 merges concurrent journal commits
// well below this bound, so start-up is no slower (docs/benchmarks.md).
const maxWrites = 32

// keyState serializes writes to one key and caches its current version, so
// a compare-and-set needs no read of the file.
type keyState struct {
	mu      sync.Mutex
	version int64 // 0: absent
}

var (
	_ statestore.Store    = (*Store)(nil)
	_ statestore.Informer = (*Store)(nil)
	_ statestore.Pager    = (*Store)(nil)
)

// Info implements statestore.Informer: "file", not shared (Open locks the
// directory for one Store).
func (s *Store) Info() statestore.Info {
	return statestore.Info{Name: "file", ProtocolMajor: statestore.ProtocolMajor, ProtocolMinor: statestore.ProtocolMinor}
}

// Open opens (creating it with mode 0700 if needed) the state store in dir
// and locks it for this Store. If another process or Store holds the lock,
// the error wraps statestore.ErrLocked and names dir and the holder's pid.
func Open(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("file state store %q: resolve path: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("file state store %s: create directory: %w", abs, err)
	}
	lock, err := acquireLock(abs)
	if err != nil {
		return nil, err
	}
	s := &Store{
		dir:     abs,
		dataDir: filepath.Join(abs, dataDirName),
		lock:    lock,
		keys:    make(map[string]*keyState),
		io:      make(chan struct{}, maxWrites),
	}
	if err := s.init(); err != nil {
		s.release()
		return nil, err
	}
	return s, nil
}

func acquireLock(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("file state store %s: open lock file: %w", dir, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if errors.Is(err, unix.EWOULDBLOCK) {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = "pid " + strconv.Itoa(pid)
				if pid == os.Getpid() {
					holder += " (this process)"
				}
			}
		}
		f.Close()
		return nil, fmt.Errorf("file state store %s is in use by %s; stop that kmirror or point this one at another state directory: %w", dir, holder, statestore.ErrLocked)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("file state store %s: lock %s: %w", dir, path, err)
	}
	// Record our pid for the error message of the next contender. Not
	// synced: it is informational and the lock itself is in the kernel.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// init creates or checks the layout, removes temporary files left by a
// crash, and loads the version of every key.
func (s *Store) init() error {
	if err := s.initLayout(); err != nil {
		return err
	}
	if err := removeTemps(s.dir); err != nil {
		return err
	}
	d, err := os.Open(s.dataDir)
	if err != nil {
		return fmt.Errorf("file state store %s: open data directory: %w", s.dir, err)
	}
	s.dirFile = d
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("file state store %s: list %s: %w", s.dir, s.dataDir, err)
	}
	var highest int64
	for _, name := range names {
		path := filepath.Join(s.dataDir, name)
		if strings.HasPrefix(name, tmpPrefix) {
			// Left by a crash before rename: the old value is still in place.
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("file state store %s: remove leftover temporary file %s: %w", s.dir, path, err)
			}
			continue
		}
		e, err := readEntryFile(path)
		if err != nil {
			return fmt.Errorf("file state store %s: %w; restore the file from a backup or move it away (its key's state is then lost)", s.dir, err)
		}
		if want := fileName(e.Key); want != name {
			return fmt.Errorf("file state store %s: file %s holds key %q, which belongs in file %s; the directory was altered outside kmirror, move the file away", s.dir, path, e.Key, want)
		}
		s.keys[e.Key] = &keyState{version: e.Version}
		highest = max(highest, e.Version)
	}
	hw, err := s.readHighwater()
	if err != nil {
		return err
	}
	s.highwater = hw
	s.counter.Store(max(highest, hw))
	return nil
}

// initLayout checks FORMAT and creates data/. FORMAT is written before
// data/ exists, so a crash during the first Open leaves a directory the next
// Open completes. A non-empty directory without FORMAT is refused: it is not
// ours, and pointing kmirror at a wrong directory must not litter it.
func (s *Store) initLayout() error {
	path := filepath.Join(s.dir, formatName)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := s.checkEmpty(); err != nil {
			return err
		}
		if err := writeFileAtomic(s.dir, formatName, []byte(formatContent)); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("file state store %s: read %s: %w", s.dir, path, err)
	case string(b) != formatContent:
		return fmt.Errorf("file state store %s: %s says %q, this kmirror understands %q; use the kmirror version that wrote it", s.dir, path, strings.TrimSpace(string(b)), strings.TrimSpace(formatContent))
	}
	if err := os.Mkdir(s.dataDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("file state store %s: create %s: %w", s.dir, s.dataDir, err)
	}
	return syncDir(s.dir)
}

func (s *Store) checkEmpty() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("file state store %s: %w", s.dir, err)
	}
	for _, e := range entries {
		if e.Name() != lockName && !strings.HasPrefix(e.Name(), tmpPrefix) {
			return fmt.Errorf("file state store %s: directory is not empty (it holds %s) and has no %s file, so it is not a kmirror state directory; choose an empty or new directory", s.dir, e.Name(), formatName)
		}
	}
	return nil
}

func removeTemps(dir string) error {
	names, err := filepath.Glob(filepath.Join(dir, tmpPrefix+"*"))
	if err != nil {
		return fmt.Errorf("file state store %s: %w", dir, err)
	}
	for _, n := range names {
		if err := os.Remove(n); err != nil {
			return fmt.Errorf("file state store %s: remove leftover temporary file %s: %w", dir, n, err)
		}
	}
	return nil
}

func (s *Store) readHighwater() (int64, error) {
	path := filepath.Join(s.dir, highwaterName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("file state store %s: read %s: %w", s.dir, path, err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("file state store %s: %s holds %q, not a version number; restore it or write the highest version ever used", s.dir, path, b)
	}
	return v, nil
}

// Dir returns the absolute path of the store's directory.
func (s *Store) Dir() string { return s.dir }

// begin starts an operation: it takes closeMu shared and checks the context,
// the key and that the store is open. The caller must call s.closeMu.RUnlock
// when begin returns nil.
func (s *Store) begin(ctx context.Context, op, key string, checkKey bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("file state store %s: %s %q: %w", s.dir, op, key, err)
	}
	if checkKey {
		if err := statestore.ValidateKey(key); err != nil {
			return fmt.Errorf("file state store %s: %s: %w", s.dir, op, err)
		}
	}
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return fmt.Errorf("file state store %s: %s %q: %w", s.dir, op, key, statestore.ErrClosed)
	}
	return nil
}

func (s *Store) state(key string) *keyState {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[key]
	if ks == nil {
		ks = &keyState{}
		s.keys[key] = ks
	}
	return ks
}

// Get implements statestore.Store.
func (s *Store) Get(ctx context.Context, key string) (statestore.Entry, error) {
	if err := s.begin(ctx, "get", key, true); err != nil {
		return statestore.Entry{}, err
	}
	defer s.closeMu.RUnlock()
	return s.get(key)
}

func (s *Store) get(key string) (statestore.Entry, error) {
	path := filepath.Join(s.dataDir, fileName(key))
	e, err := readEntryFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return statestore.Entry{}, fmt.Errorf("file state store %s: get %q: %w", s.dir, key, statestore.ErrNotFound)
	}
	if err != nil {
		return statestore.Entry{}, fmt.Errorf("file state store %s: get %q: %w", s.dir, key, err)
	}
	if e.Key != key {
		return statestore.Entry{}, fmt.Errorf("file state store %s: get %q: file %s holds key %q instead; the directory was altered outside kmirror", s.dir, key, path, e.Key)
	}
	return e, nil
}

// Put implements statestore.Store.
func (s *Store) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	if err := s.begin(ctx, "put", key, true); err != nil {
		return 0, err
	}
	defer s.closeMu.RUnlock()
	if err := statestore.ValidatePutVersion(expect); err != nil {
		return 0, fmt.Errorf("file state store %s: put %q: %w", s.dir, key, err)
	}
	ks := s.state(key)
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if err := statestore.CheckVersion(key, ks.version, expect); err != nil {
		return 0, fmt.Errorf("file state store %s: put: %w", s.dir, err)
	}
	if err := s.acquire(ctx); err != nil {
		return 0, fmt.Errorf("file state store %s: put %q: %w", s.dir, key, err)
	}
	defer s.releaseIO()
	version := s.counter.Add(1)
	renamed, err := s.writeKey(key, encodeEntry(key, value, version))
	if renamed {
		// The new file is visible even if fsyncing the directory failed;
		// keep compare-and-set consistent with what Get returns.
		ks.version = version
	}
	if err != nil {
		return 0, fmt.Errorf("file state store %s: put %q (the outcome is unknown if the rename happened; re-read the key): %w", s.dir, key, err)
	}
	return version, nil
}

// acquire waits for a write token (see maxWrites), or for ctx to end.
func (s *Store) acquire(ctx context.Context) error {
	select {
	case s.io <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// releaseIO returns the token acquire took.
func (s *Store) releaseIO() { <-s.io }

// writeKey atomically replaces the file of key with content. renamed
// reports whether the new content became visible.
func (s *Store) writeKey(key string, content []byte) (renamed bool, err error) {
	name := fileName(key)
	tmp, err := os.CreateTemp(s.dataDir, tmpPrefix+"*")
	if err != nil {
		return false, fmt.Errorf("create temporary file: %w", err)
	}
	tmpPath := tmp.Name()
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmpPath)
		}
	}()
	if _, err := tmp.Write(content); err != nil {
		return false, fmt.Errorf("write %s: %w", tmpPath, err)
	}
	if err := tmp.Sync(); err != nil {
		return false, fmt.Errorf("fsync %s: %w", tmpPath, err)
	}
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("close %s: %w", tmpPath, err)
	}
	if err := os.Rename(tmpPath, filepath.Join(s.dataDir, name)); err != nil {
		return false, fmt.Errorf("rename %s to %s: %w", tmpPath, name, err)
	}
	committed = true
	if err := s.dirFile.Sync(); err != nil {
		return true, fmt.Errorf("fsync directory %s: %w", s.dataDir, err)
	}
	return true, nil
}

// Delete implements statestore.Store.
func (s *Store) Delete(ctx context.Context, key string, expect int64) error {
	if err := s.begin(ctx, "delete", key, true); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	if err := statestore.ValidateDeleteVersion(expect); err != nil {
		return fmt.Errorf("file state store %s: delete %q: %w", s.dir, key, err)
	}
	ks := s.state(key)
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.version == 0 {
		return fmt.Errorf("file state store %s: delete %q: %w", s.dir, key, statestore.ErrNotFound)
	}
	if err := statestore.CheckVersion(key, ks.version, expect); err != nil {
		return fmt.Errorf("file state store %s: delete: %w", s.dir, err)
	}
	if err := s.acquire(ctx); err != nil {
		return fmt.Errorf("file state store %s: delete %q: %w", s.dir, key, err)
	}
	defer s.releaseIO()
	// Persist the high-water mark first: once the file is gone, its version
	// must still be known to the counter of the next Open.
	if err := s.raiseHighwater(ks.version); err != nil {
		return fmt.Errorf("file state store %s: delete %q: %w", s.dir, key, err)
	}
	path := filepath.Join(s.dataDir, fileName(key))
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("file state store %s: delete %q: remove %s: %w", s.dir, key, path, err)
	}
	ks.version = 0
	if err := s.dirFile.Sync(); err != nil {
		return fmt.Errorf("file state store %s: delete %q: fsync directory %s: %w", s.dir, key, s.dataDir, err)
	}
	return nil
}

func (s *Store) raiseHighwater(atLeast int64) error {
	s.highMu.Lock()
	defer s.highMu.Unlock()
	if s.highwater >= atLeast {
		return nil
	}
	v := s.counter.Load()
	if err := writeFileAtomic(s.dir, highwaterName, []byte(strconv.FormatInt(v, 10)+"\n")); err != nil {
		return err
	}
	s.highwater = v
	return nil
}

// List implements statestore.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]statestore.Entry, error) {
	if err := s.begin(ctx, "list", prefix, false); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	out, _, err := s.list(prefix, "", -1)
	return out, err
}

// ListPage implements statestore.Pager: it reads only the files of the
// page (plus at most one beyond it to tell whether more follow).
func (s *Store) ListPage(ctx context.Context, prefix, after string, limit int) ([]statestore.Entry, bool, error) {
	if err := s.begin(ctx, "list", prefix, false); err != nil {
		return nil, false, err
	}
	defer s.closeMu.RUnlock()
	if err := statestore.ValidateLimit(limit); err != nil {
		return nil, false, fmt.Errorf("file state store %s: list %q: %w", s.dir, prefix, err)
	}
	return s.list(prefix, after, limit)
}

// list reads the entries under prefix after the key after, at most limit
// of them (-1: all), and whether more follow.
func (s *Store) list(prefix, after string, limit int) ([]statestore.Entry, bool, error) {
	s.mu.Lock()
	var keys []string
	for k := range s.keys {
		if strings.HasPrefix(k, prefix) && k > after {
			keys = append(keys, k)
		}
	}
	s.mu.Unlock()
	sort.Strings(keys)
	n := len(keys)
	if limit >= 0 {
		n = min(n, limit)
	}
	out := make([]statestore.Entry, 0, n)
	for _, k := range keys {
		e, err := s.get(k)
		if errors.Is(err, statestore.ErrNotFound) {
			continue // deleted, or never created
		}
		if err != nil {
			return nil, false, fmt.Errorf("list %q: %w", prefix, err)
		}
		if limit >= 0 && len(out) == limit {
			return out, true, nil
		}
		out = append(out, e)
	}
	return out, false, nil
}

// Close releases the lock and the directory. Operations in flight finish
// first; later ones fail with statestore.ErrClosed. Close is idempotent.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.release()
}

func (s *Store) release() error {
	var errs []error
	if s.dirFile != nil {
		errs = append(errs, s.dirFile.Close())
	}
	// Closing the descriptor releases the flock.
	if err := s.lock.Close(); err != nil {
		errs = append(errs, fmt.Errorf("file state store %s: release lock: %w", s.dir, err))
	}
	return errors.Join(errs...)
}

// fileName maps a key to its file name in data/; see the package doc.
func fileName(key string) string {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
			b.WriteByte(c)
		case c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
		if b.Len() > maxNameLen {
			sum := sha256.Sum256([]byte(key))
			return hashedPrefix + hex.EncodeToString(sum[:])
		}
	}
	return b.String()
}

// encodeEntry lays out a key file:
//
//	magic [4]byte | version int64 | key length uint32 | key |
//	value length uint64 | value | CRC-32C (Castagnoli) of all before, uint32
//
// integers big-endian.
func encodeEntry(key string, value []byte, version int64) []byte {
	buf := make([]byte, 0, headerLen+len(key)+8+len(value)+4)
	buf = append(buf, magic[:]...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(version))
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(key)))
	buf = append(buf, key...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(value)))
	buf = append(buf, value...)
	return binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
}

// readEntryFile reads and verifies one key file. A missing file yields an
// error wrapping fs.ErrNotExist.
func readEntryFile(path string) (statestore.Entry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return statestore.Entry{}, err
	}
	e, err := decodeEntry(b)
	if err != nil {
		return statestore.Entry{}, fmt.Errorf("state file %s is damaged: %w", path, err)
	}
	return e, nil
}

// decodeEntry is the inverse of encodeEntry: it verifies and decodes the
// content of one key file. The value of the entry does not alias b.
func decodeEntry(b []byte) (statestore.Entry, error) {
	bad := func(why string) (statestore.Entry, error) {
		return statestore.Entry{}, errors.New(why)
	}
	if len(b) < headerLen+8+4 {
		return bad(fmt.Sprintf("only %d bytes", len(b)))
	}
	if [4]byte(b[:4]) != magic {
		return bad(fmt.Sprintf("starts with %q, not a kmirror state file of format %d", b[:4], magic[3]))
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return bad("checksum mismatch")
	}
	version := int64(binary.BigEndian.Uint64(b[4:12]))
	klen := uint64(binary.BigEndian.Uint32(b[12:16]))
	rest := body[headerLen:]
	if klen+8 > uint64(len(rest)) {
		return bad("key length beyond end of file")
	}
	key := string(rest[:klen])
	rest = rest[klen:]
	vlen := binary.BigEndian.Uint64(rest[:8])
	rest = rest[8:]
	if vlen != uint64(len(rest)) {
		return bad(fmt.Sprintf("value length %d, but %d bytes follow", vlen, len(rest)))
	}
	if version <= 0 {
		return bad(fmt.Sprintf("version %d", version))
	}
	return statestore.Entry{Key: key, Value: append([]byte{}, rest...), Version: version}, nil
}

// writeFileAtomic replaces dir/name with content: temporary file, fsync,
// rename, fsync dir.
func writeFileAtomic(dir, name string, content []byte) error {
	tmp, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return fmt.Errorf("file state store %s: create temporary file: %w", dir, err)
	}
	tmpPath := tmp.Name()
	_, err = tmp.Write(content)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmpPath, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmpPath)
		return fmt.Errorf("file state store %s: write %s: %w", dir, name, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("file state store %s: open directory for fsync: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("file state store %s: fsync directory: %w", dir, err)
	}
	return nil
}
