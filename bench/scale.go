package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"refuel/workflows/training"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/capacity"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// ScaleReport is the last line of `refuel-bench scale --json`, which
// `starter scale-bench --json` runs (docs/contracts.md).
type ScaleReport struct {
	Runs                      int     `json:"runs"`
	Completed                 int     `json:"completed"`
	Lost                      int     `json:"lost"`
	Leaked                    int     `json:"leaked"`
	Preempted                 int     `json:"preempted"`
	Recovered                 int     `json:"recovered"`
	RecoveryP50Seconds        float64 `json:"recovery_p50_seconds"`
	RecoveryP99Seconds        float64 `json:"recovery_p99_seconds"`
	RecoveryP90Seconds        float64 `json:"recovery_p90_seconds"`
	RecoveryMaxSeconds        float64 `json:"recovery_max_seconds"`
	RawWorkflowsPerSecond     float64 `json:"raw_workflows_per_second"`
	RecoveriesPerSecond       float64 `json:"recoveries_per_second"`
	RequestsPerRunningJobPerS float64 `json:"requests_per_running_job_per_second"`
	PeakRSSMB                 float64 `json:"peak_rss_mb"`
	WallSeconds               float64 `json:"wall_seconds"`
	// PlansSolved are the outlooks the worker's plans solved for the
	// deadline runs' decisions, and PlansSharedMB what they held at the
	// end, shared by every run.
	PlansSolved   int     `json:"plans_solved"`
	PlansSharedMB float64 `json:"plans_shared_mb"`
	// HealthyAttemptsLost are the training attempts that ended, and
	// trained again, though the market had not taken their instance: a
	// trainer, agent or control-plane fault, or an instance counted
	// lost that was not. Zero is the target; the control plane must not
	// make interruptions of its own.
	HealthyAttemptsLost int `json:"healthy_attempts_lost"`
	// BusyCores is the load kept running beside the bench (--busy-cores).
	BusyCores int `json:"busy_cores"`
}

// scaleZones are the bench market's zones: the storm strikes the first.
var scaleZones = []string{"us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"}

// scaleCommand is `refuel-bench scale`, which `starter scale-bench` runs
// (make bench-scale): its own embedded stack, so it takes no connection
// flags.
func scaleCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "scale [--runs N] [--storm FRACTION] [--busy-cores N] [--json]",
		Short:   "a thousand runs on one worker: raw rate, steady-state cost, a storm of preemptions (make bench-scale)",
		Example: "  refuel-bench scale --runs 1000 --storm 0.3 --json\n  starter scale-bench --runs 1000 --storm 0.3 --json   # the same",
		Args:    noArgs("refuel-bench scale takes no arguments; size it with --runs and --storm"),
	}
	fs := cmd.Flags()
	runs := fs.Int("runs", 100, "training runs to submit, of mixed tiers and teams")
	storm := fs.Float64("storm", 0.3, "fraction of the runs whose spot instances one zone's stock drop takes at once")
	asJSON := fs.Bool("json", false, "end with one JSON object of the figures")
	work := fs.Duration("work", 8*time.Minute, "each run's work: long enough for every run to train at once, through the steady state and the storm, on a machine busy with other work")
	steady := fs.Duration("steady", 60*time.Second, "how long to count the server's requests once every run trains")
	raw := fs.Int("raw", 300, "empty workflows to start and complete first, for the server's raw rate")
	dataDir := fs.String("data-dir", "", "a fresh data dir for the bench's own stack (default a temporary one, removed after)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole bench (server, worker and instances) to FILE")
	busy := fs.Int("busy-cores", 0, "keep this many cores busy with a spinning process each for the whole bench, as other work on a shared machine does")
	dumps := fs.String("stall-dumps", os.TempDir(), "where to write a goroutine dump of the bench when a replacement's agent holds RunTraining for 10s without a heartbeat (3 at most)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return scaleBenchRun(cmd.OutOrStdout(), cmd.ErrOrStderr(), *runs, *storm, *asJSON, *work, *steady, *raw, *dataDir, *cpuProfile, *busy, *dumps)
	}
	return cmd
}

