package version

import "testing"

func TestAnInstalledModuleVersionFillsVersionAndCommit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		mod, version, commit string
		in                   Info
	}{
		{"v0.0.0-20261201190252-f8d091b87574", "v0.0.0-20261201190252-f8d091b87574", "f8d091b87574", Info{Version: "dev"}},
		{"v1.2.3", "v1.2.3", "", Info{Version: "dev"}},
		{"(devel)", "dev", "", Info{Version: "dev"}},
		{"v0.0.0-20261201190252-f8d091b87574", "v9.9.9", "abc", Info{Version: "v9.9.9", Commit: "abc"}},
	}
	for _, c := range cases {
		info := c.in
		fromModule(&info, c.mod)
		if info.Version != c.version || info.Commit != c.commit {
			t.Errorf("fromModule(%q) on %+v = %q %q, want %q %q", c.mod, c.in, info.Version, info.Commit, c.version, c.commit)
		}
	}
}
