// Package ecsfake is a small Amazon ECS inside a test, for real aws-sdk-go-v2
// ECS clients pointed at it with BaseEndpoint. It speaks ECS's wire protocol
// (AWS JSON 1.1: POST /, X-Amz-Target AmazonEC2ContainerServiceV20141113.<Op>,
// application/x-amz-json-1.1 both ways, errors as {"__type", "message"} with
// X-Amzn-ErrorType) for the calls a scheduler of standalone tasks needs:
//
//   - ListContainerInstances (status, filter in the cluster query language:
//     attribute:NAME, ec2InstanceId and agentConnected with ==, !=, exists,
//     !exists, in, !in, joined by and/&&, or/||, not/! and parentheses);
//   - DescribeContainerInstances;
//   - StartTask (containerInstances, taskDefinition, startedBy, group) with
//     per-instance failures as ECS reports them: MISSING, AGENT,
//     RESOURCE:CPU, RESOURCE:MEMORY;
//   - ListTasks (containerInstance, family, startedBy, desiredStatus);
//   - DescribeTasks, StopTask;
//   - RunTask (launchType or capacityProviderStrategy, the awsvpc network
//     configuration, container overrides, taskRoleArn, clientToken), whose
//     tasks can run their command as local processes logging to logsfake
//     (runtask.go).
//
// It validates identifiers as ECS does: a task-definition ARN where a task
// belongs (the mistake Blox's own scheduler once shipped) is an
// InvalidParameterException "Task Identifier is invalid", not a missing task.
// Lists page with maxResults (1–100, default 100) and opaque nextTokens.
// Every request must be SigV4-signed for service "ecs" with the credentials
// the server issued (Credentials); the server signs the request again with
// the SDK's signer and compares.
//
// Tests drive the cluster from Go: add clusters, task definitions and
// instances (AddInstance), drain or disconnect an instance, terminate it
// (TerminateInstance: the instance leaves and its tasks stop), move tasks to
// RUNNING (SetTaskRunning) or stop them with an exit code
// (StopTaskWithExit, as when a container dies), make an instance refuse
// starts (RefuseStarts), and inject faults per operation (Throttle,
// FailNext). Calls records every request.
//
// A task's lifecycle: StartTask creates it PENDING (desired RUNNING; RUNNING
// at once with Options.StartRunning), it
// holds its task definition's CPU and memory on its instance until it
// stops; StopTask sets desiredStatus STOPPED and, since this fake has no
// agent to wait for, lastStatus STOPPED at once (a RUNNING task's containers
// exit 143, 128 + SIGTERM). Stopped tasks stay visible to DescribeTasks and
// ListTasks(desiredStatus STOPPED) for StoppedTaskRetention, as ECS keeps
// them for at least an hour.
package ecsfake

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Defaults of Options.
const (
	DefaultRegion  = "us-east-1"
	DefaultAccount = "123456789012"
)

// StoppedTaskRetention is how long stopped tasks stay visible.
const StoppedTaskRetention = time.Hour

// Instance statuses (ECS's ContainerInstance.status).
const (
	StatusActive   = "ACTIVE"
	StatusDraining = "DRAINING"
	StatusInactive = "INACTIVE"
)

// Task statuses.
const (
	TaskPending = "PENDING"
	TaskRunning = "RUNNING"
	TaskStopped = "STOPPED"
)

// Options configure a Server.
type Options struct {
	Region  string           // default DefaultRegion
	Account string           // default DefaultAccount
	Now     func() time.Time // default time.Now
	// MaxPageSize caps the results of one list page below the caller's
	// maxResults, as ECS may return fewer; 0: no cap but maxResults.
	MaxPageSize int
	// StartRunning makes StartTask's tasks RUNNING at once, for tests that
	// do not look at the PENDING phase; otherwise SetTaskRunning moves them.
	StartRunning bool
}

