package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"refuel/workflows/inference"
	"refuel/workflows/training"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"refuel/jobs"
	"refuel/pkg/admission"
	"refuel/pkg/devenv"
	"refuel/pkg/spec"
	"refuel/workflows"
)

func demoCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "demo",
		Short:   "drive the demo a person can watch in the Web UI",
		Example: "  starter demo\n  starter demo --clouds aws,gce   # the worker on --provider aws,gce, as make run CLOUDS=aws,gce starts it",
		Args:    noArgs("starter demo takes no arguments"),
	}
	conn := addClientFlags(cmd)
	ui := cmd.Flags().String("ui", "http://127.0.0.1:8233", "Web UI address to point people at")
	var clouds []string
	cmd.Flags().StringSliceVar(&clouds, "clouds", nil, "the public clouds the worker's --provider names (aws,gce, as make run CLOUDS=aws,gce starts it): the critical run is kept to the first, and spot is taken back on each that holds a spot run")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := context.Background()
		c, err := waitForCluster(ctx, conn, cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		defer c.Close()
		return demo(ctx, c, *ui, clouds, cmd.OutOrStdout())
	}
	return cmd
}

// waitForCluster dials until the stack answers: `make run` starts the
// worker and the demo together.
func waitForCluster(ctx context.Context, conn *clientFlags, stderr io.Writer) (client.Client, error) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		c, err := conn.dial(ctx)
		if err == nil {
			if _, err = c.CheckHealth(ctx, nil); err == nil {
				return c, nil
			}
			c.Close()
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		fmt.Fprintln(stderr, "demo: waiting for the refuel stack to come up...")
		time.Sleep(2 * time.Second)
	}
}

