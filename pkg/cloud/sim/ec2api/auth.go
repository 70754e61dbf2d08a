package ec2api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Option configures a Handler.
type Option func(*Handler)

// WithCredentials makes the endpoint check every request's Signature
// Version 4 against these credentials, as EC2 does, and refuse a request
// that is unsigned, signed with another key or too old with AuthFailure.
// Without it any signature, or none, is accepted.
func WithCredentials(accessKeyID, secretAccessKey string) Option {
	return func(h *Handler) {
		h.creds = &aws.Credentials{AccessKeyID: accessKeyID, SecretAccessKey: secretAccessKey}
	}
}

// ParseCredentials reads ACCESS:SECRET, the form of ec2-sim's
// --credentials; the secret may itself hold colons.
func ParseCredentials(s string) (accessKeyID, secretAccessKey string, err error) {
	id, secret, ok := strings.Cut(s, ":")
	if !ok || id == "" || secret == "" {
		return "", "", fmt.Errorf("credentials %q: want ACCESS:SECRET, an access key ID and its secret access key", s)
	}
	return id, secret, nil
}

// maxSkew is how far a request's signing time may be from the server's,
// as on AWS.
const maxSkew = 15 * time.Minute

// maxRequest bounds a request body: EC2's own limit is far smaller.
const maxRequest = 1 << 20

// authFailure is EC2's answer to a request it cannot authenticate.
func authFailure(format string, a ...any) *apiError {
	return errorf("AuthFailure", "AWS was not able to validate the provided access credentials: "+format, a...)
}

// verify checks r's signature by signing the same request again with the
// configured secret, using the SDK's own signer, and comparing.
func (h *Handler) verify(r *http.Request) error {
	auth := r.Header.Get("Authorization")
	const scheme = "AWS4-HMAC-SHA256 "
	if !strings.HasPrefix(auth, scheme) {
		return authFailure("the request is not signed with Signature Version 4")
	}
	fields := map[string]string{}
	for _, part := range strings.Split(auth[len(scheme):], ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || scope[4] != "aws4_request" || fields["SignedHeaders"] == "" || fields["Signature"] == "" {
		return authFailure("malformed Authorization header")
	}
	accessKey, region, service := scope[0], scope[2], scope[3]
	if subtle.ConstantTimeCompare([]byte(accessKey), []byte(h.creds.AccessKeyID)) != 1 {
		return authFailure("unknown access key %s", accessKey)
	}
	signedAt, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return authFailure("X-Amz-Date is missing or not of the form 20060102T150405Z")
	}
	if skew := time.Since(signedAt); skew > maxSkew || skew < -maxSkew {
		return authFailure("the request was signed at %s, more than %s from now", signedAt.Format(time.RFC3339), maxSkew)
	}

	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequest+1))
	if err != nil {
		return errorf("MalformedQueryString", "The request could not be read: %v", err)
	}
	if len(body) > maxRequest {
		return errorf("MalformedQueryString", "The request is larger than %d bytes", maxRequest)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	sum := sha256.Sum256(body)

	// The same request as the client signed it: only the headers it
	// signed, which the signer takes all of (host and length apart).
	again, err := http.NewRequestWithContext(context.Background(), r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return authFailure("%v", err)
	}
	signed := strings.Split(fields["SignedHeaders"], ";")
	for _, name := range signed {
		if name != "host" && name != "content-length" {
			again.Header[http.CanonicalHeaderKey(name)] = r.Header.Values(name)
		}
	}
	again.ContentLength = 0
	if slices.Contains(signed, "content-length") {
		again.ContentLength = r.ContentLength
	}
	if err := v4.NewSigner().SignHTTP(context.Background(), *h.creds, again, hex.EncodeToString(sum[:]), service, region, signedAt); err != nil {
		return authFailure("%v", err)
	}
	_, want, _ := strings.Cut(again.Header.Get("Authorization"), "Signature=")
	if subtle.ConstantTimeCompare([]byte(want), []byte(fields["Signature"])) != 1 {
		return authFailure("the signature does not match; check the secret access key")
	}
	return nil
}

// RequireToken guards next (the sim's /sim/ controls, which can take any
// instance away) with a bearer token; "" leaves it open.
func RequireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		given, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(given), []byte(token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="refuel sim"`)
			http.Error(w, fmt.Sprintf("%s: send the sim's control token as Authorization: Bearer TOKEN", r.URL.Path), http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
