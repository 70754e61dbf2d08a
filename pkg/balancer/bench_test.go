package balancer

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"refuel/pkg/serving"
)

// BenchmarkProxy is one small request from 32 clients per core, straight
// to a replica (direct) or through the balancer to one of three
// (balanced): ns/op is the inverse of the rate the cores sustain, client
// and replicas included (go test -bench Proxy -cpuprofile cpu.out).
func BenchmarkProxy(b *testing.B) {
	var set []serving.Replica
	for i := range 3 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = w.Write([]byte(`{"choices":[{"text":" tok0"}]}`))
		}))
		defer srv.Close()
		set = append(set, serving.Replica{ID: string(rune('a' + i)), State: serving.ReplicaReady, Endpoint: strings.TrimPrefix(srv.URL, "http://")})
	}
	bal := New("bench", nil, nil)
	bal.Update(set, serving.Settings{MaxConcurrency: 256})
	front := httptest.NewServer(bal)
	defer front.Close()
	for name, url := range map[string]string{"direct": "http://" + set[0].Endpoint, "balanced": front.URL} {
		b.Run(name, func(b *testing.B) {
			client := &http.Client{Transport: NewTransport()}
			b.ReportAllocs()
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"max_tokens":1}`))
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		})
	}
}
