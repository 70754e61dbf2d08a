package checkpoint

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeGCS is Cloud Storage's JSON and XML APIs as Google's Go client
// speaks them to an emulator (STORAGE_EMULATOR_HOST), for what a store
// does: bucket metadata, multipart and resumable uploads, reads whole
// and ranged, listings by prefix and delimiter, deletes.
type fakeGCS struct {
	srv *httptest.Server

	mu      sync.Mutex
	buckets map[string]map[string][]byte
	uploads map[string]resumable
	next    int
}

// resumable is an upload begun and not yet finished.
type resumable struct {
	bucket, name string
	data         []byte
}

func newFakeGCS(t *testing.T, buckets ...string) *fakeGCS {
	f := &fakeGCS{buckets: map[string]map[string][]byte{}, uploads: map[string]resumable{}}
	for _, b := range buckets {
		f.buckets[b] = map[string][]byte{}
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// host is the emulator's host:port, as STORAGE_EMULATOR_HOST takes it.
func (f *fakeGCS) host() string { return strings.TrimPrefix(f.srv.URL, "http://") }

// names are the objects of bucket whose names start with prefix.
func (f *fakeGCS) names(bucket, prefix string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for name := range f.buckets[bucket] {
		if strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func (f *fakeGCS) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/upload/storage/v1/b/"):
		f.upload(w, r, strings.TrimSuffix(strings.TrimPrefix(p, "/upload/storage/v1/b/"), "/o"))
	case strings.HasPrefix(p, "/download/storage/v1/b/"):
		bucket, name, _ := strings.Cut(strings.TrimPrefix(p, "/download/storage/v1/b/"), "/o/")
		f.media(w, r, bucket, name)
	case strings.HasPrefix(p, "/storage/v1/b/"):
		rest := strings.TrimPrefix(p, "/storage/v1/b/")
		bucket, name, isObject := strings.Cut(rest, "/o/")
		bucket = strings.TrimSuffix(bucket, "/o")
		objs, ok := f.buckets[bucket]
		if !ok {
			gcsError(w, http.StatusNotFound, "The specified bucket does not exist.")
			return
		}
		switch {
		case !isObject && !strings.HasSuffix(rest, "/o"):
			writeJSON(w, map[string]any{"kind": "storage#bucket", "name": bucket, "id": bucket, "location": "US"})
		case !isObject:
			f.list(w, r, bucket)
		case r.Method == http.MethodDelete:
			if _, ok := objs[name]; !ok {
				gcsError(w, http.StatusNotFound, "No such object: "+bucket+"/"+name)
				return
			}
			delete(objs, name)
			w.WriteHeader(http.StatusNoContent)
		case r.URL.Query().Get("alt") == "media":
			f.media(w, r, bucket, name)
		default:
			data, ok := objs[name]
			if !ok {
				gcsError(w, http.StatusNotFound, "No such object: "+bucket+"/"+name)
				return
			}
			writeJSON(w, objectResource(bucket, name, data))
		}
	default: // the XML API's reads: /BUCKET/OBJECT
		bucket, name, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
		f.media(w, r, bucket, name)
	}
}

func (f *fakeGCS) upload(w http.ResponseWriter, r *http.Request, bucket string) {
	q := r.URL.Query()
	if id := q.Get("upload_id"); id != "" {
		up, ok := f.uploads[id]
		if !ok {
			gcsError(w, http.StatusNotFound, "no such upload")
			return
		}
		chunk, _ := io.ReadAll(r.Body)
		up.data = append(up.data, chunk...)
		// "bytes A-B/TOTAL" ends the upload where TOTAL is known, as
		// does "bytes */TOTAL"; "bytes A-B/*" is one chunk of more.
		if cr := r.Header.Get("Content-Range"); strings.HasSuffix(cr, "/*") {
			f.uploads[id] = up
			w.Header().Set("Range", fmt.Sprintf("bytes=0-%d", len(up.data)-1))
			w.WriteHeader(http.StatusPermanentRedirect)
			return
		}
		delete(f.uploads, id)
		f.store(w, up.bucket, up.name, up.data)
		return
	}
	if _, ok := f.buckets[bucket]; !ok {
		gcsError(w, http.StatusNotFound, "The specified bucket does not exist.")
		return
	}
	var meta struct {
		Name string `json:"name"`
	}
	switch q.Get("uploadType") {
	case "multipart":
		_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil {
			gcsError(w, http.StatusBadRequest, err.Error())
			return
		}
		mr := multipart.NewReader(r.Body, params["boundary"])
		var parts [][]byte
		for {
			part, err := mr.NextPart()
			if err != nil {
				break
			}
			b, _ := io.ReadAll(part)
			parts = append(parts, b)
		}
		if len(parts) != 2 || json.Unmarshal(parts[0], &meta) != nil {
			gcsError(w, http.StatusBadRequest, "want a multipart body of metadata and media")
			return
		}
		if meta.Name == "" {
			meta.Name = q.Get("name")
		}
		f.store(w, bucket, meta.Name, parts[1])
	case "resumable":
		_ = json.NewDecoder(r.Body).Decode(&meta)
		if meta.Name == "" {
			meta.Name = q.Get("name")
		}
		f.next++
		id := strconv.Itoa(f.next)
		f.uploads[id] = resumable{bucket: bucket, name: meta.Name}
		w.Header().Set("Location", fmt.Sprintf("%s/upload/storage/v1/b/%s/o?uploadType=resumable&upload_id=%s", f.srv.URL, bucket, id))
		w.WriteHeader(http.StatusOK)
	default:
		gcsError(w, http.StatusBadRequest, "unknown uploadType "+q.Get("uploadType"))
	}
}

func (f *fakeGCS) store(w http.ResponseWriter, bucket, name string, data []byte) {
	objs, ok := f.buckets[bucket]
	if !ok {
		gcsError(w, http.StatusNotFound, "The specified bucket does not exist.")
		return
	}
	objs[name] = bytes.Clone(data)
	writeJSON(w, objectResource(bucket, name, data))
}

func (f *fakeGCS) media(w http.ResponseWriter, r *http.Request, bucket, name string) {
	data, ok := f.buckets[bucket][name]
	if !ok {
		gcsError(w, http.StatusNotFound, "No such object: "+bucket+"/"+name)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Goog-Generation", "1")
	h.Set("X-Goog-Metageneration", "1")
	h.Set("Last-Modified", time.Unix(0, 0).UTC().Format(http.TimeFormat))
	var start, end int
	if rg := r.Header.Get("Range"); rg != "" {
		if _, err := fmt.Sscanf(rg, "bytes=%d-", &start); err != nil || start > len(data) {
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		end = len(data)
		if _, want, ok := strings.Cut(strings.TrimPrefix(rg, "bytes="), "-"); ok && want != "" {
			if n, err := strconv.Atoi(want); err == nil && n+1 < end {
				end = n + 1
			}
		}
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end-1, len(data)))
		h.Set("Content-Length", strconv.Itoa(end-start))
		w.WriteHeader(http.StatusPartialContent)
		_, _ = w.Write(data[start:end])
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
}

func (f *fakeGCS) list(w http.ResponseWriter, r *http.Request, bucket string) {
	q := r.URL.Query()
	prefix, delim := q.Get("prefix"), q.Get("delimiter")
	var names []string
	for name := range f.buckets[bucket] {
		names = append(names, name)
	}
	slices.Sort(names)
	items := []any{}
	var prefixes []string
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		if i := strings.Index(rest, delim); delim != "" && i >= 0 {
			if p := prefix + rest[:i+len(delim)]; !slices.Contains(prefixes, p) {
				prefixes = append(prefixes, p)
			}
			continue
		}
		items = append(items, objectResource(bucket, name, f.buckets[bucket][name]))
	}
	writeJSON(w, map[string]any{"kind": "storage#objects", "items": items, "prefixes": prefixes})
}

func objectResource(bucket, name string, data []byte) map[string]any {
	sum := md5.Sum(data)
	return map[string]any{
		"kind": "storage#object", "id": bucket + "/" + name + "/1", "bucket": bucket, "name": name,
		"size": strconv.Itoa(len(data)), "generation": "1", "metageneration": "1",
		"contentType": "application/octet-stream", "md5Hash": base64.StdEncoding.EncodeToString(sum[:]),
		"timeCreated": time.Unix(0, 0).UTC().Format(time.RFC3339), "updated": time.Unix(0, 0).UTC().Format(time.RFC3339),
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func gcsError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg, "errors": []any{map[string]any{"message": msg, "reason": "notFound"}}}})
}
