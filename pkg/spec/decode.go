package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// DecodeJobSpecJSON decodes a JobSpec as the TrainingRun workflow receives
// it, from any client: JSON only, at most MaxDocumentBytes, every key a
// field of the spec (spelt exactly), every value of its field's type. A
// problem is a *ValidationError naming each field at fault. It neither
// fills defaults nor validates values: call Normalize and Validate next.
func DecodeJobSpecJSON(data []byte) (JobSpec, error) {
	var s JobSpec
	err := decodeJSON(data, &s, "JobSpec", MaxDocumentBytes)
	return s, err
}

// DecodeServiceSpecJSON decodes a ServiceSpec as the InferenceService
// workflow receives it, as strictly as DecodeJobSpecJSON.
func DecodeServiceSpecJSON(data []byte) (ServiceSpec, error) {
	var s ServiceSpec
	err := decodeJSON(data, &s, "ServiceSpec", MaxDocumentBytes)
	return s, err
}

// DecodeStrict decodes a YAML or JSON document of at most maxBytes into
// v the way specs are decoded: unknown fields rejected, mistyped fields
// named, every problem a field error of a *ValidationError of the given
// kind ("pool config"). Other packages' documents use it so every
// document refuel reads fails the same way.
func DecodeStrict(data []byte, v any, kind string, maxBytes int) error {
	if err := checkSize(data, kind, maxBytes); err != nil {
		return err
	}
	// YAML is turned into JSON, so the JSON tags are the one schema.
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return documentError(kind, fmt.Sprintf("is neither valid YAML nor JSON: %s", clip(err.Error())), "check the indentation and quoting near the line named")
	}
	return decodeJSON(j, v, kind, -1)
}

func checkSize(data []byte, kind string, maxBytes int) error {
	switch {
	case len(bytes.TrimSpace(data)) == 0:
		return documentError(kind, "is empty", "write the spec as YAML or JSON")
	case maxBytes >= 0 && len(data) > maxBytes:
		return documentError(kind, fmt.Sprintf("is %d bytes long", len(data)), fmt.Sprintf("keep it within %d bytes: put long values in files the job reads", maxBytes))
	}
	return nil
}

func documentError(kind, problem, fix string) *ValidationError {
	return &ValidationError{Kind: kind, Fields: []*FieldError{{Field: "(document)", Problem: problem, Fix: fix}}}
}

// decodeJSON decodes one JSON value into v, strictly. A walk over the
// document alongside v's type first finds every key that is no field and
// every value its field cannot hold, all at once; encoding/json alone
// stops at the first, matches keys case-insensitively and, for values
// that decode themselves (durations, times), does not say which field
// failed.
func decodeJSON(data []byte, v any, kind string, maxBytes int) error {
	if err := checkSize(data, kind, maxBytes); err != nil {
		return err
	}
	if !json.Valid(data) {
		var syn *json.SyntaxError
		if err := json.Unmarshal(data, new(any)); errors.As(err, &syn) {
			return documentError(kind, fmt.Sprintf("is not valid JSON at byte %d: %s", syn.Offset, syn.Error()), "check the brackets, quotes and commas there")
		}
		return documentError(kind, "is not one JSON value", "send one JSON object")
	}
	w := walker{kind: kind}
	w.walk(data, reflect.TypeOf(v).Elem(), "")
	if len(w.fields) > 0 {
		return &ValidationError{Kind: kind, Fields: w.fields}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		// The walk found nothing wrong; say what the decoder did.
		return documentError(kind, clip(err.Error()), "check the document against the documented fields")
	}
	return nil
}

// walker checks a JSON document against a Go type.
type walker struct {
	kind   string
	fields []*FieldError
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	timeType        = reflect.TypeFor[time.Time]()
)

func (w *walker) add(at, problem, fix string) {
	if at == "" {
		at = "(document)"
	}
	w.fields = append(w.fields, &FieldError{Field: at, Problem: problem, Fix: fix})
}

func (w *walker) walk(raw json.RawMessage, t reflect.Type, at string) {
	if string(bytes.TrimSpace(raw)) == "null" {
		return // any field may be left at its zero value
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
			w.valueError(at, t, err)
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			w.add(at, "is "+jsonKind(raw), "write a mapping of fields")
			return
		}
		fields := jsonFields(t)
		for _, key := range slices.Sorted(maps.Keys(obj)) {
			f, ok := fields[key]
			if !ok {
				w.unknown(joinKey(at, key), key, fields)
				continue
			}
			w.walk(obj[key], f, join(at, key))
		}
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			w.add(at, "is "+jsonKind(raw), "write a list")
			return
		}
		for i, item := range items {
			w.walk(item, t.Elem(), fmt.Sprintf("%s[%d]", at, i))
		}
	case reflect.Map:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			w.add(at, "is "+jsonKind(raw), "write a mapping")
			return
		}
		for _, key := range slices.Sorted(maps.Keys(obj)) {
			w.walk(obj[key], t.Elem(), joinKey(at, key))
		}
	default:
		if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
			w.valueError(at, t, err)
		}
	}
}

