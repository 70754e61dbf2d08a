package schema

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/invopop/jsonschema"
	validator "github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	"refuel/pkg/spec"
)

var update = flag.Bool("update", false, "rewrite the schemas in docs/schema")

const regenerate = "go test ./pkg/spec/schema -run TestSchemasAreCurrent -update"

// The checked-in schemas are what the Go types say today.
func TestSchemasAreCurrent(t *testing.T) {
	for name, gen := range Files {
		path := filepath.Join("..", "..", "..", "docs", "schema", name)
		want, err := Marshal(gen())
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("docs/schema/%s is stale (%v): regenerate it with `%s`", name, err, regenerate)
		}
	}
}

// Every field, of the spec and of its parts, is described.
func TestEveryFieldIsDescribed(t *testing.T) {
	for name, gen := range Files {
		var walk func(path string, s *jsonschema.Schema)
		walk = func(path string, s *jsonschema.Schema) {
			if s.Properties != nil {
				for key, p := range s.Properties.FromOldest() {
					at := strings.TrimPrefix(path+"."+key, ".")
					if p.Description == "" {
						t.Errorf("%s: %s has no description: add it to the field tables in pkg/spec/schema/fields.go", name, at)
					}
					walk(at, p)
				}
			}
			if s.Items != nil {
				if s.Items.Description == "" && s.Items.Properties == nil {
					t.Errorf("%s: %s[] has no description", name, path)
				}
				walk(path+"[]", s.Items)
			}
		}
		walk("", gen())
	}
}

func compile(t *testing.T, name string) *validator.Schema {
	t.Helper()
	b, err := Marshal(Files[name]())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := validator.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := validator.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(name, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func instance(t *testing.T, doc []byte) any {
	t.Helper()
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	v, err := validator.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A pipeline that checks its spec against the schema is never refused a
// spec refuel would run: every example and every seed of the fuzz
// corpus that refuel accepts, the schema accepts too.
func TestSchemaAcceptsWhatRefuelAccepts(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		schema string
		glob   string
		parse  func([]byte) error
	}{
		{"jobspec.schema.json", "../testdata/fuzz/FuzzParseJobSpec/*", func(b []byte) error { _, err := spec.ParseJobSpec(b, now); return err }},
		{"jobspec.schema.json", "../../../examples/*job.yaml", func(b []byte) error { _, err := spec.ParseJobSpec(b, now); return err }},
		{"jobspec.schema.json", "../../../examples/*/job*.yaml", func(b []byte) error { _, err := spec.ParseJobSpec(b, now); return err }},
		{"servicespec.schema.json", "../testdata/fuzz/FuzzParseServiceSpec/*", func(b []byte) error { _, err := spec.ParseServiceSpec(b); return err }},
		{"servicespec.schema.json", "../../../examples/service.yaml", func(b []byte) error { _, err := spec.ParseServiceSpec(b); return err }},
		{"devspec.schema.json", "../../../examples/dev-*.yaml", func(b []byte) error { _, err := spec.ParseDevSpec(b); return err }},
	}
	accepted := 0
	for _, tc := range cases {
		s := compile(t, tc.schema)
		paths, _ := filepath.Glob(tc.glob)
		for _, path := range paths {
			doc := readDoc(t, path)
			if tc.parse(doc) != nil {
				continue
			}
			accepted++
			if err := s.Validate(instance(t, doc)); err != nil {
				t.Errorf("%s: refuel accepts it, %s refuses it: %v", path, tc.schema, err)
			}
		}
	}
	if accepted < 6 {
		t.Errorf("only %d accepted documents checked; the corpus lost its valid seeds", accepted)
	}
}

// readDoc reads an example, or a seed of a fuzz corpus ([]byte("…")).
func readDoc(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	body, ok := bytes.CutPrefix(b, []byte("go test fuzz v1\n[]byte("))
	if !ok {
		return b
	}
	s, err := strconv.Unquote(string(bytes.TrimSuffix(bytes.TrimSpace(body), []byte(")"))))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(s)
}

// And the limits are in the schema: what they refuse, it refuses.
func TestSchemaRefusesWhatTheLimitsRefuse(t *testing.T) {
	s := compile(t, "jobspec.schema.json")
	cases := map[string]string{
		"unknown field":     `{"id":"a","work":"1h","teem":"x"}`,
		"nested unknown":    `{"id":"a","work":"1h","resources":{"gpu":1}}`,
		"no work":           `{"id":"a"}`,
		"bad id":            `{"id":"Bad ID","work":"1h"}`,
		"team of 100 KB":    fmt.Sprintf(`{"id":"a","work":"1h","team":%q}`, strings.Repeat("t", 100<<10)),
		"too many zones":    fmt.Sprintf(`{"id":"a","work":"1h","resources":{"zones":%s}}`, zones(spec.MaxZones+1)),
		"a REFUEL_ var":     `{"id":"a","work":"1h","env":{"REFUEL_JOB_ID":"x"}}`,
		"an odd env name":   `{"id":"a","work":"1h","env":{"1X":"x"}}`,
		"too many nodes":    `{"id":"a","work":"1h","resources":{"nodes":257}}`,
		"negative nodes":    `{"id":"a","work":"1h","resources":{"nodes":-1}}`,
		"nodes of a half":   `{"id":"a","work":"1h","resources":{"nodes":1.5}}`,
		"same_zone a word":  `{"id":"a","work":"1h","resources":{"nodes":2,"same_zone":"yes"}}`,
		"bad duration":      `{"id":"a","work":"forever"}`,
		"bad tier":          `{"id":"a","work":"1h","tier":"urgent"}`,
		"max_restarts":      `{"id":"a","work":"1h","max_restarts":101}`,
		"bad deadline":      `{"id":"a","work":"1h","deadline":"tomorrow"}`,
		"checkpoint scheme": `{"id":"a","work":"1h","checkpoint":{"url":"ftp://x"}}`,
	}
	for name, doc := range cases {
		var v any
		if err := json.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatal(err)
		}
		if s.Validate(v) == nil {
			t.Errorf("%s: the schema accepts %.80s", name, doc)
		}
		if _, err := spec.ParseJobSpec([]byte(doc), time.Now()); err == nil {
			t.Errorf("%s: refuel accepts %.80s", name, doc)
		}
	}
}

// The DevSpec's schema refuses what its validation refuses for the
// fields a schema can check.
func TestDevSchemaRefusesWhatTheLimitsRefuse(t *testing.T) {
	s := compile(t, "devspec.schema.json")
	cases := map[string]string{
		"no command":         `{"id":"a"}`,
		"an empty command":   `{"id":"a","command":[]}`,
		"a job's field":      `{"id":"a","command":["x"],"work":"1h"}`,
		"deadline tier":      `{"id":"a","command":["x"],"tier":"deadline"}`,
		"relative workspace": `{"id":"a","command":["x"],"workspace":"work"}`,
		"a REFUEL_ var":      `{"id":"a","command":["x"],"env":{"REFUEL_PORT":"1"}}`,
		"bad idle":           `{"id":"a","command":["x"],"idle_timeout":"soon"}`,
	}
	for name, doc := range cases {
		var v any
		if err := json.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatal(err)
		}
		if s.Validate(v) == nil {
			t.Errorf("%s: the schema accepts %.80s", name, doc)
		}
		if _, err := spec.ParseDevSpec([]byte(doc)); err == nil {
			t.Errorf("%s: refuel accepts %.80s", name, doc)
		}
	}
}

