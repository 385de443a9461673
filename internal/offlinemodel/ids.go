package offlinemodel

import (
	"crypto/rand"
	"encoding/base64"
)

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newID returns prefix followed by 24 random base62 characters, the shape of
// the API's ids ("msg_…", "toolu_…", "req_…").
func newID(prefix string) string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand.Read never fails.
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return prefix + string(b)
}

// newSignature returns an opaque base64 signature for a thinking block.
func newSignature() string {
	b := make([]byte, 48)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}
