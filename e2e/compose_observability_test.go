package e2e

import (
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The observability profile of the compose file cannot run here either: check that its parts
// are there, pinned and wired to each other, by their own configuration files. The workers
// export OTLP to the collector's receiver; the collector sends traces to Jaeger's OTLP port and
// serves metrics where Prometheus scrapes them; nothing of the profile is needed without it.
func TestComposeObservabilityProfile(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}
	const profile = "observability"
	for _, name := range []string{"otel-collector", "jaeger", "prometheus"} {
		s, ok := doc.Services[name]
		if !ok {
			t.Fatalf("service %s is missing", name)
		}
		if !slices.Equal(s.Profiles, []string{profile}) {
			t.Errorf("%s runs in profiles %v, want only %s", name, s.Profiles, profile)
		}
		if _, tag, ok := strings.Cut(s.Image, ":"); !ok || tag == "" || tag == "latest" {
			t.Errorf("%s: image %q is not pinned", name, s.Image)
		}
	}
	// What runs without the profile needs nothing of it.
	for name, s := range doc.Services {
		if len(s.Profiles) > 0 {
			continue
		}
		for dep := range s.DependsOn {
			if len(doc.Services[dep].Profiles) > 0 {
				t.Errorf("%s depends on %s, which runs only in a profile", name, dep)
			}
		}
	}

	// The collector's configuration is the file in deploy/observability.
	collector := doc.Services["otel-collector"]
	const collectorConfig = "/etc/otelcol/config.yaml"
	if !slices.Contains(collector.Volumes, "./deploy/observability/otel-collector.yaml:"+collectorConfig+":ro") ||
		!slices.Contains(collector.Command, "--config="+collectorConfig) {
		t.Errorf("the collector does not run deploy/observability/otel-collector.yaml: %v %v", collector.Volumes, collector.Command)
	}
	var col struct {
		Receivers struct {
			OTLP struct {
				Protocols struct {
					GRPC struct {
						Endpoint string `yaml:"endpoint"`
					} `yaml:"grpc"`
				} `yaml:"protocols"`
			} `yaml:"otlp"`
		} `yaml:"receivers"`
		Exporters map[string]struct {
			Endpoint string `yaml:"endpoint"`
		} `yaml:"exporters"`
		Service struct {
			Pipelines map[string]struct {
				Receivers  []string `yaml:"receivers"`
				Processors []string `yaml:"processors"`
				Exporters  []string `yaml:"exporters"`
			} `yaml:"pipelines"`
		} `yaml:"service"`
	}
	readYAML(t, "../deploy/observability/otel-collector.yaml", &col)
	_, otlpPort, err := net.SplitHostPort(col.Receivers.OTLP.Protocols.GRPC.Endpoint)
	if err != nil {
		t.Fatalf("the collector's OTLP/gRPC receiver: %v", err)
	}

	// Every worker exports to that receiver, unless told otherwise.
	for _, name := range []string{"worker-1", "worker-2"} {
		v := doc.Services[name].Environment["OTEL_EXPORTER_OTLP_ENDPOINT"]
		def, ok := strings.CutPrefix(v, "${OTEL_EXPORTER_OTLP_ENDPOINT-")
		u, err := url.Parse(strings.TrimSuffix(def, "}"))
		if !ok || err != nil || u.Scheme != "http" || u.Host != "otel-collector:"+otlpPort {
			t.Errorf("%s exports OTLP to %q, not by default to the collector's receiver (otel-collector:%s)", name, v, otlpPort)
		}
	}

	// Traces go to Jaeger's OTLP receiver; metrics to the Prometheus exporter.
	traces, metrics := col.Service.Pipelines["traces"], col.Service.Pipelines["metrics"]
	if !slices.Equal(traces.Receivers, []string{"otlp"}) || !slices.Equal(metrics.Receivers, []string{"otlp"}) {
		t.Errorf("the pipelines do not take what the OTLP receiver gets: traces %v, metrics %v", traces.Receivers, metrics.Receivers)
	}
	for _, pl := range []struct {
		name string
		exp  []string
	}{{"traces", traces.Exporters}, {"metrics", metrics.Exporters}} {
		for _, e := range pl.exp {
			if _, ok := col.Exporters[e]; !ok {
				t.Errorf("the %s pipeline exports to %s, which is not configured", pl.name, e)
			}
		}
	}
	if len(traces.Exporters) != 1 || col.Exporters[traces.Exporters[0]].Endpoint != "jaeger:4317" {
		t.Errorf("traces are not exported to Jaeger's OTLP/gRPC port: %v %+v", traces.Exporters, col.Exporters)
	}
	if doc.Services["jaeger"].Environment["COLLECTOR_OTLP_ENABLED"] != "true" {
		t.Error("Jaeger does not receive OTLP")
	}
	if !slices.Equal(metrics.Exporters, []string{"prometheus"}) {
		t.Fatalf("metrics are exported to %v, want the Prometheus exporter", metrics.Exporters)
	}
	_, scrapePort, err := net.SplitHostPort(col.Exporters["prometheus"].Endpoint)
	if err != nil {
		t.Fatalf("the collector's Prometheus endpoint: %v", err)
	}

	// Prometheus scrapes the collector there, with the file in deploy/observability.
	prom := doc.Services["prometheus"]
	if !slices.Contains(prom.Volumes, "./deploy/observability/prometheus.yml:/etc/prometheus/prometheus.yml:ro") ||
		!slices.Contains(prom.Command, "--config.file=/etc/prometheus/prometheus.yml") {
		t.Errorf("Prometheus does not run deploy/observability/prometheus.yml: %v %v", prom.Volumes, prom.Command)
	}
	var pc struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, "../deploy/observability/prometheus.yml", &pc)
	var targets []string
	for _, sc := range pc.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	if !slices.Equal(targets, []string{"otel-collector:" + scrapePort}) {
		t.Errorf("Prometheus scrapes %v, want the collector's otel-collector:%s", targets, scrapePort)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s does not parse: %v", path, err)
	}
}
