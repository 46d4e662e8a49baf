package security

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/kmirror/kmirror/core/config/value"
	"github.com/kmirror/kmirror/sdk/auth"
)

// ErrAdminTokenMissing is returned by ReadAdminToken when the token file does
// not exist (errors.Is also holds for fs.ErrNotExist).
var ErrAdminTokenMissing = errors.New("admin token file does not exist")

// ReadAdminToken reads a bearer token file, trimming surrounding white space.
// Errors name the file, never its content.
func ReadAdminToken(path string) (auth.Secret, error) {
	b, err := value.ReadFile(path, value.MaxSecretFileBytes)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return auth.Secret{}, fmt.Errorf("%w: %s: %w", ErrAdminTokenMissing, path, os.ErrNotExist)
		}
		return auth.Secret{}, fmt.Errorf("cannot read the admin token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return auth.Secret{}, fmt.Errorf("admin token file %s is empty: write a token into it (for example `openssl rand -hex 32 > %s`)", path, path)
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return auth.Secret{}, fmt.Errorf("admin token file %s holds more than one word: it must hold the token alone", path)
	}
	return auth.NewSecret(tok), nil
}
