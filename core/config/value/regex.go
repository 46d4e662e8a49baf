package value

import (
	"regexp"
	"strings"
)

// backrefRE finds a back-reference (\1 … \9, \k<name>) that is not itself
// an escaped backslash.
var backrefRE = regexp.MustCompile(`(?:^|[^\\])(?:\\\\)*\\(?:[1-9]|k<)`)

// RE2Hint returns what to add to Go's error for a pattern written for
// Java or Perl: kmirror compiles patterns with Go's RE2, which has no
// look-around and no back-references. It returns "" for any other
// pattern. The hint starts with "; " so that it can follow the error.
func RE2Hint(pattern string) string {
	for _, la := range []string{"(?=", "(?!", "(?<=", "(?<!"} {
		if strings.Contains(pattern, la) {
			return "; kmirror uses Go's RE2 syntax, which has no look-ahead or look-behind ((?=, (?!, (?<=, (?<!): " +
				"match the names you want directly, and list the ones to leave out in the exclude key instead of (?!…) " +
				"(mirror.topics.exclude, mirror.groups.exclude; exclude always wins over include)"
		}
	}
	if backrefRE.MatchString(pattern) {
		return "; kmirror uses Go's RE2 syntax, which has no back-references (\\1, \\k<name>): " +
			"spell the repeated part out, or list the names it should match"
	}
	return ""
}
