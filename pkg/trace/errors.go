package trace

import "fmt"

// Error says which trace file is wrong and how.
type Error struct {
	File    string
	Problem string
	Err     error // the underlying cause, if any
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("trace %s %s: %v", e.File, e.Problem, e.Err)
	}
	return fmt.Sprintf("trace %s %s", e.File, e.Problem)
}

func (e *Error) Unwrap() error { return e.Err }
