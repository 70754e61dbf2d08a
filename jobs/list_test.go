package jobs

import (
	"encoding/json"
	"testing"
	"time"

	"refuel/workflows/inference"
	"refuel/workflows/training"
	"refuel/workflows/workload"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"refuel/workflows"
)

// encoded is a status query's answer as the SDK hands it over.
type encoded struct{ v any }

func (e encoded) HasValue() bool { return e.v != nil }
func (e encoded) Get(ptr any) error {
	b, err := json.Marshal(e.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, ptr)
}

func execution(t *testing.T, id, wfType string, status enums.WorkflowExecutionStatus, attrs map[string]any) *workflow.WorkflowExecutionInfo {
	t.Helper()
	fields := map[string]*commonpb.Payload{}
	for k, v := range attrs {
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		if err != nil {
			t.Fatal(err)
		}
		fields[k] = p
	}
	return &workflow.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: id}, Type: &commonpb.WorkflowType{Name: wfType}, Status: status,
		StartTime: timestamppb.New(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)), SearchAttributes: &commonpb.SearchAttributes{IndexedFields: fields},
	}
}

func TestListRowsComeFromTheAttributesAndTheStatusQuery(t *testing.T) {
	attrs := map[string]any{"RefuelTeam": "nlp", "RefuelTier": "deadline", "RefuelPriority": 50, "RefuelState": "running", "RefuelMarket": "spot", "RefuelCostUSD": 0.25}
	run := listRowOf(execution(t, "llama", workflows.TrainingRunName, enums.WORKFLOW_EXECUTION_STATUS_RUNNING, attrs))
	addStatus(&run, encoded{training.Status{RunRecord: training.RunRecord{State: workflows.StateRunning, Priority: 80, Record: workload.Record{Step: 120, TotalSteps: 300}}, CostUSD: 0.31}})

	attrs["RefuelState"] = "running"
	killed := listRowOf(execution(t, "killed", workflows.TrainingRunName, enums.WORKFLOW_EXECUTION_STATUS_TERMINATED, attrs))

	svc := listRowOf(execution(t, "chat", workflows.InferenceServiceName, enums.WORKFLOW_EXECUTION_STATUS_RUNNING, map[string]any{"RefuelTeam": "web", "RefuelTier": "critical", "RefuelPriority": 90, "RefuelState": "running"}))
	st := inference.Status{State: workflows.StateRunning, Ready: 2, Priority: 90, CostUSD: 1.5}
	st.Desired.Replicas = 3
	addStatus(&svc, encoded{st})

	if run.Step != 120 || run.TotalSteps != 300 || run.CostUSD != 0.31 || run.Priority != 80 || run.Team != "nlp" || run.Tier != "deadline" || run.Market != "spot" {
		t.Errorf("training row %+v", run)
	}
	if killed.State != ResultTerminated || killed.Result != ResultTerminated || killed.CostUSD != 0.25 {
		t.Errorf("a terminated run's row %+v; want state terminated whatever its last RefuelState, cost from the attribute", killed)
	}
	if svc.Type != "service" || *svc.ReadyReplicas != 2 || *svc.DesiredReplicas != 3 || svc.CostUSD != 1.5 {
		t.Errorf("service row %+v", svc)
	}

	b, _ := json.Marshal(run)
	var obj map[string]any
	_ = json.Unmarshal(b, &obj)
	for _, k := range []string{"id", "type", "state", "team", "tier", "priority", "step", "total_steps", "cost_usd"} {
		if _, ok := obj[k]; !ok {
			t.Errorf("list --json lacks %q: %s", k, b)
		}
	}
}

func TestListQueryKeepsOneRowPerRunAndAppliesTheFilter(t *testing.T) {
	got := listQuery(`RefuelTeam="nlp"`)
	want := `WorkflowType IN ("TrainingRun", "InferenceService") AND ExecutionStatus != "ContinuedAsNew" AND (RefuelTeam="nlp")`
	if got != want {
		t.Errorf("listQuery:\n got %s\nwant %s", got, want)
	}
}
