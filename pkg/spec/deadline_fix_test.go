package spec

import (
	"errors"
	"regexp"
	"testing"
	"time"
)

// The fixes a deadline gets show one that would be accepted then:
// computed from the time the spec is read, never a date gone by.
func TestDeadlineFixesShowADeadlineAhead(t *testing.T) {
	rfc3339 := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	for _, now := range []time.Time{time.Date(2026, 12, 4, 18, 51, 23, 0, time.UTC), time.Date(2031, 2, 28, 23, 10, 0, 0, time.UTC)} {
		past := now.Add(-time.Hour)
		for name, s := range map[string]JobSpec{
			"none for tier deadline": {ID: "a", Team: "t", Tier: TierDeadline, Work: Duration(time.Hour)},
			"a deadline gone by":     {ID: "a", Team: "t", Tier: TierDeadline, Work: Duration(time.Hour), Deadline: &past},
		} {
			var ve *ValidationError
			if err := s.Validate(now); !errors.As(err, &ve) {
				t.Fatalf("%s: %v; want a validation error", name, err)
			}
			fixes := 0
			for _, fe := range ve.Fields {
				if fe.Field != "deadline" {
					continue
				}
				fixes++
				shown, err := time.Parse(time.RFC3339, rfc3339.FindString(fe.Fix))
				if err != nil || !shown.After(now.Add(s.Work.D())) {
					t.Errorf("%s at %s: fix %q; want a deadline after now and the work (%v)", name, now, fe.Fix, err)
				}
			}
			if fixes != 1 {
				t.Errorf("%s: %d fixes of deadline; want one", name, fixes)
			}
		}
	}
}