// demo tells refuel's story on the running stack, in the order a person
// watching the Web UI sees it: a developer's environment takes a base
// machine; the training queue fills the other and overflows to burst;
// the spot market takes an instance and the run resumes on a
// replacement; an inference service's traffic spikes and takes every
// machine, from low-priority training, which checkpoints, yields and is
// requeued, and from the environment, which saves its workspace and is
// moved; the load falls, the service gives back its public replicas
// first, and training moves from burst onto the base machines as they
// free, so burst is released before base; the environment, unused,
// stops by itself. The priorities are the usual order: inference 90,
// development 70, training below.
func demo(ctx context.Context, c client.Client, ui string, clouds []string, out io.Writer) error {
	stamp := time.Now().Format("0102-150405")
	d := &demoRun{c: c, out: out, seen: map[string]training.Status{}}
	_, err := jobs.PoolStatus(ctx, c)
	d.pool = err == nil
	switch {
	case !d.pool && len(clouds) > 1:
		fmt.Fprintf(out, "one market of %s, no capacity pool: each run acquires the cheapest offering of any of them on its own\n", strings.Join(clouds, " and "))
	case !d.pool:
		fmt.Fprintln(out, "no capacity pool runs (start the worker with --pools examples/pools.yaml, as `make run` does): runs acquire on their own")
	}

	fmt.Fprintln(out, "== 0. a developer's environment")
	if err := d.startEnv(ctx, stamp); err != nil {
		return err
	}
	// The developer works in it (a touch is use) until the load falls,
	// then walks away.
	wctx, walkAway := context.WithCancel(ctx)
	defer walkAway()
	go d.work(wctx)
	if err := d.until(ctx, "the environment serves", func() bool { return d.envSt.State == devenv.StateRunning && d.envSt.Serving }); err != nil {
		return err
	}

	deadline := time.Now().Add(time.Hour)
	d.fleet = []spec.JobSpec{
		{ID: "demo-" + stamp + "-llm-finetune", Team: "nlp", Tier: spec.TierCritical, Priority: 60, Work: spec.Duration(2 * time.Minute)},
		{ID: "demo-" + stamp + "-vision", Team: "vision", Tier: spec.TierDeadline, Deadline: &deadline, Priority: 50, Work: spec.Duration(150 * time.Second)},
		{ID: "demo-" + stamp + "-sweep-a", Team: "research", Tier: spec.TierFlexible, Priority: 40, Work: spec.Duration(2 * time.Minute),
			Checkpoint: spec.Checkpoint{Interval: "10s"}},
		{ID: "demo-" + stamp + "-eval", Team: "research", Tier: spec.TierFlexible, Priority: 30, Work: spec.Duration(90 * time.Second),
			Checkpoint: spec.Checkpoint{Interval: "10s"}},
	}
	if len(clouds) > 1 {
		// One market of several clouds: the runs go where spot is
		// cheapest, but for the critical run, kept to the first cloud on
		// on-demand, so each cloud carries work. (A spot run kept to a
		// cloud whose spot ran out would wait there for it.)
		d.fleet[0].Resources.Providers = []string{clouds[0]}
	}
	fmt.Fprintln(out, "== 1. the training queue fills")
	for i := range d.fleet {
		d.fleet[i].Normalize()
		if err := d.fleet[i].Validate(time.Now()); err != nil {
			return err
		}
		if _, err := jobs.Submit(ctx, c, d.fleet[i]); err != nil {
			return err
		}
		only := ""
		if ps := d.fleet[i].Resources.Providers; len(ps) > 0 {
			only = " on " + strings.Join(ps, ", ") + " only"
		}
		fmt.Fprintf(out, "submitted %-36s tier %-8s priority %2d team %s%s\n", d.fleet[i].ID, d.fleet[i].Tier, d.fleet[i].Priority, d.fleet[i].Team, only)
	}
	fmt.Fprintf(out, "\n  Watch it in the Temporal Web UI: %s/namespaces/default/workflows?query=%s\n", ui,
		strings.ReplaceAll(fmt.Sprintf("WorkflowId STARTS_WITH \"demo-%s\"", stamp), " ", "+"))
	if d.pool {
		fmt.Fprintf(out, "  the capacity pool: %s/namespaces/default/workflows/%s\n", ui, workflows.PoolWorkflowID)
	}
	fmt.Fprintf(out, "  or from a shell: bin/starter status %s --watch\n\n", d.fleet[2].ID)

	if err := d.until(ctx, "every run is admitted", func() bool { return d.admitted() == len(d.fleet) }); err != nil {
		return err
	}
	d.printPool(ctx)

	fmt.Fprintln(out, "\n== 2. the spot market takes an instance")
	if err := d.until(ctx, "a spot run with a checkpoint", func() bool { return d.spotRun("") != "" }); err != nil {
		return err
	}
	// On several clouds, each that holds a spot run now takes one back in
	// its own way (EC2's two-minute notice, Compute Engine's preemption),
	// and the run recovers from its checkpoint either way.
	onClouds := []string{""}
	if len(clouds) > 1 {
		onClouds = clouds
	}
	for _, cloud := range onClouds {
		id := d.spotRun(cloud)
		if id == "" {
			fmt.Fprintf(out, "no run trains on spot on %s now: nothing to take back there\n", cloud)
			continue
		}
		on := ""
		if cloud != "" {
			on = " on " + cloud
		}
		st := d.seen[id]
		fmt.Fprintf(out, "%s checkpointed at step %d; the market%s reclaims its instance %s (notice: 30s)\n", id, st.LastCheckpoint.Step, on, st.Instance.ID)
		if _, err := jobs.Interrupt(ctx, c, st.Instance.ID, 30*time.Second); err != nil {
			return err
		}
		if err := d.until(ctx, id+" resumes on a replacement", func() bool { return d.seen[id].Recoveries > st.Recoveries }); err != nil {
			return err
		}
	}

	fmt.Fprintln(out, "\n== 3. an inference service's traffic spikes")
	svc := demoService("demo-"+stamp+"-chat", out)
	if _, err := jobs.StartService(ctx, c, svc); err != nil {
		return err
	}
	d.service = svc.ID
	fmt.Fprintf(out, "started %s (priority %d, %d-%d replicas of %.0f qps each)\n", svc.ID, svc.Priority, svc.MinReplicas, svc.MaxReplicas, svc.Target.QPS)
	load := &demoLoad{qps: 8, serving: svc.Serves()}
	if svc.SLO != nil {
		load.slo = svc.SLO.Latency.D()
	}
	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	go load.drive(lctx, c, svc.ID, func() string { return d.svc.Endpoint })
	if err := d.until(ctx, "the first replica serves", func() bool { return d.svc.Ready >= 1 && (!load.serving || d.svc.Endpoint != "") }); err != nil {
		return err
	}
	if load.serving {
		fmt.Fprintf(out, "requests go to its endpoint http://%s/v1/completions (try: bin/starter load %s --qps 5)\n", d.svc.Endpoint, svc.ID)
	}
	fmt.Fprintln(out, "traffic spikes to 48 qps: the service needs five replicas, every machine there is; training and the environment give way")
	load.set(48)
	if err := d.until(ctx, "five replicas serve", func() bool { return d.svc.Ready >= 5 }); err != nil {
		return err
	}
	load.report(out, "the spike")
	d.printPool(ctx)
	if id, market := d.reclaimableReplica(); load.serving && id != "" {
		if market == "spot" {
			fmt.Fprintf(out, "\nthe spot market reclaims replica instance %s under load (notice: 30s): it drains, then goes\n", id)
		} else {
			// The simulated market's spot stock may be out, so every public
			// replica is on-demand: the cloud then takes one back as a
			// maintenance event would, with the same notice.
			fmt.Fprintf(out, "\nno replica is on spot (its stock ran out); the cloud takes back %s replica instance %s under load (notice: 30s): it drains, then goes\n", market, id)
		}
		if _, err := jobs.Interrupt(ctx, c, id, 30*time.Second); err != nil {
			return err
		}
		if err := d.until(ctx, "the replica is replaced", func() bool { return d.svc.Ready >= 5 && !d.holds(id) }); err != nil {
			return err
		}
		load.report(out, "the preemption")
	}

	fmt.Fprintln(out, "\n== 4. the load falls; the developer walks away from the notebook")
	walkAway()
	load.set(4)
	if err := d.until(ctx, "the service is back to one replica", func() bool { return d.svc.Ready+d.svc.Starting == 1 }); err != nil {
		return err
	}
	load.report(out, "the scale-in")
	d.printPool(ctx)

	if d.pool {
		fmt.Fprintln(out, "\n== 5. training finishes; burst is given back before base")
	} else {
		fmt.Fprintln(out, "\n== 5. training finishes; every instance is given back")
	}
	if err := d.until(ctx, "every run ends", func() bool { return d.ended() == len(d.fleet) }); err != nil {
		return err
	}
	stopLoad()
	if err := jobs.StopService(ctx, c, svc.ID); err != nil {
		return err
	}
	if d.pool {
		// The service gives its last replica back as it ends.
		_ = d.until(ctx, "the pool is empty", func() bool {
			p, err := jobs.PoolStatus(ctx, c)
			return err == nil && len(p.Running) == 0
		})
	}
	fmt.Fprintln(out, "\n== 6. nobody uses the environment; it stops by itself")
	if err := d.until(ctx, "the environment stops when idle", func() bool { return d.envSt.State == devenv.StateSuspended }); err != nil {
		return err
	}
	d.summary(ctx)
	fmt.Fprintln(out, "\nThe demo is over and its service stopped. The stack keeps serving: browse the runs in the Web UI; Ctrl-C stops it and releases every instance.")
	return nil
}

