package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"refuel/pkg/capacity"
)

// Remote reaches the controls of a sim in another process (worker
// ec2-sim), so a control plane on the AWS provider against the sim's EC2
// endpoint can serve interruption notices for drills, as it does against
// an in-process sim.
type Remote struct {
	// Endpoint is the sim's address, as the AWS provider's endpoint URL.
	Endpoint string
	// Token is the sim's control token (worker ec2-sim
	// --control-token-file); empty for a sim whose controls are open.
	Token  string
	Client *http.Client // default http.DefaultClient
}

// Interrupt serves an interruption notice on the instance, which the sim
// takes after grace. An instance the sim does not know, or an endpoint
// that is no sim, is a *capacity.NotFoundError.
func (r Remote) Interrupt(id string, grace time.Duration) (time.Time, error) {
	form := url.Values{"instance": {id}, "grace": {grace.String()}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(r.Endpoint, "/")+"/sim/interrupt", strings.NewReader(form.Encode()))
	if err != nil {
		return time.Time{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	c := r.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return time.Time{}, fmt.Errorf("sim controls at %s: %w", r.Endpoint, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return time.Time{}, &capacity.NotFoundError{ID: id}
	case resp.StatusCode == http.StatusUnauthorized:
		return time.Time{}, fmt.Errorf("sim controls at %s refused the control token: give the sim's --control-token-file to the worker as --sim-control-token-file", r.Endpoint)
	case resp.StatusCode != http.StatusOK:
		return time.Time{}, fmt.Errorf("sim controls at %s: %s: %s", r.Endpoint, resp.Status, strings.TrimSpace(string(body)))
	}
	var out struct {
		NoticeAt time.Time `json:"notice_at"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return time.Time{}, fmt.Errorf("sim controls at %s: %w", r.Endpoint, err)
	}
	return out.NoticeAt, nil
}
