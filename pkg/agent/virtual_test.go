package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"refuel/pkg/trainer"
)

// demo runs the demo trainer in-process, as a virtual instance's agent does.
func (h *harness) demo(steps, every int64, stepTime time.Duration) Config {
	cfg := h.config("")
	cfg.Env = nil
	cfg.Func = trainer.Embedded
	cfg.Command = []string{"trainer", "--steps", strconv.FormatInt(steps, 10), "--checkpoint-every", strconv.FormatInt(every, 10),
		"--step-time", stepTime.String(), "--features", "8"}
	return cfg
}

// storedDigest is the model of the newest checkpoint in the store.
func (h *harness) storedDigest() (int64, string) {
	h.t.Helper()
	ms, err := h.store.List(context.Background())
	if err != nil || len(ms) == 0 {
		h.t.Fatalf("store: %d checkpoints, %v", len(ms), err)
	}
	dir := filepath.Join(h.t.TempDir(), "restored")
	if err := h.store.Restore(context.Background(), ms[0], dir); err != nil {
		h.t.Fatal(err)
	}
	m, err := trainer.ReadCheckpoint(dir)
	if err != nil {
		h.t.Fatal(err)
	}
	return m.Step, m.Digest()
}

func reference(steps int64) string {
	return trainer.Train(trainer.Config{Steps: steps, Seed: trainer.DefaultSeed, Features: 8}).Digest()
}

func TestFuncTrainerCompletes(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	res, err := h.run(context.Background(), h.demo(30, 10, 0))()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Outcome != Completed || res.ExitCode != 0 || res.LastStep != 30 {
		t.Fatalf("result %+v; want completed at step 30", res)
	}
	if diff := cmp.Diff([]int64{10, 20, 30}, h.events.steps(EventCheckpoint)); diff != "" {
		t.Errorf("uploads (-want +got):\n%s", diff)
	}
	if step, digest := h.storedDigest(); step != 30 || digest != reference(30) {
		t.Errorf("stored model: step %d digest %s; want step 30, Train's %s", step, digest, reference(30))
	}
	out := h.storedOutput(0)
	for _, want := range []string{`refuel: attempt 0 on i-0123: running ["trainer" "--steps" "30"`, "stdout: REFUEL_DONE step=30", "stderr: trainer: wrote step-30"} {
		if !strings.Contains(out, want) {
			t.Errorf("stored output lacks %q:\n%s", want, out)
		}
	}
}

func TestFuncTrainerStopsOnRequestAndResumes(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	wait := h.run(ctx, h.demo(400, 25, 5*time.Millisecond))
	h.events.waitFor(t, EventCheckpoint, 25)
	cancel()
	res, err := wait()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Outcome != Stopped || res.Killed || res.ExitCode != 0 || res.LastCheckpoint == nil || res.LastCheckpoint.Step <= 25 {
		t.Fatalf("result %+v; want stopped by the stop alone, with a final checkpoint after step 25", res)
	}
	stopped := res.LastCheckpoint.Step

	h.events = newRecorder()
	res, err = h.run(context.Background(), h.demo(400, 25, 0))()
	if err != nil || res.Outcome != Completed || res.RestoredStep != stopped {
		t.Fatalf("second attempt: %+v, %v; want completed from step %d", res, err, stopped)
	}
	if _, digest := h.storedDigest(); digest != reference(400) {
		t.Errorf("model after a stop and a resume: %s; want Train's %s", digest, reference(400))
	}
}

// fakeSource is a NoticeSource a test publishes on.
type fakeSource struct {
	mu                      sync.Mutex
	interruption, rebalance *Notice
	changed                 chan struct{}
}

func newFakeSource() *fakeSource { return &fakeSource{changed: make(chan struct{})} }

func (s *fakeSource) Pending() (*Notice, *Notice, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.interruption, s.rebalance, s.changed
}

func (s *fakeSource) publish(interruption, rebalance *Notice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.interruption, s.rebalance = interruption, rebalance
	close(s.changed)
	s.changed = make(chan struct{})
}

func TestNoticeSourcePreempts(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	src := newFakeSource()
	cfg := h.demo(100000, 20, 5*time.Millisecond)
	cfg.Notices = src
	wait := h.run(context.Background(), cfg)
	h.events.waitFor(t, EventCheckpoint, 20)
	rebalance := &Notice{Action: "rebalance", Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	src.publish(nil, rebalance)
	h.events.waitFor(t, EventRebalance, 0)
	src.publish(nil, rebalance) // the same recommendation again is not news
	notice := &Notice{Action: "terminate", Time: time.Now().Add(time.Minute).Truncate(time.Second)}
	src.publish(notice, rebalance)
	res, err := wait()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Outcome != Preempted || res.Killed || res.Notice == nil || !res.Notice.Time.Equal(notice.Time) {
		t.Fatalf("result %+v; want preempted by the notice, the trainer stopping in time", res)
	}
	// The recommendation comes before the notice, and the notice's final
	// checkpoint ends the events; a periodic checkpoint may still fall
	// between the notice and the stop.
	kinds := h.events.kinds()
	rebalanced, noticed := slices.Index(kinds, EventRebalance), slices.Index(kinds, EventNotice)
	if rebalanced < 0 || noticed < rebalanced || kinds[len(kinds)-1] != EventCheckpoint || slices.Contains(kinds[noticed+1:], EventNotice) {
		t.Errorf("events %v; want the rebalance, then one notice, then checkpoints to the end", kinds)
	}
	if n := strings.Count(fmt.Sprint(kinds), string(EventRebalance)); n != 1 {
		t.Errorf("%d rebalance events; want 1", n)
	}
	if step, digest := h.storedDigest(); step != res.LastCheckpoint.Step || step <= 20 || digest != reference(step) {
		t.Errorf("stored step %d (%s); want the final checkpoint %d with Train's model", step, digest, res.LastCheckpoint.Step)
	}
}

// stubborn is a Func that ignores the stop and returns only when killed.
func stubborn(_ context.Context, kill <-chan struct{}, _, _ []string, stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, "REFUEL_PROGRESS step=1")
	<-kill
	return 0
}

