package e2e

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/drover-run/drover/internal/devserver"
	"github.com/drover-run/drover/internal/tools"
	"github.com/drover-run/drover/worker"
	"github.com/drover-run/drover/workflows"
)

type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Command     []string          `yaml:"command"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Environment map[string]string `yaml:"environment"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Ports           []string `yaml:"ports"`
	Volumes         []string `yaml:"volumes"`
	StopGracePeriod string   `yaml:"stop_grace_period"`
	Profiles        []string `yaml:"profiles"`
	Healthcheck     struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

// The compose file cannot run here (no container engine), so check what can
// be checked: it parses, has every part a deployment needs, wires them in the
// right order, and agrees with the code on names and versions. What it runs of
// Temporal's (deploy/temporal) runs natively in TestProductionLayout.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]composeService `yaml:"services"`
		Volumes  map[string]any            `yaml:"volumes"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}
	for _, name := range []string{"postgres", "temporal-schema", "temporal", "temporal-namespace", "temporal-ui", "migrate", "worker-1", "worker-2", "api"} {
		if _, ok := doc.Services[name]; !ok {
			t.Errorf("service %s is missing", name)
		}
	}
	for name, s := range doc.Services {
		if strings.Contains(s.Image, "auto-setup") {
			t.Errorf("%s runs the deprecated auto-setup image %s", name, s.Image)
		}
	}

	// Temporal: the schema job, then the server, then the namespace job; all three run the files
	// of deploy/temporal, which the native test runs too.
	schema, server, namespace := doc.Services["temporal-schema"], doc.Services["temporal"], doc.Services["temporal-namespace"]
	if schema.DependsOn["postgres"].Condition != "service_healthy" {
		t.Errorf("temporal-schema must wait for a healthy Postgres: %+v", schema.DependsOn)
	}
	if !slices.Equal(schema.Entrypoint, []string{"/bin/sh", "/etc/drover/temporal/setup-schema.sh"}) {
		t.Errorf("temporal-schema runs %v, not deploy/temporal/setup-schema.sh", schema.Entrypoint)
	}
	if server.DependsOn["temporal-schema"].Condition != "service_completed_successfully" {
		t.Errorf("the server must start after the schema job has succeeded: %+v", server.DependsOn)
	}
	if !slices.Equal(server.Entrypoint, []string{"temporal-server", "--root", "/", "--config", "/etc/drover/temporal", "--env", "server", "--allow-no-auth", "start"}) {
		t.Errorf("the server runs %v, not with deploy/temporal/server.yaml", server.Entrypoint)
	}
	if namespace.DependsOn["temporal"].Condition != "service_healthy" ||
		!slices.Equal(namespace.Entrypoint, []string{"/bin/sh", "/etc/drover/temporal/create-namespace.sh"}) {
		t.Errorf("temporal-namespace must run deploy/temporal/create-namespace.sh on a healthy server: %+v %v", namespace.DependsOn, namespace.Entrypoint)
	}
	for _, s := range []composeService{schema, server, namespace} {
		if !slices.Contains(s.Volumes, "./deploy/temporal:/etc/drover/temporal:ro") {
			t.Errorf("%s does not mount deploy/temporal: %v", s.Image, s.Volumes)
		}
	}
	// The schema job and the server read the same database settings.
	for _, k := range []string{"POSTGRES_SEEDS", "DB_PORT", "POSTGRES_USER", "POSTGRES_PWD", "DBNAME", "VISIBILITY_DBNAME"} {
		if schema.Environment[k] == "" || schema.Environment[k] != server.Environment[k] {
			t.Errorf("%s: schema job %q, server %q", k, schema.Environment[k], server.Environment[k])
		}
	}
	if server.Environment["BIND_ON_IP"] != "0.0.0.0" {
		t.Errorf("the server must listen beyond its container's loopback: BIND_ON_IP=%q", server.Environment["BIND_ON_IP"])
	}

	// Versions: the server image is the release the tests build, the admin-tools image the same
	// release's.
	serverVersion := strings.TrimPrefix(server.Image, "temporalio/server:")
	if "v"+serverVersion != tools.TemporalServerVersion {
		t.Errorf("the server image is %s, the tests build go.temporal.io/server %s", server.Image, tools.TemporalServerVersion)
	}
	for _, s := range []composeService{schema, namespace} {
		tag, ok := strings.CutPrefix(s.Image, "temporalio/admin-tools:")
		if !ok || (tag != serverVersion && !strings.HasPrefix(tag, serverVersion+"-")) {
			t.Errorf("%s is not the admin-tools image of server %s", s.Image, serverVersion)
		}
	}

	if m := doc.Services["migrate"]; len(m.Command) != 1 || m.Command[0] != "migrate" {
		t.Errorf("migrate: command %v", m.Command)
	}

	// Two workers: distinct hosts, each with its own CLI state, one shared workspace volume.
	envGo, err := os.ReadFile("../cmd/drover/env.go")
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]bool{}
	configVolumes := map[string]bool{}
	var workspaceVolumes []string
	var workerKeys [][]string
	for _, name := range []string{"worker-1", "worker-2"} {
		w := doc.Services[name]
		if len(w.Command) == 0 || w.Command[0] != "worker" || w.Build == nil {
			t.Errorf("%s: command %v, build %v", name, w.Command, w.Build)
		}
		// SIGTERM drains: the process manager must wait for the drain and for stopping the CLIs.
		drain := worker.DefaultDrainTimeout
		if i := slices.Index(w.Command, "--drain-timeout"); i >= 0 && i+1 < len(w.Command) {
			if drain, err = time.ParseDuration(w.Command[i+1]); err != nil {
				t.Errorf("%s: --drain-timeout: %v", name, err)
			}
		}
		if grace, err := time.ParseDuration(w.StopGracePeriod); err != nil || grace < drain+30*time.Second {
			t.Errorf("%s: stop_grace_period %q leaves no room for a drain of %s (want at least %s)", name, w.StopGracePeriod, drain, drain+30*time.Second)
		}
		if w.DependsOn["migrate"].Condition != "service_completed_successfully" ||
			w.DependsOn["temporal"].Condition != "service_healthy" ||
			w.DependsOn["temporal-namespace"].Condition != "service_completed_successfully" {
			t.Errorf("%s must wait for the migration, a healthy Temporal and the namespace: %+v", name, w.DependsOn)
		}
		// Every variable a worker is given is one drover reads.
		var keys []string
		for k := range w.Environment {
			keys = append(keys, k)
			if !strings.Contains(string(envGo), `"`+k+`"`) && !strings.HasPrefix(k, "OTEL_") {
				t.Errorf("%s: variable %s is not read by drover", name, k)
			}
		}
		sort.Strings(keys)
		workerKeys = append(workerKeys, keys)
		for _, k := range []string{"DROVER_DATABASE_URL", "TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "DROVER_HOST_ID",
			"DROVER_CLAUDE_CONFIG_DIR", "DROVER_WORKSPACE_ROOT", "ANTHROPIC_API_KEY", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
			if _, ok := w.Environment[k]; !ok {
				t.Errorf("%s lacks %s", name, k)
			}
		}
		if w.Environment["TEMPORAL_NAMESPACE"] != namespace.Environment["TEMPORAL_NAMESPACE"] {
			t.Errorf("%s uses namespace %q, the namespace job registers %q", name, w.Environment["TEMPORAL_NAMESPACE"], namespace.Environment["TEMPORAL_NAMESPACE"])
		}
		hosts[w.Environment["DROVER_HOST_ID"]] = true
		// Session transcripts survive the container, in a volume of this host's own.
		v := volumeAt(w.Volumes, w.Environment["DROVER_CLAUDE_CONFIG_DIR"])
		if v == "" {
			t.Errorf("%s: the CLI's config folder %s is not on a volume: %v", name, w.Environment["DROVER_CLAUDE_CONFIG_DIR"], w.Volumes)
		}
		configVolumes[v] = true
		workspaceVolumes = append(workspaceVolumes, volumeAt(w.Volumes, w.Environment["DROVER_WORKSPACE_ROOT"]))
	}
	if len(hosts) != 2 || hosts[""] {
		t.Errorf("the workers need two distinct DROVER_HOST_IDs: %v", hosts)
	}
	if len(configVolumes) != 2 || configVolumes[""] {
		t.Errorf("the workers need a CLI state volume each: %v", configVolumes)
	}
	if len(workspaceVolumes) != 2 || workspaceVolumes[0] == "" || workspaceVolumes[0] != workspaceVolumes[1] {
		t.Errorf("the workers must share one workspace volume: %v", workspaceVolumes)
	}
	if len(workerKeys) == 2 && !slices.Equal(workerKeys[0], workerKeys[1]) {
		t.Errorf("the workers are configured differently: %v and %v", workerKeys[0], workerKeys[1])
	}
	for v := range configVolumes {
		if _, ok := doc.Volumes[v]; !ok && v != "" {
			t.Errorf("volume %s is not declared", v)
		}
	}

	checkComposeShared(t, doc.Services, doc.Volumes)
	checkComposeAPI(t, doc.Services, string(envGo))

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

// TestNamespaceScriptAttributes keeps deploy/temporal/create-namespace.sh registering exactly the
// search attributes the task workflow upserts, with their types.
func TestNamespaceScriptAttributes(t *testing.T) {
	t.Parallel()
	script, err := os.ReadFile("../deploy/temporal/create-namespace.sh")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range regexp.MustCompile(`--name (\S+) --type (\S+)`).FindAllStringSubmatch(string(script), -1) {
		got[m[1]] = m[2]
	}
	want := devserver.SearchAttributeFlags(workflows.SearchAttributes())
	for name, typ := range want {
		if got[name] != typ {
			t.Errorf("create-namespace.sh registers %s as %q, the workflow upserts it as %s", name, got[name], typ)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("create-namespace.sh registers %s, which the workflow does not upsert", name)
		}
	}
}

// checkComposeAPI holds the api service to what `drover serve` needs: it runs serve on every
// interface of its container, with its tokens from the environment, once the database is
// migrated and Temporal is ready; its health check asks /healthz; its port is published on
// loopback; and the workers have health checks too.
func checkComposeAPI(t *testing.T, services map[string]composeService, envGo string) {
	t.Helper()
	a := services["api"]
	if len(a.Command) < 3 || a.Command[0] != "serve" || a.Build == nil || !slices.Contains(a.Command, "--listen") {
		t.Fatalf("api: command %v, build %v; want serve --listen ADDRESS from drover's image", a.Command, a.Build)
	}
	listen := a.Command[slices.Index(a.Command, "--listen")+1]
	if !strings.HasPrefix(listen, "0.0.0.0:") {
		t.Errorf("api listens on %s, which its container's port cannot reach", listen)
	}
	port := strings.TrimPrefix(listen, "0.0.0.0:")
	if !slices.Contains(a.Ports, "127.0.0.1:"+port+":"+port) {
		t.Errorf("api does not publish its port %s on loopback: %v", port, a.Ports)
	}
	if tok := a.Environment["DROVER_API_TOKENS"]; !strings.HasPrefix(tok, "${DROVER_API_TOKENS") {
		t.Errorf("api takes its tokens from %q, not from the environment", tok)
	}
	for k := range a.Environment {
		if !strings.Contains(envGo, `"`+k+`"`) && !strings.HasPrefix(k, "OTEL_") {
			t.Errorf("api: variable %s is not read by drover", k)
		}
	}
	if a.DependsOn["migrate"].Condition != "service_completed_successfully" || a.DependsOn["temporal"].Condition != "service_healthy" {
		t.Errorf("api must wait for the migration and a healthy Temporal: %+v", a.DependsOn)
	}
	if !strings.Contains(strings.Join(a.Healthcheck.Test, " "), "127.0.0.1:"+port+"/healthz") {
		t.Errorf("api's health check %v does not ask /healthz", a.Healthcheck.Test)
	}
	for _, name := range []string{"worker-1", "worker-2"} {
		if len(services[name].Healthcheck.Test) == 0 {
			t.Errorf("%s has no health check", name)
		}
	}
}

// checkComposeShared holds the workers to what moves a managed task between them and what keeps
// a finished one: one durable workspace remote, a bare repository the workspace-remote job makes
// on a volume the workers and the API share (DROVER_WORKSPACE_REMOTE, whose default is that
// repository), and the archive job's folder (--archive-dir) on one volume both workers share.
func checkComposeShared(t *testing.T, services map[string]composeService, volumes map[string]any) {
	t.Helper()
	job := services["workspace-remote"]
	if len(job.Entrypoint) < 2 || job.Entrypoint[0] != "git" || job.Entrypoint[1] != "init" || !slices.Contains(job.Entrypoint, "--bare") {
		t.Fatalf("workspace-remote: entrypoint %v; want git init --bare REPOSITORY", job.Entrypoint)
	}
	repo := job.Entrypoint[len(job.Entrypoint)-1]
	remoteVolume := volumeHolding(job.Volumes, repo)
	if remoteVolume == "" {
		t.Errorf("workspace-remote makes %s on no volume: %v", repo, job.Volumes)
	}
	var archiveVolumes []string
	for _, name := range []string{"worker-1", "worker-2", "api"} {
		s := services[name]
		remote := s.Environment["DROVER_WORKSPACE_REMOTE"]
		if def, ok := composeDefault(remote); !ok || def != repo {
			t.Errorf("%s: DROVER_WORKSPACE_REMOTE=%q; want ${DROVER_WORKSPACE_REMOTE:-%s}", name, remote, repo)
		}
		if v := volumeHolding(s.Volumes, repo); v != remoteVolume {
			t.Errorf("%s reaches %s on volume %q, the workspace-remote job made it on %q", name, repo, v, remoteVolume)
		}
		if s.DependsOn["workspace-remote"].Condition != "service_completed_successfully" {
			t.Errorf("%s must wait for the workspace remote to be made: %+v", name, s.DependsOn)
		}
		if name == "api" {
			continue
		}
		i := slices.Index(s.Command, "--archive-dir")
		if i < 0 || i+1 >= len(s.Command) {
			t.Errorf("%s runs no archive job: command %v", name, s.Command)
			continue
		}
		archiveVolumes = append(archiveVolumes, volumeAt(s.Volumes, s.Command[i+1]))
	}
	if len(archiveVolumes) != 2 || archiveVolumes[0] == "" || archiveVolumes[0] != archiveVolumes[1] {
		t.Errorf("the workers must archive into one shared volume: %v", archiveVolumes)
	}
	for _, v := range append(archiveVolumes, remoteVolume) {
		if _, ok := volumes[v]; !ok && v != "" {
			t.Errorf("volume %s is not declared", v)
		}
	}
}

// composeDefault is the default of a compose variable written ${NAME:-default}.
func composeDefault(v string) (string, bool) {
	if !strings.HasPrefix(v, "${") || !strings.HasSuffix(v, "}") {
		return "", false
	}
	_, def, ok := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(v, "${"), "}"), ":-")
	return def, ok
}

// volumeHolding is the source of the volume whose mount point holds path, or "".
func volumeHolding(volumes []string, path string) string {
	for _, v := range volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && strings.HasPrefix(path, strings.TrimSuffix(parts[1], "/")+"/") {
			return parts[0]
		}
	}
	return ""
}

// volumeAt is the source of the volume mounted at dir, or "".
func volumeAt(volumes []string, dir string) string {
	for _, v := range volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == dir {
			return parts[0]
		}
	}
	return ""
}
