// Package ec2api serves a simulated cloud (package sim) over the subset of
// EC2's Query API that refuel's AWS provider uses, with EC2's request
// parameters, XML response shapes, error codes and HTTP statuses, so that
// standard EC2 clients such as aws-sdk-go-v2 work against it. The actions
// are listed in Actions.
//
// Requests are form-encoded (POST, or GET with a query) with
// Action=…&Version=2016-11-15; signatures are checked when the handler has
// credentials (WithCredentials), and not otherwise. Every request
// counts as one API call for the sim's throttling. Parameters outside the
// subset are refused with UnknownParameter rather than ignored, except the
// machine side of a launch (image, key pair, security groups, user data,
// instance profile, metadata options, a subnet next to its zone), which is
// accepted and has no effect.
// One endpoint serves every zone of the sim, whatever the client's region.
package ec2api

import (
	"context"
	"encoding/xml"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/uuid"
	"go.uber.org/zap"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/sim"
)

const (
	// Version is the EC2 API version served.
	Version = "2016-11-15"
	// Namespace is the XML namespace of EC2's responses.
	Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"
	// OwnerID is the account the sim's reservations belong to.
	OwnerID = "123456789012"
)

// Handler is the EC2 endpoint of one simulated cloud. Safe for concurrent
// use.
type Handler struct {
	cloud *sim.Cloud
	log   *zap.Logger

	creds *aws.Credentials // nil: signatures are not checked

	mu        sync.Mutex
	tokens    map[string]*tokenUse // action/client token → its first request
	launches  map[string]launch    // instance → how it was launched here
	templates map[string]bool      // launch templates by name; nil: any exists
}

// tokenUse is a client token's first request, fingerprinted: EC2 refuses
// the same token with other parameters.
type tokenUse struct {
	fingerprint string
	launched    bool
}

type launch struct {
	reservation string
	clientToken string
	imageID     string
}

type action func(h *Handler, ctx context.Context, p *params) (response, error)

var actions = map[string]action{
	"CreateFleet":                   (*Handler).createFleet,
	"RunInstances":                  (*Handler).runInstances,
	"DescribeInstances":             (*Handler).describeInstances,
	"TerminateInstances":            (*Handler).terminateInstances,
	"StopInstances":                 (*Handler).stopInstances,
	"StartInstances":                (*Handler).startInstances,
	"CreateTags":                    (*Handler).createTags,
	"DescribeInstanceTypeOfferings": (*Handler).describeInstanceTypeOfferings,
	"DescribeInstanceTypes":         (*Handler).describeInstanceTypes,
	"DescribeAvailabilityZones":     (*Handler).describeAvailabilityZones,
	"DescribeSpotPriceHistory":      (*Handler).describeSpotPriceHistory,
	"GetSpotPlacementScores":        (*Handler).getSpotPlacementScores,
}

