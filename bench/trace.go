package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"refuel/activities"
)

// agentTrace follows, on the one client connection the bench's stack
// shares with every virtual instance's agent, what each agent was handed
// and what it answered: for each RunTraining, when the poll brought it to
// the agent, when the agent sent its first heartbeat and when the cluster
// took it. It counts the requests the cluster refused, by method and
// code, and while watching it writes a goroutine dump of the whole bench
// when an agent holds a RunTraining without heartbeating for long: the
// evidence of what the agent waits on. Safe for concurrent use.
type agentTrace struct {
	mu      sync.Mutex
	byToken map[string]*taskSeen
	byRun   map[string][]*taskSeen
	refused map[string]int // "method: code" → requests
	// polls are the long polls of each instance's task queue.
	polls map[string][]*pollSeen

	dumpDir string
	dumped  []string // the dumps written
}

// taskSeen is one RunTraining an agent was handed.
type taskSeen struct {
	run, queue string
	started    time.Time // when the cluster started it, by the poll's answer
	received   time.Time // when the poll's answer reached the agent
	beatSent   time.Time // the agent's first heartbeat
	beatTaken  time.Time // the cluster's answer to it
	beatErr    string    // why the first heartbeat was not taken
	dumped     bool
}

// pollSeen is one long poll of an instance's task queue.
type pollSeen struct {
	sent, answered time.Time
	outcome        string // "task", "empty" or the error's code
}

func newAgentTrace(dumpDir string) *agentTrace {
	return &agentTrace{
		byToken: map[string]*taskSeen{}, byRun: map[string][]*taskSeen{}, refused: map[string]int{},
		polls: map[string][]*pollSeen{}, dumpDir: dumpDir,
	}
}

// intercept is the client connection's interceptor.
func (t *agentTrace) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var poll *pollSeen
	if r, ok := req.(*workflowservice.PollActivityTaskQueueRequest); ok && strings.HasPrefix(r.GetTaskQueue().GetName(), "refuel-node-") {
		poll = &pollSeen{sent: time.Now()}
		t.mu.Lock()
		t.polls[r.GetTaskQueue().GetName()] = append(t.polls[r.GetTaskQueue().GetName()], poll)
		t.mu.Unlock()
	}
	sent := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if code := status.Code(err); err != nil && code != codes.Canceled {
		// A request the client cancelled (a stopping agent's poll) was
		// not refused.
		t.refused[method[strings.LastIndex(method, "/")+1:]+": "+code.String()]++
	}
	if poll != nil {
		poll.answered, poll.outcome = now, "empty"
		if err != nil {
			poll.outcome = status.Code(err).String()
		}
	}
	switch r := reply.(type) {
	case *workflowservice.PollActivityTaskQueueResponse:
		if err != nil || len(r.GetTaskToken()) == 0 {
			return err
		}
		if poll != nil {
			poll.outcome = "task"
		}
		if r.GetActivityType().GetName() != activities.RunTrainingName {
			return err
		}
		s := &taskSeen{
			run: r.GetWorkflowExecution().GetWorkflowId(), queue: req.(*workflowservice.PollActivityTaskQueueRequest).GetTaskQueue().GetName(),
			started: r.GetStartedTime().AsTime(), received: now,
		}
		t.byToken[string(r.GetTaskToken())] = s
		t.byRun[s.run] = append(t.byRun[s.run], s)
	case *workflowservice.RecordActivityTaskHeartbeatResponse:
		s := t.byToken[string(req.(*workflowservice.RecordActivityTaskHeartbeatRequest).GetTaskToken())]
		if s == nil || !s.beatSent.IsZero() {
			return err
		}
		s.beatSent = sent
		if err == nil {
			s.beatTaken = now
		} else {
			s.beatErr = status.Code(err).String()
		}
	}
	return err
}

// seen is what the trace saw of run's RunTraining started nearest after
// from: the zero taskSeen when none.
func (t *agentTrace) seen(run string, from time.Time) taskSeen {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.byRun[run] {
		if !s.started.Before(from) {
			return *s
		}
	}
	return taskSeen{}
}

// pollsAround says what the long polls of queue did between from and to.
func (t *agentTrace) pollsAround(queue string, from, to time.Time) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var parts []string
	for _, p := range t.polls[queue] {
		if p.sent.After(to) || (!p.answered.IsZero() && p.answered.Before(from)) {
			continue
		}
		answered := "unanswered"
		if !p.answered.IsZero() {
			answered = fmt.Sprintf("%s at %+.2fs", p.outcome, p.answered.Sub(from).Seconds())
		}
		parts = append(parts, fmt.Sprintf("sent %+.2fs, %s", p.sent.Sub(from).Seconds(), answered))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// refusals are the requests the cluster refused, by method and code.
func (t *agentTrace) refusals() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(t.refused)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, t.refused[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// refusedSoFar is ", N requests refused" once the cluster refused any.
func (t *agentTrace) refusedSoFar() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, c := range t.refused {
		n += c
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d requests refused", n)
}

// maxDumps bounds the goroutine dumps one bench writes.
const maxDumps = 3

// watch writes a goroutine dump to the trace's directory each time an
// agent has held a RunTraining for silent without sending a heartbeat,
// until stop is closed.
func (t *agentTrace) watch(stop <-chan struct{}, silent time.Duration, say func(string, ...any)) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		var stalled []*taskSeen
		t.mu.Lock()
		for _, runs := range t.byRun {
			for _, s := range runs {
				if !s.dumped && s.beatSent.IsZero() && time.Since(s.received) > silent {
					s.dumped = true
					stalled = append(stalled, s)
				}
			}
		}
		full := len(t.dumped) >= maxDumps
		t.mu.Unlock()
		for _, s := range stalled {
			if full {
				say("stall: %s's agent has held RunTraining for %.0fs without a heartbeat (no more dumps)", s.run, time.Since(s.received).Seconds())
				continue
			}
			path := filepath.Join(t.dumpDir, fmt.Sprintf("stall-%s-%s.txt", s.run, time.Now().Format("150405.000")))
			if err := dumpGoroutines(path); err != nil {
				say("stall: %s: goroutine dump: %v", s.run, err)
				continue
			}
			t.mu.Lock()
			t.dumped = append(t.dumped, path)
			full = len(t.dumped) >= maxDumps
			t.mu.Unlock()
			say("stall: %s's agent (%s) has held RunTraining for %.0fs without a heartbeat: goroutines in %s", s.run, s.queue, time.Since(s.received).Seconds(), path)
		}
	}
}

// dumpOnSignal writes a goroutine dump of the whole bench to dir each
// time the process gets SIGUSR1 (kill -USR1 PID): what it waits on, at a
// moment of the caller's choosing, without stopping it.
func dumpOnSignal(dir string, say func(string, ...any)) (stop func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-sig:
			}
			path := filepath.Join(dir, fmt.Sprintf("goroutines-%d-%s.txt", os.Getpid(), time.Now().Format("150405.000")))
			if err := dumpGoroutines(path); err != nil {
				say("SIGUSR1: goroutine dump: %v", err)
				continue
			}
			say("SIGUSR1: goroutines in %s", path)
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
	}
}

// dumpGoroutines writes every goroutine's stack to path.
func dumpGoroutines(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("goroutine").WriteTo(f, 2); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
