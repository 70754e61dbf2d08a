package gceapi

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	compute "google.golang.org/api/compute/v1"
)

func instanceField(inst *compute.Instance, field string) string {
	switch {
	case field == "name":
		return inst.Name
	case field == "status":
		return inst.Status
	case field == "zone":
		return path.Base(inst.Zone)
	case strings.HasPrefix(field, "labels."):
		return inst.Labels[strings.TrimPrefix(field, "labels.")]
	}
	return ""
}

// parseFilter reads a list filter of terms joined by AND; an empty one
// matches everything.
func parseFilter(f string) (func(get func(string) string) bool, error) {
	f = strings.TrimSpace(f)
	if f == "" {
		return func(func(string) string) bool { return true }, nil
	}
	type term struct {
		field  string
		match  func(string) bool
		negate bool
	}
	var terms []term
	for _, part := range regexp.MustCompile(`\s+(?i:AND)\s+`).Split(f, -1) {
		m := filterTerm.FindStringSubmatch(strings.TrimSpace(part))
		if m == nil {
			return nil, fmt.Errorf("%q: the sim takes terms field = \"value\" joined by AND", part)
		}
		v := m[3]
		if strings.HasPrefix(v, `"`) {
			// The quotes hold the value as it is (a regexp keeps its
			// backslashes); only an escaped quote is unescaped.
			v = strings.ReplaceAll(v[1:len(v)-1], `\"`, `"`)
		}
		t := term{field: m[1], negate: m[2] == "!=" || m[2] == "ne"}
		if m[2] == "eq" || m[2] == "ne" {
			re, err := regexp.Compile("^(?:" + v + ")$")
			if err != nil {
				return nil, fmt.Errorf("%q: %v", part, err)
			}
			t.match = re.MatchString
		} else {
			want := v
			t.match = func(s string) bool { return s == want }
		}
		terms = append(terms, t)
	}
	return func(get func(string) string) bool {
		for _, t := range terms {
			if t.match(get(t.field)) == t.negate {
				return false
			}
		}
		return true
	}, nil
}