// demoRun follows the demo's runs, its service and the pool, and prints
// what changes.
type demoRun struct {
	c       client.Client
	out     io.Writer
	fleet   []spec.JobSpec
	env     string
	envSt   devenv.Status
	service string
	pool    bool
	seen    map[string]training.Status
	svc     inference.Status
}

// until polls, printing every change, until cond holds.
func (d *demoRun) until(ctx context.Context, what string, cond func() bool) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		d.poll(ctx)
		if cond() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: %s did not happen within 10 minutes; see the worker's log", what)
		}
		time.Sleep(time.Second)
	}
}

func (d *demoRun) poll(ctx context.Context) {
	for _, j := range d.fleet {
		st, err := jobs.Status(ctx, d.c, j.ID)
		if err != nil {
			continue
		}
		d.report(j.ID, d.seen[j.ID], st)
		d.seen[j.ID] = st
	}
	if d.env != "" {
		if st, err := jobs.DevStatus(ctx, d.c, d.env); err == nil {
			if st.State != d.envSt.State || instanceOf(st) != instanceOf(d.envSt) {
				d.logf("%-12s %-20s %s %s", "notebook", st.State, instanceOf(st), st.Reason)
			}
			d.envSt = st
		}
	}
	if d.service != "" {
		if st, err := jobs.ServiceStatus(ctx, d.c, d.service); err == nil {
			if replicas(st) != replicas(d.svc) || st.Desired.Replicas != d.svc.Desired.Replicas {
				d.logf("%-12s wants %d (%s): %s", "chat", st.Desired.Replicas, st.Desired.Reason, replicas(st))
			}
			d.svc = st
		}
	}
}