func TestFuncs(t *testing.T) {
	cases := map[string]struct {
		fn         Func
		stop       bool
		want       Outcome
		wantCode   int
		wantKilled bool
		wantStderr string
	}{
		"fails": {fn: func(_ context.Context, _ <-chan struct{}, args, _ []string, _, stderr io.Writer) int {
			fmt.Fprintf(stderr, "bad flag %s\n", args[0])
			return 3
		}, want: Failed, wantCode: 3, wantStderr: "bad flag --x"},
		"panics": {fn: func(context.Context, <-chan struct{}, []string, []string, io.Writer, io.Writer) int {
			panic("out of bounds")
		}, want: Failed, wantCode: 2, wantStderr: "trainer panicked: out of bounds"},
		"outlives its grace": {fn: stubborn, stop: true, want: Stopped, wantCode: exitKilled, wantKilled: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			h := newHarness(t)
			cfg := h.config("")
			cfg.Func, cfg.Command, cfg.StopGrace = tc.fn, []string{"fake", "--x"}, 50*time.Millisecond
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			wait := h.run(ctx, cfg)
			if tc.stop {
				h.events.waitFor(t, EventProgress, 1)
				cancel()
			}
			res, err := wait()
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Outcome != tc.want || res.ExitCode != tc.wantCode || res.Killed != tc.wantKilled || !strings.Contains(res.Stderr, tc.wantStderr) {
				t.Errorf("result %s code %d killed %v stderr %q; want %s code %d killed %v stderr with %q",
					res.Outcome, res.ExitCode, res.Killed, res.Stderr, tc.want, tc.wantCode, tc.wantKilled, tc.wantStderr)
			}
		})
	}
}

// TestMachineKilled takes the machine away under a run, in-process trainer
// or process alike: the run ends at once with ErrMachineGone, nothing
// after the last periodic checkpoint reaches the store, no event is
// reported after the kill, and nothing of the run is left running.
func TestMachineKilled(t *testing.T) {
	cases := map[string]struct {
		config     func(h *harness) Config
		checkpoint int64 // the periodic checkpoint to kill after
	}{
		"in-process trainer": {config: func(h *harness) Config { return h.demo(100000, 10, 5*time.Millisecond) }, checkpoint: 10},
		"process trainer":    {config: func(h *harness) Config { return h.config("wait") }, checkpoint: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			h := newHarness(t)
			cfg := tc.config(h)
			m := NewMachine()
			cfg.Machine = m
			var mu sync.Mutex
			var afterKill []Event
			killed, lastBefore := false, int64(-1)
			record := cfg.OnEvent
			cfg.OnEvent = func(e Event) {
				mu.Lock()
				switch {
				case killed:
					afterKill = append(afterKill, e)
				case e.Kind == EventCheckpoint:
					lastBefore = e.Step
				}
				mu.Unlock()
				record(e)
			}
			wait := h.run(context.Background(), cfg)
			h.events.waitFor(t, EventCheckpoint, tc.checkpoint)
			mu.Lock()
			killed = true
			mu.Unlock()
			m.Kill()
			res, err := wait()
			if !errors.Is(err, ErrMachineGone) || res.Outcome != "" {
				t.Fatalf("Run on a killed machine: %+v, %v; want no result and ErrMachineGone", res, err)
			}
			if len(afterKill) > 0 {
				t.Errorf("events after the kill: %+v", afterKill)
			}
			ms, _ := h.store.List(context.Background())
			if len(ms) == 0 || ms[0].Step != lastBefore {
				t.Errorf("store after the kill holds %d checkpoints, the newest %v; want step %d, the last before the kill", len(ms), ms, lastBefore)
			}
			if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrMachineGone) {
				t.Errorf("Run after the kill: %v; want ErrMachineGone at once", err)
			}
			m.Kill() // again: nothing left to wait for
		})
	}
}

func TestMachineKilledDuringNoticeWindow(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t)
	src := newFakeSource()
	cfg := h.config("")
	cfg.Func, cfg.Command, cfg.Notices = stubborn, []string{"stubborn"}, src
	m := NewMachine()
	cfg.Machine = m
	wait := h.run(context.Background(), cfg)
	h.events.waitFor(t, EventProgress, 1)
	src.publish(&Notice{Action: "terminate", Time: time.Now().Add(time.Hour)}, nil)
	h.events.waitFor(t, EventNotice, 0)
	m.Kill() // the window is an hour, the trainer ignores the stop: only the kill ends it
	if _, err := wait(); !errors.Is(err, ErrMachineGone) {
		t.Fatalf("Run: %v; want ErrMachineGone", err)
	}
}
