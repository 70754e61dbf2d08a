// Package schema holds the JSON Schemas of what pipelines submit, JobSpec,
// ServiceSpec and DevSpec, reflected from package spec's Go types and completed
// with each field's description and limits, so that pipelines written in
// any language can check a spec before they send it. The schemas are
// checked in under docs/schema; a test fails when they are stale.
package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/invopop/jsonschema"

	"refuel/pkg/spec"
)

// Files are the checked-in schemas, by file name under docs/schema.
var Files = map[string]func() *jsonschema.Schema{
	"jobspec.schema.json":     JobSpec,
	"servicespec.schema.json": ServiceSpec,
	"devspec.schema.json":     DevSpec,
}

// JobSpec is the JSON Schema of a JobSpec, the TrainingRun workflow's input.
func JobSpec() *jsonschema.Schema {
	s := reflected(reflect.TypeFor[spec.JobSpec](), jobFields)
	s.Title = "refuel JobSpec"
	s.Description = "One training run, as `starter submit` reads it (YAML or JSON) and as the TrainingRun workflow takes it (JSON). Unknown fields are refused; the workflow ID is the id."
	s.Required = []string{"id", "work"}
	return s
}

// ServiceSpec is the JSON Schema of a ServiceSpec, the InferenceService
// workflow's input.
func ServiceSpec() *jsonschema.Schema {
	s := reflected(reflect.TypeFor[spec.ServiceSpec](), serviceFields)
	s.Title = "refuel ServiceSpec"
	s.Description = "One inference service, as `starter serve` reads it (YAML or JSON) and as the InferenceService workflow takes it (JSON). Unknown fields are refused; the workflow ID is the id."
	s.Required = []string{"id", "max_replicas", "target"}
	return s
}

// DevSpec is the JSON Schema of a DevSpec, the DevEnvironment workflow's
// input.
func DevSpec() *jsonschema.Schema {
	s := reflected(reflect.TypeFor[spec.DevSpec](), devFields)
	s.Title = "refuel DevSpec"
	s.Description = "One development environment, as `starter dev up` reads it (YAML or JSON) and as the DevEnvironment workflow takes it (JSON). Unknown fields are refused; the workflow ID is the id."
	s.Required = []string{"id", "command"}
	return s
}

// Marshal is a schema as it is checked in: indented, ending in a newline.
func Marshal(s *jsonschema.Schema) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "<data-dir>" reads better than "\u003cdata-dir\u003e"
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// reflected is t's schema, every field of it described and limited as
// fields says.
func reflected(t reflect.Type, fields map[string]field) *jsonschema.Schema {
	r := &jsonschema.Reflector{
		Anonymous: true, DoNotReference: true, ExpandedStruct: true,
		// Required fields are set by hand: an omitempty tag says how a
		// field is written, not whether a spec must have it.
		RequiredFromJSONSchemaTags: true,
		Mapper:                     mapper,
	}
	s := r.ReflectFromType(t)
	for path, f := range fields {
		p := At(s, path)
		if p == nil {
			panic(fmt.Sprintf("schema: %s has no field %s", t.Name(), path))
		}
		p.Description = f.doc
		if f.limit != nil {
			f.limit(p)
		}
	}
	return s
}

// At finds the schema of a field by its path: "resources.zones",
// "schedules[].cron" (a list's items), "env{}" (a mapping's values).
func At(s *jsonschema.Schema, path string) *jsonschema.Schema {
	for part := range strings.SplitSeq(path, ".") {
		name, items := strings.CutSuffix(part, "[]")
		name, values := strings.CutSuffix(name, "{}")
		if s.Properties == nil {
			return nil
		}
		next, ok := s.Properties.Get(name)
		if !ok {
			return nil
		}
		s = next
		if items {
			s = s.Items
		}
		if values {
			s = s.AdditionalProperties
		}
		if s == nil {
			return nil
		}
	}
	return s
}

// mapper gives the types that decode themselves their schema.
func mapper(t reflect.Type) *jsonschema.Schema {
	if t == reflect.TypeFor[spec.Duration]() {
		return &jsonschema.Schema{AnyOf: []*jsonschema.Schema{
			{Type: "string", Pattern: durationPattern, MaxLength: uint64p(spec.MaxDurationText)},
			{Type: "number", Minimum: "0"},
		}}
	}
	return nil
}

// A Go duration such as 48h, 1h30m, 1.5s or 0, as a pattern; a duration
// field may also be "auto".
const (
	duration        = `0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+`
	durationPattern = "^(" + duration + ")$"
	autoOrDuration  = "^(auto|" + duration + ")$"
)

func uint64p(n int) *uint64 {
	u := uint64(n)
	return &u
}
