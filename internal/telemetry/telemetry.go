// Package telemetry sets up OpenTelemetry for a drover process: traces and metrics exported
// over OTLP when the command line found an OTLP endpoint configured, metrics collected for a
// Prometheus scrape endpoint when one is served, and nothing at all otherwise, so that
// telemetry costs nothing unless someone collects it.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// Config says what a process exports.
type Config struct {
	// Service and Version name the process in what it exports; Instance, when set, tells it
	// from the other processes of the service (a worker's host id).
	Service, Version, Instance string
	// Traces exports traces over OTLP/gRPC; the exporter takes its endpoint and options from
	// the standard OTEL_EXPORTER_OTLP_* variables.
	Traces bool
	// Metrics exports metrics over OTLP/gRPC, configured the same way (OTEL_METRIC_EXPORT_INTERVAL
	// sets how often; 60s by default).
	Metrics bool
	// Prometheus collects metrics for a scrape endpoint: Telemetry.MetricsHandler serves them.
	Prometheus bool
	// Logger receives the exporters' errors (a collector out of reach), at most one a minute.
	// Nil leaves OpenTelemetry's default handler, which prints each.
	Logger *slog.Logger
}

// Telemetry is what Setup installed.
type Telemetry struct {
	// MetricsHandler serves the metrics in Prometheus' text format, with the Go runtime's and
	// the process's own; nil unless Config.Prometheus.
	MetricsHandler http.Handler
	shutdown       []func(context.Context) error
}

// Shutdown flushes what is left to export and stops the exporters; call it on exit.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range t.shutdown {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}

// Setup installs the global propagator, and the global tracer and meter providers of what cfg
// exports. A provider with nothing to export is left as it is, a no-op.
func Setup(ctx context.Context, cfg Config) (*Telemetry, error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	t := &Telemetry{}
	if !cfg.Traces && !cfg.Metrics && !cfg.Prometheus {
		return t, nil
	}
	if cfg.Logger != nil {
		otel.SetErrorHandler(&errorLog{log: cfg.Logger, every: time.Minute})
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(cfg.Service), semconv.ServiceVersion(cfg.Version)}
	if cfg.Instance != "" {
		attrs = append(attrs, semconv.ServiceInstanceID(cfg.Instance))
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL, attrs...))
	if err != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, fmt.Errorf("building the telemetry resource: %w", err)
	}
	if cfg.Traces {
		exp, err := otlptracegrpc.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("creating the OTLP trace exporter: %w", err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		otel.SetTracerProvider(tp)
		t.shutdown = append(t.shutdown, tp.Shutdown)
	}
	opts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	if cfg.Metrics {
		exp, err := otlpmetricgrpc.New(ctx)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("creating the OTLP metric exporter: %w", err), t.Shutdown(ctx))
		}
		opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	if cfg.Prometheus {
		reg := promclient.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		exp, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("creating the Prometheus exporter: %w", err), t.Shutdown(ctx))
		}
		opts = append(opts, sdkmetric.WithReader(exp))
		t.MetricsHandler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	if cfg.Metrics || cfg.Prometheus {
		mp := sdkmetric.NewMeterProvider(opts...)
		otel.SetMeterProvider(mp)
		t.shutdown = append(t.shutdown, mp.Shutdown)
	}
	return t, nil
}

// errorLog logs OpenTelemetry's errors, the first of every period and then a count of those it
// left out: an exporter that cannot reach its collector fails at every export.
type errorLog struct {
	log   *slog.Logger
	every time.Duration

	mu      sync.Mutex
	last    time.Time
	dropped int
}

func (h *errorLog) Handle(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if now := time.Now(); now.Sub(h.last) >= h.every {
		h.log.Warn("telemetry", "error", err, "errors_since_last", h.dropped)
		h.last, h.dropped = now, 0
		return
	}
	h.dropped++
}
