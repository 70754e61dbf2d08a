package spec

// DecodeStrict decodes a YAML or JSON document into v the way specs are
// decoded: unknown fields rejected, mistyped fields named. kind labels the
// errors ("pool config"). Other packages' documents use it so every
// document refuel reads fails the same way.
func DecodeStrict(data []byte, v any, kind string) error {
	err := decodeStrict(data, v)
	if ve, ok := err.(*ValidationError); ok {
		ve.Kind = kind
	}
	return err
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
