package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"go.uber.org/zap"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/local"
)

// Acquire implements capacity.Provider. The ordered offerings are cut into
// runs of one market (spot first, then on-demand, as the request orders
// them) and each run is one CreateFleet call of type instant for one
// instance, with an override per instance type and zone; the first run
// that launches wins.
//
// Spot runs use the price-capacity-optimized strategy: EC2 picks among
// the run's pools by price and depth of stock, which is what keeps a spot
// instance alive longest, and ignores the overrides' priorities. Those
// (the request's order) matter to on-demand runs, whose prioritized
// strategy tries the overrides in that order.
//
// Each call's ClientToken is derived from the request's run and attempt
// (see ClientToken), so a retried activity gets back the fleet, and the
// instance, its first try launched. A run is abandoned for the next only
// when EC2 answered it definitively; after throttling, a transport or
// server failure, EC2 may have launched something, so Acquire returns and
// the retry resends the same token.
//
// Acquire returns once the instance is running, as its node agent starts
// from the launch template's user data at boot.
func (c *Cloud) Acquire(ctx context.Context, req capacity.Request) (capacity.Instance, error) {
	runs, skipped := c.plan(req)
	var failures []error
	for _, r := range runs {
		inst, settled, err := c.launch(ctx, req, r)
		if err == nil {
			return inst, nil
		}
		failures = append(failures, err)
		if !settled || ctx.Err() != nil {
			break
		}
	}
	failures = append(failures, skipped...)
	if len(failures) == 0 {
		return capacity.Instance{}, capacity.NewError(capacity.SpecMismatch, capacity.Offering{Provider: c.cfg.Name}, "", "the request named no offerings")
	}
	return capacity.Instance{}, errors.Join(failures...)
}

// fleetRun is one CreateFleet call: consecutive offerings of one market.
type fleetRun struct {
	market    capacity.Market
	offerings []capacity.Offering
	token     string
}

// plan cuts the request into market runs. Offerings this provider cannot
// sell fail at once as spec mismatches.
func (c *Cloud) plan(req capacity.Request) ([]fleetRun, []error) {
	var runs []fleetRun
	var skipped []error
	inRun := map[string]bool{}
	count := map[capacity.Market]int{}
	for _, o := range req.Offerings {
		if o.Provider != c.cfg.Name || (o.Market != capacity.Spot && o.Market != capacity.OnDemand) {
			skipped = append(skipped, capacity.NewError(capacity.SpecMismatch, o, "", "provider %q sells only its own spot and on-demand offerings", c.cfg.Name))
			continue
		}
		if n := len(runs); n > 0 && runs[n-1].market == o.Market {
			// EC2 rejects a fleet that names one pool twice.
			if !inRun[o.Key()] {
				inRun[o.Key()] = true
				runs[n-1].offerings = append(runs[n-1].offerings, o)
			}
			continue
		}
		count[o.Market]++
		inRun = map[string]bool{o.Key(): true}
		runs = append(runs, fleetRun{market: o.Market, offerings: []capacity.Offering{o}, token: ClientToken(req, o.Market, count[o.Market])})
	}
	return runs, skipped
}

// maxClientToken is EC2's limit on a ClientToken, in ASCII characters.
const maxClientToken = 64

