package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// MinTokenBytes is the shortest bearer token a server accepts in its configuration.
const MinTokenBytes = 16

// ErrExposedWithoutTokens is CheckExposure's answer for an address other than loopback with
// no tokens configured.
var ErrExposedWithoutTokens = errors.New("refusing to listen beyond loopback without credentials")

// CheckExposure refuses an address that others can reach (anything but a loopback IP or
// "localhost") when no tokens are configured.
func CheckExposure(addr string, tokens int) error {
	if tokens > 0 || IsLoopback(addr) {
		return nil
	}
	return fmt.Errorf("%w: %s is reachable from other machines; set DROVER_API_TOKENS or DROVER_API_TOKEN_FILE, or listen on 127.0.0.1", ErrExposedWithoutTokens, addr)
}

// IsLoopback reports whether the host of addr (host:port) is a loopback IP or "localhost". An
// empty host (every interface) is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tokenSet holds the digests of the accepted tokens, never the tokens.
type tokenSet [][sha256.Size]byte

func newTokenSet(tokens []string) tokenSet {
	out := make(tokenSet, 0, len(tokens))
	for _, t := range tokens {
		out = append(out, sha256.Sum256([]byte(t)))
	}
	return out
}

// allows reports whether r carries one of the tokens. It compares the digest of what r
// carries with every token's, each in constant time, so the time taken says nothing about
// which token, or how much of one, matched.
func (s tokenSet) allows(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	match := 0
	for _, want := range s {
		match |= subtle.ConstantTimeCompare(sum[:], want[:])
	}
	return match == 1
}
