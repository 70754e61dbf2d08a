package codec

import (
	"crypto/subtle"
	"net/http"
	"slices"
	"strings"

	"go.temporal.io/sdk/converter"
)

// DefaultServerAddr is where the worker serves the codec when keys are
// set and no --codec-server says otherwise: loopback, because whoever
// reaches it can read every payload.
const DefaultServerAddr = "127.0.0.1:8234"

// maxBody bounds a request: the Web UI sends a page of history at a time,
// and the frontend's own limit on a message is of this order.
const maxBody = 64 << 20

// ServerOptions configures Handler.
type ServerOptions struct {
	// Origins may call the codec from a browser (CORS), such as the Web
	// UI's "http://127.0.0.1:8233". Others get no CORS headers, so a page
	// from anywhere else cannot read what the codec decodes.
	Origins []string
	// Token, when set, must come with every request: as a bearer token
	// (`temporal workflow show --codec-auth "Bearer TOKEN"`, an SDK's
	// remote codec) or as the password of HTTP basic authentication, which
	// a browser asks for once when the codec server's address is opened
	// and then sends along with the Web UI's requests.
	Token string
}

// Handler serves Temporal's remote codec protocol for c: POST .../encode
// and .../decode with a JSON body of payloads, as the Web UI, the
// `temporal` CLI (--codec-endpoint) and the SDKs' remote data converters
// speak it.
func Handler(c *Codec, o ServerOptions) http.Handler {
	codec := converter.NewPayloadCodecHTTPHandler(c)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && slices.Contains(o.Origins, origin) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
			h.Add("Vary", "Origin")
		}
		// A preflight carries no credentials; it only asks whether the real
		// request may follow, which the headers above answer.
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if o.Token != "" && !authorized(r, o.Token) {
			w.Header().Set("WWW-Authenticate", `Basic realm="refuel codec", charset="UTF-8"`)
			http.Error(w, "codec server: this request carries no valid token; send Authorization: Bearer TOKEN (the token in the worker's --codec-token-file)", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodGet && r.URL.Path == "/" {
			// Where a browser lands to sign in once for the Web UI.
			_, _ = w.Write([]byte("refuel codec server: signed in; the Web UI can decode payloads now.\n"))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		codec.ServeHTTP(w, r)
	})
}

// authorized reports whether r carries token as a bearer token or as a
// basic-authentication password (any user name).
func authorized(r *http.Request, token string) bool {
	given := ""
	if _, pass, ok := r.BasicAuth(); ok {
		given = pass
	} else if auth := r.Header.Get("Authorization"); len(auth) > len("Bearer ") && strings.EqualFold(auth[:len("Bearer ")], "Bearer ") {
		given = auth[len("Bearer "):]
	}
	return given != "" && subtle.ConstantTimeCompare([]byte(given), []byte(token)) == 1
}