func scaleBenchRun(stdout, stderr io.Writer, runs int, storm float64, asJSON bool, work, steady time.Duration, raw int, dataDir, cpuProfile string, busy int, dumps string) error {
	switch {
	case runs < 1:
		return usagef("--runs must be 1 or more")
	case storm < 0 || storm > 0.9:
		return usagef("--storm is a fraction of the runs from 0 to 0.9, such as 0.3")
	case busy < 0 || busy > runtime.NumCPU():
		return usagef("--busy-cores is from 0 to this machine's %d cores", runtime.NumCPU())
	}
	if busy > 0 {
		stop, err := busyCores(busy)
		if err != nil {
			return err
		}
		defer stop()
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	b := &scaleBench{runs: runs, storm: int(storm * float64(runs)), work: work, steady: steady, log: stderr, byMethod: map[string]int64{}, trace: newAgentTrace(dumps)}
	rep, err := b.run(dataDir, raw)
	if err != nil {
		return err
	}
	rep.BusyCores = busy
	if asJSON {
		return json.NewEncoder(stdout).Encode(rep)
	}
	fmt.Fprintf(stdout, "runs %d: completed %d, lost %d, leaked %d; healthy attempts lost %d\n", rep.Runs, rep.Completed, rep.Lost, rep.Leaked, rep.HealthyAttemptsLost)
	fmt.Fprintf(stdout, "storm: %d preempted, %d recovered, recovery p50 %.1fs p90 %.1fs p99 %.1fs max %.1fs, %.2f recoveries/s (raw rate %.1f workflows/s)\n",
		rep.Preempted, rep.Recovered, rep.RecoveryP50Seconds, rep.RecoveryP90Seconds, rep.RecoveryP99Seconds, rep.RecoveryMaxSeconds, rep.RecoveriesPerSecond, rep.RawWorkflowsPerSecond)
	fmt.Fprintf(stdout, "steady state: %.3f requests per running job per second; peak RSS %.0f MB; %.0fs in all\n",
		rep.RequestsPerRunningJobPerS, rep.PeakRSSMB, rep.WallSeconds)
	fmt.Fprintf(stdout, "plans: %d outlooks solved for the deadline runs' decisions, %.0f MB held\n", rep.PlansSolved, rep.PlansSharedMB)
	return nil
}

type scaleBench struct {
	runs, storm int
	work        time.Duration
	steady      time.Duration
	log         io.Writer
	start       time.Time
	requests    atomic.Int64
	trace       *agentTrace

	mu       sync.Mutex
	counting bool             // while the steady state is measured
	byMethod map[string]int64 // its requests, by gRPC method
}

// request counts one request the frontend served.
func (b *scaleBench) request(method string) {
	b.requests.Add(1)
	b.mu.Lock()
	if b.counting {
		b.byMethod[method[strings.LastIndex(method, "/")+1:]]++
	}
	b.mu.Unlock()
}

func (b *scaleBench) say(format string, args ...any) {
	fmt.Fprintf(b.log, "[%5.1fs] %s\n", time.Since(b.start).Seconds(), fmt.Sprintf(format, args...))
}

func (b *scaleBench) run(dataDir string, raw int) (ScaleReport, error) {
	b.start = time.Now()
	rep := ScaleReport{Runs: b.runs}
	if dataDir == "" {
		d, err := os.MkdirTemp("", "refuel-scale-bench-")
		if err != nil {
			return rep, err
		}
		defer os.RemoveAll(d)
		dataDir = d
	} else if entries, _ := os.ReadDir(dataDir); len(entries) > 0 {
		return rep, usagef("--data-dir %s is not empty: the bench needs a fresh one", dataDir)
	}
	market, err := b.market(dataDir)
	if err != nil {
		return rep, err
	}
	defer dumpOnSignal(b.trace.dumpDir, b.say)()
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	go b.trace.watch(stopWatch, 10*time.Second, b.say)
	ctx := context.Background()
	b.say("starting the embedded stack: %d runs, a storm of %d, %s of work each", b.runs, b.storm, b.work)
	s, err := controlplane.Start(ctx, controlplane.Config{
		DataDir: filepath.Join(dataDir, "stack"), FrontendAddr: "127.0.0.1:0", UIAddr: "-", MetricsAddr: "-",
		Provider: controlplane.ProviderSim, Instances: controlplane.InstancesVirtual, DemoStepTime: time.Second, JanitorEvery: -1,
		Sim:               controlplane.SimConfig{Traces: market, Speed: 0, Notice: 20 * time.Second},
		OnFrontendRequest: b.request,
		ClientInterceptor: b.trace.intercept,
		Logger:            zap.NewNop(),
	})
	if err != nil {
		return rep, err
	}
	defer s.Stop()

	if rep.RawWorkflowsPerSecond, err = b.rawRate(ctx, s.Client, raw); err != nil {
		return rep, err
	}
	b.say("raw rate: %.1f empty workflows started and completed per second", rep.RawWorkflowsPerSecond)

	ids, err := b.submit(ctx, s.Client)
	if err != nil {
		return rep, err
	}
	if err := b.until(ctx, s.Client, "training", func(c counts) (bool, error) {
		if c.closed > 0 {
			// The storm must find every run training.
			return false, usagef("%d runs ended before every run trained at once: give them more --work than %s", c.closed, b.work)
		}
		return c.running == b.runs, nil
	}); err != nil {
		return rep, err
	}
	b.mu.Lock()
	b.counting = true
	b.mu.Unlock()
	before, t0 := b.requests.Load(), time.Now()
	time.Sleep(b.steady)
	rep.RequestsPerRunningJobPerS = float64(b.requests.Load()-before) / time.Since(t0).Seconds() / float64(b.runs)
	b.mu.Lock()
	b.counting = false
	b.mu.Unlock()
	b.say("steady state: %.3f requests per running job per second (%s)", rep.RequestsPerRunningJobPerS, b.topMethods(time.Since(t0)))

	b.say("storm: %s's spot stock drops by %d", scaleZones[0], b.storm)
	s.Sim.Advance(1)
	if err := b.until(ctx, s.Client, "completed", func(c counts) (bool, error) { return c.closed == b.runs, nil }); err != nil {
		return rep, err
	}
	b.say("requests the cluster refused, by method and code: %s", b.trace.refusals())
	b.tally(ctx, s.Client, ids, stormed(s.Sim.Instances()), &rep)
	time.Sleep(3 * time.Second) // the last releases
	left, _ := s.Sim.List(ctx, nil)
	rep.Leaked = len(left)
	rep.PeakRSSMB = peakRSSMB()
	ps := s.Plans.Stats()
	rep.PlansSolved, rep.PlansSharedMB = ps.Misses, float64(ps.Bytes)/(1<<20)
	b.say("plans: %d outlooks solved, %d decisions found one solved, %d waited for one being solved; %.0f MB held",
		ps.Misses, ps.Hits, ps.Shared, rep.PlansSharedMB)
	rep.WallSeconds = time.Since(b.start).Seconds()
	b.say("done: %d completed, %d lost, %d leaked, %d healthy attempts lost", rep.Completed, rep.Lost, rep.Leaked, rep.HealthyAttemptsLost)
	return rep, nil
}

// market writes the bench's traces: the first zone holds exactly the
// storm's worth of spot instances and loses them all at the next tick;
// the others have stock for every run throughout.
func (b *scaleBench) market(dataDir string) (string, error) {
	dir := filepath.Join(dataDir, "market")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	for i, zone := range scaleZones {
		points := []int{b.runs, b.runs}
		if i == 0 {
			points = []int{b.storm, 0}
		}
		data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"gap_seconds": 600}, "data": points})
		if err := os.WriteFile(filepath.Join(dir, zone+"_v100_1.json"), data, 0o600); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// emptyWorkflow is what the raw rate is measured with.