// report prints what changed in a run.
func (d *demoRun) report(id string, was, now training.Status) {
	short := id[strings.LastIndex(id, "-")+1:]
	if i := strings.Index(id, "-sweep-"); i >= 0 {
		short = id[i+1:]
	}
	if now.Preemptions > was.Preemptions && now.LastPreemption != nil {
		d.logf("%-12s preempted by the spot market at step %d (checkpoint %d)", short, now.LastPreemption.AtStep, now.LastPreemption.CheckpointStep)
	}
	if a := now.Admission; a != nil && (was.Admission == nil || a.Yields > was.Admission.Yields) && a.LastYield != nil {
		d.logf("%-12s yielded at step %d, checkpoint %d: %s", short, a.LastYield.AtStep, a.LastYield.CheckpointStep, a.LastYield.Reason)
	}
	where, wasWhere := placement(now), placement(was)
	if now.State != was.State || where != wasWhere {
		d.logf("%-12s %-20s %s", short, now.State, where)
	}
}

// replicas lists a service's replicas and where they run.
func replicas(st inference.Status) string {
	var parts []string
	for _, r := range st.Replicas {
		where := string(r.Layer)
		if r.Instance != nil {
			if cloud, _, ok := strings.Cut(r.Instance.Offering, "/"); ok && r.Layer == "" {
				where = cloud // no pool: the cloud says where it is
			}
			where += "/" + r.Instance.Market
		}
		parts = append(parts, fmt.Sprintf("%s %s %s", r.ID[strings.LastIndex(r.ID, "/")+1:], r.State, strings.TrimPrefix(where, "/")))
	}
	if len(parts) == 0 {
		return "no replicas"
	}
	return strings.Join(parts, ", ")
}

func placement(st training.Status) string {
	if st.Instance == nil {
		return ""
	}
	layer := string(admission.BurstLayer)
	if st.Admission != nil && st.Admission.Layer != "" {
		layer = st.Admission.Layer
	} else if st.Admission == nil {
		layer = "public"
	}
	return fmt.Sprintf("on %s %s (%s, $%.2f/h)", layer, st.Instance.ID, offeringWords(st.Instance.Offering, st.Instance.Market), st.Instance.PricePerHour)
}

// offeringWords says where an offering key (cloud/type/zone/market) is:
// "gce spot a3-highgpu-1g in us-central1-a"; market alone when the key
// is not one.
func offeringWords(key, market string) string {
	parts := strings.Split(key, "/")
	if len(parts) != 4 {
		return market
	}
	return fmt.Sprintf("%s %s %s in %s", parts[0], parts[3], parts[1], parts[2])
}

