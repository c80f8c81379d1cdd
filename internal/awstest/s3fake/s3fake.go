// Package s3fake is a small Amazon S3 inside a test, for real aws-sdk-go-v2
// S3 clients pointed at it with BaseEndpoint and UsePathStyle. It speaks
// S3's REST protocol with path-style addressing (/BUCKET/KEY) for single
// objects: PutObject (PUT), GetObject (GET, If-Match and If-None-Match) and
// HeadObject (HEAD). Errors are S3's XML documents (<Error><Code>NoSuchKey
// …), a HEAD's without a body, as S3 answers them. Requests must be SigV4-
// signed for the service "s3" with the server's credentials.
//
// ETags are the hex MD5 of the object in quotes, as S3 gives for objects
// uploaded in one part. Tests add buckets with AddBucket and read or
// replace objects from Go (Object, Put) to see what a client stored or to
// tamper with it.
package s3fake

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"errors"
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

// Options configure a Server.
type Options struct {
	Region      string // default us-east-1
	Credentials aws.Credentials
}

// Server is the fake S3.
type Server struct {
	URL string

	verifier sigv4check.Verifier

	mu       sync.Mutex
	buckets  map[string]map[string]Object
	afterPut []func(bucket, key string)
	calls    []Call
}

// Object is a stored object.
type Object struct {
	Data         []byte
	ETag         string // "\"<md5 hex>\""
	ContentType  string
	Metadata     map[string]string // x-amz-meta-*, lower-case names without the prefix
	LastModified time.Time
}

// Call is one request the server answered.
type Call struct {
	Method, Bucket, Key string
	Status              int
	Error               string
}

// New starts a Server; it is closed when the test ends.
func New(t testing.TB, o Options) *Server {
	t.Helper()
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	s := &Server{
		verifier: sigv4check.Verifier{KeyID: o.Credentials.AccessKeyID, Secret: o.Credentials.SecretAccessKey, Region: o.Region, Service: "s3", S3: true},
		buckets:  map[string]map[string]Object{},
	}
	srv := httptest.NewServer(s)
	s.URL = srv.URL
	t.Cleanup(srv.Close)
	return s
}

// AddBucket creates a bucket (idempotent).
func (s *Server) AddBucket(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buckets[name] == nil {
		s.buckets[name] = map[string]Object{}
	}
}

// Object is the object at key of bucket.
func (s *Server) Object(bucket, key string) (Object, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.buckets[bucket][key]
	return o, ok
}

// Put stores data at key of bucket as a PutObject would (a test tampering
// with a stored object).
func (s *Server) Put(bucket, key string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buckets[bucket][key] = newObject(data, "", nil)
}

