package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/checkpoint"
)

// hangGuard bounds every wait in these tests. It is not a speed
// assertion: a healthy run takes a fraction of it.
const hangGuard = 30 * time.Second

// harness is one agent run against a file:// store in a temp directory.
type harness struct {
	t         *testing.T
	bucketDir string
	store     *checkpoint.Store
	events    *recorder
	stdout    bytes.Buffer
	stderr    bytes.Buffer
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, bucketDir: t.TempDir(), events: newRecorder()}
	store, err := checkpoint.Open(context.Background(), "file://"+filepath.ToSlash(h.bucketDir), "job-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	h.store = store
	return h
}

// config runs the fake trainer in mode.
func (h *harness) config(mode string, env ...string) Config {
	return Config{
		Command:    []string{os.Args[0]},
		Env:        append([]string{fakeTrainerEnv + "=" + mode}, env...),
		Dir:        h.t.TempDir(),
		Store:      h.store,
		Keep:       2,
		InstanceID: "i-0123",
		JobID:      "job-1",
		NoticePoll: 20 * time.Millisecond,
		OnEvent:    h.events.record,
		Stdout:     &h.stdout,
		Stderr:     &h.stderr,
	}
}

// seed saves a checkpoint for step as the fake trainer would have.
func (h *harness) seed(step int64) {
	h.t.Helper()
	dir := filepath.Join(h.t.TempDir(), stepName(step))
	if err := os.MkdirAll(filepath.Join(dir, "nested"), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state"), fmt.Appendf(nil, "%d", step), 0o644); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nested", "weights"), weights(step), 0o644); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.store.Save(context.Background(), step, dir, "i-old"); err != nil {
		h.t.Fatal(err)
	}
}

