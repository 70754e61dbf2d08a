package checkpoint

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 4, 27, 10, 0, 0, 123456789, time.UTC)

func TestLogLineRoundTrip(t *testing.T) {
	cases := map[string]struct {
		line LogLine
		want string
	}{
		"full":              {LogLine{Time: t0, Stream: Stdout, Text: "epoch 3 loss 0.12"}, "2026-04-27T10:00:00.123456789Z stdout F epoch 3 loss 0.12\n"},
		"partial":           {LogLine{Time: t0, Stream: Stderr, Partial: true, Text: "xxxx"}, "2026-04-27T10:00:00.123456789Z stderr P xxxx\n"},
		"empty text":        {LogLine{Time: t0, Stream: AgentStream}, "2026-04-27T10:00:00.123456789Z refuel F \n"},
		"spaces kept":       {LogLine{Time: t0, Stream: Stdout, Text: "  a  b "}, "2026-04-27T10:00:00.123456789Z stdout F   a  b \n"},
		"local time as UTC": {LogLine{Time: t0.In(time.FixedZone("x", 3600)), Stream: Stdout, Text: "t"}, "2026-04-27T10:00:00.123456789Z stdout F t\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := string(tc.line.Append(nil))
			if got != tc.want {
				t.Fatalf("Append = %q, want %q", got, tc.want)
			}
			back, err := ParseLogLine(strings.TrimSuffix(got, "\n"))
			if err != nil {
				t.Fatal(err)
			}
			if !back.Time.Equal(tc.line.Time) || back.Stream != tc.line.Stream || back.Partial != tc.line.Partial || back.Text != tc.line.Text {
				t.Errorf("ParseLogLine = %+v, want %+v", back, tc.line)
			}
		})
	}
}

func TestParseLogLineRejects(t *testing.T) {
	for _, s := range []string{"", "hello", "2026-04-27T10:00:00Z stdout", "yesterday stdout F x", "2026-04-27T10:00:00Z stdout X x"} {
		if _, err := ParseLogLine(s); err == nil {
			t.Errorf("ParseLogLine(%q) accepted it", s)
		}
	}
}

func TestLogKeys(t *testing.T) {
	for _, g := range []LogSegment{
		{Attempt: 3, Instance: "i-0abc", Index: 1},
		{Attempt: 0, Instance: "local/odd name%", Index: 1234567},
	} {
		back, ok := parseLogKey(g.key())
		if !ok || back != g {
			t.Errorf("parseLogKey(%q) = %+v, %v; want %+v", g.key(), back, ok, g)
		}
	}
	for _, key := range []string{"logs/attempt-1/i/output-0.log", "logs/attempt-x/i/output-1.log", "logs/attempt-1/output-1.log", "step-000000000001/manifest.json", "logs/attempt-1/i/output-1.txt"} {
		if g, ok := parseLogKey(key); ok {
			t.Errorf("parseLogKey(%q) = %+v; want it refused", key, g)
		}
	}
}

// logText stores lines as one segment's content.
func logText(texts ...string) []byte {
	var b []byte
	for _, s := range texts {
		b = LogLine{Time: t0, Stream: Stdout, Text: s}.Append(b)
	}
	return b
}

// chunkTexts flattens what a reader returned to "attempt/instance[-missing]: text" lines.
func chunkTexts(chunks []LogChunk) []string {
	var out []string
	for _, c := range chunks {
		for i, l := range c.Lines {
			prefix := c.Instance
			if i == 0 && c.Missing > 0 {
				prefix += "-" + strings.Repeat("?", c.Missing)
			}
			out = append(out, prefix+": "+l.Text)
		}
	}
	return out
}

func TestLogReaderFollowsInOrder(t *testing.T) {
	for _, scheme := range schemes {
		t.Run(scheme, func(t *testing.T) {
			ctx := context.Background()
			s := openStore(t, scheme)
			put := func(attempt int, instance string, index int, data []byte) {
				t.Helper()
				if err := s.PutLogSegment(ctx, LogSegment{Attempt: attempt, Instance: instance, Index: index}, data); err != nil {
					t.Fatal(err)
				}
			}
			// A checkpoint beside the logs is not taken for one, nor they for it.
			if _, err := s.Save(ctx, 5, writeTree(t, map[string]string{"w": "1"}), "i-a"); err != nil {
				t.Fatal(err)
			}
			all := s.NewLogReader()
			only2 := s.NewLogReader(2)
			next := func(r *LogReader) []string {
				t.Helper()
				chunks, err := r.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return chunkTexts(chunks)
			}

			put(10, "i-b", 1, logText("ten"))
			put(2, "i-a", 1, logText("two-1"))
			if diff := cmp.Diff([]string{"i-a: two-1", "i-b: ten"}, next(all)); diff != "" {
				t.Errorf("first read, attempts in numeric order (-want +got):\n%s", diff)
			}
			// The current segment grows and is stored again, with half a
			// line at its end that must wait for the rest.
			grown := append(logText("two-1", "two-2"), "2026-04-27T10:00:00Z stdout F half"...)
			put(2, "i-a", 1, grown)
			if diff := cmp.Diff([]string{"i-a: two-2"}, next(all)); diff != "" {
				t.Errorf("after growth (-want +got):\n%s", diff)
			}
			put(2, "i-a", 1, append(logText("two-1", "two-2"), logText("half-done")...))
			put(2, "i-a", 2, logText("two-3"))
			put(3, "i-c", 4, logText("three-4"))
			if diff := cmp.Diff([]string{"i-a: half-done", "i-a: two-3", "i-c-???: three-4"}, next(all)); diff != "" {
				t.Errorf("after rotation and a source whose first segments are gone (-want +got):\n%s", diff)
			}
			if got := next(all); len(got) != 0 {
				t.Errorf("nothing new, got %q", got)
			}
			if diff := cmp.Diff([]string{"i-a: two-1", "i-a: two-2", "i-a: half-done", "i-a: two-3"}, next(only2)); diff != "" {
				t.Errorf("attempt 2 alone (-want +got):\n%s", diff)
			}
			if !strings.HasSuffix(s.LogsURL(), "/job-1/logs/") {
				t.Errorf("LogsURL %s", s.LogsURL())
			}
		})
	}
}

func TestLogReaderKeepsUnparsableText(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, "mem")
	if err := s.PutLogSegment(ctx, LogSegment{Attempt: 1, Instance: "i", Index: 1}, []byte("not a record\n")); err != nil {
		t.Fatal(err)
	}
	chunks, err := s.NewLogReader().Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"i: not a record"}, chunkTexts(chunks)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestDeleteLogSegment(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, "mem")
	g := LogSegment{Attempt: 1, Instance: "i", Index: 1}
	if err := s.PutLogSegment(ctx, g, logText("x")); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second time it is already gone
		if err := s.DeleteLogSegment(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	if segs, err := s.LogSegments(ctx); err != nil || len(segs) != 0 {
		t.Errorf("segments after delete: %v, %v", segs, err)
	}
	if err := s.PutLogSegment(ctx, LogSegment{Attempt: 1, Instance: "i"}, nil); err == nil {
		t.Error("segment index 0 accepted")
	}
}
