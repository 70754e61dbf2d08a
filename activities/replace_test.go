package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"gocloud.dev/blob/memblob"

	"refuel/pkg/capacity"
	"refuel/pkg/marketmem"
	"refuel/pkg/policy"
)

// releasing is a stocked provider that records its releases, or refuses
// them with err.
type releasing struct {
	stocked
	err      error
	released []string
}

func (p *releasing) Release(_ context.Context, id string) error {
	if p.err != nil {
		return p.err
	}
	p.released = append(p.released, id)
	return nil
}

// Replace gives the lost instance back, teaching the pool what its time
// showed, and then acquires; a release the provider refuses ends it
// before anything is launched, as ReleaseFailed, for the run to release
// and acquire apart.
func TestReplaceReleasesThenAcquires(t *testing.T) {
	spot := capacity.Offering{Provider: "fake", InstanceType: "gpu", Zone: "a", Market: capacity.Spot, GPUs: 1, PricePerHour: 1}
	lost := capacity.Instance{ID: "i-lost", Offering: spot, LaunchedAt: time.Now().Add(-time.Hour)}
	lesson := policy.CheckpointLog{Held: time.Hour, Preemptions: 1}
	for name, tc := range map[string]struct {
		releaseErr  error
		wantErrType string
		wantTaught  policy.CheckpointLog
	}{
		"released then acquired": {wantTaught: lesson},
		"release refused":        {releaseErr: errors.New("RequestLimitExceeded"), wantErrType: ReleaseFailedType},
	} {
		t.Run(name, func(t *testing.T) {
			p := &releasing{stocked: stocked{in: true}, err: tc.releaseErr}
			a := &Capacity{Providers: []capacity.Provider{p}, Memory: marketmem.New(memblob.OpenBucket(nil), "test", marketmem.Options{})}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivity(a)
			in := ReplaceInput{
				Release: ReleaseInput{Instance: lost, Reason: ReleasePreempted, Log: &lesson},
				Request: capacity.Request{RunID: "r", Attempt: 2, Offerings: []capacity.Offering{spot}},
			}
			v, err := env.ExecuteActivity(a.Replace, in)
			var app *temporal.ApplicationError
			switch {
			case tc.wantErrType != "":
				if !errors.As(err, &app) || app.Type() != tc.wantErrType || !app.NonRetryable() {
					t.Fatalf("error %v; want a final %s", err, tc.wantErrType)
				}
			case err != nil:
				t.Fatal(err)
			default:
				var inst capacity.Instance
				if err := v.Get(&inst); err != nil || inst.ID != "i-1" {
					t.Errorf("acquired %+v, %v; want i-1", inst, err)
				}
				if len(p.released) != 1 || p.released[0] != lost.ID {
					t.Errorf("released %v; want %s", p.released, lost.ID)
				}
			}
			if got, err := a.PoolCheckpointLog(context.Background(), spot); err != nil || got != tc.wantTaught {
				t.Errorf("the pool's log: %+v, %v; want %+v", got, err, tc.wantTaught)
			}
		})
	}
}