// Actions lists the EC2 actions served, sorted.
func Actions() []string {
	out := make([]string, 0, len(actions))
	for a := range actions {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// New returns the EC2 endpoint of cloud; log may be nil.
func New(cloud *sim.Cloud, log *zap.Logger, opts ...Option) *Handler {
	if log == nil {
		log = zap.NewNop()
	}
	h := &Handler{cloud: cloud, log: log.Named("ec2api"), tokens: map[string]*tokenUse{}, launches: map[string]launch{}}
	for _, o := range opts {
		o(h)
	}
	return h
}

// response is an action's answer; each embeds meta.
type response interface{ setMeta(requestID string) }

// meta is what every response carries besides its own fields.
type meta struct {
	XMLNS     string `xml:"xmlns,attr"`
	RequestID string `xml:"requestId"`
}

func (m *meta) setMeta(requestID string) { m.XMLNS, m.RequestID = Namespace, requestID }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	requestID := uuid.NewString()
	w.Header().Set("x-amzn-RequestId", requestID)
	start := time.Now()
	var resp response
	var err error
	if h.creds != nil {
		err = h.verify(r)
	}
	if err == nil {
		if perr := r.ParseForm(); perr != nil {
			err = errorf("MalformedQueryString", "The request could not be parsed: %v", perr)
		}
	}
	p := newParams(r.Form)
	name := p.str("Action")
	if err == nil {
		resp, err = h.serve(r.Context(), name, p)
	}
	if err != nil {
		e := asAPIError(err)
		h.log.Debug("request refused", zap.String("action", name), zap.String("code", e.Code), zap.String("message", e.Message), zap.Duration("took", time.Since(start)))
		writeXML(w, e.status(), errorResponse{Errors: []errorItem{{Code: e.Code, Message: e.Message}}, RequestID: requestID})
		return
	}
	resp.setMeta(requestID)
	h.log.Debug("request served", zap.String("action", name), zap.Duration("took", time.Since(start)))
	writeXML(w, http.StatusOK, resp)
}

func (h *Handler) serve(ctx context.Context, name string, p *params) (response, error) {
	if name == "" {
		return nil, errorf("MissingAction", "The request must contain the parameter Action")
	}
	act, ok := actions[name]
	if !ok {
		return nil, errorf("InvalidAction", "The action %s is not valid for this web service.", name)
	}
	switch v := p.str("Version"); v {
	case Version:
	case "":
		return nil, missing("Version")
	default:
		return nil, errorf("NoSuchVersion", "The requested version (%s) of service AmazonEC2 does not exist", v)
	}
	if err := h.cloud.APICall(); err != nil {
		return nil, fromSim(err)
	}
	return act(h, ctx, p)
}

// checkRequest ends the reading of a request: parameters left unread are
// refused, and a dry run stops here, as valid.
func checkRequest(p *params, dryRun bool) error {
	if err := p.leftover(); err != nil {
		return err
	}
	if dryRun {
		return errorf("DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
	}
	return nil
}

// useToken records a client token's request, or refuses the token if it
// came with other parameters before. The returned func settles the use:
// a token whose request launched nothing is forgotten, so a retry may.
func (h *Handler) useToken(name, token string, p *params) (settle func(launched bool), err error) {
	if token == "" {
		return func(bool) {}, nil
	}
	if len(token) > 64 {
		return nil, errorf(codeInvalidValue, "Value (%s) for parameter ClientToken is invalid. It must be at most 64 ASCII characters.", token)
	}
	var pairs []string
	for k, vs := range p.form {
		if k != "ClientToken" {
			pairs = append(pairs, k+"="+fmt.Sprint(vs))
		}
	}
	slices.Sort(pairs)
	fp := fmt.Sprint(pairs)
	key := name + "/" + token
	h.mu.Lock()
	defer h.mu.Unlock()
	use := h.tokens[key]
	if use == nil {
		use = &tokenUse{fingerprint: fp}
		h.tokens[key] = use
	} else if use.fingerprint != fp {
		return nil, errorf("IdempotentParameterMismatch", "Arguments on this idempotent request are inconsistent with arguments used in previous request(s).")
	}
	return func(launched bool) {
		h.mu.Lock()
		defer h.mu.Unlock()
		use.launched = use.launched || launched
		if !use.launched {
			delete(h.tokens, key)
		}
	}, nil
}

func (h *Handler) recordLaunch(id string, l launch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.launches[id] = l
}

func (h *Handler) launchOf(id string) launch {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.launches[id]
	if !ok {
		l.reservation = "r-" + id[len("i-"):] // launched through the Provider, not here
	}
	return l
}

// The error codes used in more than one place.
const (
	codeInvalidValue       = "InvalidParameterValue"
	codeInvalidCombination = "InvalidParameterCombination"
)

// apiError is one EC2 error response.
type apiError struct{ Code, Message string }

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, args ...any) *apiError {
	return &apiError{Code: code, Message: fmt.Sprintf(format, args...)}
}

func missing(param string) *apiError {
	return errorf("MissingParameter", "The request must contain the parameter %s", param)
}

func invalidValue(param, value string) *apiError {
	return errorf(codeInvalidValue, "Value (%s) for parameter %s is invalid.", value, param)
}

// status is the HTTP status EC2 answers a code with: server-side capacity
// shortages and internal errors are 500s, throttling and unavailability
// 503s (aws-sdk-go-v2 retries both by default, and backs off further on
// RequestLimitExceeded as a throttle), a dry run that would succeed 412,
// and every other error, the caller's, 400.
func (e *apiError) status() int {
	switch e.Code {
	case sim.CodeInsufficientCapacity, "InsufficientHostCapacity", "InsufficientCapacity", "InternalError":
		return http.StatusInternalServerError
	case sim.CodeRequestLimitExceeded, "Unavailable":
		return http.StatusServiceUnavailable
	case "DryRunOperation":
		return http.StatusPreconditionFailed
	case "AuthFailure":
		return http.StatusUnauthorized
	}
	return http.StatusBadRequest
}

func asAPIError(err error) *apiError {
	if e, ok := err.(*apiError); ok {
		return e
	}
	return fromSim(err)
}

// fromSim turns the sim's refusal into EC2's: the code and message of
// the failure whose class decides (capacity.ClassOf).
func fromSim(err error) *apiError {
	class := capacity.ClassOf(err)
	for _, f := range capacity.Failures(err) {
		if f.Class == class && f.Code != "" {
			return &apiError{Code: f.Code, Message: f.Message}
		}
	}
	return errorf("InternalError", "An internal error has occurred: %v", err)
}

type errorResponse struct {
	XMLName   xml.Name    `xml:"Response"`
	Errors    []errorItem `xml:"Errors>Error"`
	RequestID string      `xml:"RequestID"`
}

type errorItem struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func writeXML(w http.ResponseWriter, status int, v any) {
	body, err := xml.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(body)
}
