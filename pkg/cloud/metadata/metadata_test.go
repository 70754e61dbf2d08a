package metadata

import (
	"net/http"
	"testing"
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
