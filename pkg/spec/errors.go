package spec

import (
	"fmt"
	"strings"
)

// FieldError names one field of a spec that is wrong and says how to fix it.
type FieldError struct {
	Field   string // dotted path as written in YAML, e.g. "resources.gpus"
	Problem string // what is wrong with the value given
	Fix     string // what to write instead
}

func (e *FieldError) Error() string {
	if e.Fix == "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Problem)
	}
	return fmt.Sprintf("%s: %s; %s", e.Field, e.Problem, e.Fix)
}

// ValidationError lists every field error found in one spec, so a user
// fixes them all in one pass instead of one per submission.
type ValidationError struct {
	Kind   string // "JobSpec", "ServiceSpec", …
	ID     string
	Fields []*FieldError
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	name := e.Kind
	if e.ID != "" {
		name = fmt.Sprintf("%s %q", e.Kind, e.ID)
	}
	fmt.Fprintf(&b, "invalid %s: %d problem(s)", name, len(e.Fields))
	for _, f := range e.Fields {
		b.WriteString("\n  - ")
		b.WriteString(f.Error())
	}
	return b.String()
}

// Has reports whether a field error names the given field.
func (e *ValidationError) Has(field string) bool {
	for _, f := range e.Fields {
		if f.Field == field {
			return true
		}
	}
	return false
}

type fieldErrors []*FieldError

func (fe *fieldErrors) add(field, problem, fix string) {
	*fe = append(*fe, &FieldError{Field: field, Problem: problem, Fix: fix})
}

func (fe fieldErrors) err(kind, id string) error {
	if len(fe) == 0 {
		return nil
	}
	return &ValidationError{Kind: kind, ID: id, Fields: fe}
}

// Add records one field error.
func (e *ValidationError) Add(field, problem, fix string) {
	e.Fields = append(e.Fields, &FieldError{Field: field, Problem: problem, Fix: fix})
}

// Err returns e when it lists a field error and nil otherwise, so a
// validator can collect into a ValidationError and return Err().
func (e *ValidationError) Err() error {
	if len(e.Fields) == 0 {
		return nil
	}
	return e
}
