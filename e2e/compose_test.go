package e2e

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/drover-run/drover/internal/tools"
)

// The compose file cannot run here (no container engine), so check what can
// be checked: it parses, has every part a deployment needs, wires them in the
// right order, and agrees with the code on names and versions.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Build       any               `yaml:"build"`
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			DependsOn   map[string]struct {
				Condition string `yaml:"condition"`
			} `yaml:"depends_on"`
			Ports   []string `yaml:"ports"`
			Volumes []string `yaml:"volumes"`
		} `yaml:"services"`
		Volumes map[string]any `yaml:"volumes"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}
	for _, name := range []string{"postgres", "temporal", "temporal-ui", "migrate", "worker"} {
		if _, ok := doc.Services[name]; !ok {
			t.Errorf("service %s is missing", name)
		}
	}
	w := doc.Services["worker"]
	if len(w.Command) != 1 || w.Command[0] != "worker" || w.Build == nil {
		t.Errorf("worker: command %v, build %v", w.Command, w.Build)
	}
	if w.DependsOn["migrate"].Condition != "service_completed_successfully" || w.DependsOn["temporal"].Condition != "service_healthy" {
		t.Errorf("worker must wait for the migration and a healthy Temporal: %+v", w.DependsOn)
	}
	if m := doc.Services["migrate"]; len(m.Command) != 1 || m.Command[0] != "migrate" {
		t.Errorf("migrate: command %v", m.Command)
	}
	// Every variable the worker is given is one drover reads.
	main, err := os.ReadFile("../cmd/drover/env.go")
	if err != nil {
		t.Fatal(err)
	}
	for k := range w.Environment {
		if !strings.Contains(string(main), `"`+k+`"`) && !strings.HasPrefix(k, "OTEL_") {
			t.Errorf("worker variable %s is not read by drover", k)
		}
	}
	for _, k := range []string{"DROVER_DATABASE_URL", "TEMPORAL_ADDRESS", "DROVER_HOST_ID", "DROVER_CLAUDE_CONFIG_DIR"} {
		if w.Environment[k] == "" {
			t.Errorf("worker lacks %s", k)
		}
	}
	// Session transcripts must survive the container.
	if !hasVolumeAt(w.Volumes, w.Environment["DROVER_CLAUDE_CONFIG_DIR"]) {
		t.Errorf("the CLI's config folder %s is not on a volume: %v", w.Environment["DROVER_CLAUDE_CONFIG_DIR"], w.Volumes)
	}
	for name, s := range doc.Services {
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s publishes %s beyond loopback", name, p)
			}
		}
	}

	// The image pins the same Claude Code as the tests.
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`ARG CLAUDE_CODE_VERSION=(\S+)`).FindSubmatch(df)
	if m == nil || string(m[1]) != tools.ClaudeVersion {
		t.Errorf("Dockerfile pins Claude Code %q, tools pin %s", m, tools.ClaudeVersion)
	}
}

func hasVolumeAt(volumes []string, dir string) bool {
	for _, v := range volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == dir {
			return true
		}
	}
	return false
}
