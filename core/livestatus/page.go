package livestatus

import (
	_ "embed"
	"net/http"
)

//go:embed page.html
var page []byte

// ServePage serves the status page: one HTML file with its styles and
// script inline (no other asset, nothing fetched from elsewhere), which
// reads GET /v1/live every 2 s. It shows what describe shows, never a
// secret, and changes nothing.
func ServePage(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// Only the page's own inline script and style, and requests to itself.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(page)
}
