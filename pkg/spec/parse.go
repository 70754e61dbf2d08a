package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// ParseJobSpec reads a JobSpec from YAML or JSON, rejects unknown fields
// (a typo must not silently become a default), fills defaults and
// validates it against now.
func ParseJobSpec(data []byte, now time.Time) (JobSpec, error) {
	var s JobSpec
	if err := DecodeStrict(data, &s, "JobSpec"); err != nil {
		return JobSpec{}, err
	}
	s.Normalize()
	if err := s.Validate(now); err != nil {
		return s, err
	}
	return s, nil
}

// ReadJobSpec reads and parses a JobSpec file.
func ReadJobSpec(path string, now time.Time) (JobSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return JobSpec{}, err
	}
	s, err := ParseJobSpec(data, now)
	if err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// decodeStrict turns YAML (JSON is YAML too) into JSON and decodes that
// with unknown fields disallowed, so the JSON tags are the one schema.
func decodeStrict(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return &ValidationError{Kind: "spec", Fields: []*FieldError{{Field: "(document)", Problem: "is empty", Fix: "write the spec as YAML or JSON"}}}
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("spec is neither valid YAML nor JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	return nil
}

// decodeError names the field a decoding error is about, where Go's JSON
// decoder knows it.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return &ValidationError{Kind: "spec", Fields: []*FieldError{{
			Field: te.Field, Problem: fmt.Sprintf("is a %s", te.Value), Fix: fmt.Sprintf("write a %s", te.Type),
		}}}
	}
	var pe *time.ParseError
	if errors.As(err, &pe) {
		return &ValidationError{Kind: "spec", Fields: []*FieldError{{
			Field: "deadline", Problem: fmt.Sprintf("%q is not an RFC 3339 time", pe.Value), Fix: "write it like 2026-12-01T18:00:00Z",
		}}}
	}
	// Go's decoder has no type for an unknown field; its message is stable.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return &ValidationError{Kind: "spec", Fields: []*FieldError{{
			Field: strings.Trim(name, `"`), Problem: "is not a field of this document", Fix: "check its spelling against the documented fields, or remove it",
		}}}
	}
	return fmt.Errorf("spec: %w", err)
}