// corrupt alters a stored checkpoint's data behind the store's back.
func (h *harness) corrupt(step int64) {
	h.t.Helper()
	path := filepath.Join(h.bucketDir, "job-1", fmt.Sprintf("step-%012d", step), "data", "state")
	if err := os.WriteFile(path, []byte("X"), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// run runs the agent in the background; the returned func waits for it.
func (h *harness) run(ctx context.Context, cfg Config) func() (Result, error) {
	type ran struct {
		res Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := Run(ctx, cfg)
		done <- ran{res, err}
	}()
	return func() (Result, error) {
		h.t.Helper()
		select {
		case r := <-done:
			return r.res, r.err
		case <-time.After(hangGuard):
			h.t.Fatal("Run did not return")
			return Result{}, nil
		}
	}
}

// storedSteps lists the good checkpoints in the store, newest first, and
// checks that each restores to the trainer's content for its step.
func (h *harness) storedSteps() []int64 {
	h.t.Helper()
	ms, err := h.store.List(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	var steps []int64
	for _, m := range ms {
		dir := h.t.TempDir()
		if err := h.store.Restore(context.Background(), m, dir); err != nil {
			h.t.Fatalf("restore step %d: %v", m.Step, err)
		}
		state, _ := os.ReadFile(filepath.Join(dir, "state"))
		w, _ := os.ReadFile(filepath.Join(dir, "nested", "weights"))
		if string(state) != fmt.Sprint(m.Step) || !bytes.Equal(w, weights(m.Step)) {
			h.t.Errorf("step %d restores state %q and %d bytes of weights", m.Step, state, len(w))
		}
		steps = append(steps, m.Step)
	}
	return steps
}

// recorder keeps the events of a run and lets a test wait for one.
type recorder struct {
	mu     sync.Mutex
	events []Event
	ch     chan Event
}

func newRecorder() *recorder { return &recorder{ch: make(chan Event, 1000)} }

func (r *recorder) record(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	r.ch <- e
}

// waitFor returns once an event of kind for step has been recorded.
func (r *recorder) waitFor(t *testing.T, kind EventKind, step int64) {
	t.Helper()
	timeout := time.After(hangGuard)
	for {
		select {
		case e := <-r.ch:
			if e.Kind == kind && e.Step == step {
				return
			}
		case <-timeout:
			t.Fatalf("no %s event for step %d", kind, step)
		}
	}
}

// steps lists the steps of the events of kind, in order.
func (r *recorder) steps(kind EventKind) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var steps []int64
	for _, e := range r.events {
		if e.Kind == kind {
			steps = append(steps, e.Step)
		}
	}
	return steps
}

func (r *recorder) kinds() []EventKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var kinds []EventKind
	for _, e := range r.events {
		if e.Kind != EventProgress {
			kinds = append(kinds, e.Kind)
		}
	}
	return kinds
}

func TestRunRestoresAndCompletes(t *testing.T) {
	cases := map[string]struct {
		seeded       []int64
		corrupted    []int64
		wantResumed  string
		wantRestored []int64
		wantUploaded []int64
		wantStored   []int64
	}{
		"fresh job": {
			wantResumed:  "RESUMED step=0 state=\n",
			wantUploaded: []int64{1, 2, 3},
			wantStored:   []int64{3, 2},
		},
		"resumes from the latest checkpoint": {
			seeded:       []int64{5, 7},
			wantResumed:  "RESUMED step=7 state=7\n",
			wantRestored: []int64{7},
			wantUploaded: []int64{8, 9, 10},
			wantStored:   []int64{10, 9},
		},
		"skips a corrupt latest checkpoint": {
			seeded:       []int64{5, 7},
			corrupted:    []int64{7},
			wantResumed:  "RESUMED step=5 state=5\n",
			wantRestored: []int64{5},
			wantUploaded: []int64{6, 7, 8},
			wantStored:   []int64{8, 7},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			for _, step := range tc.seeded {
				h.seed(step)
			}
			for _, step := range tc.corrupted {
				h.corrupt(step)
			}
			cfg := h.config("complete", "FAKE_STEPS=3")
			res, err := h.run(context.Background(), cfg)()
			if err != nil {
				t.Fatalf("Run: %v", err)
			}

			if res.Outcome != Completed || res.ExitCode != 0 {
				t.Errorf("outcome %s exit %d, want completed exit 0; stderr:\n%s", res.Outcome, res.ExitCode, res.Stderr)
			}
			out := h.stdout.String()
			if !strings.HasPrefix(out, tc.wantResumed) || !strings.Contains(out, "ENV job=job-1 instance=i-0123\n") {
				t.Errorf("trainer output:\n%s\nwant it to start with %q and show its env", out, tc.wantResumed)
			}
			if diff := cmp.Diff(tc.wantRestored, h.events.steps(EventRestored)); diff != "" {
				t.Errorf("restored events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantUploaded, h.events.steps(EventCheckpoint)); diff != "" {
				t.Errorf("checkpoint events, each upload once (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantUploaded, h.events.steps(EventProgress)); diff != "" {
				t.Errorf("progress events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantStored, h.storedSteps()); diff != "" {
				t.Errorf("store after pruning to 2 (-want +got):\n%s", diff)
			}
			last := tc.wantUploaded[len(tc.wantUploaded)-1]
			if res.LastStep != last || res.LastCheckpoint == nil || res.LastCheckpoint.Step != last {
				t.Errorf("last step %d, last checkpoint %+v; want both %d", res.LastStep, res.LastCheckpoint, last)
			}
			if len(tc.wantRestored) > 0 && res.RestoredStep != tc.wantRestored[0] {
				t.Errorf("restored step %d, want %d", res.RestoredStep, tc.wantRestored[0])
			}
			local, err := localSteps(filepath.Join(cfg.Dir, "checkpoints"))
			if err != nil || len(local) != 1 || local[0].step != last {
				t.Errorf("local checkpoints %v (%v), want only step %d", local, err, last)
			}
		})
	}
}

// fakeIMDS is an instance metadata service whose notices a test sets.
type fakeIMDS struct {
	mu        sync.Mutex
	action    string // body of spot/instance-action; "" answers 404
	rebalance string // body of events/recommendations/rebalance
}

func (f *fakeIMDS) set(action, rebalance string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.action, f.rebalance = action, rebalance
}

func (f *fakeIMDS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" {
		ttl := r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds")
		if ttl == "" {
			http.Error(w, "no ttl", http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", ttl)
		fmt.Fprint(w, "token-1")
		return
	}
	if r.Method != http.MethodGet || r.Header.Get("X-Aws-Ec2-Metadata-Token") != "token-1" {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	f.mu.Lock()
	body := map[string]string{
		"/latest/meta-data/spot/instance-action":             f.action,
		"/latest/meta-data/events/recommendations/rebalance": f.rebalance,
	}[r.URL.Path]
	f.mu.Unlock()
	if body == "" {
		http.NotFound(w, r)
		return
	}
	fmt.Fprint(w, body)
}

func TestRunPreemptedByNotice(t *testing.T) {
	h := newHarness(t)
	imds := &fakeIMDS{}
	srv := httptest.NewServer(imds)
	defer srv.Close()
	cfg := h.config("wait")
	cfg.MetadataEndpoint = srv.URL
	wait := h.run(context.Background(), cfg)

	h.events.waitFor(t, EventCheckpoint, 1)
	imds.set("", `{"noticeTime":"2026-01-02T03:04:05Z"}`)
	h.events.waitFor(t, EventRebalance, 0)
	terminateAt := time.Now().Add(2 * time.Minute).UTC().Truncate(time.Second)
	imds.set(fmt.Sprintf(`{"action":"terminate","time":%q}`, terminateAt.Format(time.RFC3339)), `{"noticeTime":"2026-01-02T03:04:05Z"}`)
	res, err := wait()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}

	if res.Outcome != Preempted || res.Killed {
		t.Errorf("outcome %s killed %v, want preempted by SIGTERM alone", res.Outcome, res.Killed)
	}
	if diff := cmp.Diff(&Notice{Action: "terminate", Time: terminateAt}, res.Notice); diff != "" {
		t.Errorf("notice (-want +got):\n%s", diff)
	}
	if res.NoticeAt.IsZero() {
		t.Error("NoticeAt not set")
	}
	if !strings.Contains(res.Stderr, "got SIGTERM") {
		t.Errorf("stderr %q, want the trainer's SIGTERM message", res.Stderr)
	}
	wantKinds := []EventKind{EventCheckpoint, EventRebalance, EventNotice, EventCheckpoint}
	if diff := cmp.Diff(wantKinds, h.events.kinds()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if res.LastCheckpoint == nil || res.LastCheckpoint.Step != 2 {
		t.Errorf("last checkpoint %+v, want the final one, step 2", res.LastCheckpoint)
	}
	if diff := cmp.Diff([]int64{2, 1}, h.storedSteps()); diff != "" {
		t.Errorf("store (-want +got):\n%s", diff)
	}
	// The output, up to the final checkpoint's upload, is kept too.
	out := h.storedOutput(0)
	notice := strings.Index(out, "refuel: interruption notice (terminate at "+terminateAt.Format(time.RFC3339)+"): sent SIGTERM")
	saving := strings.Index(out, "stderr: got SIGTERM, saving")
	final := strings.Index(out, "refuel: uploaded checkpoint step 2 in ")
	exited := strings.Index(out, "refuel: trainer exited with code 0: preempted")
	if notice < 0 || saving < notice || final < saving || exited < final {
		t.Errorf("stored output:\n%s\nwant the notice, the trainer's last words, the final upload and the exit, in order", out)
	}
}

func TestRunStoppedByCancel(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := h.run(ctx, h.config("wait"))

	h.events.waitFor(t, EventCheckpoint, 1)
	cancel()
	res, err := wait()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}

	if res.Outcome != Stopped || res.Killed || res.Notice != nil {
		t.Errorf("outcome %s killed %v notice %v, want stopped by SIGTERM alone", res.Outcome, res.Killed, res.Notice)
	}
	if diff := cmp.Diff([]int64{1, 2}, h.events.steps(EventCheckpoint)); diff != "" {
		t.Errorf("uploads (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{2, 1}, h.storedSteps()); diff != "" {
		t.Errorf("store (-want +got):\n%s", diff)
	}
}

// A stop that comes before the trainer starts, or while the checkpoint
// restores, ends the run stopped, as one that comes a moment later does:
// the checkpoint restored, then the trainer stopped at its first step.
func TestRunStoppedBeforeTheTrainerStarts(t *testing.T) {
	h := newHarness(t)
	h.seed(5)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := h.run(ctx, h.config("wait"))()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Outcome != Stopped || res.RestoredStep != 5 || res.LastCheckpoint == nil || res.LastCheckpoint.Step < 5 {
		t.Errorf("outcome %s, restored %d, checkpoint %v; want stopped from the checkpoint of step 5",
			res.Outcome, res.RestoredStep, res.LastCheckpoint)
	}
}

func TestRunTrainerFails(t *testing.T) {
	h := newHarness(t)
	res, err := h.run(context.Background(), h.config("fail"))()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var want []string
	for i := 10; i < 30; i++ {
		want = append(want, fmt.Sprintf("error line %d", i))
	}
	if res.Outcome != Failed || res.ExitCode != 3 {
		t.Errorf("outcome %s exit %d, want failed exit 3", res.Outcome, res.ExitCode)
	}
	if diff := cmp.Diff(strings.Join(want, "\n"), res.Stderr); diff != "" {
		t.Errorf("stderr tail (-want +got):\n%s", diff)
	}
	if !strings.Contains(h.stderr.String(), "error line 0\n") {
		t.Errorf("stderr copy lacks the first line:\n%s", h.stderr.String())
	}
	var all []string
	for i := range 30 {
		all = append(all, fmt.Sprintf("error line %d", i))
	}
	if diff := cmp.Diff(all, streamLines(h.storedOutput(0), checkpoint.Stderr)); diff != "" {
		t.Errorf("stderr in the store, every line (-want +got):\n%s", diff)
	}
}

func TestRunKillsTrainerIgnoringSIGTERM(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := h.config("stubborn")
	cfg.StopGrace = 300 * time.Millisecond
	wait := h.run(ctx, cfg)

	h.events.waitFor(t, EventProgress, 1)
	cancel()
	res, err := wait()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}

	if res.Outcome != Stopped || !res.Killed || res.ExitCode != 128+int(syscall.SIGKILL) {
		t.Errorf("outcome %s killed %v exit %d, want stopped, killed, exit 137", res.Outcome, res.Killed, res.ExitCode)
	}
	var child int
	for line := range strings.Lines(h.stdout.String()) {
		fmt.Sscanf(line, "CHILD pid=%d", &child)
	}
	if child == 0 {
		t.Fatalf("trainer printed no child pid:\n%s", h.stdout.String())
	}
	// The child was reparented; it is gone once it is dead or a zombie.
	deadline := time.Now().Add(hangGuard)
	for !gone(child) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d of the trainer survived SIGKILL of the group", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	_, after, _ := strings.Cut(string(stat), ") ")
	return strings.HasPrefix(after, "Z")
}

func TestRunCommandNotFound(t *testing.T) {
	h := newHarness(t)
	cfg := h.config("complete")
	cfg.Command = []string{filepath.Join(t.TempDir(), "no-such-trainer")}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Outcome != Failed || res.ExitCode != -1 || !strings.Contains(res.Stderr, "no-such-trainer") {
		t.Errorf("got %+v, want failed, exit -1, naming the command", res)
	}
}

func TestRunConfigErrors(t *testing.T) {
	h := newHarness(t)
	cases := map[string]func(*Config){
		"no command": func(c *Config) { c.Command = nil },
		"no store":   func(c *Config) { c.Store = nil },
		"no dir":     func(c *Config) { c.Dir = "" },
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := h.config("complete")
			spoil(&cfg)
			if _, err := Run(context.Background(), cfg); err == nil {
				t.Error("Run accepted the config")
			}
		})
	}
}

func TestParseProgress(t *testing.T) {
	cases := map[string]struct {
		line      string
		step, tot int64
		ok        bool
	}{
		"step":            {line: "REFUEL_PROGRESS step=42", step: 42, ok: true},
		"step and total":  {line: "REFUEL_PROGRESS step=42 total=1000", step: 42, tot: 1000, ok: true},
		"extra keys":      {line: "REFUEL_PROGRESS loss=0.3 step=7", step: 7, ok: true},
		"leading spaces":  {line: "  REFUEL_PROGRESS step=1", step: 1, ok: true},
		"no step":         {line: "REFUEL_PROGRESS total=5"},
		"bad step":        {line: "REFUEL_PROGRESS step=x"},
		"other line":      {line: "epoch 3 step=4"},
		"prefix in words": {line: "REFUEL_PROGRESSION step=4"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			step, tot, ok := parseProgress(tc.line)
			if step != tc.step || tot != tc.tot || ok != tc.ok {
				t.Errorf("parseProgress(%q) = %d, %d, %v; want %d, %d, %v", tc.line, step, tot, ok, tc.step, tc.tot, tc.ok)
			}
		})
	}
}

