package traffic

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseAzureCSV(t *testing.T) {
	got, err := ParseAzureCSV(strings.NewReader(`TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:47.5000000,100,10
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.0000000,5,0
`), "t.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := &Trace{Name: "t.csv", Span: 4 * time.Second, Requests: []Request{
		{At: 0, ContextTokens: 374, GeneratedTokens: 44},
		{At: 819410 * time.Microsecond, ContextTokens: 100, GeneratedTokens: 10},
		{At: 3319410 * time.Microsecond, ContextTokens: 5},
	}}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("got(-), want(+):\n%s", diff)
	}
}

func TestParseAzureCSVNamesTheBadLine(t *testing.T) {
	cases := map[string]struct {
		doc  string
		line int
	}{
		"no column":       {"TIMESTAMP,ContextTokens\n2023-11-16 18:15:47,1\n", 1},
		"bad time":        {"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:47,1,1\nyesterday,1,1\n", 3},
		"negative tokens": {"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:47,-1,1\n", 2},
		"no rows":         {"TIMESTAMP,ContextTokens,GeneratedTokens\n", 2},
		"empty":           {"", 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseAzureCSV(strings.NewReader(tc.doc), "t.csv")
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line != tc.line {
				t.Errorf("error %v; want a *ParseError at line %d", err, tc.line)
			}
		})
	}
}

// uniform is n requests an interval apart, starting at 0.
func uniform(n int, interval time.Duration) *Trace {
	tr := &Trace{Name: "uniform", Span: time.Duration(n) * interval}
	for i := range n {
		tr.Requests = append(tr.Requests, Request{At: time.Duration(i) * interval, ContextTokens: i % 7, GeneratedTokens: 1})
	}
	return tr
}

func TestSliceAndSteady(t *testing.T) {
	// Ten requests a 10 s bin, but only 3 in the first and 4 in the last.
	tr := uniform(100, time.Second)
	tr.Requests = append(tr.Requests[7:93:93], Request{At: 99 * time.Second})
	s := tr.Steady()
	if first, last := s.Requests[0], s.Requests[len(s.Requests)-1]; first.At != 0 || s.Span != 80*time.Second || last.At != 79*time.Second {
		t.Errorf("steady spans %s, first at %s, last at %s; want the thin first and last 10 s bins dropped", s.Span, first.At, last.At)
	}
	if got := tr.Slice(20*time.Second, 30*time.Second); len(got.Requests) != 10 || got.Requests[0].At != 0 {
		t.Errorf("slice: %d requests from %s", len(got.Requests), got.Requests[0].At)
	}
}

func TestDayShape(t *testing.T) {
	s := DayShape{Trough: 0.2, TroughAt: 4 * time.Hour}
	for at, want := range map[time.Duration]float64{4 * time.Hour: 0.2, 16 * time.Hour: 1, 10 * time.Hour: 0.6, 28 * time.Hour: 0.2} {
		if got := s.Factor(at); math.Abs(got-want) > 1e-9 {
			t.Errorf("factor at %s: %g; want %g", at, got, want)
		}
	}
}

func TestComposeDayFollowsTheCycle(t *testing.T) {
	hour := uniform(3600, time.Second)
	shape := DayShape{Trough: 0.2, TroughAt: 4 * time.Hour}
	day := ComposeDay(hour, shape, 7)
	perHour := make([]int, 24)
	for i, r := range day.Requests {
		if r.At < 0 || r.At >= Day || (i > 0 && r.At < day.Requests[i-1].At) {
			t.Fatalf("request %d at %s: out of the day or out of order", i, r.At)
		}
		perHour[r.At/time.Hour]++
	}
	for h, n := range perHour {
		want := 3600 * shape.Factor(time.Duration(h)*time.Hour+30*time.Minute)
		if math.Abs(float64(n)-want) > 0.1*want {
			t.Errorf("hour %d: %d requests; want about %.0f", h, n, want)
		}
	}
	if diff := cmp.Diff(ComposeDay(hour, shape, 7), day); diff != "" {
		t.Errorf("same seed, different day:\n%s", diff)
	}
	if cmp.Equal(ComposeDay(hour, shape, 8), day) {
		t.Error("another seed gave the same day")
	}
}

func TestBursts(t *testing.T) {
	b := Bursts{Length: 2 * time.Hour, PeakRate: 5, Shape: DayShape{Trough: 1}, PerHour: 1, MinFactor: 3, MaxFactor: 3, MinHold: 10 * time.Minute, MaxHold: 10 * time.Minute, Ramp: time.Minute}
	sizes := uniform(10, time.Second)
	tr := b.Generate(sizes, 3)
	if diff := cmp.Diff(b.Generate(sizes, 3), tr); diff != "" {
		t.Errorf("same seed, different traffic:\n%s", diff)
	}
	perMinute := make([]int, 120)
	for _, r := range tr.Requests {
		perMinute[r.At/time.Minute]++
	}
	quiet, busy := 0, 0
	for _, n := range perMinute {
		switch {
		case n < 450:
			quiet++
		case n > 750:
			busy++
		}
	}
	if quiet < 60 || busy < 5 {
		t.Errorf("%d quiet and %d busy minutes; want mostly 300 a minute with bursts of 900: %v", quiet, busy, fmt.Sprint(perMinute))
	}
}
