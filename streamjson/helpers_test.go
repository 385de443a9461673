package streamjson

import (
	"bytes"
	"encoding/json"
)

// jsonString encodes v the way Normalize writes it: no HTML escaping.
func jsonString(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n"))), nil
}
