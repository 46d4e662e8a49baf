// Package version reports what kmirror binary this is: its release version, the
// commit it was built from, and the versions of the Go toolchain and franz-go
// that went into it.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version and Commit are set at link time:
//
//	go build -ldflags "-X github.com/kmirror/kmirror/core/version.Version=v0.1.0 \
//	  -X github.com/kmirror/kmirror/core/version.Commit=$(git rev-parse --short HEAD)"
//
// When they are not set, Info falls back to the VCS data Go stamps into the binary.
var (
	Version = "dev"
	Commit  = ""
)

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"go_version"`
	FranzGo   string `json:"franz_go_version"`
}

// Get returns the build information of the running binary.
func Get() Info {
	info := Info{Version: Version, Commit: Commit, GoVersion: runtime.Version(), FranzGo: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	for _, dep := range bi.Deps {
		if dep.Path == "github.com/twmb/franz-go" {
			info.FranzGo = dep.Version
			if dep.Replace != nil {
				info.FranzGo = dep.Replace.Version
			}
		}
	}
	if info.Commit == "" {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				info.Commit = s.Value
				if len(info.Commit) > 12 {
					info.Commit = info.Commit[:12]
				}
			}
		}
	}
	fromModule(&info, bi.Main.Version)
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	return info
}

// fromModule fills what the linker did not set from the main module's
// version, which `go install …/cmd/kmirror@<version>` records: a release
// tag, or a pseudo-version ending in the commit's first 12 hex digits.
func fromModule(info *Info, modVersion string) {
	if modVersion == "" || modVersion == "(devel)" {
		return
	}
	if info.Version == "dev" {
		info.Version = modVersion
	}
	if info.Commit == "" {
		if i := strings.LastIndexByte(modVersion, '-'); i >= 0 && isHex12(modVersion[i+1:]) {
			info.Commit = modVersion[i+1:]
		}
	}
}

func isHex12(s string) bool {
	if len(s) != 12 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// String renders the information on one line per field, as `kmirror version` prints it.
func (i Info) String() string {
	return fmt.Sprintf("kmirror %s\ncommit:   %s\ngo:       %s\nfranz-go: %s\n", i.Version, i.Commit, i.GoVersion, i.FranzGo)
}
