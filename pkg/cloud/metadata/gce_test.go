package metadata

import (
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestGCEPreemptedHangsUntilTheNotice(t *testing.T) {
	s, err := Start("vm-1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetZone("us-central1-a")
	get := func(path string, flavor bool) (int, string, string) {
		r, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+s.HostPort()+"/computeMetadata/v1/instance/"+path, nil)
		if flavor {
			r.Header.Set("Metadata-Flavor", "Google")
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Get("ETag")
	}
	if code, _, _ := get("preempted", false); code != http.StatusForbidden {
		t.Errorf("without Metadata-Flavor: %d, want 403", code)
	}
	for path, want := range map[string]string{
		"name": "vm-1", "zone": "projects/" + GCEProjectNumber + "/zones/us-central1-a",
		"id": strconv.FormatUint(GCEInstanceID("vm-1"), 10), "preempted": "FALSE",
	} {
		if _, got, _ := get(path, true); got != want {
			t.Errorf("instance/%s = %q, want %q", path, got, want)
		}
	}
	_, _, tag := get("preempted", true)
	if _, v, _ := get("preempted?wait_for_change=true&timeout_sec=1", true); v != "FALSE" {
		t.Errorf("a wait that times out answers %q, want the unchanged FALSE", v)
	}
	answer := make(chan string, 1)
	go func() {
		_, v, _ := get("preempted?wait_for_change=true&last_etag="+tag, true)
		answer <- v
	}()
	select {
	case v := <-answer:
		t.Fatalf("the hanging GET answered %q before any notice", v)
	case <-time.After(100 * time.Millisecond):
	}
	s.Interrupt("terminate", time.Now().Add(30*time.Second))
	if v := <-answer; v != "TRUE" {
		t.Errorf("after the notice: %q, want TRUE", v)
	}
	if _, v, _ := get("preempted?wait_for_change=true&last_etag="+tag, true); v != "TRUE" {
		t.Errorf("a wait with a stale etag: %q, want TRUE at once", v)
	}
}
