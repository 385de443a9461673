package worker

import (
	"testing"

	"go.temporal.io/sdk/client"
)

// A server on loopback gets its calls uncompressed; any other keeps the SDK's gzip.
func TestGrpcCompressionIsOffOnlyOnLoopback(t *testing.T) {
	for _, tc := range []struct {
		address string
		off     bool
	}{
		{"127.0.0.1:7233", true},
		{"127.0.5.9:7233", true},
		{"[::1]:7233", true},
		{"localhost:7233", true},
		{"localhost", true},
		{"temporal:7233", false},
		{"10.0.0.4:7233", false},
		{"temporal.example.com:7233", false},
		{"dns:///127.0.0.1:7233", false},
	} {
		got := grpcCompression(tc.address)
		_, off := got.(*client.GrpcCompressionNone)
		if off != tc.off {
			t.Errorf("grpcCompression(%q) = %T, want compression off: %v", tc.address, got, tc.off)
		}
		if !off && got != nil {
			t.Errorf("grpcCompression(%q) = %T, want the SDK's default (nil)", tc.address, got)
		}
	}
}
