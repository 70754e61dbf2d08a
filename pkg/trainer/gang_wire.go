package trainer

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"sync"
	"time"
)

// The gang's wire protocol, over one TCP connection between rank 0 and
// each other rank:
//
//	rank r → 0   hello     a length-prefixed JSON object: protocol, job, attempt, rank, nodes, seed, features, steps
//	0 → rank r   welcome   a length-prefixed JSON object, {} once every rank has joined, {"error": why}, or {"stopped": true}
//	0 → rank r   frame     the step to resume from and the weights
//	then, for every step n:
//	rank r → 0   frame     stop?, n, the gradient of rank r's shard at the weights of step n
//	0 → rank r   frame     stop?, n+1, the weights after step n+1
//
// A frame is a flags byte (1: stop after this step), the step as a
// little-endian int64 and the floats as little-endian float64 bits:
// gradients and weights cross the wire exactly.
const protocol = "refuel-demo-gang/1"

// maxHandshake bounds a hello or welcome, so a stray connection cannot
// make rank 0 allocate much.
const maxHandshake = 4 << 10

// helloTimeout is how long rank 0 waits for what a new connection says.
const helloTimeout = 10 * time.Second

type hello struct {
	Protocol string `json:"protocol"`
	Job      string `json:"job"`
	Attempt  string `json:"attempt"`
	Rank     int    `json:"rank"`
	Nodes    int    `json:"nodes"`
	Seed     uint64 `json:"seed"`
	Features int    `json:"features"`
	Steps    int64  `json:"steps"`
}

// mismatch says how a rank's hello differs from rank 0's own, "" when it
// belongs to the same gang.
func (h hello) mismatch(want hello) string {
	switch {
	case h.Protocol != want.Protocol:
		return fmt.Sprintf("protocol %q, not %q", h.Protocol, want.Protocol)
	case h.Job != want.Job || h.Attempt != want.Attempt:
		return fmt.Sprintf("job %q attempt %q, not job %q attempt %q", h.Job, h.Attempt, want.Job, want.Attempt)
	case h.Nodes != want.Nodes:
		return fmt.Sprintf("a gang of %d nodes, not %d", h.Nodes, want.Nodes)
	case h.Seed != want.Seed || h.Features != want.Features || h.Steps != want.Steps:
		return fmt.Sprintf("seed %d, %d features, %d steps; not seed %d, %d features, %d steps",
			h.Seed, h.Features, h.Steps, want.Seed, want.Features, want.Steps)
	case h.Rank < 1 || h.Rank >= want.Nodes:
		return fmt.Sprintf("rank %d, not one of 1 to %d", h.Rank, want.Nodes-1)
	}
	return ""
}

// welcome answers a hello: Error refuses the rank; Stopped says rank 0
// was asked to stop before every rank had joined, so this one stops too.
type welcome struct {
	Error   string `json:"error,omitempty"`
	Stopped bool   `json:"stopped,omitempty"`
}

func writeMessage(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(binary.LittleEndian.AppendUint32(nil, uint32(len(b))), b...)
	_, err = w.Write(b)
	return err
}

func readMessage(r io.Reader, v any) error {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return err
	}
	size := binary.LittleEndian.Uint32(n[:])
	if size > maxHandshake {
		return fmt.Errorf("a handshake of %d bytes, more than %d", size, maxHandshake)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// frame is a step's message: a gradient to rank 0, weights from it.
type frame struct {
	stop bool
	step int64
	vec  []float64
}

func encodeFrame(buf []byte, f frame) []byte {
	flags := byte(0)
	if f.stop {
		flags = 1
	}
	buf = append(buf[:0], flags)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(f.step))
	for _, v := range f.vec {
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
	}
	return buf
}

// decodeFrame reads a frame of features floats into vec's storage.
func decodeFrame(r io.Reader, buf []byte, vec []float64) (frame, error) {
	if _, err := io.ReadFull(r, buf); err != nil {
		return frame{}, err
	}
	if buf[0] > 1 {
		return frame{}, fmt.Errorf("a frame with flags %#x", buf[0])
	}
	for j := range vec {
		vec[j] = math.Float64frombits(binary.LittleEndian.Uint64(buf[9+8*j:]))
	}
	return frame{stop: buf[0] == 1, step: int64(binary.LittleEndian.Uint64(buf[1:])), vec: vec}, nil
}

// link is one connection between rank 0 and another rank.
type link struct {
	conn net.Conn
	rank int // the other rank, as rank 0 sees it; 0 for a rank's link to rank 0
	pat  *patience
	out  []byte
	in   []byte
	vec  []float64
}

func newLink(conn net.Conn, rank, features int, pat *patience) *link {
	pat.add(conn)
	return &link{conn: conn, rank: rank, pat: pat, in: make([]byte, 9+8*features), vec: make([]float64, features)}
}

// send writes a frame within the gang's patience.
func (l *link) send(f frame) error {
	if err := l.pat.arm(l.conn); err != nil {
		return err
	}
	l.out = encodeFrame(l.out, f)
	_, err := l.conn.Write(l.out)
	return l.pat.explain(err)
}

// receive reads the frame of step, within the gang's patience. The
// frame's floats are the link's own, valid until the next receive.
func (l *link) receive(step int64) (frame, error) {
	if err := l.pat.arm(l.conn); err != nil {
		return frame{}, err
	}
	f, err := decodeFrame(l.conn, l.in, l.vec)
	if err != nil {
		return frame{}, l.pat.explain(err)
	}
	if f.step != step {
		return frame{}, fmt.Errorf("a frame of step %d, not %d", f.step, step)
	}
	return f, nil
}

// patience gives every exchange of a gang's links its deadline: the peer
// timeout from now, and once this rank is asked to stop, stopWait from
// then at the latest. Its lock makes that change reach an exchange under
// way as well as the next ones.
type patience struct {
	timeout time.Duration

	mu      sync.Mutex
	stopAt  time.Time
	conns   []net.Conn
	stopped bool
}

func (p *patience) add(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
}

func (p *patience) deadlineLocked() time.Time {
	d := time.Now().Add(p.timeout)
	if !p.stopAt.IsZero() {
		if s := p.stopAt.Add(stopWait); s.Before(d) {
			d = s
		}
	}
	return d
}

func (p *patience) arm(c net.Conn) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return c.SetDeadline(p.deadlineLocked())
}

// stop shortens every exchange from now on, and the ones under way.
func (p *patience) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.stopped, p.stopAt = true, time.Now()
	for _, c := range p.conns {
		_ = c.SetDeadline(p.deadlineLocked())
	}
}

// close ends every link at once: a killed trainer's, or a gang's end.
func (p *patience) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

// explain says what a deadline that passed means for the gang.
func (p *patience) explain(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.stopped {
			return fmt.Errorf("no answer within %s of the stop", stopWait)
		}
		return fmt.Errorf("no answer within %s (--peer-timeout)", p.timeout)
	}
	return err
}
