// Command mcpenv is a minimal stdio MCP server for tests: it writes the environment it was
// started with to the file named by its one argument (JSON, name → value, written before it
// answers anything), then answers initialize, tools/list and ping over newline-delimited
// JSON-RPC on its standard streams until its input ends.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mcpenv RECORD-FILE")
		os.Exit(2)
	}
	if err := record(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "mcpenv:", err)
		os.Exit(1)
	}
	if err := serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mcpenv:", err)
		os.Exit(1)
	}
}

// record writes the process's environment to path, atomically.
func record(path string) error {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	b, err := json.Marshal(env)
	if err != nil {
		return fmt.Errorf("encoding the environment: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("recording the environment: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("recording the environment: %w", err)
	}
	return nil
}

type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// serve answers requests from in on out until in ends.
func serve(in io.Reader, out io.Writer) error {
	r := bufio.NewReader(in)
	enc := json.NewEncoder(out)
	for {
		line, err := r.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			var req request
			if json.Unmarshal(line, &req) == nil && len(req.ID) > 0 {
				if err := enc.Encode(answer(req)); err != nil {
					return fmt.Errorf("writing an answer: %w", err)
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading a request: %w", err)
		}
	}
}

// answer is the response to one request.
func answer(req request) response {
	resp := response{JSONRPC: "2.0", ID: req.ID}
	switch req.Method {
	case "initialize":
		resp.Result = map[string]any{
			"protocolVersion": "2025-06-18",
			"capabilities":    map[string]any{"tools": map[string]any{}},
			"serverInfo":      map[string]any{"name": "mcpenv", "version": "1.0.0"},
		}
	case "tools/list":
		resp.Result = map[string]any{"tools": []any{}}
	case "ping":
		resp.Result = map[string]any{}
	default:
		resp.Error = &rpcError{Code: -32601, Message: "method not found: " + req.Method}
	}
	return resp
}
