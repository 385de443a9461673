package realcli

import (
	"bufio"
	"encoding/json"
	"io"
	"os"

	"github.com/drover-run/drover/claudecode"
)

// mcpServerEnv, set to 1, makes the test binary serve MCP on its stdio instead of running tests:
// the CLI starts it as the stdio MCP server of mcpServers.
const mcpServerEnv = "DROVER_REALCLI_MCP_SERVER"

// mcpServerName and mcpToolName name the one tool the test server offers; the CLI calls it
// mcp__<server>__<tool>.
const (
	mcpServerName = "drovertest"
	mcpToolName   = "echo"
	mcpToolFull   = "mcp__" + mcpServerName + "__" + mcpToolName
)

// testMCPServers configures the test binary as a stdio MCP server.
func testMCPServers() map[string]claudecode.MCPServer {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return map[string]claudecode.MCPServer{mcpServerName: {
		Command: exe,
		Env:     map[string]string{mcpServerEnv: "1"},
	}}
}

// serveMCP answers MCP requests (JSON-RPC 2.0, one message per line) until in ends. Its one tool
// echoes its text argument back, prefixed with "echo: ".
func serveMCP(in io.Reader, out io.Writer) {
	r := bufio.NewReader(in)
	enc := json.NewEncoder(out)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if json.Unmarshal(line, &req) == nil && len(req.ID) > 0 {
				result, rpcErr := mcpAnswer(req.Method, req.Params)
				resp := map[string]any{"jsonrpc": "2.0", "id": req.ID}
				if rpcErr != nil {
					resp["error"] = rpcErr
				} else {
					resp["result"] = result
				}
				_ = enc.Encode(resp)
			}
		}
		if err != nil {
			return
		}
	}
}

func mcpAnswer(method string, params json.RawMessage) (any, any) {
	switch method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(params, &p)
		return map[string]any{
			"protocolVersion": p.ProtocolVersion,
			"capabilities":    map[string]any{"tools": map[string]any{}},
			"serverInfo":      map[string]any{"name": mcpServerName, "version": "1.0.0"},
		}, nil
	case "ping":
		return map[string]any{}, nil
	case "tools/list":
		return map[string]any{"tools": []any{map[string]any{
			"name":        mcpToolName,
			"description": "Echo the text back.",
			"inputSchema": map[string]any{
				"type":       "object",
				"properties": map[string]any{"text": map[string]any{"type": "string"}},
				"required":   []string{"text"},
			},
		}}}, nil
	case "tools/call":
		var p struct {
			Name      string `json:"name"`
			Arguments struct {
				Text string `json:"text"`
			} `json:"arguments"`
		}
		_ = json.Unmarshal(params, &p)
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": "echo: " + p.Arguments.Text}}}, nil
	}
	return nil, map[string]any{"code": -32601, "message": "method not found: " + method}
}
