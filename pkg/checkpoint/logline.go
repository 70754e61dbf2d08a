package checkpoint

import (
	"fmt"
	"strings"
	"time"
)

// LogStream says where a line of an attempt's output came from.
type LogStream string

const (
	Stdout LogStream = "stdout"
	Stderr LogStream = "stderr"
	// AgentStream is what the node agent says about the attempt: the
	// command it started, the checkpoint restored, notices, the exit.
	AgentStream LogStream = "refuel"
)

// LogLine is one line of output. Stored, it is one text line in the
// container runtime's log format (what kubelet keeps):
//
//	2026-04-27T10:00:00.123456789Z stdout F epoch 3 loss 0.12
//
// time (RFC 3339, UTC), stream, F for a full line or P for part of one
// that goes on in the next LogLine (a line cut for length), then the text.
type LogLine struct {
	Time    time.Time
	Stream  LogStream
	Partial bool
	Text    string
}

// Append adds the line's stored form, newline included, to b. A newline
// inside Text would split the record, so it is stored as a space.
func (l LogLine) Append(b []byte) []byte {
	b = l.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, ' ')
	b = append(b, l.Stream...)
	if l.Partial {
		b = append(b, " P "...)
	} else {
		b = append(b, " F "...)
	}
	b = append(b, strings.ReplaceAll(l.Text, "\n", " ")...)
	return append(b, '\n')
}

// ParseLogLine reads one stored line, without its newline.
func ParseLogLine(s string) (LogLine, error) {
	fields := strings.SplitN(s, " ", 4)
	if len(fields) < 3 {
		return LogLine{}, fmt.Errorf("log line %q: want time, stream, tag and text", s)
	}
	t, err := time.Parse(time.RFC3339Nano, fields[0])
	if err != nil {
		return LogLine{}, fmt.Errorf("log line %q: %w", s, err)
	}
	l := LogLine{Time: t, Stream: LogStream(fields[1])}
	switch fields[2] {
	case "F":
	case "P":
		l.Partial = true
	default:
		return LogLine{}, fmt.Errorf("log line %q: tag %q is neither F nor P", s, fields[2])
	}
	if len(fields) == 4 {
		l.Text = fields[3]
	}
	return l, nil
}
