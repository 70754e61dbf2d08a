package devenv

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/spec"
)

var t0 = time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func TestSampleActive(t *testing.T) {
	cases := map[string]struct {
		s    Sample
		want bool
	}{
		"nothing":                     {Sample{}, false},
		"a connection":                {Sample{Connections: 1}, true},
		"a busy GPU":                  {Sample{GPUKnown: true, GPUUtilization: 0.5}, true},
		"a GPU holding a model, idle": {Sample{GPUKnown: true, GPUUtilization: 0}, false},
		"just under busy":             {Sample{GPUKnown: true, GPUUtilization: GPUBusyShare - 0.01}, false},
		"no nvidia-smi":               {Sample{GPUUtilization: 0.9}, false},
	}
	for name, tc := range cases {
		if got := tc.s.Active(); got != tc.want {
			t.Errorf("%s: Active() = %v; want %v", name, got, tc.want)
		}
	}
}

func TestActivityIdle(t *testing.T) {
	started := Activity{Since: t0}
	used := Activity{Since: t0, LastActive: at(10 * time.Minute)}
	touched := Activity{Since: t0, LastActive: at(10 * time.Minute), LastTouch: at(25 * time.Minute)}
	cases := map[string]struct {
		a       Activity
		now     time.Time
		timeout time.Duration
		idleFor time.Duration
		idle    bool
		stopAt  time.Time // zero: never
	}{
		"never used, within the timeout": {started, at(29 * time.Minute), 30 * time.Minute, 29 * time.Minute, false, at(30 * time.Minute)},
		"never used, at the timeout":     {started, at(30 * time.Minute), 30 * time.Minute, 30 * time.Minute, true, at(30 * time.Minute)},
		"used, then quiet":               {used, at(39 * time.Minute), 30 * time.Minute, 29 * time.Minute, false, at(40 * time.Minute)},
		"used, quiet past the timeout":   {used, at(41 * time.Minute), 30 * time.Minute, 31 * time.Minute, true, at(40 * time.Minute)},
		"a touch restarts the clock":     {touched, at(41 * time.Minute), 30 * time.Minute, 16 * time.Minute, false, at(55 * time.Minute)},
		"timeout 0 never stops":          {started, at(1000 * time.Hour), 0, 1000 * time.Hour, false, time.Time{}},
		"an agent clock ahead":           {Activity{Since: t0, LastActive: at(time.Minute)}, t0, time.Minute, 0, false, at(2 * time.Minute)},
		"in use: no clock runs":          {Activity{Since: t0, LastActive: at(time.Minute), InUse: true}, at(time.Hour), 30 * time.Minute, 0, false, time.Time{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.a.IdleFor(tc.now); got != tc.idleFor {
				t.Errorf("IdleFor = %s; want %s", got, tc.idleFor)
			}
			if got := tc.a.Idle(tc.now, tc.timeout); got != tc.idle {
				t.Errorf("Idle = %v; want %v", got, tc.idle)
			}
			stop, ok := tc.a.StopAt(tc.timeout)
			if ok != !tc.stopAt.IsZero() || !stop.Equal(tc.stopAt) {
				t.Errorf("StopAt = %s, %v; want %s", stop, ok, tc.stopAt)
			}
		})
	}
}

func TestQuietAfter(t *testing.T) {
	for timeout, want := range map[time.Duration]time.Duration{
		0: time.Minute, 30 * time.Minute: time.Minute, 2 * time.Minute: 30 * time.Second, 10 * time.Second: 2500 * time.Millisecond,
	} {
		if got := QuietAfter(timeout); got != want {
			t.Errorf("QuietAfter(%s) = %s; want %s", timeout, got, want)
		}
	}
}

func TestSplitHeld(t *testing.T) {
	used := Activity{Since: t0, LastActive: at(20 * time.Minute)}
	cases := map[string]struct {
		from, to     time.Time
		a            Activity
		active, idle time.Duration
	}{
		"all in use":               {t0, at(24 * time.Minute), used, 24 * time.Minute, 0},
		"a pause within the grace": {t0, at(25 * time.Minute), used, 25 * time.Minute, 0},
		"idle after the grace":     {t0, at(55 * time.Minute), used, 25 * time.Minute, 30 * time.Minute},
		"a span all idle":          {at(30 * time.Minute), at(50 * time.Minute), used, 0, 20 * time.Minute},
		"never used, autostopped":  {t0, at(30 * time.Minute), Activity{Since: t0}, IdleGrace, 30*time.Minute - IdleGrace},
		"in use to the end":        {t0, at(55 * time.Minute), Activity{Since: t0, LastActive: at(20 * time.Minute), InUse: true}, 55 * time.Minute, 0},
		"an empty span":            {at(time.Hour), at(time.Hour), used, 0, 0},
		"a span backwards":         {at(time.Hour), t0, used, 0, 0},
	}
	for name, tc := range cases {
		active, idle := SplitHeld(tc.from, tc.to, tc.a)
		if active != tc.active || idle != tc.idle {
			t.Errorf("%s: active %s, idle %s; want %s, %s", name, active, idle, tc.active, tc.idle)
		}
		if active+idle != max(0, tc.to.Sub(tc.from)) {
			t.Errorf("%s: the split loses time", name)
		}
	}
}

