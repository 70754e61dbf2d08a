package cost

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var t0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

// at is t0 plus h hours.
func at(h float64) time.Time { return t0.Add(time.Duration(h * float64(time.Hour))) }

// op is one thing a workflow does to a ledger.
type op func(*Ledger)

func open(id, pool, market string, price, startH float64) op {
	return func(l *Ledger) {
		l.Open(Segment{InstanceID: id, Pool: pool, Market: market, Offering: "aws/g5.xlarge/us-east-1a/" + market, PricePerHour: price, Start: at(startH)})
	}
}

func closeAt(id string, h float64) op  { return func(l *Ledger) { l.Close(id, at(h)) } }
func lost(id string, s float64) op     { return func(l *Ledger) { l.AddLostWork(id, s) } }
func recovery(id string, s float64) op { return func(l *Ledger) { l.AddRecovery(id, s) } }
func idle(id string, s float64) op     { return func(l *Ledger) { l.AddIdle(id, s) } }

func build(ops ...op) Ledger {
	var l Ledger
	for _, o := range ops {
		o(&l)
	}
	return l
}

var approx = cmpopts.EquateApprox(0, 1e-12)

func TestLedgerBreakdown(t *testing.T) {
	tests := map[string]struct {
		ops  []op
		now  float64
		want Breakdown
	}{
		"empty": {
			now:  5,
			want: Breakdown{ByMarket: map[string]Line{}, ByPool: map[string]Line{}},
		},
		"one open spot segment": {
			ops: []op{open("i-1", "burst-aws", "spot", 1.25, 0)},
			now: 2,
			want: Breakdown{
				ByMarket: map[string]Line{"spot": {2, 2.5}},
				ByPool:   map[string]Line{"burst-aws": {2, 2.5}},
				TotalUSD: 2.5, Hours: 2,
			},
		},
		"preempted spot, then on-demand, then base": {
			ops: []op{
				open("i-1", "burst-aws", "spot", 1, 0), closeAt("i-1", 1),
				open("i-2", "burst-aws", "on-demand", 3, 1.25), closeAt("i-2", 2.25),
				open("i-3", "base", "base", 0.5, 2.5),
			},
			now: 4.5,
			want: Breakdown{
				ByMarket: map[string]Line{"spot": {1, 1}, "on-demand": {1, 3}, "base": {2, 1}},
				ByPool:   map[string]Line{"burst-aws": {2, 4}, "base": {2, 1}},
				TotalUSD: 5, Hours: 4,
			},
		},
		"lost work and recovery at the mean price": {
			ops: []op{
				open("i-1", "p", "spot", 1, 0), closeAt("i-1", 2),
				lost("i-1", 1800), recovery("i-1", 900),
				open("i-2", "p", "on-demand", 4, 2),
			},
			now: 3,
			// 3 hours for $6: $2 an hour.
			want: Breakdown{
				ByMarket:    map[string]Line{"spot": {2, 2}, "on-demand": {1, 4}},
				ByPool:      map[string]Line{"p": {3, 6}},
				TotalUSD:    6,
				Hours:       3,
				LostWorkUSD: 1,
				RecoveryUSD: 0.5,
			},
		},
		"idle time at each instance's own price": {
			ops: []op{
				open("i-1", "p", "on-demand", 4, 0), idle("i-1", 1800), closeAt("i-1", 1),
				open("i-2", "p", "spot", 1, 1), idle("i-2", 3600), idle("i-2", -60),
			},
			now: 3,
			want: Breakdown{
				ByMarket: map[string]Line{"on-demand": {1, 4}, "spot": {2, 2}},
				ByPool:   map[string]Line{"p": {3, 6}},
				TotalUSD: 6, Hours: 3, IdleUSD: 3,
			},
		},
		"lost work before anything was paid": {
			ops:  []op{lost("i-0", 600), recovery("i-0", 60)},
			now:  1,
			want: Breakdown{ByMarket: map[string]Line{}, ByPool: map[string]Line{}},
		},
		"negative amounts ignored": {
			ops: []op{open("i-1", "p", "spot", 2, 0), closeAt("i-1", 1), lost("i-1", -3600), recovery("i-1", -1), lost("i-1", 0)},
			now: 1,
			want: Breakdown{
				ByMarket: map[string]Line{"spot": {1, 2}},
				ByPool:   map[string]Line{"p": {1, 2}},
				TotalUSD: 2, Hours: 1,
			},
		},
		"now before an open segment started": {
			ops:  []op{open("i-1", "p", "spot", 2, 3)},
			now:  1,
			want: Breakdown{ByMarket: map[string]Line{"spot": {}}, ByPool: map[string]Line{"p": {}}},
		},
		"closed segment ignores now": {
			ops: []op{open("i-1", "p", "on-demand", 3, 0), closeAt("i-1", 0.5)},
			now: 100,
			want: Breakdown{
				ByMarket: map[string]Line{"on-demand": {0.5, 1.5}},
				ByPool:   map[string]Line{"p": {0.5, 1.5}},
				TotalUSD: 1.5, Hours: 0.5,
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := build(tc.ops...)
			now := at(tc.now)
			got := l.Breakdown(now)
			if diff := cmp.Diff(got, tc.want, approx); diff != "" {
				t.Errorf("Breakdown mismatch, got(-), want(+):\n%s", diff)
			}
			sums := map[string]float64{
				"CostUSD":     l.CostUSD(now) - tc.want.TotalUSD,
				"Hours":       l.Hours(now) - tc.want.Hours,
				"LostWorkUSD": l.LostWorkUSD(now) - tc.want.LostWorkUSD,
				"RecoveryUSD": l.RecoveryUSD(now) - tc.want.RecoveryUSD,
			}
			for method, d := range sums {
				if d > 1e-12 || d < -1e-12 {
					t.Errorf("%s is off the breakdown by %g", method, d)
				}
			}
		})
	}
}