func emptyWorkflow(workflow.Context) error { return nil }

// rawRate is how many empty workflows the server starts and completes a
// second, measured on a task queue of the bench's own.
func (b *scaleBench) rawRate(ctx context.Context, c client.Client, n int) (float64, error) {
	const queue = "refuel-scale-bench"
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(emptyWorkflow, workflow.RegisterOptions{Name: "ScaleBenchEmpty"})
	if err := w.Start(); err != nil {
		return 0, err
	}
	defer w.Stop()
	start := time.Now()
	err := inParallel(n, 32, func(i int) error {
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "scale-bench-empty-" + strconv.Itoa(i), TaskQueue: queue}, "ScaleBenchEmpty")
		if err != nil {
			return err
		}
		return run.Get(ctx, nil)
	})
	return float64(n) / time.Since(start).Seconds(), err
}

// submit starts the runs: a tenth critical, the rest deadline and
// flexible, across four teams.
func (b *scaleBench) submit(ctx context.Context, c client.Client) ([]string, error) {
	ids := make([]string, b.runs)
	deadline := time.Now().Add(100 * b.work)
	err := inParallel(b.runs, 32, func(i int) error {
		js := spec.JobSpec{
			ID: fmt.Sprintf("scale-%05d", i), Team: []string{"nlp", "vision", "speech", "rl"}[i%4], Priority: 10 + i%80,
			Tier: spec.TierFlexible, Work: spec.Duration(b.work), Checkpoint: spec.Checkpoint{Interval: "2m"},
		}
		switch {
		case i%10 == 0:
			js.Tier = spec.TierCritical
		case i%2 == 1:
			js.Tier, js.Deadline = spec.TierDeadline, &deadline
		}
		ids[i] = js.ID
		_, err := jobs.Submit(ctx, c, js)
		return err
	})
	b.say("submitted %d runs", b.runs)
	return ids, err
}

// counts are the runs by what they are doing.
type counts struct{ running, closed int }