// ClientToken is the CreateFleet ClientToken of the n-th run (from 1) of
// market m in req: the request's idempotency token and the market, so it
// is stable across retries of one attempt and differs between attempts.
// A token EC2 would refuse (longer than 64 characters, or not printable
// ASCII) is replaced by its SHA-256 in hex, exactly 64 characters.
func ClientToken(req capacity.Request, m capacity.Market, n int) string {
	t := req.IdempotencyToken() + "-" + string(m)
	if n > 1 {
		t += "-" + strconv.Itoa(n)
	}
	if len(t) <= maxClientToken && printableASCII(t) {
		return t
	}
	sum := sha256.Sum256([]byte(t))
	return hex.EncodeToString(sum[:])
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// launch makes one run's CreateFleet call and waits for its instance.
// settled is false when the outcome is uncertain and no further run may
// be tried (see Acquire).
func (c *Cloud) launch(ctx context.Context, req capacity.Request, r fleetRun) (inst capacity.Instance, settled bool, err error) {
	out, err := c.ec2.CreateFleet(ctx, c.fleetInput(req, r))
	if err != nil {
		code, class, msg := c.explain(err)
		if code == codeTokenReused {
			adopted, err := c.adopt(ctx, req, r, msg)
			return adopted, false, err
		}
		if code == "" {
			msg = "CreateFleet failed: " + msg
		}
		return capacity.Instance{}, definitive(err) && class != capacity.Throttled, failAll(r.offerings, class, code, msg)
	}
	for _, fi := range out.Instances {
		if len(fi.InstanceIds) > 0 {
			return c.ready(ctx, req, fi.InstanceIds[0], r.offerings)
		}
	}
	return capacity.Instance{}, true, c.fleetErrors(r, out.Errors)
}

// definitive reports whether a failed call was refused by EC2 (a client
// error) rather than lost on the way or failed inside EC2, after which
// EC2 may or may not have acted on it.
func definitive(err error) bool {
	var resp interface{ HTTPStatusCode() int }
	return errors.As(err, &resp) && resp.HTTPStatusCode() >= 400 && resp.HTTPStatusCode() < 500
}

func (c *Cloud) fleetInput(req capacity.Request, r fleetRun) *ec2.CreateFleetInput {
	overrides := make([]types.FleetLaunchTemplateOverridesRequest, len(r.offerings))
	for i, o := range r.offerings {
		// The zone is redundant next to a subnet but makes EC2 name it in
		// the override of each launch error.
		ov := types.FleetLaunchTemplateOverridesRequest{
			InstanceType:     types.InstanceType(o.InstanceType),
			AvailabilityZone: aws.String(o.Zone),
			Priority:         aws.Float64(float64(i)),
		}
		if subnet, ok := c.cfg.Subnets[o.Zone]; ok {
			ov.SubnetId = aws.String(subnet)
		}
		if r.market == capacity.Spot && req.MaxPricePerHour > 0 {
			ov.MaxPrice = aws.String(strconv.FormatFloat(req.MaxPricePerHour, 'f', -1, 64))
		}
		overrides[i] = ov
	}
	spec := &types.FleetLaunchTemplateSpecificationRequest{Version: aws.String(c.cfg.LaunchTemplate.Version)}
	if c.cfg.LaunchTemplate.ID != "" {
		spec.LaunchTemplateId = aws.String(c.cfg.LaunchTemplate.ID)
	} else {
		spec.LaunchTemplateName = aws.String(c.cfg.LaunchTemplate.Name)
	}
	// Tags in key order: EC2 compares a reused token's parameters, and a
	// map's order would differ between retries.
	reqTags := local.RequestTags(req)
	tags := make([]types.Tag, 0, len(reqTags))
	for _, k := range slices.Sorted(maps.Keys(reqTags)) {
		tags = append(tags, types.Tag{Key: aws.String(k), Value: aws.String(reqTags[k])})
	}
	in := &ec2.CreateFleetInput{
		Type:                  types.FleetTypeInstant,
		ClientToken:           aws.String(r.token),
		LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{{LaunchTemplateSpecification: spec, Overrides: overrides}},
		TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity: aws.Int32(1),
		},
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: tags}},
	}
	if r.market == capacity.Spot {
		in.TargetCapacitySpecification.DefaultTargetCapacityType = types.DefaultTargetCapacityTypeSpot
		in.SpotOptions = &types.SpotOptionsRequest{AllocationStrategy: types.SpotAllocationStrategyPriceCapacityOptimized}
	} else {
		in.TargetCapacitySpecification.DefaultTargetCapacityType = types.DefaultTargetCapacityTypeOnDemand
		in.OnDemandOptions = &types.OnDemandOptionsRequest{AllocationStrategy: types.FleetOnDemandAllocationStrategyPrioritized}
	}
	return in
}

// fleetErrors classifies the per-override failures of a fleet that
// launched nothing, one per offering of the run in the request's order.
// An error naming no override applies to every offering; an offering EC2
// said nothing about is Unknown rather than guessed.
func (c *Cloud) fleetErrors(r fleetRun, errs []types.CreateFleetError) error {
	byKey := map[string]*capacity.Error{}
	for _, fe := range errs {
		code, msg := aws.ToString(fe.ErrorCode), aws.ToString(fe.ErrorMessage)
		class := ClassOf(code, msg)
		if h := c.hint(code, msg); h != "" {
			msg += " (" + h + ")"
		}
		for _, o := range overridden(r, fe.LaunchTemplateAndOverrides) {
			if byKey[o.Key()] == nil {
				byKey[o.Key()] = capacity.NewError(class, o, code, "%s", msg)
			}
		}
		c.log.Debug("fleet launch error", zap.String("token", r.token), zap.String("code", code), zap.String("message", msg))
	}
	out := make([]error, len(r.offerings))
	for i, o := range r.offerings {
		if e := byKey[o.Key()]; e != nil {
			out[i] = e
			continue
		}
		out[i] = capacity.NewError(capacity.Unknown, o, "", "EC2 launched no instance and gave no reason for this offering")
	}
	return errors.Join(out...)
}

// overridden returns the run's offerings an error's override names.
func overridden(r fleetRun, lto *types.LaunchTemplateAndOverridesResponse) []capacity.Offering {
	if lto == nil || lto.Overrides == nil {
		return r.offerings
	}
	ov := lto.Overrides
	zone := aws.ToString(ov.AvailabilityZone)
	var out []capacity.Offering
	for _, o := range r.offerings {
		if (ov.InstanceType == "" || string(ov.InstanceType) == o.InstanceType) && (zone == "" || zone == o.Zone) {
			out = append(out, o)
		}
	}
	return out
}

