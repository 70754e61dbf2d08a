package ec2api

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// params reads the form of an EC2 Query request and remembers what was
// read, so that parameters the sim does not implement are refused rather
// than silently ignored.
type params struct {
	form url.Values
	read map[string]bool
}

func newParams(form url.Values) *params { return &params{form: form, read: map[string]bool{}} }

func (p *params) str(key string) string {
	p.read[key] = true
	return p.form.Get(key)
}

// indexes returns the N of every key.N and key.N.… parameter, in order.
func (p *params) indexes(key string) []int {
	var out []int
	prefix := key + "."
	for k := range p.form {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		rest, _, _ = strings.Cut(rest, ".")
		if n, err := strconv.Atoi(rest); err == nil && n > 0 && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// list returns the values of key.1, key.2, … in index order.
func (p *params) list(key string) []string {
	var out []string
	for _, i := range p.indexes(key) {
		out = append(out, p.str(fmt.Sprintf("%s.%d", key, i)))
	}
	return out
}

func (p *params) integer(key string) (n int, set bool, err error) {
	s := p.str(key)
	if s == "" {
		return 0, false, nil
	}
	n, err = strconv.Atoi(s)
	if err != nil {
		return 0, true, invalidValue(key, s)
	}
	return n, true, nil
}

func (p *params) number(key string) (x float64, set bool, err error) {
	s := p.str(key)
	if s == "" {
		return 0, false, nil
	}
	x, err = strconv.ParseFloat(s, 64)
	if err != nil || x < 0 {
		return 0, true, invalidValue(key, s)
	}
	return x, true, nil
}

func (p *params) boolean(key string) (bool, error) {
	switch s := p.str(key); s {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, invalidValue(key, s)
	}
}

func (p *params) timestamp(key string) (t time.Time, set bool, err error) {
	s := p.str(key)
	if s == "" {
		return time.Time{}, false, nil
	}
	t, err = time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, true, invalidValue(key, s)
	}
	return t, true, nil
}

// oneOf reads an enumerated parameter: empty gives def, and a value
// outside allowed is InvalidParameterValue.
func (p *params) oneOf(key, def string, allowed ...string) (string, error) {
	s := p.str(key)
	if s == "" {
		return def, nil
	}
	if !slices.Contains(allowed, s) {
		return "", errorf(codeInvalidValue, "Value (%s) for parameter %s is invalid. Valid values: %s.", s, key, strings.Join(allowed, ", "))
	}
	return s, nil
}

// accept marks parameters under these prefixes as read: accepted and
// without effect in the sim (the machine side of a launch: image, keys,
// networking, user data).
func (p *params) accept(prefixes ...string) {
	for k := range p.form {
		for _, pre := range prefixes {
			if k == pre || strings.HasPrefix(k, pre+".") {
				p.read[k] = true
			}
		}
	}
}

// leftover refuses the first parameter nothing read.
func (p *params) leftover() error {
	var unread []string
	for k := range p.form {
		if !p.read[k] {
			unread = append(unread, k)
		}
	}
	if len(unread) == 0 {
		return nil
	}
	slices.Sort(unread)
	return errorf("UnknownParameter", "The parameter %s is not recognized by the simulated EC2, which serves a subset of EC2's parameters.", unread[0])
}

// filter is one Filter.N of a Describe call: it matches when a value of
// the named field equals one of its values.
type filter struct {
	name   string
	values []string
}

func (p *params) filters() ([]filter, error) {
	var out []filter
	for _, i := range p.indexes("Filter") {
		key := fmt.Sprintf("Filter.%d", i)
		name := p.str(key + ".Name")
		if name == "" {
			return nil, missing(key + ".Name")
		}
		out = append(out, filter{name: name, values: p.list(key + ".Value")})
	}
	return out, nil
}

// matchesAll reports whether every filter matches, given each filter's
// values for the item (fields returns nil for a field the item lacks).
func matchesAll(filters []filter, fields func(name string) []string) bool {
	for _, f := range filters {
		if !slices.ContainsFunc(fields(f.name), func(v string) bool { return slices.Contains(f.values, v) }) {
			return false
		}
	}
	return true
}

// checkFilters refuses a filter name the action does not know.
func checkFilters(filters []filter, known func(name string) bool) error {
	for _, f := range filters {
		if !known(f.name) {
			return errorf(codeInvalidValue, "The filter '%s' is invalid", f.name)
		}
	}
	return nil
}

// tags reads key.N.Key and key.N.Value pairs, validated as EC2 does.
func (p *params) tags(key string) (map[string]string, error) {
	out := map[string]string{}
	for _, i := range p.indexes(key) {
		prefix := fmt.Sprintf("%s.%d", key, i)
		k, v := p.str(prefix+".Key"), p.str(prefix+".Value")
		switch _, dup := out[k]; {
		case k == "":
			return nil, missing(prefix + ".Key")
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			return nil, errorf(codeInvalidValue, "Tag keys starting with 'aws:' are reserved for internal use")
		case len(k) > 128:
			return nil, errorf(codeInvalidValue, "Tag key exceeds the maximum length of 128 characters")
		case len(v) > 256:
			return nil, errorf(codeInvalidValue, "Tag value exceeds the maximum length of 256 characters")
		case dup:
			return nil, errorf(codeInvalidValue, "Duplicate tag key '%s' specified.", k)
		}
		out[k] = v
	}
	if len(out) > maxTags {
		return nil, errorf("TagLimitExceeded", "The maximum number of Tags for a resource (%d) has been reached.", maxTags)
	}
	return out, nil
}

const maxTags = 50

// maxLaunch bounds the instances one request may launch, so that no
// request holds the endpoint in a launch loop (EC2's own bound is the
// account's quota; the sim's quotas may be unlimited).
const maxLaunch = 1000

// instanceTags reads TagSpecification.N and returns the tags meant for
// instances; specifications for the other resource types allowed are
// accepted and have nothing to tag in the sim.
func (p *params) instanceTags(allowed ...string) (map[string]string, error) {
	out := map[string]string{}
	for _, i := range p.indexes("TagSpecification") {
		key := fmt.Sprintf("TagSpecification.%d", i)
		rt := p.str(key + ".ResourceType")
		if rt == "" {
			return nil, missing(key + ".ResourceType")
		}
		if rt != "instance" && !slices.Contains(allowed, rt) {
			return nil, errorf(codeInvalidValue, "'%s' is not a valid taggable resource type for this operation.", rt)
		}
		tags, err := p.tags(key + ".Tag")
		if err != nil {
			return nil, err
		}
		if rt == "instance" {
			for k, v := range tags {
				out[k] = v
			}
		}
	}
	return out, nil
}

// page cuts one page out of n items by MaxResults (limited to lo..1000
// when given) and NextToken, an opaque offset.
func (p *params) page(n, lo int) (from, to int, next string, err error) {
	limit, set, err := p.integer("MaxResults")
	if err != nil {
		return 0, 0, "", err
	}
	if set && (limit < lo || limit > 1000) {
		return 0, 0, "", errorf(codeInvalidValue, "Value ( %d ) for parameter maxResults is invalid. Expecting a value between %d and 1000.", limit, lo)
	}
	if tok := p.str("NextToken"); tok != "" {
		from, err = strconv.Atoi(tok)
		if err != nil || from < 0 || from > n {
			return 0, 0, "", errorf(codeInvalidValue, "Invalid NextToken %q", tok)
		}
	}
	to = n
	if set && from+limit < n {
		to = from + limit
		next = strconv.Itoa(to)
	}
	return from, to, next, nil
}
