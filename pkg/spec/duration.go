package spec

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Duration is a time.Duration written as a Go duration string ("48h",
// "90m") in YAML and JSON. A bare number is read as seconds.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration as a string such as "48h0m0s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

const durationFix = "write it like 48h, 90m or 30s (a bare number is seconds)"

// UnmarshalJSON reads "48h" or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := parseDurationText(s)
		if err != nil {
			return &valueError{fmt.Sprintf("%q is not a duration", clip(s)), durationFix}
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return &valueError{fmt.Sprintf("%s is not a duration", clip(string(b))), durationFix}
	}
	// A float beyond int64 nanoseconds has no Duration: converting it
	// would wrap around to any value.
	ns := secs * float64(time.Second)
	if ns >= math.MaxInt64 || ns <= math.MinInt64 {
		return &valueError{fmt.Sprintf("%s seconds is out of range", clip(string(b))), durationFix}
	}
	*d = Duration(time.Duration(ns))
	return nil
}
