package offlinemodel

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkStreamReply measures one streamed answer with text, thinking and
// a tool call, end to end over loopback HTTP.
func BenchmarkStreamReply(b *testing.B) {
	srv, err := Start(Config{Responder: func(*Request) (Response, bool) {
		return Reply(Thinking(strings.Repeat("think ", 50)), Text(strings.Repeat("word ", 200)), UseBash("echo hi")), true
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	body, _ := json.Marshal(messagesBody(true, "bench"))
	b.ResetTimer()
	for b.Loop() {
		resp, err := c.Post(srv.URL()+"/v1/messages", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
