package security_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/kmirror/kmirror/core/config/security"
	"github.com/kmirror/kmirror/internal/testpki"
	"github.com/kmirror/kmirror/sdk/auth"
)

func TestReadAdminToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tok, err := security.ReadAdminToken(testpki.WriteFile(t, dir, "t", "  tok-123\n"))
	if err != nil || tok.Reveal() != "tok-123" || tok.String() != auth.Redacted {
		t.Fatalf("ReadAdminToken = %q (%s), %v", tok.Reveal(), tok, err)
	}
	_, err = security.ReadAdminToken(filepath.Join(dir, "missing"))
	if !errors.Is(err, security.ErrAdminTokenMissing) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}
