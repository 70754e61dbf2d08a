package devserver

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/server/common/log/tag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestParsePortRange(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    portRange
		wantErr bool
	}{
		"the file's tab":  {in: "32768\t60999\n", want: portRange{32768, 60999}},
		"spaces":          {in: " 1024  65535 ", want: portRange{1024, 65535}},
		"one number":      {in: "32768", wantErr: true},
		"not numbers":     {in: "low high", wantErr: true},
		"upside down":     {in: "60999 32768", wantErr: true},
		"beyond the top":  {in: "32768 70000", wantErr: true},
		"zero at the low": {in: "0 60999", wantErr: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parsePortRange(c.in)
			if (err != nil) != c.wantErr {
				t.Fatalf("parsePortRange(%q) error %v; want error %v", c.in, err, c.wantErr)
			}
			if got != c.want {
				t.Errorf("parsePortRange(%q) = %v; want %v", c.in, got, c.want)
			}
		})
	}
}

func TestPickable(t *testing.T) {
	cases := map[string]struct {
		ephemeral portRange
		want      []portRange
	}{
		"linux default":             {ephemeral: portRange{32768, 60999}, want: []portRange{{10000, 19999}, {30000, 32767}, {61000, 65535}}},
		"IANA's":                    {ephemeral: portRange{49152, 65535}, want: []portRange{{10000, 19999}, {30000, 49151}}},
		"low, under lowestPicked":   {ephemeral: portRange{1024, 5000}, want: []portRange{{10000, 19999}, {30000, 65535}}},
		"straddling lowestPicked":   {ephemeral: portRange{8000, 40000}, want: []portRange{{40001, 65535}}},
		"covering the gangs' ports": {ephemeral: portRange{15000, 35000}, want: []portRange{{10000, 14999}, {35001, 65535}}},
		"everything is ephemeral":   {ephemeral: portRange{1024, 65535}, want: nil},
		"from just above the pick":  {ephemeral: portRange{10001, 65534}, want: []portRange{{10000, 10000}, {65535, 65535}}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(pickable(c.ephemeral), c.want, cmp.AllowUnexported(portRange{})); diff != "" {
				t.Errorf("pickable(%v): got(-), want(+)\n%s", c.ephemeral, diff)
			}
		})
	}
}

func TestNthPort(t *testing.T) {
	ranges := []portRange{{10, 12}, {20, 21}}
	var got []int
	for i := range 5 {
		got = append(got, nthPort(ranges, i))
	}
	if diff := cmp.Diff(got, []int{10, 11, 12, 20, 21}); diff != "" {
		t.Errorf("got(-), want(+)\n%s", diff)
	}
}

// TestFreePortsOutsideTheEphemeralRange: every port picked is one an
// outgoing connection cannot be given, and bindable.
func TestFreePortsOutsideTheEphemeralRange(t *testing.T) {
	ephemeral := ephemeralRange()
	if len(pickable(ephemeral)) == 0 {
		t.Skipf("the ephemeral range %v covers every port: the kernel picks", ephemeral)
	}
	got, err := freePorts(loopback, 20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range got {
		if p >= ephemeral.lo && p <= ephemeral.hi || p < lowestPicked || p >= gangPorts.lo && p <= gangPorts.hi {
			t.Errorf("port %d picked; want one in %v", p, pickable(ephemeral))
		}
		if seen[p] {
			t.Errorf("port %d picked twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", hostPort(p))
		if err != nil {
			t.Errorf("port %d picked free but: %v", p, err)
			continue
		}
		l.Close()
	}
	if p, err := FreePort(loopback); err != nil || p >= ephemeral.lo && p <= ephemeral.hi {
		t.Errorf("FreePort = %d, %v; want a port outside %v", p, err, ephemeral)
	}
	addr, err := reserveAddr("frontend", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	if p, _ := strconv.Atoi(port); p >= ephemeral.lo && p <= ephemeral.hi {
		t.Errorf("port 0 resolved to %s, in the ephemeral range %v", addr, ephemeral)
	}
}

// TestAHeldAddressCannotBeTakenUntilLetGo: the Web UI's port, picked for
// port 0, stays bound while the server starts, so no other listener
// takes it (the UI server would exit the process); let go, it binds.
func TestAHeldAddressCannotBeTakenUntilLetGo(t *testing.T) {
	addr, held, err := holdAddr("Web UI", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if l, err := net.Listen("tcp", addr); !errors.Is(err, syscall.EADDRINUSE) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("listening on %s while it is held: %v; want address in use", addr, err)
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s once let go: %v", addr, err)
	}
	l.Close()
}

// TestStartRetriesWhenAPickedPortIsTaken: a port picked free and taken
// before the server binds it (here the history service's, held by the
// test) makes the start pick other ports rather than fail or panic.
func TestStartRetriesWhenAPickedPortIsTaken(t *testing.T) {
	taken, err := net.Listen("tcp", hostPort(0))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	picks := 0
	pick := func(frontend string) (ports, error) {
		picks++
		p, err := pickPorts(frontend)
		if picks == 1 {
			p.history = taken.Addr().(*net.TCPAddr).Port
		}
		return p, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o, level, err := Options{FrontendAddr: "127.0.0.1:0", Logger: zap.NewNop()}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	s, err := launch(ctx, o, level, pick)
	if err != nil {
		t.Fatalf("start with the history port taken: %v", err)
	}
	defer s.Stop()
	if err := s.awaitReady(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if picks != 2 {
		t.Errorf("ports picked %d times; want 2", picks)
	}
}

func TestFatalCarriesItsError(t *testing.T) {
	bind := &net.OpError{Op: "listen", Net: "tcp", Err: syscall.EADDRINUSE}
	defer func() {
		f, ok := recover().(fatal)
		if !ok || !errors.Is(f, syscall.EADDRINUSE) {
			t.Errorf("Fatal panicked with %v; want a fatal wrapping EADDRINUSE", f)
		}
	}()
	newServerLogger(zap.NewNop(), zapcore.WarnLevel, new(atomic.Bool)).Fatal("Failed to start gRPC listener", tag.Error(bind))
}