func TestLineWriter(t *testing.T) {
	var lines []string
	var copied bytes.Buffer
	w := &lineWriter{copy: &copied, line: func(l string, partial bool) {
		if partial {
			l += " (partial)"
		}
		lines = append(lines, l)
	}}
	long := strings.Repeat("x", maxLine+1)
	for _, chunk := range []string{"one\r\ntw", "o\n", long, "\nlast"} {
		w.Write([]byte(chunk))
	}
	w.flush()
	want := []string{"one", "two", long + " (partial)", "", "last"}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	if copied.String() != "one\r\ntwo\n"+long+"\nlast" {
		t.Error("output was not passed through unchanged")
	}
}

func TestLocalSteps(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"step-10", "step-9", "step-0011", ".tmp-12", "step-x", "step-", "step-+3", "notes"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "step-13"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := localSteps(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []localStep{{9, "step-9"}, {10, "step-10"}, {11, "step-0011"}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(localStep{})); diff != "" {
		t.Errorf("localSteps (-want +got):\n%s", diff)
	}
}

// When every checkpoint in the store is corrupt the trainer is not
// started from step 0 behind the run's back: the attempt fails, listing
// them, unless RestartFromScratch asks for exactly that.
func TestRunRefusesToTrainOverCorruptCheckpoints(t *testing.T) {
	for name, fromScratch := range map[string]bool{"fails": false, "restart from scratch": true} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			for _, step := range []int64{5, 7} {
				h.seed(step)
				h.corrupt(step)
			}
			cfg := h.config("complete", "FAKE_STEPS=3")
			cfg.RestartFromScratch = fromScratch
			res, err := h.run(context.Background(), cfg)()
			if fromScratch {
				if err != nil || res.Outcome != Completed || !strings.HasPrefix(h.stdout.String(), "RESUMED step=0 state=\n") {
					t.Fatalf("Run = %s, %v; trainer output %q; want a completion from step 0", res.Outcome, err, h.stdout.String())
				}
				return
			}
			var none *checkpoint.NotFoundError
			if !errors.As(err, &none) || len(none.Skipped) != 2 || none.Skipped[0].Step != 7 {
				t.Fatalf("Run = %v; want a NotFoundError skipping steps 7 and 5", err)
			}
			if h.stdout.Len() != 0 {
				t.Errorf("the trainer ran: %q", h.stdout.String())
			}
		})
	}
}