func (d *demoRun) logf(format string, args ...any) {
	fmt.Fprintf(d.out, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// admitted counts runs past admission: holding an instance, or waiting
// for stock of what they were granted.
func (d *demoRun) admitted() int {
	n := 0
	for _, st := range d.seen {
		switch {
		case st.Instance != nil, jobs.Ended(st), st.State == workflows.StateWaiting, st.State == workflows.StateRunning:
			n++
		}
	}
	return n
}

func (d *demoRun) ended() int {
	n := 0
	for _, st := range d.seen {
		if jobs.Ended(st) {
			n++
		}
	}
	return n
}

// spotRun is a run training on spot with a checkpoint, if any; on cloud,
// unless it is "".
func (d *demoRun) spotRun(cloud string) string {
	for _, j := range d.fleet {
		st := d.seen[j.ID]
		if st.Instance != nil && st.Instance.Market == "spot" && st.LastCheckpoint != nil && st.State == workflows.StateRunning &&
			(cloud == "" || strings.HasPrefix(st.Instance.Offering, cloud+"/")) {
			return j.ID
		}
	}
	return ""
}

func (d *demoRun) printPool(ctx context.Context) {
	if !d.pool {
		return
	}
	p, err := jobs.PoolStatus(ctx, d.c)
	if err != nil {
		return
	}
	fmt.Fprintf(d.out, "   pool: base %d instances (%d of %d GPUs free), burst %d, %d waiting, %d preemptions, %d moves to base\n",
		p.Base, p.FreeBaseGPUs, p.BaseGPUs, p.Burst, len(p.Waiting), p.Preemptions, p.Moves)
}

func (d *demoRun) summary(ctx context.Context) {
	fmt.Fprintln(d.out)
	for _, j := range d.fleet {
		st := d.seen[j.ID]
		yields := 0
		if st.Admission != nil {
			yields = st.Admission.Yields
		}
		fmt.Fprintf(d.out, "  %-36s %-10s %s preempted %d yielded %d $%.4f\n", j.ID, st.State, progressBar(st.Step, st.TotalSteps, 16), st.Preemptions, yields, st.CostUSD)
	}
	if e := d.envSt; e.ID != "" {
		fmt.Fprintf(d.out, "  %-36s %-10s moved %d times, $%.4f ($%.4f idle); its workspace is kept: bin/starter dev resume %s\n",
			e.ID, e.State, e.Moves, e.CostUSD, e.IdleCostUSD, e.ID)
	}
	d.printPool(ctx)
}

// startEnv starts the demo's development environment: a web server on
// its workspace, as a notebook would be, that stops after a minute idle.
func (d *demoRun) startEnv(ctx context.Context, stamp string) error {
	idle := spec.Duration(time.Minute)
	ds := spec.DevSpec{
		ID: "demo-" + stamp + "-notebook", Team: "research", Priority: 70, Tier: spec.TierCritical,
		Command:     []string{"sh", "-c", `exec python3 -m http.server "$REFUEL_PORT" --directory "$REFUEL_WORKSPACE"`},
		IdleTimeout: &idle, WorkspaceInterval: spec.Duration(30 * time.Second),
	}
	if _, err := jobs.StartDev(ctx, d.c, ds, "demo"); err != nil {
		return err
	}
	d.env = ds.ID
	on := "a base machine"
	if !d.pool {
		on = "a public cloud's instance"
	}
	fmt.Fprintf(d.out, "started %s (priority %d): a developer's notebook on %s, stopping after %s idle\n", ds.ID, ds.Priority, on, idle)
	fmt.Fprintf(d.out, "  bin/starter dev status %s --watch; bin/starter dev connect %s --local-port 8000\n", ds.ID, ds.ID)
	return nil
}

// work touches the demo's environment every 20 seconds, as a developer
// using it would, until ctx ends.
func (d *demoRun) work(ctx context.Context) {
	t := time.NewTicker(20 * time.Second)
	defer t.Stop()
	for {
		_ = jobs.TouchDev(ctx, d.c, d.env)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// instanceOf is where an environment runs, in a few words.
func instanceOf(st devenv.Status) string {
	if st.Instance == nil {
		return ""
	}
	layer := st.Instance.Layer
	if layer == "" {
		layer = "public"
	}
	return fmt.Sprintf("on %s %s (%s)", layer, st.Instance.ID, offeringWords(st.Instance.Offering, st.Instance.Market))
}
