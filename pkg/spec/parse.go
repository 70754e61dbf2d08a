package spec

import (
	"fmt"
	"os"
	"time"
)

// ParseJobSpec reads a JobSpec from YAML or JSON, rejects unknown fields
// (a typo must not silently become a default), fills defaults and
// validates it against now.
func ParseJobSpec(data []byte, now time.Time) (JobSpec, error) {
	var s JobSpec
	if err := DecodeStrict(data, &s, "JobSpec", MaxDocumentBytes); err != nil {
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