// until reports progress every few seconds until done holds.
func (b *scaleBench) until(ctx context.Context, c client.Client, what string, done func(counts) (bool, error)) error {
	// A run that recovers late still has its whole work ahead of it.
	wait := 15*time.Minute + b.work
	deadline := time.Now().Add(wait)
	for {
		var n counts
		var err error
		if n.running, err = jobs.Count(ctx, c, `RefuelState = "running"`); err != nil {
			return err
		}
		if n.closed, err = jobs.Count(ctx, c, `ExecutionStatus != "Running"`); err != nil {
			return err
		}
		b.say("%d of %d runs training, %d ended%s", n.running, b.runs, n.closed, b.trace.refusedSoFar())
		if ok, err := done(n); ok || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not every run %s within %s: %d training, %d ended", what, wait, n.running, n.closed)
		}
		time.Sleep(5 * time.Second)
	}
}

// topMethods are the requests of the steady state by method, the most
// frequent first, per running job per second.
func (b *scaleBench) topMethods(d time.Duration) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	methods := slices.Collect(maps.Keys(b.byMethod))
	slices.SortFunc(methods, func(x, y string) int { return cmp.Compare(b.byMethod[y], b.byMethod[x]) })
	var parts []string
	for _, m := range methods[:min(6, len(methods))] {
		parts = append(parts, fmt.Sprintf("%s %.3f", m, float64(b.byMethod[m])/d.Seconds()/float64(b.runs)))
	}
	return strings.Join(parts, ", ")
}

// stormed counts, by run, the instances the market took from it.
func stormed(insts []sim.Status) map[string]int {
	out := map[string]int{}
	for _, inst := range insts {
		if inst.Reason == sim.ReasonSpotTermination {
			out[inst.Tags[capacity.TagRun]]++
		}
	}
	return out
}

// healthyLost is how many of a run's attempts ended on an instance the
// market did not take: its restarts, of every cause, but those that
// count an instance the market took without the run seeing the notice.
func healthyLost(st training.Status, taken int) int {
	unseen := max(0, taken-st.Preemptions)
	return max(0, st.Restarts.Total()+st.Restarts[capacity.ControlPlane]-unseen)
}

// tally reads every run's end: completed or not, preempted and when it
// trained again, and attempts lost on healthy instances.
func (b *scaleBench) tally(ctx context.Context, c client.Client, ids []string, taken map[string]int, rep *ScaleReport) {
	var mu sync.Mutex
	var recoveries []float64
	var slow []slowRecovery
	var firstNotice, lastResume time.Time
	classes := map[string]int{}
	example := map[string]string{} // one message per class, for the log
	_ = inParallel(len(ids), 32, func(i int) error {
		st, err := jobs.FinalStatus(ctx, c, ids[i])
		mu.Lock()
		defer mu.Unlock()
		if err != nil || st.State != workflows.StateCompleted {
			rep.Lost++
			why := fmt.Sprint(err)
			if err == nil {
				why = "ended " + string(st.State)
			}
			if _, ok := example["lost"]; !ok {
				example["lost"] = ids[i] + ": " + why
			}
			return nil
		}
		rep.Completed++
		rep.HealthyAttemptsLost += healthyLost(st, taken[ids[i]])
		for _, f := range st.Failures {
			classes[f.Class]++
			if _, ok := example[f.Class]; !ok {
				example[f.Class] = ids[i] + ": " + f.Message
			}
		}
		if p := st.LastPreemption; p != nil && st.Preemptions > 0 {
			rep.Preempted++
			if r := st.LastRecovery; r != nil && !r.ResumedAt.IsZero() {
				rep.Recovered++
				recoveries = append(recoveries, r.ResumedAt.Sub(p.Time).Seconds())
				slow = append(slow, slowRecovery{id: ids[i], from: p.Time, to: r.ResumedAt})
				if firstNotice.IsZero() || p.Time.Before(firstNotice) {
					firstNotice = p.Time
				}
				if r.ResumedAt.After(lastResume) {
					lastResume = r.ResumedAt
				}
			}
		}
		return nil
	})
	b.say("failures the runs met, by class: %v", classes)
	for _, class := range slices.Sorted(maps.Keys(example)) {
		b.say("  %s, for example %s", class, example[class])
	}
	b.showSlowest(ctx, c, slow)
	slices.Sort(recoveries)
	rep.RecoveryP50Seconds, rep.RecoveryP90Seconds, rep.RecoveryP99Seconds = quantile(recoveries, 0.5), quantile(recoveries, 0.9), quantile(recoveries, 0.99)
	if len(recoveries) > 0 {
		rep.RecoveryMaxSeconds = recoveries[len(recoveries)-1]
	}
	if span := lastResume.Sub(firstNotice).Seconds(); span > 0 {
		rep.RecoveriesPerSecond = float64(rep.Recovered) / span
	}
}
