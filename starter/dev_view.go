package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"refuel/activities"
	"refuel/jobs"
	"refuel/pkg/devenv"
)

// devIdle says how long of how long the environment has gone unused at
// now: from the agent's latest heartbeat while it runs (the status hears
// of use only when it changes), else from the status.
func devIdle(st devenv.Status, live *activities.DevProgress, now time.Time) string {
	of := "no idle timeout"
	if st.IdleTimeout > 0 {
		of = "of " + st.IdleTimeout.D().String()
	}
	if st.State != devenv.StateRunning {
		return "-"
	}
	if live != nil {
		use := fmt.Sprintf("%d connections", live.Usage.Connections)
		if live.Usage.GPUKnown {
			use += fmt.Sprintf(", GPU %.0f%%", 100*live.Usage.GPUUtilization)
		}
		act := live.Activity(knownUse(st))
		if live.InUse {
			return fmt.Sprintf("in use now (%s); idle timeout %s", use, strings.TrimPrefix(of, "of "))
		}
		idle := act.IdleFor(now).Round(time.Second)
		if at, ok := act.StopAt(st.IdleTimeout.D()); ok {
			return fmt.Sprintf("%s %s (%s); stops at %s", idle, of, use, at.Format(time.TimeOnly))
		}
		return fmt.Sprintf("%s, %s (%s)", idle, of, use)
	}
	return fmt.Sprintf("%s %s", secondsOf(st.IdleSeconds), of)
}

// knownUse is the latest use the status knows of, touches included.
func knownUse(st devenv.Status) time.Time {
	if st.LastActive == nil {
		return time.Time{}
	}
	return *st.LastActive
}

func secondsOf(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Second)
}

// printDevStatus is `starter dev status ID`.
func printDevStatus(w io.Writer, st devenv.Status, live *activities.DevProgress, now time.Time) {
	fmt.Fprintf(w, "environment %s (who %s, team %s, tier %s, priority %d)\n", st.ID, orDash(st.Who), orDash(st.Team), st.Tier, st.Priority)
	fmt.Fprintf(w, "state       %s since %s\n", st.State, st.Since.Format(time.RFC3339))
	if st.Reason != "" {
		fmt.Fprintf(w, "why         %s\n", st.Reason)
	}
	endpoint := st.Endpoint
	if live != nil && live.Endpoint != "" {
		endpoint = live.Endpoint
	}
	switch {
	case st.State == devenv.StateRunning && endpoint != "":
		answers := map[bool]string{true: "answering", false: "not answering yet"}[st.Serving || live != nil && live.Serving]
		fmt.Fprintf(w, "endpoint    %s (%s); forward it: starter dev connect %s --local-port PORT\n", endpoint, answers, st.ID)
	case st.State == devenv.StateSuspended:
		fmt.Fprintf(w, "endpoint    none while suspended: starter dev resume %s\n", st.ID)
	case st.State == devenv.StateFailed:
		fmt.Fprintf(w, "endpoint    none: its command's output: starter logs %s\n", st.ID)
	case st.State.Ended():
		fmt.Fprintln(w, "endpoint    none")
	default:
		fmt.Fprintf(w, "endpoint    none yet: starter dev status %s --watch\n", st.ID)
	}
	fmt.Fprintf(w, "idle        %s\n", devIdle(st, live, now))
	if in := st.Instance; in != nil {
		layer := ""
		if in.Layer != "" {
			layer = " (" + in.Layer + ")"
		}
		fmt.Fprintf(w, "instance    %s %s%s $%.4f/h since %s\n", in.ID, in.Offering, layer, in.PricePerHour, in.Since.Format(time.TimeOnly))
	} else {
		fmt.Fprintln(w, "instance    none")
	}
	fmt.Fprintf(w, "cost        $%.4f: %.2f h active, %.2f h idle ($%.4f)", st.CostUSD, st.ActiveHours, st.IdleHours, st.IdleCostUSD)
	if st.BudgetUSD > 0 {
		fmt.Fprintf(w, " of a $%.2f budget", st.BudgetUSD)
	}
	fmt.Fprintln(w)
	ws := st.Workspace
	path := ws.Path
	if path == "" && live != nil {
		path = live.Workspace
	}
	if s := ws.LastSave; s != nil {
		fmt.Fprintf(w, "workspace   %s, saved %s (save %d, %s) in %s\n", orDefault(path, "its own directory"), s.Time.Format(time.TimeOnly), s.Step, bytesOf(s.Bytes), orDash(ws.StoreURL))
	} else {
		fmt.Fprintf(w, "workspace   %s, not saved yet\n", orDefault(path, "its own directory"))
	}
	if st.Moves > 0 || st.LostWorkSeconds > 0 {
		fmt.Fprintf(w, "moves       %d (preemptions %d), %s of work lost\n", st.Moves, st.Preemptions, secondsOf(st.LostWorkSeconds))
	}
	for _, f := range st.Failures {
		fmt.Fprintf(w, "failure     %s %s %s: %s\n", f.Time.Format(time.TimeOnly), f.Class, f.Offering, f.Message)
	}
}

// devLine is one line of a watched environment.
func devLine(st devenv.Status, live *activities.DevProgress, now time.Time) string {
	endpoint := st.Endpoint
	if endpoint == "" {
		endpoint = "-"
	}
	return fmt.Sprintf("%s %-9s %s  idle %s  $%.4f ($%.4f idle)", now.Format(time.TimeOnly), st.State, endpoint,
		devIdle(st, live, now), st.CostUSD, st.IdleCostUSD)
}

// printDevList is `starter dev list`.
func printDevList(w io.Writer, rows []jobs.DevRow, now time.Time) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no development environments: start one with starter dev up FILE (see examples/dev-http.yaml)")
		return
	}
	table := [][]string{{"ID", "STATE", "WHO", "TEAM", "PRIORITY", "ENDPOINT", "IDLE", "COST", "IDLE COST", "STARTED"}}
	for _, r := range rows {
		idle := "-"
		if r.State == string(devenv.StateRunning) {
			idle = secondsOf(r.IdleSeconds).String()
			if r.IdleTimeout != "" && r.IdleTimeout != "0s" {
				idle += "/" + r.IdleTimeout
			}
		}
		table = append(table, []string{r.ID, r.State, orDash(r.Who), orDash(r.Team), fmt.Sprint(r.Priority), orDash(r.Endpoint), idle,
			fmt.Sprintf("$%.4f", r.CostUSD), fmt.Sprintf("$%.4f", r.IdleCostUSD), ago(now.Sub(r.StartedAt))})
	}
	writeTable(w, "", table)
}

// ago says how long ago, to the minute.
func ago(d time.Duration) string {
	if d < time.Minute {
		return "just now"
	}
	return d.Truncate(time.Minute).String() + " ago"
}

func bytesOf(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