func TestLedgerClose(t *testing.T) {
	tests := map[string]struct {
		ops  []op
		want []time.Time // End of each segment, in order
	}{
		"closes the open one": {
			ops:  []op{open("i-1", "p", "spot", 1, 0), closeAt("i-1", 2)},
			want: []time.Time{at(2)},
		},
		"second close keeps the first end": {
			ops:  []op{open("i-1", "p", "spot", 1, 0), closeAt("i-1", 2), closeAt("i-1", 5)},
			want: []time.Time{at(2)},
		},
		"unknown instance": {
			ops:  []op{open("i-1", "p", "spot", 1, 0), closeAt("i-9", 2)},
			want: []time.Time{{}},
		},
		"only the named instance": {
			ops:  []op{open("i-1", "p", "spot", 1, 0), open("i-2", "p", "spot", 1, 0), closeAt("i-2", 1)},
			want: []time.Time{{}, at(1)},
		},
		"end before start": {
			ops:  []op{open("i-1", "p", "spot", 1, 3), closeAt("i-1", 1)},
			want: []time.Time{at(3)},
		},
		"reused instance ID": {
			ops:  []op{open("i-1", "p", "spot", 1, 0), closeAt("i-1", 1), open("i-1", "p", "on-demand", 3, 2), closeAt("i-1", 4)},
			want: []time.Time{at(1), at(4)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := build(tc.ops...)
			var got []time.Time
			for _, s := range l.Segments {
				got = append(got, s.End)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("segment ends, got(-), want(+):\n%s", diff)
			}
		})
	}
}

// TestLedgerJSON checks the ledger survives workflow state serialisation,
// open segments included.
func TestLedgerJSON(t *testing.T) {
	tests := map[string]Ledger{
		"empty": {},
		"open and closed": build(
			open("i-1", "burst", "spot", 0.9701, 0), closeAt("i-1", 1.5), lost("i-1", 1234.5),
			open("i-2", "burst", "on-demand", 3.06, 1.75), recovery("i-2", 720),
		),
	}
	for name, l := range tests {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			var got Ledger
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, l, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("round trip, got(-), want(+):\n%s", diff)
			}
			if strings.Count(string(b), `"end"`) != len(l.Segments)-openCount(l) {
				t.Errorf("open segments should have no end: %s", b)
			}
		})
	}
}

func openCount(l Ledger) int {
	n := 0
	for _, s := range l.Segments {
		if s.open() {
			n++
		}
	}
	return n
}

func TestLedgerStoppedTimeIsVolumeHours(t *testing.T) {
	reprice := func(id string, h, price float64, stopped bool) op {
		return func(l *Ledger) { l.Reprice(id, at(h), price, stopped) }
	}
	tests := []struct {
		name                    string
		ops                     []op
		now                     float64
		hours, volumeHours, usd float64
		segments                int
	}{
		{"never stopped", []op{open("i-1", "aws", "on-demand", 3, 0)}, 2, 2, 0, 6, 1},
		{"stopped and still", []op{open("i-1", "aws", "on-demand", 3, 0), reprice("i-1", 1, 0.02, true)}, 3, 1, 2, 3 + 0.04, 2},
		{"stopped, started, released", []op{
			open("i-1", "aws", "on-demand", 3, 0), reprice("i-1", 1, 0.02, true), reprice("i-1", 2, 3, false), closeAt("i-1", 3),
		}, 5, 2, 1, 6.02, 3},
		{"released while stopped", []op{open("i-1", "aws", "on-demand", 3, 0), reprice("i-1", 1, 0.02, true), closeAt("i-1", 4)}, 9, 1, 3, 3.06, 2},
		{"nothing open: no change", []op{open("i-1", "aws", "on-demand", 3, 0), closeAt("i-1", 1), reprice("i-1", 2, 0.02, true)}, 5, 1, 0, 3, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := build(tt.ops...)
			now := at(tt.now)
			b := l.Breakdown(now)
			if !cmp.Equal(l.Hours(now), tt.hours, approx) || !cmp.Equal(l.VolumeHours(now), tt.volumeHours, approx) ||
				!cmp.Equal(b.TotalUSD, tt.usd, approx) || !cmp.Equal(b.Hours, tt.hours, approx) || !cmp.Equal(b.VolumeHours, tt.volumeHours, approx) {
				t.Errorf("hours %v, volume hours %v, breakdown %+v; want %v, %v, $%v", l.Hours(now), l.VolumeHours(now), b, tt.hours, tt.volumeHours, tt.usd)
			}
			if len(l.Segments) != tt.segments {
				t.Errorf("%d segments; want %d", len(l.Segments), tt.segments)
			}
			rows := Rollup([]JobCost{{Job: "svc", Team: "t", Ledger: l, At: now}})
			if len(rows) != 1 || !cmp.Equal(rows[0].Hours, tt.hours, approx) || !cmp.Equal(rows[0].VolumeHours, tt.volumeHours, approx) || !cmp.Equal(rows[0].USD, tt.usd, approx) {
				t.Errorf("rollup %+v; want %v hours, %v volume hours, $%v", rows, tt.hours, tt.volumeHours, tt.usd)
			}
		})
	}
}
