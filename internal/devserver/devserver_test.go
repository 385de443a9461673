package devserver

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/drover-run/drover/internal/testkit/testtools"
)

func TestStartRestartKeepsState(t *testing.T) {
	bin, err := testtools.TemporalBin()
	if err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := filepath.Join(t.TempDir(), "temporal.db")
	cfg := Config{Bin: bin, Headless: true, DBFile: db, SearchAttributes: map[string]string{"DroverProbe": "Keyword"},
		Retention: 45 * 24 * time.Hour}

	srv, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	port := srv.cfg.Port
	assertSearchAttribute(ctx, t, srv, "DroverProbe")
	c, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: srv.Namespace(), Logger: nopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := c.WorkflowService().DescribeNamespace(ctx, describeNamespace(srv.Namespace()))
	c.Close()
	if err != nil || ns.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration() != 45*24*time.Hour {
		t.Fatalf("the namespace keeps closed histories %v (%v), want the retention asked, 1080h", ns.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(), err)
	}
	srv.Kill()

	// Same file, no search attribute flags: what was registered must still be there.
	cfg.SearchAttributes = nil
	cfg.Port = port
	srv, err = Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	assertSearchAttribute(ctx, t, srv, "DroverProbe")
}

func assertSearchAttribute(ctx context.Context, t *testing.T, srv *Server, name string) {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: srv.Namespace(), Logger: nopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: srv.Namespace()})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resp.GetCustomAttributes()[name]; !ok {
		t.Fatalf("search attribute %s missing; have %v", name, resp.GetCustomAttributes())
	}
}
