package codec

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

func newKey(t *testing.T, id string) Key {
	t.Helper()
	secret := make([]byte, KeySize)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	return Key{ID: id, Secret: secret}
}

func mustCodec(t *testing.T, keys ...Key) *Codec {
	t.Helper()
	c, err := New(keys)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func jsonPayload(t *testing.T, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEncodeHidesEverythingAndDecodesBack(t *testing.T) {
	c := mustCodec(t, newKey(t, "k1"))
	in := []*commonpb.Payload{jsonPayload(t, map[string]string{"command": "python train.py --secret"}), jsonPayload(t, 42)}
	enc, err := c.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range enc {
		if got := string(p.Metadata[MetadataEncoding]); got != EncodingName {
			t.Errorf("payload %d: encoding %q, want %q", i, got, EncodingName)
		}
		if got := string(p.Metadata[MetadataKeyID]); got != "k1" {
			t.Errorf("payload %d: key ID %q, want k1", i, got)
		}
		if bytes.Contains(p.Data, []byte("train.py")) || bytes.Contains(p.Data, []byte("json/plain")) {
			t.Errorf("payload %d: sealed data shows its plaintext", i)
		}
		if len(p.Metadata) != 2 {
			t.Errorf("payload %d: metadata %v, want only encoding and key ID", i, p.Metadata)
		}
	}
	again, _ := c.Encode(in)
	if bytes.Equal(again[0].Data, enc[0].Data) {
		t.Error("two encodings of one payload are identical: the nonce is not fresh")
	}
	dec, err := c.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if !proto.Equal(dec[i], in[i]) {
			t.Errorf("payload %d: decoded %v, want %v", i, dec[i], in[i])
		}
	}
}

// TestRotation is the operator's rotation: a new key goes first, the old
// one stays to open what it sealed, and is dropped only later.
func TestRotation(t *testing.T) {
	oldKey, newKeyV := newKey(t, "2026-01"), newKey(t, "2026-02")
	before := mustCodec(t, oldKey)
	during := mustCodec(t, newKeyV, oldKey)
	after := mustCodec(t, newKeyV)

	sealedOld, _ := before.Encode([]*commonpb.Payload{jsonPayload(t, "old")})
	sealedNew, _ := during.Encode([]*commonpb.Payload{jsonPayload(t, "new")})
	if got := string(sealedNew[0].Metadata[MetadataKeyID]); got != "2026-02" {
		t.Fatalf("after rotation the first key must encrypt: got key %q", got)
	}
	if _, err := during.Decode(sealedOld); err != nil {
		t.Errorf("the rotated codec cannot open the old key's payloads: %v", err)
	}
	if _, err := before.Decode(sealedNew); err == nil {
		t.Error("a codec without the new key opened its payload")
	}
	_, err := after.Decode(sealedOld)
	var unknown *UnknownKeyError
	if !errors.As(err, &unknown) || unknown.ID != "2026-01" {
		t.Fatalf("retired key: got %v, want UnknownKeyError naming 2026-01", err)
	}
	if !strings.Contains(err.Error(), "add it back") {
		t.Errorf("error does not say how to fix it: %v", err)
	}
}

func TestDecodeRefusesTamperingAndPassesPlaintext(t *testing.T) {
	a, b := newKey(t, "a"), newKey(t, "b")
	c := mustCodec(t, a, b)
	sealed, _ := c.Encode([]*commonpb.Payload{jsonPayload(t, "x")})

	flipped := proto.Clone(sealed[0]).(*commonpb.Payload)
	flipped.Data[len(flipped.Data)-1] ^= 1
	relabelled := proto.Clone(sealed[0]).(*commonpb.Payload)
	relabelled.Metadata[MetadataKeyID] = []byte("b")
	short := proto.Clone(sealed[0]).(*commonpb.Payload)
	short.Data = short.Data[:5]
	for name, p := range map[string]*commonpb.Payload{"flipped bit": flipped, "other key ID": relabelled, "truncated": short} {
		_, err := c.Decode([]*commonpb.Payload{p})
		var open *OpenError
		if !errors.As(err, &open) {
			t.Errorf("%s: got %v, want OpenError", name, err)
		}
	}

	plain := jsonPayload(t, "written before encryption")
	out, err := c.Decode([]*commonpb.Payload{plain})
	if err != nil || !proto.Equal(out[0], plain) {
		t.Errorf("plaintext payload: got %v, %v; want it unchanged", out, err)
	}
}

func TestParseKeys(t *testing.T) {
	k := base64.StdEncoding.EncodeToString(make([]byte, KeySize))
	short := base64.StdEncoding.EncodeToString(make([]byte, 16))
	tests := map[string]struct {
		file    string
		wantIDs []string
		wantErr string // substring; "" means no error
	}{
		"one key":                   {file: "k1:" + k + "\n", wantIDs: []string{"k1"}},
		"space in an ID":            {file: "# rotated 2026-02\n\nnew:" + k + "\n  old : " + k + "  \n", wantErr: `key ID "old "`},
		"first encrypts":            {file: "new:" + k + "\nold:" + k + "\n", wantIDs: []string{"new", "old"}},
		"no colon":                  {file: k + "\n", wantErr: "line 1: want ID:BASE64KEY"},
		"empty ID":                  {file: ":" + k, wantErr: "line 1: key ID \"\": empty"},
		"bad ID":                    {file: "a/b:" + k, wantErr: "'/' is not allowed"},
		"not base64":                {file: "k1:not*base64", wantErr: "line 1: key \"k1\" is not standard base64"},
		"AES-128 key":               {file: "k1:" + short, wantErr: "is 16 bytes; AES-256 needs 32"},
		"duplicate ID":              {file: "k1:" + k + "\n# x\nk1:" + k, wantErr: "line 3: key ID \"k1\" is already used on line 1"},
		"no keys":                   {file: "# nothing yet\n", wantErr: "no keys"},
		"key after comment is read": {file: "#k0:" + k + "\nk2:" + k, wantIDs: []string{"k2"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			keys, err := ParseKeys(strings.NewReader(tc.file), "keys.txt")
			if tc.wantErr != "" {
				var kf *KeyFileError
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.As(err, &kf) {
					t.Fatalf("got %v, want a KeyFileError containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, k := range keys {
				ids = append(ids, k.ID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(tc.wantIDs) {
				t.Errorf("IDs %v, want %v", ids, tc.wantIDs)
			}
		})
	}
}

func TestReadKeysRefusesAFileOthersCanRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	line := "k1:" + base64.StdEncoding.EncodeToString(make([]byte, KeySize)) + "\n"
	if err := os.WriteFile(path, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadKeys(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("world-readable key file: got %v, want an error saying chmod 600", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if keys, err := ReadKeys(path); err != nil || len(keys) != 1 {
		t.Errorf("0600 key file: got %v, %v", keys, err)
	}
	if _, err := ReadKeys(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing key file: no error")
	}
}

// TestHandlerSpeaksTheRemoteCodecProtocol drives the handler with the
// SDK's own remote codec, the client the CLI's --codec-endpoint uses.
func TestHandlerSpeaksTheRemoteCodecProtocol(t *testing.T) {
	c := mustCodec(t, newKey(t, "k1"))
	const token = "0123456789abcdef0123"
	srv := httptest.NewServer(Handler(c, ServerOptions{Origins: []string{"http://127.0.0.1:8233"}, Token: token}))
	defer srv.Close()

	sealed, _ := c.Encode([]*commonpb.Payload{jsonPayload(t, "hello")})
	remote := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{
		Endpoint: srv.URL,
		ModifyRequest: func(r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+token)
			return nil
		},
	})
	out, err := remote.Decode(sealed)
	if err != nil {
		t.Fatal(err)
	}
	var s string
	if err := converter.GetDefaultDataConverter().FromPayload(out[0], &s); err != nil || s != "hello" {
		t.Errorf("decoded %q, %v; want hello", s, err)
	}
	reEncoded, err := remote.Encode(out)
	if err != nil || string(reEncoded[0].Metadata[MetadataKeyID]) != "k1" {
		t.Errorf("encode: %v, %v", reEncoded, err)
	}

	noToken := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{Endpoint: srv.URL})
	if _, err := noToken.Decode(sealed); err == nil {
		t.Error("decode without the token succeeded")
	}
}

func TestHandlerCORSAndAuth(t *testing.T) {
	c := mustCodec(t, newKey(t, "k1"))
	const ui, token = "http://127.0.0.1:8233", "0123456789abcdef0123"
	h := Handler(c, ServerOptions{Origins: []string{ui}, Token: token})
	body := `{"payloads":[]}`
	tests := map[string]struct {
		method, origin string
		auth           func(*http.Request)
		wantStatus     int
		wantCORS       bool
	}{
		"preflight from the UI":     {method: http.MethodOptions, origin: ui, wantStatus: http.StatusNoContent, wantCORS: true},
		"preflight from elsewhere":  {method: http.MethodOptions, origin: "http://evil.example", wantStatus: http.StatusNoContent},
		"UI without token":          {method: http.MethodPost, origin: ui, wantStatus: http.StatusUnauthorized, wantCORS: true},
		"UI with basic auth":        {method: http.MethodPost, origin: ui, auth: func(r *http.Request) { r.SetBasicAuth("", token) }, wantStatus: http.StatusOK, wantCORS: true},
		"CLI with bearer":           {method: http.MethodPost, auth: func(r *http.Request) { r.Header.Set("Authorization", "bearer "+token) }, wantStatus: http.StatusOK},
		"wrong bearer":              {method: http.MethodPost, auth: func(r *http.Request) { r.Header.Set("Authorization", "Bearer x"+token) }, wantStatus: http.StatusUnauthorized},
		"other origin with token":   {method: http.MethodPost, origin: "http://evil.example", auth: func(r *http.Request) { r.SetBasicAuth("", token) }, wantStatus: http.StatusOK},
		"browser sign-in page":      {method: http.MethodGet, auth: func(r *http.Request) { r.SetBasicAuth("me", token) }, wantStatus: http.StatusOK},
		"sign-in page without auth": {method: http.MethodGet, wantStatus: http.StatusUnauthorized},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := "/decode"
			if tc.method == http.MethodGet {
				path = "/"
			}
			r := httptest.NewRequest(tc.method, path, strings.NewReader(body))
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			if tc.auth != nil {
				tc.auth(r)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.wantStatus {
				t.Errorf("status %d, want %d (%s)", w.Code, tc.wantStatus, w.Body)
			}
			if got := w.Header().Get("Access-Control-Allow-Origin"); (got != "") != tc.wantCORS || tc.wantCORS && got != tc.origin {
				t.Errorf("Access-Control-Allow-Origin %q, want CORS %t", got, tc.wantCORS)
			}
		})
	}
}

// BenchmarkSealAndOpen measures what encryption adds to a payload of a
// JobSpec's size on its way to the history and back.
func BenchmarkSealAndOpen(b *testing.B) {
	secret := make([]byte, KeySize)
	c, err := New([]Key{{ID: "k1", Secret: secret}})
	if err != nil {
		b.Fatal(err)
	}
	p, err := converter.GetDefaultDataConverter().ToPayload(map[string]string{"spec": strings.Repeat("x", 2048)})
	if err != nil {
		b.Fatal(err)
	}
	in := []*commonpb.Payload{p}
	b.SetBytes(int64(proto.Size(p)))
	for b.Loop() {
		sealed, err := c.Encode(in)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Decode(sealed); err != nil {
			b.Fatal(err)
		}
	}
}
