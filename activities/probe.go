package activities

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"time"

	"go.temporal.io/sdk/temporal"

	"refuel/pkg/capacity"
)

// ProbeSpotName is the activity that tries spot in pools a run does not
// hold, to learn their stock.
const ProbeSpotName = "ProbeSpot"

// ProbeInput asks to probe pools: to acquire spot in each as a run would,
// for Nodes instances, and let go at once of what was had.
type ProbeInput struct {
	// Request is the run's: RunID, Identity, Tags and MaxPricePerHour
	// are those of its acquisitions. Its Offerings are not read.
	Request capacity.Request `json:"request"`
	// Probes are the spot offerings to try, one per pool.
	Probes []capacity.Offering `json:"probes"`
	// Nodes is how many instances each pool is tried for (a gang's
	// width); 0 means 1.
	Nodes int `json:"nodes,omitempty"`
	// Name tells these probes apart from the run's others in the
	// idempotency tokens (the market's tick, say): a retry of the same
	// probes gets the instances the first try had.
	Name string `json:"name"`
}

// ProbeResult says, per pool in the order asked, how many of the nodes
// its probe had before it let them go: Nodes where the pool had the
// stock, fewer where it ran out, 0 where it was refused.
type ProbeResult struct {
	Taken []int `json:"taken"`
}

// ProbeSpot tries spot in each pool of in, as Acquire does (so the
// market memory and the unavailable cache learn from the answer), for
// all of the gang's nodes at once, and releases what it had before it
// tries the next pool. A refusal for stock, price or quota ends a pool's
// probe with the nodes had so far; another failure is retried, and the
// retry, with the same tokens, finds what the first try launched, so
// nothing is left running. A pool the first try had fewer than all the
// nodes of may count one more on a retry: its instances, let go, no
// longer hold the stock they took (a live run's view of that tick then
// differs from its replay; nothing is lost).
func (a *Capacity) ProbeSpot(ctx context.Context, in ProbeInput) (ProbeResult, error) {
	out := ProbeResult{Taken: make([]int, len(in.Probes))}
	req := in.Request
	req.Tags = maps.Clone(req.Tags)
	if req.Tags == nil {
		req.Tags = map[string]string{}
	}
	req.Tags[capacity.TagProbe] = "true"
	for i, o := range in.Probes {
		if o.Market != capacity.Spot {
			return out, temporal.NewNonRetryableApplicationError(fmt.Sprintf("probe %d is of %s; only spot is probed", i, o.Key()), string(capacity.SpecMismatch), nil)
		}
		req.Offerings, req.Probe = []capacity.Offering{o}, probeName(in.Name, o)
		var had []capacity.Instance
		var err error
		for n := range max(1, in.Nodes) {
			req.Attempt = n
			var inst capacity.Instance
			if inst, err = a.Acquire(ctx, req); err != nil {
				break
			}
			had = append(had, inst)
		}
		if rerr := a.letGo(ctx, had); rerr != nil {
			return out, rerr
		}
		if err != nil && !refused(err) {
			return out, err
		}
		out.Taken[i] = len(had)
	}
	return out, nil
}

// probeName names a pool's probe in its tokens: the probes' name and a
// short hash of the offering, which keeps EC2's 64-character tokens in
// bounds whatever the zone's name.
func probeName(name string, o capacity.Offering) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(o.Key()))
	return fmt.Sprintf("%s-%08x", name, h.Sum32())
}

// letGo releases a probe's instances, even where the probe was
// cancelled midway (the run ending), so none is left running for the
// janitor. It teaches the market memory nothing: the probe's acquisition
// already told it the stock.
func (a *Capacity) letGo(ctx context.Context, had []capacity.Instance) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	for _, inst := range had {
		if err := a.release(ctx, inst); err != nil {
			return err
		}
	}
	return nil
}

// refused reports whether Acquire's failure is the market's answer (no
// stock, a price or quota the run cannot pass), not a failure to ask.
func refused(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && (app.NonRetryable() || app.Type() == string(capacity.NoCapacity))
}