// valueError turns a leaf's decoding error into a field error.
func (w *walker) valueError(at string, t reflect.Type, err error) {
	var ve *valueError
	var pe *time.ParseError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &ve):
		w.add(at, ve.problem, ve.fix)
	case t == timeType && errors.As(err, &pe):
		w.add(at, fmt.Sprintf("%q is not an RFC 3339 time", clip(pe.Value)), "write it as date, time and zone: YYYY-MM-DDThh:mm:ssZ, or an offset for Z such as +02:00")
	case t == timeType:
		w.add(at, "is not an RFC 3339 time", "write it as a string of date, time and zone: YYYY-MM-DDThh:mm:ssZ")
	case errors.As(err, &te) && strings.HasPrefix(te.Value, "number "):
		w.add(at, fmt.Sprintf("%s is out of range for %s", strings.TrimPrefix(te.Value, "number "), goKind(t)), "write a smaller value within the documented limit")
	case errors.As(err, &te):
		w.add(at, "is a "+te.Value, "write "+goKind(t))
	default:
		w.add(at, clip(err.Error()), "write "+goKind(t))
	}
}

// unknown reports a key that is no field, suggesting the field meant.
func (w *walker) unknown(at, key string, fields map[string]reflect.Type) {
	fix := "check its spelling against the documented fields, or remove it"
	switch near := nearest(key, slices.Sorted(maps.Keys(fields))); {
	case strings.EqualFold(near, key):
		fix = fmt.Sprintf("did you mean %s? Field names are case-sensitive", near)
	case near != "":
		fix = fmt.Sprintf("did you mean %s? Or remove it", near)
	}
	w.fields = append(w.fields, &FieldError{Field: at, Problem: "is not a field of a " + w.kind, Fix: fix})
}

// jsonFields maps a struct's JSON keys to their types, as encoding/json
// names them (embedded structs' fields promoted).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case name == "-" && tag == "-":
			continue
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			maps.Copy(out, jsonFields(f.Type))
			continue
		case !f.IsExported():
			continue
		case name == "":
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// nearest is the field a misspelt key most likely meant: one equal but
// for case, or within two edits; "" if none is close.
func nearest(key string, names []string) string {
	best, bestDist := "", 3
	for _, n := range names {
		if strings.EqualFold(n, key) {
			return n
		}
		if d := editDistance(strings.ToLower(key), n, bestDist); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, or limit when it
// is at least limit (long keys are not compared in full).
func editDistance(a, b string, limit int) int {
	if len(a) > 64 || len(b) > 64 || abs(len(a)-len(b)) >= limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], limit)
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

// plainKey matches keys that read well in a dotted path.
var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,127}$`)

// joinKey is the path of key under at: at.key, or at["key"] for a key
// that is empty, long or odd (a map's key is the user's).
func joinKey(at, key string) string {
	if plainKey.MatchString(key) {
		return join(at, key)
	}
	return fmt.Sprintf("%s[%q]", at, clip(key))
}

// jsonKind names what a JSON value is, for "is a list" and the like.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "empty"
	}
	switch raw[0] {
	case '{':
		return "a mapping"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "true or false"
	}
	return "a number"
}

// goKind says what a Go type takes, for "write …" fixes.
func goKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return "a mapping of fields"
}

// valueError is a value a field's own decoder refused, with the fix.
type valueError struct{ problem, fix string }

func (e *valueError) Error() string { return e.problem + "; " + e.fix }

// CheckWorkflowID returns a *ValidationError on the id unless a spec's id
// is the ID of the workflow it was started as: the contract makes them
// one, so that a start with the same ID is rejected rather than
// duplicated, whichever client started it. kind is "JobSpec" or
// "ServiceSpec".
func CheckWorkflowID(kind, specID, workflowID string) error {
	if specID == workflowID {
		return nil
	}
	return &ValidationError{Kind: kind, ID: clip(specID), Fields: []*FieldError{{
		Field:   "id",
		Problem: fmt.Sprintf("%q is not the workflow ID %q", clip(specID), clip(workflowID)),
		Fix:     "start the workflow with the spec's id as its workflow ID, as starter does",
	}}}
}
