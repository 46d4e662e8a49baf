package mm2migrate

import (
	"fmt"
	"strconv"
	"strings"
)

// Property is one key of a Java properties file, unescaped, with the line
// its key starts on.
type Property struct {
	Key, Value string
	Line       int
}

// Properties is a parsed properties file: every property in file order
// (a key given twice appears twice; Get returns the last, as Java does).
type Properties struct {
	List []Property
	last map[string]int // key → index in List of its last occurrence
}

// Get returns the value of key and whether it is set.
func (p *Properties) Get(key string) (string, bool) {
	i, ok := p.last[key]
	if !ok {
		return "", false
	}
	return p.List[i].Value, true
}

// Line returns the line of key's last occurrence, or 0.
func (p *Properties) Line(key string) int {
	if i, ok := p.last[key]; ok {
		return p.List[i].Line
	}
	return 0
}

// Duplicates returns the keys given more than once, in file order.
func (p *Properties) Duplicates() []Property {
	var out []Property
	for i, pr := range p.List {
		if p.last[pr.Key] != i {
			out = append(out, pr)
		}
	}
	return out
}

// ParseProperties reads Java's properties syntax (java.util.Properties.load):
// comment lines start with # or !; a line ending in an odd number of
// backslashes continues on the next, whose leading white space is dropped;
// the key ends at the first unescaped '=', ':' or white space, and one '='
// or ':' after white space is skipped; \t \n \r \f \uXXXX and \<any> are
// escapes in keys and values. Errors name the line, never a value.
func ParseProperties(text string) (*Properties, error) {
	p := &Properties{last: map[string]int{}}
	lines := splitLines(text)
	for i := 0; i < len(lines); i++ {
		start := i + 1
		line := strings.TrimLeft(lines[i], " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		for endsInEscape(line) && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + strings.TrimLeft(lines[i], " \t\f")
		}
		if endsInEscape(line) { // a continuation at the end of the file
			line = line[:len(line)-1]
		}
		rawKey, rawValue := splitKeyValue(line)
		key, err := unescape(rawKey)
		if err != nil {
			return nil, fmt.Errorf("line %d: key: %v", start, err)
		}
		val, err := unescape(rawValue)
		if err != nil {
			return nil, fmt.Errorf("line %d: value of %s: %v", start, key, err)
		}
		p.last[key] = len(p.List)
		p.List = append(p.List, Property{Key: key, Value: val, Line: start})
	}
	return p, nil
}

func splitLines(text string) []string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	text = strings.ReplaceAll(text, "\r", "\n")
	return strings.Split(text, "\n")
}

// endsInEscape reports whether line ends in an odd number of backslashes
// (an escaped line break).
func endsInEscape(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitKeyValue splits a logical line at the first unescaped separator.
func splitKeyValue(line string) (key, value string) {
	i := 0
	for i < len(line) {
		c := line[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			break
		}
		i++
	}
	if i > len(line) {
		i = len(line)
	}
	key, rest := line[:i], line[i:]
	rest = strings.TrimLeft(rest, " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	return key, rest
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("malformed \\uXXXX escape")
			}
			n, err := strconv.ParseUint(s[i+1:i+5], 16, 32)
			if err != nil {
				return "", fmt.Errorf("malformed \\uXXXX escape")
			}
			b.WriteRune(rune(n))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}
