package realcli

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/internal/testkit/clitest"
)

// secretPattern matches anything that looks like an Anthropic API key.
var secretPattern = regexp.MustCompile(`sk-ant-[A-Za-z0-9_-]+`)

// TestTranscripts checks every recorded transcript: each stdout line decodes with claudecode.Decode;
// there is exactly one result per prompt we sent, not counting the turns the CLI starts by itself
// (results with an origin, such as a background agent's task-notification) nor the result of a
// start-up failure (a result before any system/init, as for a rejected resume); no line holds an
// API key or an unnormalized temporary path.
func TestTranscripts(t *testing.T) {
	if *update {
		t.Skip("the transcripts are being rewritten; run again without -update to check them")
	}
	paths, err := filepath.Glob(filepath.Join(transcriptDir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, p := range paths {
		if strings.HasSuffix(p, ".stdin.jsonl") {
			continue
		}
		n++
		name := strings.TrimSuffix(filepath.Base(p), ".jsonl")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out := readLines(t, p)
			in := readLines(t, strings.TrimSuffix(p, ".jsonl")+".stdin.jsonl")
			if len(out) == 0 {
				t.Fatalf("empty transcript")
			}
			var results, startupFailures int
			var inited bool
			for i, line := range out {
				m, err := claudecode.Decode(line)
				if err != nil {
					t.Errorf("line %d does not decode: %v", i+1, err)
					continue
				}
				if !bytes.Equal(m.Raw(), line) {
					t.Errorf("line %d: Raw differs from the line", i+1)
				}
				switch m := m.(type) {
				case *claudecode.SystemInit:
					inited = true
				case *claudecode.ResultMessage:
					switch {
					case !inited:
						startupFailures++
					case clitest.Object(m.Raw())["origin"] == nil:
						results++
					}
				}
			}
			var prompts int
			for i, line := range in {
				switch clitest.Object(line)["type"] {
				case claudecode.TypeUser:
					prompts++
				case claudecode.TypeControlRequest, claudecode.TypeControlResponse:
				default:
					t.Errorf("stdin line %d is not a prompt, control request or control response: %.100s", i+1, line)
				}
			}
			if results != prompts || results+startupFailures == 0 {
				t.Errorf("%d results for %d prompts (and %d start-up failures), want one per prompt", results, prompts, startupFailures)
			}
			for i, line := range append(out, in...) {
				if secretPattern.Match(line) {
					t.Errorf("line %d holds something like an API key", i+1)
				}
				if bytes.Contains(line, []byte(`"`+os.TempDir()+"/")) {
					t.Errorf("line %d holds a temporary path that was not normalized", i+1)
				}
			}
		})
	}
	if n == 0 {
		t.Fatalf("no transcripts in %s: run go test ./claudecode/realcli -run . -update", transcriptDir)
	}
}

// readLines returns the non-empty lines of a file.
func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			lines = append(lines, l)
		}
	}
	return lines
}
