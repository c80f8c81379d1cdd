package ecsfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gantryhq/gantry/internal/awstest/sigv4check"
)

// TargetPrefix is X-Amz-Target's prefix: ECS's service name and API version.
const TargetPrefix = "AmazonEC2ContainerServiceV20141113."

const contentType = "application/x-amz-json-1.1"

// operation runs one call; it is given the request body and returns the
// response document, with the server's lock held.
type operation func(s *Server, body []byte) (any, *apiError)

var operations = map[string]operation{
	"ListContainerInstances":     (*Server).listContainerInstances,
	"DescribeContainerInstances": (*Server).describeContainerInstances,
	"StartTask":                  (*Server).startTask,
	"ListTasks":                  (*Server).listTasks,
	"DescribeTasks":              (*Server).describeTasks,
	"StopTask":                   (*Server).stopTask,
	"RunTask":                    (*Server).runTask,
}

// apiError is an error answer.
type apiError struct {
	status  int
	code    string
	message string
}

func clientError(code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, message: fmt.Sprintf(format, args...)}
}

func invalidParameter(format string, args ...any) *apiError {
	return clientError("InvalidParameterException", format, args...)
}

// ServeHTTP answers one ECS request; every request, answered with an error
// or not, is recorded in Calls.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op, _ := strings.CutPrefix(r.Header.Get("X-Amz-Target"), TargetPrefix)
	s.runHooks(op)

	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	body, readErr := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	call := Call{Operation: op, Body: body, At: now}
	out, err := s.handle(r, op, body, readErr, now)
	status := http.StatusOK
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("X-Amzn-Requestid", randomHex(16))
	if err != nil {
		status, call.Error = err.status, err.code
		w.Header().Set("X-Amzn-ErrorType", err.code)
		out = map[string]string{"__type": err.code, "message": err.message}
	}
	call.Status = status
	s.calls = append(s.calls, call)
	doc, mErr := json.Marshal(out)
	if mErr != nil {
		http.Error(w, mErr.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write(doc)
}

func (s *Server) runHooks(op string) {
	s.mu.Lock()
	hooks := s.hooks[op]
	delete(s.hooks, op)
	s.mu.Unlock()
	for _, fn := range hooks {
		fn()
	}
}

func (s *Server) handle(r *http.Request, op string, body []byte, readErr error, now time.Time) (any, *apiError) {
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		return nil, clientError("UnknownOperationException", "%s %s is not an ECS request", r.Method, r.URL.Path)
	}
	if readErr != nil {
		return nil, clientError("SerializationException", "reading the body: %v", readErr)
	}
	// Signatures are checked against the wall clock the SDK signs with, not
	// Options.Now, so tests may move the cluster's clock freely.
	if err := s.authenticate(r, body, time.Now()); err != nil {
		return nil, err
	}
	run, ok := operations[op]
	if !ok {
		return nil, clientError("UnknownOperationException", "operation %q is not implemented by ecsfake", r.Header.Get("X-Amz-Target"))
	}
	if ct := r.Header.Get("Content-Type"); ct != contentType {
		return nil, clientError("SerializationException", "Content-Type must be %s, not %q", contentType, ct)
	}
	if err := s.fireFault(op); err != nil {
		return nil, err
	}
	s.expire(now)
	return run(s, body)
}

func (s *Server) fireFault(op string) *apiError {
	fs := s.faults[op]
	if len(fs) == 0 {
		return nil
	}
	f := fs[0]
	if f.times > 0 {
		fs[0].times--
		if fs[0].times == 0 {
			s.faults[op] = fs[1:]
		}
	}
	return &apiError{status: f.status, code: f.code, message: f.message}
}

// decode reads a request document strictly: an unknown member is a
// SerializationException here, stricter than ECS may be, so that a
// misspelt field fails a test instead of being ignored.
func decode(body []byte, v any) *apiError {
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return clientError("SerializationException", "%v", err)
	}
	return nil
}

// authenticate checks the request's Signature Version 4 as ECS does
// (sigv4check), for the server's key, region and the service ecs.
func (s *Server) authenticate(r *http.Request, body []byte, now time.Time) *apiError {
	v := sigv4check.Verifier{KeyID: s.keyID, Secret: s.secret, Region: s.region, Service: "ecs"}
	if f := v.Check(r, body, now); f != nil {
		return &apiError{status: f.Status, code: f.Code, message: f.Message}
	}
	return nil
}
