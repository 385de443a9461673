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

// A token of Config.Tokens is "name:secret", or a bare secret, which is named token-N by its
// place in the list (token-1 first). The name is who the API records as the author of what a
// request carrying the secret does (a decision, a prompt, an interrupt, a cancel, a budget
// change).
const unnamedTokenPrefix = "token-"

// maxTokenNameBytes bounds a token's name.
const maxTokenNameBytes = 64

// SplitToken reads one entry of Config.Tokens: its name and its secret. An entry whose part
// before the first colon is a name (letters, digits, and . _ @ -, at most 64 bytes) is named;
// any other entry is a bare secret, named token-n (n counts from 1).
func SplitToken(entry string, n int) (name, secret string) {
	if before, after, ok := strings.Cut(entry, ":"); ok && validTokenName(before) && after != "" {
		return before, after
	}
	return fmt.Sprintf("%s%d", unnamedTokenPrefix, n), entry
}

func validTokenName(s string) bool {
	if s == "" || len(s) > maxTokenNameBytes {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._@-", r)
		if !ok {
			return false
		}
	}
	return true
}

// tokenSet holds the digests of the accepted tokens with their names, never the tokens.
type tokenSet []namedDigest

type namedDigest struct {
	name string
	sum  [sha256.Size]byte
}

func newTokenSet(entries []string) tokenSet {
	out := make(tokenSet, 0, len(entries))
	for i, e := range entries {
		name, secret := SplitToken(e, i+1)
		out = append(out, namedDigest{name: name, sum: sha256.Sum256([]byte(secret))})
	}
	return out
}

// holder returns the name of the token r carries, and whether it carries one. It compares the
// digest of what r carries with every token's, each in constant time, so the time taken says
// nothing about which token, or how much of one, matched.
func (s tokenSet) holder(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	match, name := 0, ""
	for _, want := range s {
		if subtle.ConstantTimeCompare(sum[:], want.sum[:]) == 1 {
			match, name = 1, want.name
		}
	}
	return name, match == 1
}

// actorKey keeps, in a request's context, who sent it.
type actorKey struct{}

// defaultActor is who a request is recorded as sent by when the server has no tokens.
const defaultActor = "api"

// actor is who sent r: its token's name, or defaultActor on a server without tokens.
func actor(r *http.Request) string {
	if a, ok := r.Context().Value(actorKey{}).(string); ok && a != "" {
		return a
	}
	return defaultActor
}