// Server is the fake ECS.
type Server struct {
	// URL is the endpoint, for BaseEndpoint.
	URL string

	srv         *httptest.Server
	region      string
	account     string
	maxPageSize int
	runAtStart  bool
	keyID       string
	secret      string

	mu       sync.Mutex
	now      func() time.Time
	clusters map[string]*cluster          // by name
	taskDefs map[string][]*taskDefinition // by family, revision i+1 at i
	faults   map[string][]fault           // by operation, in order
	hooks    map[string][]func()          // by operation, run once before it
	calls    []Call
	// sweepAt is the earliest time something stopped or deregistered may
	// be forgotten; zero: nothing to forget.
	sweepAt time.Time
	// RunTask's (runtask.go): how tasks run, and how many of the next
	// RunTask calls' tasks never start.
	processes  *Processes
	neverStart int
	runTokens  map[string][]*task // by RunTask's clientToken
}

// Call is one request the server answered.
type Call struct {
	Operation string
	Body      []byte // the request's JSON
	Status    int
	Error     string // the ECS error code, "" on success
	At        time.Time
}

type cluster struct {
	name      string
	arn       string
	instances map[string]*instance // by id
	tasks     map[string]*task     // by id
	// their ARNs sorted, the order lists page in; nil after a change
	sortedInstances, sortedTasks []string
}

type instance struct {
	id, arn, ec2ID string
	status         string
	agentConnected bool
	attributes     map[string]string
	cpu, memory    int // registered
	registeredAt   time.Time
	leftAt         time.Time // when it became INACTIVE
	refusal        *failureDoc
	tasks          map[string]*task // by id: the tasks on it the server keeps
}

type taskDefinition struct {
	family      string
	revision    int
	arn         string
	cpu, memory int
	containers  []string
	awslogs     *Awslogs
}

type task struct {
	id, arn       string
	cluster       *cluster
	instance      *instance
	def           *taskDefinition
	startedBy     string
	group         string
	lastStatus    string
	desiredStatus string
	exitCodes     map[string]int  // by container, once exited
	overrides     json.RawMessage // StartTask's, echoed as ECS does
	stoppedReason string
	stopCode      string
	version       int64
	createdAt     time.Time
	startedAt     time.Time
	stoppingAt    time.Time
	stoppedAt     time.Time
	// RunTask's tasks (runtask.go): on no instance of the server's.
	launch           string // FARGATE or EC2; "" for StartTask's (EC2)
	capacityProvider string
	proc             *process // the local process running its command, if any
	killed           bool     // StopByECS: stopped without its containers exiting
}

// holdsResources: a task holds its CPU and memory until it has stopped.
func (t *task) holdsResources() bool { return t.lastStatus != TaskStopped }

type fault struct {
	times   int // remaining; < 0: until cleared
	status  int
	code    string
	message string
}

// New starts a Server; it is closed when the test ends.
func New(t testing.TB, o Options) *Server {
	t.Helper()
	s := &Server{
		region:      o.Region,
		account:     o.Account,
		maxPageSize: o.MaxPageSize,
		runAtStart:  o.StartRunning,
		now:         o.Now,
		clusters:    map[string]*cluster{},
		taskDefs:    map[string][]*taskDefinition{},
		faults:      map[string][]fault{},
		hooks:       map[string][]func(){},
		runTokens:   map[string][]*task{},
		keyID:       "AKIA" + randomHex(8),
		secret:      randomHex(20),
	}
	if s.region == "" {
		s.region = DefaultRegion
	}
	if s.account == "" {
		s.account = DefaultAccount
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.srv = httptest.NewServer(s)
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// Region is the region requests must be signed for.
func (s *Server) Region() string { return s.region }

// Account is the account in every ARN.
func (s *Server) Account() string { return s.account }

// Config is an aws.Config for SDK clients of this server: its region,
// endpoint, credentials and HTTPClient.
func (s *Server) Config() aws.Config {
	return aws.Config{Region: s.region, BaseEndpoint: aws.String(s.URL), Credentials: s.Credentials(), HTTPClient: s.HTTPClient()}
}

// HTTPClient is an HTTP client for SDK clients of this server, so that
// every call reaches it exactly once.
//
// Why: smithy-go closes a request's body as soon as the response headers
// arrive, and its closed body then answers WriteTo with io.EOF, an error.
// When the server answers before net/http's write loop has made its final
// check for bytes past Content-Length, that check fails, the transport
// closes the connection under the response being read, and the SDK retries
// the call: ECS, and this server, see it twice. Over a real network the
// window is narrow; on a loopback under load it is 1 call in 100 and makes
// tests that count calls flaky. Hiding WriteTo makes the check read, which
// a closed body answers with a plain EOF.
func (s *Server) HTTPClient() *http.Client {
	return &http.Client{Transport: hideWriterTo{http.DefaultTransport}}
}

type hideWriterTo struct{ next http.RoundTripper }

func (h hideWriterTo) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		r = r.Clone(r.Context())
		r.Body = struct{ io.ReadCloser }{r.Body}
	}
	return h.next.RoundTrip(r)
}

