package devserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
)

// startUI runs the Web UI on addr, pointed at this server's frontend, and
// waits until it answers. The UI server's Start blocks until Stop, so it runs
// in a goroutine; s.uiDone closes when it returns.
func (s *Server) startUI(ctx context.Context, addr, namespace string) error {
	host, portText, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portText)
	s.ui = uiserver.NewServer(uioptions.WithConfigProvider(&uiconfig.Config{
		TemporalGRPCAddress: dialable(s.frontendAddr),
		Host:                host,
		Port:                port,
		EnableUI:            true,
		DefaultNamespace:    namespace,
		// Plain HTTP on localhost: a Secure cookie would never be sent back.
		CORS:     uiconfig.CORS{CookieInsecure: true},
		HideLogs: true,
		// No calls out: the dev stack must work without internet.
		DisableNewsFetch:   true,
		NotifyOnNewVersion: false,
	}))
	s.uiDone = make(chan struct{})
	go func() {
		defer close(s.uiDone)
		// Start returns nil once Stop closes it; it exits the process itself
		// when it cannot listen, which reserveAddr checked beforehand.
		_ = s.ui.Start()
	}()

	s.uiURL = "http://" + dialable(addr)
	return waitForUI(ctx, s.uiURL+"/healthz", s.uiDone)
}

// waitForUI polls the UI's health endpoint until it answers 200.
func waitForUI(ctx context.Context, url string, done <-chan struct{}) error {
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("devserver: Web UI: %w", err)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devserver: Web UI at %s did not become ready: %w", url, ctx.Err())
		case <-done:
			return fmt.Errorf("devserver: Web UI at %s stopped while starting", url)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
