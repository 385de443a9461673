package offlinemodel

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
)

// Account names the client a request came from by its credential, without
// the credential: a kind prefix and the first 12 hex digits of the
// credential's SHA-256, for example "key-3f2a9c1d0b7e" or
// "oauth-8e41c0d2a955". The server keeps and logs only this label.
//
// The pinned CLI sends an API key (ANTHROPIC_API_KEY) as x-api-key and a
// claude.ai OAuth token (CLAUDE_CODE_OAUTH_TOKEN) as "Authorization: Bearer";
// those are the two kinds. A request with neither is NoAccount.
type Account string

// NoAccount is the account of a request without a credential.
const NoAccount Account = "none"

// Account label prefixes.
const (
	keyPrefix   = "key-"
	oauthPrefix = "oauth-"
)

// APIKeyAccount returns the account of requests that send key as x-api-key.
func APIKeyAccount(key string) Account {
	return Account(keyPrefix + digest(key))
}

// OAuthAccount returns the account of requests that send token as
// "Authorization: Bearer token".
func OAuthAccount(token string) Account {
	return Account(oauthPrefix + digest(token))
}

// OAuth reports whether the account authenticates with a bearer (claude.ai
// OAuth) token. Such accounts are limited the way claude.ai subscriptions
// are: with anthropic-ratelimit-unified-* headers.
func (a Account) OAuth() bool {
	return strings.HasPrefix(string(a), oauthPrefix)
}

// APIKey reports whether the account authenticates with an API key.
func (a Account) APIKey() bool {
	return strings.HasPrefix(string(a), keyPrefix)
}

func digest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])[:12]
}

// accountOf returns the account a request's headers name: x-api-key first,
// then a bearer token.
func accountOf(h http.Header) Account {
	if k := h.Get("X-Api-Key"); k != "" {
		return APIKeyAccount(k)
	}
	if scheme, token, ok := strings.Cut(h.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") && token != "" {
		return OAuthAccount(strings.TrimSpace(token))
	}
	return NoAccount
}
