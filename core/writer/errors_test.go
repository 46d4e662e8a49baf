package writer

import (
	"errors"
	"strings"
	"testing"
)

// An offset mismatch says what to do: a destination shorter than kmirror
// left it (a topic deleted and created again) is told apart from records in
// the way.
func TestOffsetMismatchErrorSaysWhatToDo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		got  int64
		want string
	}{
		{got: 0, want: "the destination topic was deleted (and created again)"},
		{got: 60, want: "holds records kmirror did not write there"},
	} {
		err := error(&OffsetMismatchError{Mirror: "m", Topic: "t", Partition: 1, Expected: 50, Got: tc.got, What: "batch appended at another offset"})
		msg := err.Error()
		for _, w := range []string{`mirror "m", destination t/1`, "expected offset 50", tc.want} {
			if !strings.Contains(msg, w) {
				t.Errorf("got %d: %q does not say %q", tc.got, msg, w)
			}
		}
		if !errors.Is(err, ErrOffsetMismatch) {
			t.Errorf("got %d: not ErrOffsetMismatch", tc.got)
		}
	}
}