// A run resumes from its own checkpoints and those written before
// manifests named their run, and refuses a checkpoint another run of the
// same job id wrote: the trainer does not start.
func TestRunRefusesAnotherRunsCheckpoint(t *testing.T) {
	cases := map[string]struct {
		writer, reader string
		refused        bool
	}{
		"its own":                  {writer: "run-a", reader: "run-a"},
		"written before runs said": {writer: "", reader: "run-a"},
		"a reader that names none": {writer: "run-a", reader: ""},
		"another run's":            {writer: "run-a", reader: "run-b", refused: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.store.SetRun(tc.writer)
			h.seed(900)
			h.store.SetRun(tc.reader)
			res, err := h.run(context.Background(), h.config("complete", "FAKE_STEPS=3"))()
			var foreign *checkpoint.ForeignRunError
			if !tc.refused {
				if err != nil || res.Outcome != Completed || !strings.HasPrefix(h.stdout.String(), "RESUMED step=900 ") {
					t.Fatalf("Run = %s, %v; trainer output %q; want a completion from step 900", res.Outcome, err, h.stdout.String())
				}
				return
			}
			if !errors.As(err, &foreign) || foreign.Step != 900 || foreign.Run != tc.writer || foreign.Want != tc.reader {
				t.Fatalf("Run = %v; want a ForeignRunError for step 900 by %s", err, tc.writer)
			}
			if !strings.Contains(err.Error(), "give this job another id or another checkpoint.url") {
				t.Errorf("error %q does not say what to do", err)
			}
			if h.stdout.Len() != 0 {
				t.Errorf("the trainer ran: %q", h.stdout.String())
			}
		})
	}
}
