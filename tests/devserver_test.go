package tests

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"refuel/internal/cluster"
	"refuel/pkg/devserver"
)

// refuelSearchAttributes are the attributes of the external contract
// (docs/contracts.md) that the dev server must register.
var refuelSearchAttributes = map[string]enums.IndexedValueType{
	"RefuelTeam":     enums.INDEXED_VALUE_TYPE_KEYWORD,
	"RefuelTier":     enums.INDEXED_VALUE_TYPE_KEYWORD,
	"RefuelPriority": enums.INDEXED_VALUE_TYPE_INT,
	"RefuelState":    enums.INDEXED_VALUE_TYPE_KEYWORD,
	"RefuelMarket":   enums.INDEXED_VALUE_TYPE_KEYWORD,
	"RefuelCostUSD":  enums.INDEXED_VALUE_TYPE_DOUBLE,
}

func TestDevserverSearchAttributesAndUI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	srv := startDevserver(ctx, t, devserver.Options{
		FrontendAddr:     "127.0.0.1:0",
		UIAddr:           "127.0.0.1:0",
		SearchAttributes: refuelSearchAttributes,
	})
	c := dialDevserver(t, srv)

	assertSearchAttributes(ctx, t, c, srv.Namespace(), refuelSearchAttributes)

	resp, err := http.Get(srv.UIURL())
	if err != nil {
		t.Fatalf("GET %s: %v", srv.UIURL(), err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: status %d, want 200", srv.UIURL(), resp.StatusCode)
	}

	// A second server on the same frontend address must say so clearly.
	_, err = devserver.Start(ctx, devserver.Options{FrontendAddr: srv.FrontendAddr()})
	if !errors.Is(err, devserver.ErrAddrInUse) {
		t.Errorf("Start on a taken address: got %v, want ErrAddrInUse", err)
	}
	t.Logf("Start on a taken address: %v", err)

	// The same attribute with another type is a conflict, not a silent no-op.
	err = cluster.EnsureSearchAttributes(ctx, c.OperatorService(), srv.Namespace(),
		map[string]enums.IndexedValueType{"RefuelTeam": enums.INDEXED_VALUE_TYPE_INT})
	if err == nil {
		t.Error("EnsureSearchAttributes with a conflicting type: got nil error")
	}

	if err := srv.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestDevserverPersistsAcrossRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	const workflowID, taskQueue = "devserver-persist", "devserver-test"

	first := startDevserver(ctx, t, devserver.Options{
		DataDir:          dir,
		FrontendAddr:     "127.0.0.1:0",
		SearchAttributes: refuelSearchAttributes,
	})
	c := dialDevserver(t, first)
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(greet, workflow.RegisterOptions{Name: "DevserverGreet"})
	if err := w.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflowID, TaskQueue: taskQueue}, "DevserverGreet", "refuel")
	if err != nil {
		t.Fatalf("start workflow: %v", err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	w.Stop()
	c.Close()
	if err := first.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}

	// A newer refuel may bring a search attribute the old database lacks.
	withNew := map[string]enums.IndexedValueType{"RefuelDevserverTest": enums.INDEXED_VALUE_TYPE_KEYWORD}
	for name, typ := range refuelSearchAttributes {
		withNew[name] = typ
	}
	second := startDevserver(ctx, t, devserver.Options{
		DataDir:          dir,
		FrontendAddr:     "127.0.0.1:0",
		SearchAttributes: withNew,
	})
	c = dialDevserver(t, second)

	desc, err := c.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		t.Fatalf("describe after restart: %v", err)
	}
	if status := desc.GetWorkflowExecutionInfo().GetStatus(); status != enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Errorf("status after restart: %v, want COMPLETED", status)
	}
	var afterRestart string
	if err := c.GetWorkflow(ctx, workflowID, "").Get(ctx, &afterRestart); err != nil {
		t.Fatalf("result after restart: %v", err)
	}
	if afterRestart != got || got != "hello refuel" {
		t.Errorf("result: before restart %q, after %q, want %q", got, afterRestart, "hello refuel")
	}
	assertSearchAttributes(ctx, t, c, second.Namespace(), withNew)
}

func greet(_ workflow.Context, name string) (string, error) {
	return "hello " + name, nil
}

// startDevserver starts a server whose logs go to the test log, stopped
// when the test ends.
func startDevserver(ctx context.Context, t *testing.T, o devserver.Options) *devserver.Server {
	t.Helper()
	o.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	start := time.Now()
	srv, err := devserver.Start(ctx, o)
	if err != nil {
		t.Fatalf("devserver.Start: %v", err)
	}
	t.Logf("devserver up at %s in %v", srv.FrontendAddr(), time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return srv
}

func dialDevserver(t *testing.T, srv *devserver.Server) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{
		HostPort:  srv.FrontendAddr(),
		Namespace: srv.Namespace(),
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	})
	if err != nil {
		t.Fatalf("dial %s: %v", srv.FrontendAddr(), err)
	}
	t.Cleanup(c.Close)
	return c
}

func assertSearchAttributes(ctx context.Context, t *testing.T, c client.Client, namespace string, want map[string]enums.IndexedValueType) {
	t.Helper()
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		t.Fatalf("list search attributes: %v", err)
	}
	for name, typ := range want {
		if got, ok := resp.GetCustomAttributes()[name]; !ok || got != typ {
			t.Errorf("search attribute %s: got %v (present %t), want %v", name, got, ok, typ)
		}
	}
}
