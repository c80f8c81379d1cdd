// Package logsfake is a small Amazon CloudWatch Logs inside a test, for
// real aws-sdk-go-v2 CloudWatch Logs clients pointed at it with
// BaseEndpoint. It speaks the service's wire protocol (AWS JSON 1.1: POST /,
// X-Amz-Target Logs_20140328.<Op>, application/x-amz-json-1.1 both ways,
// errors as {"__type", "message"} with X-Amzn-ErrorType, SigV4 for the
// service "logs") for what a reader of one task's output needs:
//
//   - GetLogEvents (logGroupName or logGroupIdentifier, logStreamName,
//     startFromHead, nextToken, limit): pages of events with the forward
//     and backward tokens; at the end of a stream the forward token it
//     returns is the one it was given, as CloudWatch documents;
//   - PutLogEvents, for completeness of the writer's side.
//
// Tests (and ecsfake's tasks, as the awslogs driver) add events from Go with
// Append; a group must exist first (AddGroup), a stream is created by its
// first event, as the awslogs driver creates streams. Faults per operation
// (Throttle: ThrottlingException "Rate exceeded") and Calls record what
// clients did.
package logsfake

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/gantryhq/gantry/internal/awstest/sigv4check"
)

// TargetPrefix is X-Amz-Target's prefix: the service and its API version.
const TargetPrefix = "Logs_20140328."

const (
	contentType = "application/x-amz-json-1.1"
	// maxEvents is GetLogEvents' most events a page (its limit's maximum
	// and default).
	maxEvents = 10000
)

// Options configure a Server.
type Options struct {
	Region string // default us-east-1
	// Credentials are the keys requests must be signed with.
	Credentials aws.Credentials
}

// Server is the fake CloudWatch Logs.
type Server struct {
	URL string

	verifier sigv4check.Verifier

	mu     sync.Mutex
	groups map[string]map[string][]event // group → stream → events
	faults map[string][]fault
	calls  []Call
}

// Call is one request the server answered.
type Call struct {
	Operation string
	Body      []byte
	Status    int
	Error     string
}

type event struct {
	Timestamp     int64  `json:"timestamp"`
	Message       string `json:"message"`
	IngestionTime int64  `json:"ingestionTime"`
}

type fault struct {
	times, status int
	code, message string
}

// New starts a Server; it is closed when the test ends.
func New(t testing.TB, o Options) *Server {
	t.Helper()
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	s := &Server{
		verifier: sigv4check.Verifier{KeyID: o.Credentials.AccessKeyID, Secret: o.Credentials.SecretAccessKey, Region: o.Region, Service: "logs"},
		groups:   map[string]map[string][]event{},
		faults:   map[string][]fault{},
	}
	srv := httptest.NewServer(s)
	s.URL = srv.URL
	t.Cleanup(srv.Close)
	return s
}

// AddGroup creates a log group (idempotent).
func (s *Server) AddGroup(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groups[name] == nil {
		s.groups[name] = map[string][]event{}
	}
}

// Append adds one event per message to the stream of group, creating the
// stream; it reports whether the group exists.
func (s *Server) Append(group, stream string, at time.Time, messages ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[group]
	if g == nil {
		return false
	}
	for _, m := range messages {
		g[stream] = append(g[stream], event{Timestamp: at.UnixMilli(), Message: m, IngestionTime: time.Now().UnixMilli()})
	}
	return true
}

// Events are the messages of a stream, in order.
func (s *Server) Events(group, stream string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.groups[group][stream] {
		out = append(out, e.Message)
	}
	return out
}

// Throttle makes the next n calls of op fail with ThrottlingException
// (n < 0: every call from now on).
func (s *Server) Throttle(op string, n int) {
	s.FailNext(op, n, http.StatusBadRequest, "ThrottlingException", "Rate exceeded")
}

// FailNext answers the next n calls of op (n < 0: every call from now on)
// with an error of the given HTTP status and error code, e.g. 500
// ServiceUnavailableException or 400 AccessDeniedException.
func (s *Server) FailNext(op string, n, status int, code, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[op] = append(s.faults[op], fault{times: n, status: status, code: code, message: message})
}

// Calls are the requests answered so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

type apiError struct {
	status        int // 0: 400
	code, message string
}

var operations = map[string]func(*Server, []byte) (any, *apiError){
	"GetLogEvents": (*Server).getLogEvents,
	"PutLogEvents": (*Server).putLogEvents,
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, readErr := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	op, _ := strings.CutPrefix(r.Header.Get("X-Amz-Target"), TargetPrefix)
	s.mu.Lock()
	defer s.mu.Unlock()
	out, apiErr := s.handle(r, op, body, readErr)
	call := Call{Operation: op, Body: body, Status: http.StatusOK}
	w.Header().Set("Content-Type", contentType)
	if apiErr != nil {
		call.Status, call.Error = cmp.Or(apiErr.status, http.StatusBadRequest), apiErr.code
		w.Header().Set("X-Amzn-ErrorType", apiErr.code)
		out = map[string]string{"__type": apiErr.code, "message": apiErr.message}
	}
	s.calls = append(s.calls, call)
	doc, _ := json.Marshal(out)
	w.WriteHeader(call.Status)
	_, _ = w.Write(doc)
}

