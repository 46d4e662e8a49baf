package value

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// CheckHostPort validates one bootstrap server.
func CheckHostPort(s string) error {
	if i := strings.Index(s, "://"); i >= 0 {
		return fmt.Errorf("server %s: remove the %q prefix; the protocol is set by security.protocol", Quote(s), s[:i+3])
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("server %s is not host:port: %v", Quote(s), err)
	}
	if host == "" {
		return fmt.Errorf("server %s has no host", Quote(s))
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("server %s: port %q is not a number in 1 … 65535", Quote(s), port)
	}
	return nil
}

// CheckListenAddress validates http.address: "" or host:port with port in
// 0 … 65535 (0 picks a free port) and an empty host meaning all interfaces.
func CheckListenAddress(s string) error {
	if s == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%s is not host:port (or \"\" to disable): %v", Quote(s), err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%s: port %q is not a number in 0 … 65535", Quote(s), port)
	}
	if host != "" && net.ParseIP(host) == nil && !hostnameRE.MatchString(host) {
		return fmt.Errorf("%s: %q is neither an IP address nor a host name", Quote(s), host)
	}
	return nil
}

var hostnameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$`)

// CheckURL validates sasl.oauthbearer.token.endpoint.url: "" or an
// http(s) URL with a host and no credentials.
func CheckURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("not a URL: %v", err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%s is not an http(s) URL with a host", Quote(s))
	}
	if u.User != nil {
		return fmt.Errorf("the URL must not carry credentials; use sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret")
	}
	return nil
}
