package cli

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// tree is a small command tree: kmirror mirrors pause with --config,
// --topics and -o.
func tree() (*cobra.Command, *cobra.Command) {
	root := &cobra.Command{Use: "kmirror"}
	root.SetFlagErrorFunc(FlagError)
	mirrors := Group(&cobra.Command{Use: "mirrors"})
	var out Output
	var topics RegexList
	var cf ConfigFlags
	pause := &cobra.Command{Use: "pause MIRROR", RunE: func(*cobra.Command, []string) error { return nil }}
	cf.Register(pause.Flags(), "")
	pause.Flags().Var(&topics, "topics", "regexes")
	out.Register(pause.Flags())
	mirrors.AddCommand(pause)
	root.AddCommand(mirrors)
	return root, pause
}

func TestNormalizeArgsTakesSingleDashLongFlags(t *testing.T) {
	t.Parallel()
	root, _ := tree()
	got := NormalizeArgs(root, []string{"mirrors", "pause", "-config", "f.yaml", "-json", "-topics=a,b", "-o", "yaml", "-ojson", "-h", "-xyz", "--", "-config"})
	want := []string{"mirrors", "pause", "--config", "f.yaml", "--json", "--topics=a,b", "-o", "yaml", "-ojson", "-h", "-xyz", "--", "-config"}
	if !slices.Equal(got, want) {
		t.Fatalf("NormalizeArgs:\n got %q\nwant %q", got, want)
	}
}

func TestFlagErrorsSuggestAndExplain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--topic", "x"}, []string{"unknown flag --topic", "Did you mean --topics?", "use --topics REGEX"}},
		{[]string{"--bootstrap-server", "k:9092"}, []string{"unknown flag --bootstrap-server", "--admin-address"}},
		{[]string{"--confg", "f"}, []string{"Did you mean --config?"}},
		{[]string{"-o", "xml"}, []string{`--output "xml": want text, json or yaml`}},
		{[]string{"--topics", "a,,b"}, []string{`--topics "a,,b": entry 2 of "a,,b" is empty`}},
		{[]string{"--config"}, []string{"--config needs a value: FILE"}},
	} {
		root, _ := tree()
		var stderr bytes.Buffer
		code := Execute(root, append([]string{"mirrors", "pause", "m1"}, tc.args...), strings.NewReader(""), &bytes.Buffer{}, &stderr)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want %d", tc.args, code, ExitUsage)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%v: stderr lacks %q:\n%s", tc.args, w, stderr.String())
			}
		}
	}
}

func TestErrorsComeInTheOutputFormat(t *testing.T) {
	t.Parallel()
	root, pause := tree()
	pause.RunE = func(*cobra.Command, []string) error { return Failf("no such mirror %q", "m1") }
	var stdout, stderr bytes.Buffer
	if code := Execute(root, []string{"mirrors", "pause", "m1", "-o", "yaml"}, strings.NewReader(""), &stdout, &stderr); code != ExitFailure {
		t.Fatalf("exit %d", code)
	}
	if want := "error: no such mirror \"m1\"\nexit_code: 1\n"; stderr.String() != want {
		t.Fatalf("stderr %q, want %q", stderr.String(), want)
	}
	root, _ = tree()
	stderr.Reset()
	Execute(root, []string{"mirrors", "pause", "m1", "--topic", "x", "--json"}, strings.NewReader(""), &stdout, &stderr)
	if !strings.HasPrefix(stderr.String(), "{\n  \"error\": \"unknown flag --topic") || !strings.Contains(stderr.String(), `"exit_code": 2`) {
		t.Fatalf("a flag error with --json: %q", stderr.String())
	}
}

func TestMirrorArg(t *testing.T) {
	t.Parallel()
	if m, err := MirrorArg([]string{"m1"}, "", true); m != "m1" || err != nil {
		t.Errorf("positional: %q %v", m, err)
	}
	if m, err := MirrorArg(nil, "m1", true); m != "m1" || err != nil {
		t.Errorf("--mirror: %q %v", m, err)
	}
	if m, err := MirrorArg([]string{"m1"}, "m1", true); m != "m1" || err != nil {
		t.Errorf("both, agreeing: %q %v", m, err)
	}
	var e *Error
	for _, tc := range []struct {
		args []string
		flag string
	}{{nil, ""}, {[]string{"m1"}, "m2"}, {[]string{"a", "b"}, ""}} {
		if _, err := MirrorArg(tc.args, tc.flag, true); !errors.As(err, &e) || e.Code != ExitUsage {
			t.Errorf("%v --mirror %q: %v, want a usage error", tc.args, tc.flag, err)
		}
	}
}

func TestPrintYAMLKeepsTheJSONFieldsAndOrder(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	PrintYAML(&b, struct {
		Zed   string   `json:"zed"`
		Alpha []string `json:"alpha"`
		Multi string   `json:"multi"`
		Colon string   `json:"colon"`
	}{"z", []string{}, "a\nb\n", "a: b"})
	want := "zed: z\nalpha: []\nmulti: |\n  a\n  b\ncolon: 'a: b'\n"
	if b.String() != want {
		t.Fatalf("PrintYAML:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestSuggestFlagsBySharedWordOnlyWithoutACloseName(t *testing.T) {
	t.Parallel()
	cmd := &cobra.Command{Use: "init"}
	for _, f := range []string{"source-bootstrap", "destination-bootstrap", "admin-address", "admin-token-file"} {
		cmd.Flags().String(f, "", "")
	}
	if got := suggestFlags(cmd, "bootstrap-server"); !slices.Equal(got, []string{"--destination-bootstrap", "--source-bootstrap"}) {
		t.Errorf("bootstrap-server: %v", got)
	}
	if got := suggestFlags(cmd, "admin-adress"); !slices.Equal(got, []string{"--admin-address"}) {
		t.Errorf("admin-adress: %v", got)
	}
}