func (s *Server) handle(r *http.Request, op string, body []byte, readErr error) (any, *apiError) {
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		return nil, &apiError{0, "UnknownOperationException", fmt.Sprintf("%s %s is not a CloudWatch Logs request", r.Method, r.URL.Path)}
	}
	if readErr != nil {
		return nil, &apiError{0, "SerializationException", readErr.Error()}
	}
	if f := s.verifier.Check(r, body, time.Now()); f != nil {
		return nil, &apiError{code: f.Code, message: f.Message}
	}
	run, ok := operations[op]
	if !ok {
		return nil, &apiError{0, "UnknownOperationException", fmt.Sprintf("operation %q is not implemented by logsfake", op)}
	}
	if ct := r.Header.Get("Content-Type"); ct != contentType {
		return nil, &apiError{0, "SerializationException", "Content-Type must be " + contentType}
	}
	if fs := s.faults[op]; len(fs) > 0 {
		f := fs[0]
		if f.times > 0 {
			if fs[0].times--; fs[0].times == 0 {
				s.faults[op] = fs[1:]
			}
		}
		return nil, &apiError{f.status, f.code, f.message}
	}
	return run(s, body)
}

func decode(body []byte, v any) *apiError {
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return &apiError{0, "SerializationException", err.Error()}
	}
	return nil
}

func (s *Server) stream(group, identifier, stream string) ([]event, *apiError) {
	if group == "" {
		// logGroupIdentifier is a name or an ARN (…:log-group:NAME).
		group = identifier
		if i := strings.LastIndex(identifier, ":log-group:"); i >= 0 {
			group = strings.TrimSuffix(identifier[i+len(":log-group:"):], ":*")
		}
	} else if identifier != "" {
		return nil, &apiError{0, "InvalidParameterException", "LogGroupName and LogGroupIdentifier are mutually exclusive parameters."}
	}
	g, ok := s.groups[group]
	if !ok {
		return nil, &apiError{0, "ResourceNotFoundException", "The specified log group does not exist."}
	}
	events, ok := g[stream]
	if !ok {
		return nil, &apiError{0, "ResourceNotFoundException", "The specified log stream does not exist."}
	}
	return events, nil
}

// Tokens are "f/" or "b/" and a position as 56 digits, the shape
// CloudWatch's have. A forward token is the position of the next event to
// return; a backward token the position after the last event of the
// previous page.
func token(dir byte, pos int) string { return fmt.Sprintf("%c/%056d", dir, pos) }

func (s *Server) getLogEvents(body []byte) (any, *apiError) {
	var req struct {
		LogGroupName       string `json:"logGroupName"`
		LogGroupIdentifier string `json:"logGroupIdentifier"`
		LogStreamName      string `json:"logStreamName"`
		StartTime          *int64 `json:"startTime"`
		EndTime            *int64 `json:"endTime"`
		NextToken          string `json:"nextToken"`
		Limit              *int   `json:"limit"`
		StartFromHead      *bool  `json:"startFromHead"`
		Unmask             bool   `json:"unmask"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if req.LogStreamName == "" {
		return nil, &apiError{0, "InvalidParameterException", "1 validation error detected: Value null at 'logStreamName' failed to satisfy constraint: Member must not be null"}
	}
	limit := maxEvents
	if req.Limit != nil {
		if *req.Limit < 1 || *req.Limit > maxEvents {
			return nil, &apiError{0, "InvalidParameterException", fmt.Sprintf("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value between 1 and 10000", *req.Limit)}
		}
		limit = *req.Limit
	}
	events, apiErr := s.stream(req.LogGroupName, req.LogGroupIdentifier, req.LogStreamName)
	if apiErr != nil {
		return nil, apiErr
	}
	var from, to int // the page is events[from:to]
	switch {
	case req.NextToken != "":
		dir, digits, _ := strings.Cut(req.NextToken, "/")
		pos, err := strconv.Atoi(digits)
		if err != nil || len(digits) != 56 || (dir != "f" && dir != "b") || pos < 0 || pos > len(events) {
			return nil, &apiError{0, "InvalidParameterException", "The specified nextToken is invalid."}
		}
		if dir == "f" {
			from, to = pos, min(pos+limit, len(events))
		} else {
			from, to = max(0, pos-limit), pos
		}
	case req.StartFromHead != nil && *req.StartFromHead:
		from, to = 0, min(limit, len(events))
	default:
		from, to = max(0, len(events)-limit), len(events)
	}
	page := []event{}
	for _, e := range events[from:to] {
		if (req.StartTime != nil && e.Timestamp < *req.StartTime) || (req.EndTime != nil && e.Timestamp >= *req.EndTime) {
			continue
		}
		page = append(page, e)
	}
	return map[string]any{"events": page, "nextForwardToken": token('f', to), "nextBackwardToken": token('b', from)}, nil
}

func (s *Server) putLogEvents(body []byte) (any, *apiError) {
	var req struct {
		LogGroupName  string  `json:"logGroupName"`
		LogStreamName string  `json:"logStreamName"`
		LogEvents     []event `json:"logEvents"`
		SequenceToken string  `json:"sequenceToken"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if len(req.LogEvents) == 0 {
		return nil, &apiError{0, "InvalidParameterException", "1 validation error detected: Value '[]' at 'logEvents' failed to satisfy constraint: Member must have length greater than or equal to 1"}
	}
	if _, apiErr := s.stream(req.LogGroupName, "", req.LogStreamName); apiErr != nil {
		return nil, apiErr
	}
	for _, e := range req.LogEvents {
		e.IngestionTime = time.Now().UnixMilli()
		s.groups[req.LogGroupName][req.LogStreamName] = append(s.groups[req.LogGroupName][req.LogStreamName], e)
	}
	return map[string]any{}, nil
}
