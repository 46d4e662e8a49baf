// Command modproxy writes a Go module proxy directory (GOPROXY=file://DIR)
// serving modules of this repository at pseudo-versions made from git
// commits, and prints the go.sum lines of each. kmirror has no published
// version yet, so this is how CI proves that `go install
// github.com/kmirror/kmirror/cmd/kmirror@<version>` works from a clean module
// cache, and how `make sdk-pin` computes the sdk version the main module
// requires (docs/testing.md, "go install").
//
//	modproxy -out DIR [-repo .] MODULE=SUBDIR@REV ...
//
// For example `modproxy -out /tmp/proxy github.com/kmirror/kmirror=.@HEAD
// github.com/kmirror/kmirror/sdk=sdk@HEAD`. Each module is zipped from the
// commit's tree (nested modules left out, as the go command does), under
// the pseudo-version v0.0.0-<commit time, UTC>-<12 hex digits>. It prints
// one line per module: "MODULE VERSION h1:ZIPHASH h1:GOMODHASH".
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"
)

func main() {
	out := flag.String("out", "", "proxy directory to write (created if missing)")
	repo := flag.String("repo", ".", "git repository")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: modproxy -out DIR [-repo .] MODULE=SUBDIR@REV ...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	for _, arg := range flag.Args() {
		line, err := serve(*repo, *out, arg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "modproxy: %s: %v\n", arg, err)
			os.Exit(1)
		}
		fmt.Println(line)
	}
}

// serve writes one module version into the proxy directory.
func serve(repo, out, arg string) (string, error) {
	path, rest, ok := strings.Cut(arg, "=")
	subdir, rev, ok2 := strings.Cut(rest, "@")
	if !ok || !ok2 || path == "" || rev == "" {
		return "", fmt.Errorf("want MODULE=SUBDIR@REV")
	}
	subdir = strings.TrimPrefix(filepath.Clean(subdir), "./")
	if subdir == "." {
		subdir = ""
	}
	hash, err := git(repo, "rev-parse", rev+"^{commit}")
	if err != nil {
		return "", err
	}
	unix, err := git(repo, "show", "-s", "--format=%ct", hash)
	if err != nil {
		return "", err
	}
	secs, err := strconv.ParseInt(unix, 10, 64)
	if err != nil {
		return "", fmt.Errorf("commit time %q: %w", unix, err)
	}
	when := time.Unix(secs, 0).UTC()
	version := module.PseudoVersion("v0", "", when, hash[:12])
	mv := module.Version{Path: path, Version: version}

	escPath, err := module.EscapePath(path)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(out, escPath, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	gomodPath := "go.mod"
	if subdir != "" {
		gomodPath = subdir + "/go.mod"
	}
	gomod, err := gitRaw(repo, "show", hash+":"+gomodPath)
	if err != nil {
		return "", err
	}
	zipFile := filepath.Join(dir, version+".zip")
	f, err := os.Create(zipFile)
	if err != nil {
		return "", err
	}
	root, err := vcsRoot(repo)
	if err != nil {
		f.Close()
		return "", err
	}
	if err := modzip.CreateFromVCS(f, mv, root, hash, subdir); err != nil {
		f.Close()
		return "", fmt.Errorf("zip %s: %w", mv, err)
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, when})
	if err := os.WriteFile(filepath.Join(dir, version+".info"), info, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, version+".mod"), []byte(gomod), 0o644); err != nil {
		return "", err
	}
	if err := appendList(filepath.Join(dir, "list"), version); err != nil {
		return "", err
	}
	zipHash, err := dirhash.HashZip(zipFile, dirhash.Hash1)
	if err != nil {
		return "", err
	}
	modHash, err := dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(gomod)), nil
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s %s %s", path, version, zipHash, modHash), nil
}

func appendList(file, version string) error {
	old, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, v := range strings.Fields(string(old)) {
		if v == version {
			return nil
		}
	}
	return os.WriteFile(file, append(old, []byte(version+"\n")...), 0o644)
}

// vcsRoot returns the directory that x/mod's CreateFromVCS accepts for
// repo: one whose .git is the repository's git directory. In a linked
// worktree (git worktree add), .git is a file, so it is the directory
// holding the shared .git instead; commits are read by hash, and both see
// the same objects.
func vcsRoot(repo string) (string, error) {
	common, err := git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return "", err
	}
	if filepath.Base(common) != ".git" {
		return "", fmt.Errorf("%s: the git directory %s is not a .git directory of a work tree", repo, common)
	}
	return filepath.Dir(common), nil
}

func git(repo string, args ...string) (string, error) {
	out, err := gitRaw(repo, args...)
	return strings.TrimRight(out, "\n"), err
}

func gitRaw(repo string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
