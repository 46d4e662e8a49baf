package value_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/core/aclrule"
	"github.com/kmirror/kmirror/core/config/value"
	"github.com/kmirror/kmirror/sdk/auth"
)

// refuse checks that parse refuses raw with an error containing want.
func refuse[V any](t *testing.T, c value.Codec[V], raw any, want string) error {
	t.Helper()
	v, err := c.Parse(raw)
	if err == nil {
		t.Errorf("Parse(%#v) = %v, want an error containing %q", raw, v, want)
		return nil
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("Parse(%#v) error %q, want it to contain %q", raw, err, want)
	}
	return err
}

// roundTrip checks that Parse accepts raw as want, and that Format renders
// want into text that Parse reads back as want.
func roundTrip[V any](t *testing.T, c value.Codec[V], raw any, want V) {
	t.Helper()
	got, err := c.Parse(raw)
	if err != nil {
		t.Errorf("Parse(%#v): %v", raw, err)
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse(%#v) = %#v, want %#v", raw, got, want)
	}
	text := c.Format(got)
	again, err := c.Parse(text)
	if err != nil || !reflect.DeepEqual(again, want) {
		t.Errorf("Parse(Format(%#v) = %q) = %#v, %v; want %#v", got, text, again, err, want)
	}
}

func TestTypeErrorRedactedNeverShowsTheValue(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-do-not-print"
	for _, raw := range []any{secret, 1234.5678, true, []any{secret}, map[string]any{"k": secret}} {
		_, err := value.Int(0, 10).Parse(raw)
		var te *value.TypeError
		if !errors.As(err, &te) {
			t.Fatalf("Int(0, 10).Parse(%#v) error %v is not a *TypeError", raw, err)
		}
		red := te.Redacted()
		if !strings.HasPrefix(red, "expected an integer, got a") {
			t.Errorf("Redacted() = %q", red)
		}
		for _, leak := range []string{secret, "1234", "true"} {
			if strings.Contains(red, leak) {
				t.Errorf("Redacted() = %q shows the value", red)
			}
		}
	}
	// Error, for keys that are not secret, quotes the value.
	_, err := value.Bool().Parse("maybe")
	if err == nil || err.Error() != `expected true or false, got "maybe"` {
		t.Errorf("Bool().Parse(\"maybe\") error = %v", err)
	}
	// A TypeError wrapped by a codec is still found, and still redacts.
	_, err = value.Secret().Parse(42)
	var te *value.TypeError
	if !errors.As(err, &te) || strings.Contains(te.Redacted(), "42") || te.Redacted() != "expected a string, got a number" {
		t.Errorf("Secret().Parse(42) error %v", err)
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw        any
		show, hide string
	}{
		{"pw", `"pw"`, "a string"},
		{true, "true (a boolean)", "a boolean"},
		{7, "7 (a number)", "a number"},
		{uint64(7), "7 (a number)", "a number"},
		{1.5, "1.5 (a number)", "a number"},
		{[]any{"a"}, "a list", "a list"},
		{map[string]any{"a": 1}, "a map", "a map"},
		{nil, "nothing", "nothing"},
		{struct{}{}, "{} (a value)", "a value"},
	} {
		if got := value.Describe(tc.raw, true); got != tc.show {
			t.Errorf("Describe(%#v, true) = %q, want %q", tc.raw, got, tc.show)
		}
		if got := value.Describe(tc.raw, false); got != tc.hide {
			t.Errorf("Describe(%#v, false) = %q, want %q", tc.raw, got, tc.hide)
		}
	}
}

func TestQuoteShortensLongValues(t *testing.T) {
	t.Parallel()
	if got := value.Quote(`a"b`); got != `"a\"b"` {
		t.Errorf("Quote = %s", got)
	}
	long := strings.Repeat("x", 250)
	if got := value.Quote(long); got != `"`+strings.Repeat("x", 200)+`"…` {
		t.Errorf("Quote of 250 bytes = %s", got)
	}
}

func TestInt(t *testing.T) {
	t.Parallel()
	c := value.Int(1, 3)
	if c.Type != "int" || c.Constraint != "1 … 3" {
		t.Errorf("Type %q, Constraint %q", c.Type, c.Constraint)
	}
	roundTrip(t, c, 2, 2)
	roundTrip(t, c, int64(3), 3)
	roundTrip(t, c, uint64(1), 1)
	roundTrip(t, c, 2.0, 2)
	roundTrip(t, c, " 3 ", 3)
	refuse(t, c, 5, "5 is out of range: must be 1 … 3")
	refuse(t, c, "0", "0 is out of range: must be 1 … 3")
	refuse(t, c, 1.5, "expected an integer, got 1.5 (a number)")
	refuse(t, c, "2x", `expected an integer, got "2x"`)
	refuse(t, c, true, "expected an integer, got true (a boolean)")
	refuse(t, c, "99999999999999999999", `"99999999999999999999" is out of range for a 64-bit integer`)
	refuse(t, c, uint64(math.MaxUint64), "18446744073709551615 is too large (the maximum is 9223372036854775807)")

	if got := value.Int(0, math.MaxInt32).Constraint; got != "≥ 0" {
		t.Errorf("Int(0, MaxInt32).Constraint = %q", got)
	}
	if got := value.Int(1, math.MaxInt32).Constraint; got != "≥ 1 (must be positive)" {
		t.Errorf("Int(1, MaxInt32).Constraint = %q", got)
	}
	if got := value.Int(-1, math.MaxInt32).Constraint; got != "≥ -1" {
		t.Errorf("Int(-1, MaxInt32).Constraint = %q", got)
	}
}

func TestBuffer(t *testing.T) {
	t.Parallel()
	c := value.Buffer()
	roundTrip(t, c, -1, -1)
	roundTrip(t, c, "65536", 65536)
	roundTrip(t, c, math.MaxInt32, math.MaxInt32)
	want := "must be -1 (OS default) or 1 … 2147483647"
	refuse(t, c, 0, "0 is out of range: "+want)
	refuse(t, c, -2, "-2 is out of range: "+want)
	refuse(t, c, int64(math.MaxInt32)+1, "2147483648 is out of range: "+want)
}

func TestBool(t *testing.T) {
	t.Parallel()
	c := value.Bool()
	roundTrip(t, c, true, true)
	roundTrip(t, c, false, false)
	roundTrip(t, c, "TRUE", true)
	roundTrip(t, c, " False ", false)
	refuse(t, c, "yes", `expected true or false, got "yes"`)
	refuse(t, c, 1, "expected true or false, got 1 (a number)")
}

func TestLong(t *testing.T) {
	t.Parallel()
	c := value.Long(-1)
	if c.Type != "long" || c.Constraint != "≥ -1" {
		t.Errorf("Type %q, Constraint %q", c.Type, c.Constraint)
	}
	roundTrip(t, c, -1, int64(-1))
	roundTrip(t, c, "9223372036854775807", int64(math.MaxInt64))
	refuse(t, c, -2, "-2 is out of range: must be ≥ -1")
}

func TestMs(t *testing.T) {
	t.Parallel()
	c := value.Ms(1)
	if c.Type != "long (ms)" {
		t.Errorf("Type %q", c.Type)
	}
	roundTrip(t, c, 1500, 1500*time.Millisecond)
	roundTrip(t, c, "30000", 30*time.Second)
	if got := c.Format(2 * time.Minute); got != "120000" {
		t.Errorf("Format(2m) = %q, want milliseconds", got)
	}
	refuse(t, c, 0, "0 is out of range: must be ≥ 1 (must be positive) milliseconds")
	// A number of milliseconds that overflows a time.Duration is refused,
	// not wrapped around.
	refuse(t, c, int64(math.MaxInt64), "9223372036854775807 is out of range")
	refuse(t, c, "1s", `expected an integer, got "1s"`)
}

func TestString(t *testing.T) {
	t.Parallel()
	c := value.String("string", nil)
	roundTrip(t, c, "a b", "a b")
	err := refuse(t, c, 5, "expected a string, got 5 (a number) (quote the value in the file)")
	var te *value.TypeError
	if !errors.As(err, &te) {
		t.Errorf("error %v does not wrap a *TypeError", err)
	}
	refuse(t, c, []any{"a"}, "expected a string, got a list")

	checked := value.String("host:port", value.CheckHostPort)
	roundTrip(t, checked, "kafka:9092", "kafka:9092")
	refuse(t, checked, "kafka", `server "kafka" is not host:port`)
}

func TestSecret(t *testing.T) {
	t.Parallel()
	c := value.Secret()
	s, err := c.Parse("pa55word")
	if err != nil || s.Reveal() != "pa55word" {
		t.Fatalf("Parse = %q, %v", s.Reveal(), err)
	}
	if got := c.Format(s); strings.Contains(got, "pa55word") || got != auth.Redacted {
		t.Errorf("Format = %q, want %q", got, auth.Redacted)
	}
	if got := c.Format(auth.Secret{}); got != "" {
		t.Errorf("Format of an unset secret = %q", got)
	}
}

func TestEnum(t *testing.T) {
	t.Parallel()
	c := value.Enum([]string{"PLAINTEXT", "SSL", ""}, map[string]string{"JKS": "kmirror reads PEM only"})
	if c.Type != "enum" || c.Constraint != `PLAINTEXT, SSL, "" (empty)` || !reflect.DeepEqual(c.Values, []string{"PLAINTEXT", "SSL", ""}) {
		t.Errorf("Type %q, Constraint %q, Values %q", c.Type, c.Constraint, c.Values)
	}
	roundTrip(t, c, "ssl", "SSL")
	roundTrip(t, c, " Plaintext ", "PLAINTEXT")
	if got, err := c.Parse(""); err != nil || got != "" {
		t.Errorf(`Parse("") = %q, %v`, got, err)
	}
	refuse(t, c, "jks", `"jks" is not supported: kmirror reads PEM only`)
	refuse(t, c, "TLS", `unknown value "TLS"; valid values: PLAINTEXT, SSL, "" (empty)`)
	refuse(t, c, 1, "expected a string, got 1 (a number)")
}

func TestParseList(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw  any
		want []string
	}{
		{"a, b ,c", []string{"a", "b", "c"}},
		{"  ", nil},
		{[]any{"a{1,3}", " b "}, []string{"a{1,3}", "b"}},
		{[]any{}, []string{}},
	} {
		got, err := value.ParseList(tc.raw)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseList(%#v) = %#v, %v; want %#v", tc.raw, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		raw  any
		want string
	}{
		{"a,,b", "entry 2: empty (remove the extra comma)"},
		{"a,", "entry 2: empty"},
		{[]any{"a", 3}, "entry 2: expected a string, got 3 (a number)"},
		{[]any{"a", " "}, "entry 2: empty"},
		{5, "expected a comma-separated string or a list, got 5 (a number)"},
		{map[string]any{}, "expected a comma-separated string or a list, got a map"},
	} {
		if _, err := value.ParseList(tc.raw); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseList(%#v) error %v, want %q", tc.raw, err, tc.want)
		}
	}
}

func TestStringList(t *testing.T) {
	t.Parallel()
	c := value.StringList("list of host:port", value.CheckHostPort)
	roundTrip(t, c, "a:1, b:2", []string{"a:1", "b:2"})
	roundTrip(t, c, []any{"a:1"}, []string{"a:1"})
	refuse(t, c, "a:1,b", `server "b" is not host:port`)
	refuse(t, c, "a:1,,b:2", "entry 2: empty")
	unchecked := value.StringList("list", nil)
	roundTrip(t, unchecked, "x,y", []string{"x", "y"})
}

func TestACL(t *testing.T) {
	t.Parallel()
	c := value.ACL()
	want, err := aclrule.Parse("TOPIC;orders.*,GROUP;billing-.*;READ;ALLOW")
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, "TOPIC;orders.*,GROUP;billing-.*;READ;ALLOW", want)
	roundTrip(t, c, []any{"TOPIC;orders.*", "GROUP;billing-.*;READ;ALLOW"}, want)
	// A list item may hold a comma (a regex), which a string cannot.
	got, err := c.Parse([]any{"TOPIC;a{1,2}"})
	if err != nil || len(got) != 1 || got[0].ResourceName != "a{1,2}" {
		t.Errorf("Parse of a list item with a comma = %v, %v", got, err)
	}
	// A bad list item is reported with its position in the list.
	err = refuse(t, c, []any{"TOPIC;a", "NOPE;b"}, `entry 2: "NOPE;b": resourceType`)
	var pe *aclrule.ParseError
	if !errors.As(err, &pe) || pe.Rule != 2 {
		t.Errorf("error %v: want an *aclrule.ParseError for rule 2", err)
	}
	refuse(t, c, []any{"TOPIC;a", 7}, "entry 2: expected a string, got 7 (a number)")
	refuse(t, c, 7, "expected a comma-separated string or a list, got 7 (a number)")
}