// AfterNextPut runs fn once, with the bucket's lock released, right after
// the next successful PutObject: the way to tamper with an object between
// its writer's PutObject and its reader's GetObject.
func (s *Server) AfterNextPut(fn func(bucket, key string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.afterPut = append(s.afterPut, fn)
}

// Calls are the requests answered so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

func newObject(data []byte, contentType string, meta map[string]string) Object {
	sum := md5.Sum(data)
	if contentType == "" {
		contentType = "binary/octet-stream"
	}
	return Object{Data: data, ETag: `"` + hex.EncodeToString(sum[:]) + `"`, ContentType: contentType, Metadata: meta, LastModified: time.Now().UTC().Truncate(time.Second)}
}

type s3Error struct {
	status        int
	code, message string
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, readErr := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	s.mu.Lock()
	defer s.mu.Unlock()
	call := Call{Method: r.Method, Bucket: bucket, Key: key, Status: http.StatusOK}
	w.Header().Set("X-Amz-Request-Id", strconv.FormatInt(time.Now().UnixNano(), 36))
	if e := s.handle(w, r, bucket, key, body, readErr); e != nil {
		call.Status, call.Error = e.status, e.code
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(e.status)
		if r.Method != http.MethodHead {
			doc, _ := xml.Marshal(struct {
				XMLName xml.Name `xml:"Error"`
				Code    string
				Message string
				Key     string `xml:",omitempty"`
			}{Code: e.code, Message: e.message, Key: key})
			_, _ = w.Write(append([]byte(xml.Header), doc...))
		}
	}
	s.calls = append(s.calls, call)
	if r.Method == http.MethodPut && call.Status == http.StatusOK && len(s.afterPut) > 0 {
		fn := s.afterPut[0]
		s.afterPut = s.afterPut[1:]
		s.mu.Unlock()
		fn(bucket, key)
		s.mu.Lock()
	}
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request, bucket, key string, body []byte, readErr error) *s3Error {
	if readErr != nil {
		return &s3Error{http.StatusBadRequest, "IncompleteBody", readErr.Error()}
	}
	if f := s.verifier.Check(r, body, time.Now()); f != nil {
		return &s3Error{f.Status, f.Code, f.Message}
	}
	objects, ok := s.buckets[bucket]
	if !ok {
		return &s3Error{http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist"}
	}
	if key == "" || len(r.URL.Query()) > 0 && r.URL.Query().Get("x-id") == "" {
		return &s3Error{http.StatusNotImplemented, "NotImplemented", "s3fake answers only PutObject, GetObject and HeadObject with path-style addressing"}
	}
	switch r.Method {
	case http.MethodPut:
		if r.Header.Get("X-Amz-Copy-Source") != "" {
			return &s3Error{http.StatusNotImplemented, "NotImplemented", "CopyObject is not implemented by s3fake"}
		}
		data, err := payload(r, body)
		if err != nil {
			return &s3Error{http.StatusBadRequest, "InvalidRequest", err.Error()}
		}
		meta := map[string]string{}
		for name, vals := range r.Header {
			if m, ok := strings.CutPrefix(strings.ToLower(name), "x-amz-meta-"); ok {
				meta[m] = vals[0]
			}
		}
		o := newObject(data, r.Header.Get("Content-Type"), meta)
		objects[key] = o
		w.Header().Set("ETag", o.ETag)
		w.WriteHeader(http.StatusOK)
		return nil
	case http.MethodGet, http.MethodHead:
		o, ok := objects[key]
		if !ok {
			return &s3Error{http.StatusNotFound, "NoSuchKey", "The specified key does not exist."}
		}
		if m := r.Header.Get("If-Match"); m != "" && m != o.ETag && m != "*" {
			return &s3Error{http.StatusPreconditionFailed, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold"}
		}
		h := w.Header()
		h.Set("ETag", o.ETag)
		h.Set("Last-Modified", o.LastModified.Format(http.TimeFormat))
		h.Set("Content-Type", o.ContentType)
		h.Set("Content-Length", strconv.Itoa(len(o.Data)))
		h.Set("Accept-Ranges", "bytes")
		for k, v := range o.Metadata {
			h.Set("X-Amz-Meta-"+k, v)
		}
		if m := r.Header.Get("If-None-Match"); m != "" && (m == o.ETag || m == "*") {
			w.WriteHeader(http.StatusNotModified)
			return nil
		}
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(o.Data)
		}
		return nil
	}
	return &s3Error{http.StatusMethodNotAllowed, "MethodNotAllowed", "The specified method is not allowed against this resource."}
}

// payload is the object's bytes. The SDK sends a seekable body over plain
// HTTP as is, signed with its SHA-256; a streamed (aws-chunked) body, which
// it sends only with a trailing checksum over TLS, is refused rather than
// half understood.
func payload(r *http.Request, body []byte) ([]byte, error) {
	if strings.Contains(r.Header.Get("Content-Encoding"), "aws-chunked") || strings.HasPrefix(r.Header.Get("X-Amz-Content-Sha256"), "STREAMING-") {
		return nil, errors.New("s3fake does not take aws-chunked bodies: give PutObject a seekable body")
	}
	return body, nil
}
