//go:build tools

package deps

import (
	_ "github.com/google/uuid"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "go.opentelemetry.io/otel"
	_ "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	_ "go.opentelemetry.io/otel/sdk/trace"
	_ "go.opentelemetry.io/otel/sdk/trace/tracetest"
	_ "go.temporal.io/sdk/client"
	_ "go.temporal.io/sdk/contrib/opentelemetry"
	_ "go.temporal.io/sdk/testsuite"
	_ "go.uber.org/goleak"
)