func TestCheckHostPort(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"kafka:9092", "10.0.0.1:1", "[::1]:65535"} {
		if err := value.CheckHostPort(ok); err != nil {
			t.Errorf("CheckHostPort(%q): %v", ok, err)
		}
	}
	for in, want := range map[string]string{
		"SSL://kafka:9093": `server "SSL://kafka:9093": remove the "SSL://" prefix; the protocol is set by security.protocol`,
		"kafka":            `server "kafka" is not host:port`,
		":9092":            `server ":9092" has no host`,
		"kafka:0":          `server "kafka:0": port "0" is not a number in 1 … 65535`,
		"kafka:65536":      `port "65536" is not a number in 1 … 65535`,
		"kafka:http":       `port "http" is not a number`,
	} {
		if err := value.CheckHostPort(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckHostPort(%q) = %v, want %q", in, err, want)
		}
	}
}

func TestCheckListenAddress(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", ":9644", "0.0.0.0:0", "localhost:9644", "[::1]:9644", "admin.example.com:80"} {
		if err := value.CheckListenAddress(ok); err != nil {
			t.Errorf("CheckListenAddress(%q): %v", ok, err)
		}
	}
	for in, want := range map[string]string{
		"localhost":     `"localhost" is not host:port (or "" to disable)`,
		"localhost:-1":  `"localhost:-1": port "-1" is not a number in 0 … 65535`,
		"localhost:abc": `port "abc" is not a number in 0 … 65535`,
		"bad_host!:80":  `"bad_host!:80": "bad_host!" is neither an IP address nor a host name`,
	} {
		if err := value.CheckListenAddress(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckListenAddress(%q) = %v, want %q", in, err, want)
		}
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", "https://idp.example.com/token", "http://127.0.0.1:8080/t"} {
		if err := value.CheckURL(ok); err != nil {
			t.Errorf("CheckURL(%q): %v", ok, err)
		}
	}
	for in, want := range map[string]string{
		"ftp://idp/token":              `"ftp://idp/token" is not an http(s) URL with a host`,
		"https:///token":               "is not an http(s) URL with a host",
		"https://u:pw@idp/token":       "the URL must not carry credentials; use sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret",
		"https://idp/%zz":              "not a URL: invalid URL escape",
		"https://idp.example.com:x/t/": "not a URL: invalid port",
	} {
		err := value.CheckURL(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckURL(%q) = %v, want %q", in, err, want)
		}
		// Credentials in a URL are never echoed.
		if err != nil && strings.Contains(err.Error(), "u:pw") {
			t.Errorf("CheckURL error shows the credentials: %v", err)
		}
	}
}
