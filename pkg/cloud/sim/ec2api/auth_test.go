package ec2api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"refuel/pkg/cloud/sim"
)

// signedEnv serves a sim that checks signatures against AKIDEXAMPLE and
// its secret, and returns its URL.
func signedEnv(t *testing.T) string {
	t.Helper()
	cloud, err := sim.New(sim.Config{Pools: []sim.PoolConfig{{Pool: smallA, Spot: points(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(cloud, nil, WithCredentials("AKIDEXAMPLE", "the-real-secret")))
	t.Cleanup(func() {
		srv.Close()
		_ = cloud.Close()
	})
	return srv.URL
}

func clientFor(endpoint, access, secret string, edit ...func(*ec2.Options)) *ec2.Client {
	return ec2.New(ec2.Options{
		Region: "us-west-2", BaseEndpoint: aws.String(endpoint), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(access, secret, ""),
	}, edit...)
}

// TestSignaturesAreChecked drives the endpoint with the real SDK: its
// signature passes, every other is AuthFailure, as on EC2.
func TestSignaturesAreChecked(t *testing.T) {
	endpoint := signedEnv(t)
	ctx := context.Background()

	good := clientFor(endpoint, "AKIDEXAMPLE", "the-real-secret")
	if _, err := good.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{}); err != nil {
		t.Fatalf("correctly signed call: %v", err)
	}
	// A call with a body and many parameters, signed over all of them.
	if _, err := good.RunInstances(ctx, &ec2.RunInstancesInput{
		InstanceType: types.InstanceTypeP32xlarge, MinCount: aws.Int32(1), MaxCount: aws.Int32(1), ImageId: aws.String("ami-1"),
		Placement: &types.Placement{AvailabilityZone: aws.String(zoneA)}, ClientToken: aws.String("signed-run"),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String("refuel:run"), Value: aws.String("r 1")}}}},
	}); err != nil {
		t.Fatalf("correctly signed RunInstances: %v", err)
	}

	// The body changed after signing, as a man in the middle would.
	tampered := clientFor(endpoint, "AKIDEXAMPLE", "the-real-secret", func(o *ec2.Options) {
		o.HTTPClient = tamperingClient{}
	})
	cases := map[string]*ec2.Client{
		"wrong secret":       clientFor(endpoint, "AKIDEXAMPLE", "a-guessed-secret"),
		"unknown access key": clientFor(endpoint, "AKIDOTHER", "the-real-secret"),
		"anonymous":          ec2.New(ec2.Options{Region: "us-west-2", BaseEndpoint: aws.String(endpoint), RetryMaxAttempts: 1, Credentials: aws.AnonymousCredentials{}}),
		"tampered body":      tampered,
	}
	for name, c := range cases {
		_, err := c.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{ZoneNames: []string{zoneA}})
		wantError(t, err, "AuthFailure", http.StatusUnauthorized)
		t.Logf("%s: %v", name, err)
	}

	// A plain form post, as curl would send it.
	resp, err := http.PostForm(endpoint, url.Values{"Action": {"DescribeAvailabilityZones"}, "Version": {Version}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unsigned form post: status %d, want 401", resp.StatusCode)
	}
}

// tamperingClient changes a request's body after it was signed.
type tamperingClient struct{}

func (tamperingClient) Do(r *http.Request) (*http.Response, error) {
	body := "Action=DescribeAvailabilityZones&Version=2016-11-15&ZoneName.1=" + zoneB
	r.Body = io.NopCloser(strings.NewReader(body))
	r.ContentLength = int64(len(body))
	return http.DefaultClient.Do(r)
}

var _ smithyhttp.ClientDo = tamperingClient{}

func TestRequireToken(t *testing.T) {
	h := RequireToken("control-token-0123", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for name, tc := range map[string]struct {
		header string
		want   int
	}{
		"no token":    {"", http.StatusUnauthorized},
		"wrong token": {"Bearer control-token-0124", http.StatusUnauthorized},
		"the token":   {"Bearer control-token-0123", http.StatusTeapot},
	} {
		r := httptest.NewRequest(http.MethodPost, "/sim/interrupt?instance=i-1", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("%s: status %d, want %d", name, w.Code, tc.want)
		}
	}
}

func TestParseCredentials(t *testing.T) {
	if id, secret, err := ParseCredentials("AKID:se:cret"); err != nil || id != "AKID" || secret != "se:cret" {
		t.Errorf("AKID:se:cret: %q %q %v", id, secret, err)
	}
	for _, bad := range []string{"", "AKID", ":secret", "AKID:"} {
		if _, _, err := ParseCredentials(bad); err == nil || !strings.Contains(err.Error(), "ACCESS:SECRET") {
			t.Errorf("%q: got %v, want an error showing ACCESS:SECRET", bad, err)
		}
	}
}