func failAll(offerings []capacity.Offering, class capacity.Class, code, msg string) error {
	out := make([]error, len(offerings))
	for i, o := range offerings {
		out[i] = capacity.NewError(class, o, code, "%s", msg)
	}
	return errors.Join(out...)
}

// adopt handles a ClientToken EC2 saw before with other parameters: an
// earlier try of this attempt ordered its offerings differently (another
// run's failures reorder them). Whatever that try launched carries the
// run and attempt tags; if EC2 shows none yet, the activity's retry looks
// again rather than risk a second instance.
func (c *Cloud) adopt(ctx context.Context, req capacity.Request, r fleetRun, msg string) (capacity.Instance, error) {
	mine := map[string]string{capacity.TagRun: req.RunID, capacity.TagAttempt: strconv.Itoa(req.Attempt)}
	if req.Identity != "" {
		mine[capacity.TagIdentity] = req.Identity // not an earlier run's with the same job id
	}
	if d, ok := req.Tags[capacity.TagDeployment]; ok {
		mine[capacity.TagDeployment] = d // never another deployment's instance
	}
	found, err := c.List(ctx, mine)
	if err != nil {
		code, class, listMsg := c.explain(err)
		return capacity.Instance{}, failAll(r.offerings, class, code,
			fmt.Sprintf("ClientToken %s was used before with other offerings (%s), and looking for this attempt's instance failed: %s", r.token, msg, listMsg))
	}
	if len(found) == 0 {
		return capacity.Instance{}, failAll(r.offerings, capacity.Unknown, codeTokenReused,
			fmt.Sprintf("ClientToken %s was used before with other offerings and no instance of this attempt is visible yet: %s", r.token, msg))
	}
	inst, _, err := c.ready(ctx, req, found[0].ID, req.Offerings)
	return inst, err
}

// ready waits until instance id, launched for req, runs and returns it on
// the offering of choices it was launched on, with the tags requested
// and any its launch template added. An instance that ends instead failed
// to start: settled is true, since nothing is left running and the next
// run may be tried.
func (c *Cloud) ready(ctx context.Context, req capacity.Request, id string, choices []capacity.Offering) (inst capacity.Instance, settled bool, err error) {
	wait := time.NewTimer(0)
	defer wait.Stop()
	for {
		select {
		case <-ctx.Done():
			return capacity.Instance{}, false, capacity.NewError(capacity.Unknown, choices[0], "", "instance %s launched but was not running yet: %v", id, ctx.Err())
		case <-wait.C:
		}
		ec2Inst, err := c.describeInstance(ctx, id)
		switch {
		case capacity.IsNotFound(err):
			// EC2 is eventually consistent: a new instance may not be
			// visible to DescribeInstances at once.
		case err != nil:
			code, class, msg := c.explain(err)
			return capacity.Instance{}, false, capacity.NewError(class, choices[0], code, "instance %s launched but could not be described: %s", id, msg)
		default:
			inst := c.instance(ec2Inst)
			inst.Offering = chosen(choices, inst.Offering)
			tags := local.RequestTags(req)
			maps.Copy(tags, inst.Tags)
			inst.Tags = tags
			if inst.LaunchedAt.IsZero() {
				inst.LaunchedAt = c.cfg.Clock()
			}
			switch stateOf(ec2Inst) {
			case capacity.StateRunning:
				c.log.Info("instance launched", zap.String("instance", id), zap.String("offering", inst.Offering.Key()),
					zap.String("run", inst.Tags[capacity.TagRun]), zap.String("attempt", inst.Tags[capacity.TagAttempt]))
				return inst, true, nil
			case capacity.StatePending:
			default:
				return capacity.Instance{}, true, endedError(ec2Inst, inst.Offering)
			}
		}
		wait.Reset(c.cfg.PollInterval)
	}
}

// chosen is the offering of choices an instance was launched on, with the
// price it was chosen at; one outside them (EC2 should never launch one)
// keeps what the instance itself says.
func chosen(choices []capacity.Offering, actual capacity.Offering) capacity.Offering {
	for _, o := range choices {
		if o.InstanceType == actual.InstanceType && o.Zone == actual.Zone && o.Market == actual.Market {
			return o
		}
	}
	return actual
}

// endedError classifies an instance that ended before it ran by EC2's
// state reason, such as Server.InsufficientInstanceCapacity; one the
// spot market reclaimed at once had no capacity; anything else is an
// initialisation failure.
func endedError(inst types.Instance, o capacity.Offering) error {
	code, msg := "", "no reason given"
	if inst.StateReason != nil {
		code, msg = aws.ToString(inst.StateReason.Code), aws.ToString(inst.StateReason.Message)
	}
	class := ClassOfCode(strings.TrimPrefix(code, "Server."))
	switch {
	case inst.InstanceLifecycle == types.InstanceLifecycleTypeSpot && spotReclaimed(inst.StateReason):
		class = capacity.NoCapacity
	case class == capacity.Unknown:
		class = capacity.InitFailure
	}
	return capacity.NewError(class, o, code, "instance %s ended before it ran: %s", aws.ToString(inst.InstanceId), msg)
}