func TestCommandExitVerdict(t *testing.T) {
	cases := map[string]struct {
		e       CommandExit
		state   State
		mention []string
	}{
		"exits at once": {CommandExit{Code: 2, Ran: 300 * time.Millisecond, Output: "python3: No module named http.servr\n"},
			StateFailed, []string{"code 2", "before its endpoint ever answered", "No module named http.servr"}},
		"serves, then dies at once": {CommandExit{Code: 1, Ran: 5 * time.Second, Served: true, Output: "OSError: port in use"},
			StateFailed, []string{"code 1 after 5s", "port in use"}},
		"never answers, then exits": {CommandExit{Code: 0, Ran: 10 * time.Minute},
			StateFailed, []string{"before its endpoint ever answered"}},
		"shut down by the developer": {CommandExit{Code: 0, Ran: 3 * time.Hour, Served: true},
			StateSuspended, []string{"exited by itself with code 0 after 3h0m0s", "resume starts it again"}},
	}
	for name, tc := range cases {
		state, why := tc.e.Verdict()
		if state != tc.state {
			t.Errorf("%s: state %s; want %s (%s)", name, state, tc.state, why)
		}
		for _, m := range tc.mention {
			if !strings.Contains(why, m) {
				t.Errorf("%s: %q does not say %q", name, why, m)
			}
		}
	}
}

func TestEndpoint(t *testing.T) {
	for host, want := range map[string]string{"127.0.0.1": "127.0.0.1:8080", "::1": "[::1]:8080", "ip-10-0-0-7": "ip-10-0-0-7:8080"} {
		if got := Endpoint(host, 8080); got != want {
			t.Errorf("Endpoint(%q) = %q; want %q", host, got, want)
		}
	}
}

func TestStateEnded(t *testing.T) {
	var ended []State
	for _, s := range States {
		if s.Ended() {
			ended = append(ended, s)
		}
	}
	if diff := cmp.Diff([]State{StateFailed, StateDeleted}, ended); diff != "" {
		t.Errorf("ended states got(-), want(+):\n%s", diff)
	}
}

// The status carries the contract's fields under their names.
func TestStatusJSONNames(t *testing.T) {
	b, err := json.Marshal(Status{ID: "dev", State: StateRunning, IdleTimeout: spec.Duration(30 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"state", "idle_seconds", "idle_timeout", "cost_usd", "idle_cost_usd", "moves", "failures", "priority", "tier"} {
		if _, ok := m[key]; !ok {
			t.Errorf("status JSON lacks %s: %s", key, b)
		}
	}
	if m["idle_timeout"] != "30m0s" {
		t.Errorf("idle_timeout %v; want 30m0s", m["idle_timeout"])
	}
}

func TestStatusDetails(t *testing.T) {
	st := Status{
		ID: "scratch", Who: "ana@laptop", Team: "research", Priority: 70, Tier: "critical", State: StateRunning,
		Endpoint: "127.0.0.1:41234", Serving: true, IdleSeconds: 125, IdleTimeout: spec.Duration(10 * time.Minute),
		Instance: &Instance{ID: "i-1", Offering: "base/p3.2xlarge/dc-1/on-demand", Layer: "base", Since: t0},
		CostUSD:  1.5, IdleCostUSD: 0.25, ActiveHours: 1, IdleHours: 0.2,
		Workspace: Workspace{Path: "/w", LastSave: &Save{Step: 4, Time: at(time.Minute)}},
	}
	want := "scratch running, of ana@laptop, on i-1 (base/p3.2xlarge/dc-1/on-demand, base), at 127.0.0.1:41234, idle 2m5s of 10m0s, $1.50 ($0.25 idle)"
	if got := st.Summary(); got != want {
		t.Errorf("summary\n got %q\nwant %q", got, want)
	}
	d := st.Details()
	for _, m := range []string{"**who** ana@laptop, team research, priority 70, tier critical", "**endpoint** `127.0.0.1:41234`\n",
		"**idle** 2m5s of 10m0s", "saved 2026-03-04T09:01:00Z (save 4)"} {
		if !strings.Contains(d, m) {
			t.Errorf("details lack %q:\n%s", m, d)
		}
	}
	st.Serving, st.IdleTimeout = false, 0
	if d := st.Details(); !strings.Contains(d, "(not answering yet)") || !strings.Contains(d, "no timeout") {
		t.Errorf("details of an endpoint not answering, without timeout:\n%s", d)
	}
}