// Credentials are the only keys the server accepts.
func (s *Server) Credentials() aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(s.keyID, s.secret, "")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// AddCluster creates a cluster (idempotent) and returns its ARN. Names are
// what ECS allows: 1–255 letters, digits, hyphens and underscores.
func (s *Server) AddCluster(name string) string {
	if !clusterName.MatchString(name) {
		panic(fmt.Sprintf("ecsfake: bad cluster name %q", name))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cluster(name).arn
}

func (s *Server) cluster(name string) *cluster {
	c := s.clusters[name]
	if c == nil {
		c = &cluster{
			name:      name,
			arn:       s.arn("cluster/" + name),
			instances: map[string]*instance{},
			tasks:     map[string]*task{},
		}
		s.clusters[name] = c
	}
	return c
}

func (s *Server) arn(resource string) string {
	return "arn:aws:ecs:" + s.region + ":" + s.account + ":" + resource
}

// TaskDefinition is what RegisterTaskDefinition needs of one.
type TaskDefinition struct {
	Family      string
	CPU, Memory int      // units and MiB the task holds on its instance
	Containers  []string // names; default one container named Family
	// Awslogs, when set, is its containers' log configuration (the awslogs
	// driver): RunTask's processes write their output there.
	Awslogs *Awslogs
}

// Awslogs is the awslogs log driver's options: awslogs-group and
// awslogs-stream-prefix. Each container's stream is
// PREFIX/CONTAINER/TASK-ID.
type Awslogs struct {
	Group, StreamPrefix string
}

// RegisterTaskDefinition adds the family's next revision and returns its
// ARN (arn:aws:ecs:REGION:ACCOUNT:task-definition/FAMILY:REVISION).
func (s *Server) RegisterTaskDefinition(d TaskDefinition) string {
	if !familyName.MatchString(d.Family) {
		panic(fmt.Sprintf("ecsfake: bad task definition family %q", d.Family))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	containers := slices.Clone(d.Containers)
	if len(containers) == 0 {
		containers = []string{d.Family}
	}
	rev := len(s.taskDefs[d.Family]) + 1
	td := &taskDefinition{
		family: d.Family, revision: rev, cpu: d.CPU, memory: d.Memory, containers: containers, awslogs: d.Awslogs,
		arn: s.arn(fmt.Sprintf("task-definition/%s:%d", d.Family, rev)),
	}
	s.taskDefs[d.Family] = append(s.taskDefs[d.Family], td)
	return td.arn
}

// InstanceSpec describes a container instance joining a cluster.
type InstanceSpec struct {
	Attributes  map[string]string // custom attributes; "" values have none
	CPU, Memory int               // registered; 0: 2048 units and 4096 MiB
}

// Instance is a container instance as the server holds it.
type Instance struct {
	ID, ARN, EC2InstanceID string
	Status                 string
	AgentConnected         bool
	Attributes             map[string]string
}

// AddInstance registers a container instance, ACTIVE with its agent
// connected. Like ECS it carries the ecs.* attributes every instance has
// (ecs.os-type, ecs.instance-type) besides spec's.
func (s *Server) AddInstance(clusterName string, spec InstanceSpec) Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cluster(clusterName)
	id := randomHex(16)
	attrs := map[string]string{"ecs.os-type": "linux", "ecs.instance-type": "t3.medium"}
	maps.Copy(attrs, spec.Attributes)
	in := &instance{
		id: id, arn: s.arn("container-instance/" + c.name + "/" + id),
		ec2ID: "i-" + randomHex(9)[:17], status: StatusActive, agentConnected: true,
		attributes: attrs, cpu: spec.CPU, memory: spec.Memory, registeredAt: s.now(),
		tasks: map[string]*task{},
	}
	if in.cpu == 0 {
		in.cpu = 2048
	}
	if in.memory == 0 {
		in.memory = 4096
	}
	c.instances[in.id] = in
	c.sortedInstances = nil
	return in.snapshot()
}

func (in *instance) snapshot() Instance {
	return Instance{
		ID: in.id, ARN: in.arn, EC2InstanceID: in.ec2ID, Status: in.status,
		AgentConnected: in.agentConnected, Attributes: maps.Clone(in.attributes),
	}
}

// instance and task find what a test names; an ARN the server never issued
// is a bug in the test, so they panic.
func (s *Server) instance(arn string) *instance {
	id := idOf(arn)
	for _, c := range s.clusters {
		if in := c.instances[id]; in != nil && in.arn == arn {
			return in
		}
	}
	panic("ecsfake: no container instance " + arn)
}

func (s *Server) task(arn string) *task {
	id := idOf(arn)
	for _, c := range s.clusters {
		if t := c.tasks[id]; t != nil && t.arn == arn {
			return t
		}
	}
	panic("ecsfake: no task " + arn)
}

// SetInstanceStatus sets an instance ACTIVE or DRAINING.
func (s *Server) SetInstanceStatus(arn, status string) {
	if status != StatusActive && status != StatusDraining {
		panic("ecsfake: SetInstanceStatus takes ACTIVE or DRAINING, not " + status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.instance(arn).status = status
}

// SetAgentConnected connects or disconnects an instance's ECS agent; ECS
// refuses to start tasks on a disconnected one (failure reason AGENT).
func (s *Server) SetAgentConnected(arn string, connected bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.instance(arn).agentConnected = connected
}

// RefuseStarts makes StartTask answer every start on the instance with a
// failures entry of this reason and detail (e.g. ATTRIBUTE, RESOURCE:PORTS:
// what the model does not produce by itself); reason "" lifts it.
func (s *Server) RefuseStarts(arn, reason, detail string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.instance(arn)
	in.refusal = nil
	if reason != "" {
		in.refusal = &failureDoc{ARN: in.arn, Reason: reason, Detail: detail}
	}
}

// SetAttribute sets (value != "" or present) or removes an instance's
// attribute, as PutAttributes and DeleteAttributes would.
func (s *Server) SetAttribute(arn, name, value string, present bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.instance(arn)
	if present {
		in.attributes[name] = value
	} else {
		delete(in.attributes, name)
	}
}

// TerminateInstance is the instance's EC2 host going away: the instance
// becomes INACTIVE (no longer listed, still describable for a while) and
// every task on it stops as ECS reports it, without exit codes.
func (s *Server) TerminateInstance(arn string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.instance(arn)
	now := s.now()
	in.status, in.agentConnected, in.leftAt = StatusInactive, false, now
	s.forgetAfter(now)
	for _, t := range in.tasks {
		if t.lastStatus != TaskStopped {
			t.stop(now, fmt.Sprintf("Host EC2 (instance %s) terminated.", in.ec2ID), "", nil)
		}
	}
}

// SetTaskRunning moves a PENDING task to RUNNING.
func (s *Server) SetTaskRunning(arn string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.task(arn)
	if t.lastStatus != TaskPending {
		panic("ecsfake: task " + arn + " is " + t.lastStatus + ", not PENDING")
	}
	t.lastStatus, t.startedAt = TaskRunning, s.now()
	t.version++
}

// StopTaskWithExit stops a task as when its essential container exits by
// itself: every container exits with exitCode and ECS gives the reason
// "Essential container in task exited" unless reason is set.
func (s *Server) StopTaskWithExit(arn string, exitCode int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.task(arn)
	if t.lastStatus == TaskStopped {
		panic("ecsfake: task " + arn + " has already stopped")
	}
	if reason == "" {
		reason = "Essential container in task exited"
	}
	now := s.now()
	t.stop(now, reason, "EssentialContainerExited", &exitCode)
	s.forgetAfter(now)
}

// forgetAfter notes that something stopped or left at t, to be forgotten
// StoppedTaskRetention later.
func (s *Server) forgetAfter(t time.Time) {
	at := t.Add(StoppedTaskRetention)
	if s.sweepAt.IsZero() || at.Before(s.sweepAt) {
		s.sweepAt = at
	}
}

// stop ends a task; exitCode, when set, is what every container exited
// with (a task that never ran has no exit codes).
func (t *task) stop(now time.Time, reason, code string, exitCode *int) {
	if t.desiredStatus != TaskStopped {
		t.desiredStatus, t.stoppingAt = TaskStopped, now
	}
	t.lastStatus, t.stoppedAt = TaskStopped, now
	if t.stoppedReason == "" {
		t.stoppedReason, t.stopCode = reason, code
	}
	if exitCode != nil {
		if t.startedAt.IsZero() {
			t.startedAt = now
		}
		for _, name := range t.def.containers {
			t.exitCodes[name] = *exitCode
		}
	}
	t.version++
}

// Task is a task as the server holds it.
type Task struct {
	ID, ARN, InstanceARN, TaskDefinitionARN string
	StartedBy, Group                        string
	LastStatus, DesiredStatus               string
	StoppedReason                           string
}

// Tasks returns the tasks of a cluster the server still keeps, stopped ones
// included, sorted by ARN.
func (s *Server) Tasks(clusterName string) []Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.clusters[clusterName]
	if c == nil {
		return nil
	}
	var out []Task
	for _, t := range c.tasks {
		out = append(out, Task{
			ID: t.id, ARN: t.arn, InstanceARN: t.instanceARN(), TaskDefinitionARN: t.def.arn,
			StartedBy: t.startedBy, Group: t.group, LastStatus: t.lastStatus,
			DesiredStatus: t.desiredStatus, StoppedReason: t.stoppedReason,
		})
	}
	slices.SortFunc(out, func(a, b Task) int { return strings.Compare(a.ARN, b.ARN) })
	return out
}

// Throttle answers the next times calls of operation with ECS's
// ThrottlingException ("Rate exceeded"); times < 0 throttles until
// ClearFaults.
func (s *Server) Throttle(operation string, times int) {
	s.FailNext(operation, times, 400, "ThrottlingException", "Rate exceeded")
}

// FailNext answers the next times calls of operation (times < 0: until
// ClearFaults) with an error of the given HTTP status and ECS error code,
// e.g. 500 ServerException. Faults of one operation fire in the order added.
func (s *Server) FailNext(operation string, times, status int, code, message string) {
	if _, ok := operations[operation]; !ok {
		panic("ecsfake: no operation " + operation)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[operation] = append(s.faults[operation], fault{times: times, status: status, code: code, message: message})
}

// ClearFaults drops every fault not yet fired.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = map[string][]fault{}
}

// PendingFaults counts the faults not yet fired (a persistent fault counts
// as one), so a test can check that what it injected happened.
func (s *Server) PendingFaults() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, fs := range s.faults {
		n += len(fs)
	}
	return n
}

// BeforeNext runs fn once, just before the server handles the next call of
// operation (outside the server's lock, so fn may change the cluster): the
// way to make the world change between two calls of a client.
func (s *Server) BeforeNext(operation string, fn func()) {
	if _, ok := operations[operation]; !ok {
		panic("ecsfake: no operation " + operation)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks[operation] = append(s.hooks[operation], fn)
}

// Calls returns the requests answered so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// CallsOf returns the requests of one operation answered so far.
func (s *Server) CallsOf(operation string) []Call {
	var out []Call
	for _, c := range s.Calls() {
		if c.Operation == operation {
			out = append(out, c)
		}
	}
	return out
}
