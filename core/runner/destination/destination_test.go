package destination

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestTooLargeIsBothSizeErrorsAndNothingElse(t *testing.T) {
	wrapped := fmt.Errorf("writer: produce: %w", kerr.MessageTooLarge)
	if !isTooLarge(wrapped) || !isTooLarge(kerr.RecordListTooLarge) {
		t.Fatal("a size refusal is not recognised")
	}
	if isTooLarge(kerr.CorruptMessage) || isTooLarge(errors.New("MESSAGE_TOO_LARGE")) || isTooLarge(nil) {
		t.Fatal("another error is taken for a size refusal")
	}
}
