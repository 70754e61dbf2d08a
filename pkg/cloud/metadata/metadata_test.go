package metadata

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

func TestReadsNeedASessionToken(t *testing.T) {
	s, err := Start("i-1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cases := map[string]struct {
		method, path string
		header       map[string]string
		want         int
	}{
		"token without ttl":  {http.MethodPut, "/latest/api/token", nil, http.StatusBadRequest},
		"token with ttl":     {http.MethodPut, "/latest/api/token", map[string]string{"X-aws-ec2-metadata-token-ttl-seconds": "60"}, http.StatusOK},
		"read without token": {http.MethodGet, "/latest/meta-data/instance-id", nil, http.StatusUnauthorized},
		"read with bad one":  {http.MethodGet, "/latest/meta-data/spot/instance-action", map[string]string{"X-aws-ec2-metadata-token": "nope"}, http.StatusUnauthorized},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, s.Endpoint()+tc.path, nil)
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d; want %d", resp.StatusCode, tc.want)
			}
		})
	}
}

func TestWatchSeesEveryPublication(t *testing.T) {
	s := New("i-2")
	if s.Endpoint() != "" {
		t.Errorf("an unserved service has endpoint %q", s.Endpoint())
	}
	action, rebalance, changed := s.Watch()
	if action != nil || rebalance != nil {
		t.Fatalf("fresh service: %v, %v; want nothing pending", action, rebalance)
	}
	at := time.Date(2026, 5, 1, 12, 0, 0, 500, time.UTC)
	s.RecommendRebalance(at)
	select {
	case <-changed:
	default:
		t.Fatal("a rebalance recommendation did not close the watch")
	}
	action, rebalance, changed = s.Watch()
	if action != nil || rebalance == nil || !rebalance.Equal(at.Truncate(time.Second)) {
		t.Fatalf("after the recommendation: %v, %v", action, rebalance)
	}
	s.Interrupt("terminate", at.Add(time.Minute))
	<-changed
	action, _, changed = s.Watch()
	if action == nil || action.Action != "terminate" || !action.Time.Equal(at.Add(time.Minute).Truncate(time.Second)) {
		t.Fatalf("after the notice: %+v", action)
	}
	select {
	case <-changed:
		t.Fatal("the watch closed with nothing new published")
	default:
	}
	if err := s.Close(); err != nil {
		t.Errorf("closing an unserved service: %v", err)
	}
}

// A trainer or agent that asks the metadata service for the instance's
// address, through the AWS SDK's IMDS client as on EC2, gets the address
// the simulated clouds give their instances' peers.
func TestLocalIPv4ThroughTheSDK(t *testing.T) {
	s, err := Start("i-3")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	client := imds.New(imds.Options{Endpoint: s.Endpoint(), EnableFallback: aws.FalseTernary})
	for path, want := range map[string]string{"local-ipv4": Loopback, "instance-id": "i-3"} {
		out, err := client.GetMetadata(context.Background(), &imds.GetMetadataInput{Path: path})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		got, err := io.ReadAll(out.Content)
		out.Content.Close()
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", path, got, err, want)
		}
	}
	if got := New("i-4").LocalIPv4(); got != Loopback {
		t.Errorf("an unserved service's LocalIPv4 = %q; want %q", got, Loopback)
	}
}