// A gang's fields at their bounds and defaults: what refuel accepts, the
// schema accepts, and refuel reads them as documented.
func TestSchemaAcceptsGangs(t *testing.T) {
	s := compile(t, "jobspec.schema.json")
	cases := map[string]struct {
		resources string
		nodes     int
		oneZone   bool
	}{
		"one node, by default":    {`{}`, 1, true},
		"nodes 0 means 1":         {`{"nodes":0}`, 1, true},
		"nodes 1":                 {`{"nodes":1}`, 1, true},
		"a gang of 2, one zone":   {`{"nodes":2}`, 2, true},
		"the limit":               {fmt.Sprintf(`{"nodes":%d}`, spec.MaxNodes), spec.MaxNodes, true},
		"same_zone true":          {`{"nodes":4,"same_zone":true}`, 4, true},
		"same_zone false spreads": {`{"nodes":4,"same_zone":false}`, 4, false},
	}
	for name, tc := range cases {
		doc := fmt.Sprintf(`{"id":"a","work":"1h","resources":%s}`, tc.resources)
		var v any
		if err := json.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(v); err != nil {
			t.Errorf("%s: the schema refuses %s: %v", name, doc, err)
		}
		js, err := spec.ParseJobSpec([]byte(doc), time.Now())
		if err != nil {
			t.Errorf("%s: refuel refuses %s: %v", name, doc, err)
			continue
		}
		if got := js.Resources.NodeCount(); got != tc.nodes {
			t.Errorf("%s: %d nodes; want %d", name, got, tc.nodes)
		}
		if got := js.Resources.OneZone(); got != tc.oneZone {
			t.Errorf("%s: one zone %v; want %v", name, got, tc.oneZone)
		}
	}
}

func zones(n int) string {
	z := make([]string, n)
	for i := range z {
		z[i] = fmt.Sprintf("%q", fmt.Sprintf("zone-%d", i))
	}
	return "[" + strings.Join(z, ",") + "]"
}
