package ecsfake

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Limits ECS documents for the implemented calls.
const (
	maxListResults     = 100 // ListContainerInstances, ListTasks
	maxDescribe        = 100 // DescribeContainerInstances, DescribeTasks
	maxStartInstances  = 10  // StartTask's containerInstances
	maxStopReasonChars = 255
)

// sigtermExit is what a container stopped by StopTask exits with here:
// 128 + SIGTERM, as a process that honours the signal does.
var sigtermExit = 143

// Wire shapes. Field names are ECS's; timestamps are epoch seconds.

type attribute struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
}

type resource struct {
	Name         string `json:"name"`
	Type         string `json:"type"`
	IntegerValue int    `json:"integerValue"`
}

type containerInstanceDoc struct {
	ContainerInstanceARN string      `json:"containerInstanceArn"`
	EC2InstanceID        string      `json:"ec2InstanceId"`
	Status               string      `json:"status"`
	AgentConnected       bool        `json:"agentConnected"`
	RunningTasksCount    int         `json:"runningTasksCount"`
	PendingTasksCount    int         `json:"pendingTasksCount"`
	Attributes           []attribute `json:"attributes"`
	RegisteredResources  []resource  `json:"registeredResources"`
	RemainingResources   []resource  `json:"remainingResources"`
	RegisteredAt         epoch       `json:"registeredAt"`
}

type containerDoc struct {
	ContainerARN string `json:"containerArn"`
	TaskARN      string `json:"taskArn"`
	Name         string `json:"name"`
	LastStatus   string `json:"lastStatus"`
	ExitCode     *int   `json:"exitCode,omitempty"`
}

type taskDoc struct {
	TaskARN              string          `json:"taskArn"`
	ClusterARN           string          `json:"clusterArn"`
	TaskDefinitionARN    string          `json:"taskDefinitionArn"`
	ContainerInstanceARN string          `json:"containerInstanceArn,omitempty"`
	LaunchType           string          `json:"launchType"`
	LastStatus           string          `json:"lastStatus"`
	DesiredStatus        string          `json:"desiredStatus"`
	StartedBy            string          `json:"startedBy,omitempty"`
	Group                string          `json:"group"`
	Version              int64           `json:"version"`
	CPU                  string          `json:"cpu"`
	Memory               string          `json:"memory"`
	Overrides            json.RawMessage `json:"overrides,omitempty"`
	Containers           []containerDoc  `json:"containers"`
	CreatedAt            epoch           `json:"createdAt"`
	StartedAt            *epoch          `json:"startedAt,omitempty"`
	StoppingAt           *epoch          `json:"stoppingAt,omitempty"`
	StoppedAt            *epoch          `json:"stoppedAt,omitempty"`
	StoppedReason        string          `json:"stoppedReason,omitempty"`
	StopCode             string          `json:"stopCode,omitempty"`
	CapacityProviderName string          `json:"capacityProviderName,omitempty"`
}

type failureDoc struct {
	ARN    string `json:"arn"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// epoch is a time on the wire: seconds since 1970 with milliseconds.
type epoch time.Time

func (e epoch) MarshalJSON() ([]byte, error) {
	return []byte(strconv.FormatFloat(float64(time.Time(e).UnixMilli())/1000, 'f', 3, 64)), nil
}

func epochPtr(t time.Time) *epoch {
	if t.IsZero() {
		return nil
	}
	e := epoch(t)
	return &e
}

// expire forgets stopped tasks and deregistered instances older than
// StoppedTaskRetention, as ECS does. It sweeps only once something is due.
func (s *Server) expire(now time.Time) {
	if s.sweepAt.IsZero() || now.Before(s.sweepAt) {
		return
	}
	s.sweepAt = time.Time{}
	for _, c := range s.clusters {
		for id, t := range c.tasks {
			if t.lastStatus != TaskStopped {
				continue
			}
			if now.Sub(t.stoppedAt) > StoppedTaskRetention {
				delete(c.tasks, id)
				if t.instance != nil {
					delete(t.instance.tasks, id)
				}
				c.sortedTasks = nil
			} else {
				s.forgetAfter(t.stoppedAt)
			}
		}
		for id, in := range c.instances {
			if in.status != StatusInactive {
				continue
			}
			switch {
			case now.Sub(in.leftAt) <= StoppedTaskRetention:
				s.forgetAfter(in.leftAt)
			case len(in.tasks) == 0:
				delete(c.instances, id)
				c.sortedInstances = nil
			}
			// else: kept while its stopped tasks are, whose expiry is noted
		}
	}
}

// pageToken is what a nextToken carries: the last ARN returned, and a digest
// of the request it continues, so a token is refused on another query.
type pageToken struct {
	After string `json:"a"`
	Query string `json:"q"`
}

func queryDigest(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:8])
}

// page returns one page of the ARNs in sorted that match, in order, and the
// token of the next page: it starts past the token's ARN and stops at the
// first match past a full page, so a page costs what it returns and what
// it skips, not the whole cluster.
func (s *Server) page(sorted []string, match func(arn string) bool, maxResults *int, token, query string) ([]string, string, *apiError) {
	limit := maxListResults
	if maxResults != nil {
		if *maxResults < 1 || *maxResults > maxListResults {
			return nil, "", invalidParameter("maxResults must be between 1 and %d.", maxListResults)
		}
		limit = *maxResults
	}
	if s.maxPageSize > 0 {
		limit = min(limit, s.maxPageSize)
	}
	i := 0
	if token != "" {
		var pt pageToken
		raw, err := base64.RawURLEncoding.DecodeString(token)
		if err != nil || json.Unmarshal(raw, &pt) != nil || pt.Query != query {
			return nil, "", invalidParameter("Invalid nextToken.")
		}
		i = sort.SearchStrings(sorted, pt.After)
		for i < len(sorted) && sorted[i] <= pt.After {
			i++
		}
	}
	var out []string
	for ; i < len(sorted); i++ {
		if !match(sorted[i]) {
			continue
		}
		if len(out) == limit {
			raw, _ := json.Marshal(pageToken{After: out[limit-1], Query: query})
			return out, base64.RawURLEncoding.EncodeToString(raw), nil
		}
		out = append(out, sorted[i])
	}
	return out, "", nil
}

// instanceARNs and taskARNs are the cluster's ARNs, sorted; rebuilt after a
// change (nil).
func (c *cluster) instanceARNs() []string {
	if c.sortedInstances == nil {
		c.sortedInstances = make([]string, 0, len(c.instances))
		for _, in := range c.instances {
			c.sortedInstances = append(c.sortedInstances, in.arn)
		}
		slices.Sort(c.sortedInstances)
	}
	return c.sortedInstances
}

func (c *cluster) taskARNs() []string {
	if c.sortedTasks == nil {
		c.sortedTasks = make([]string, 0, len(c.tasks))
		for _, t := range c.tasks {
			c.sortedTasks = append(c.sortedTasks, t.arn)
		}
		slices.Sort(c.sortedTasks)
	}
	return c.sortedTasks
}

// idOf is the last part of an ARN the server issued.
func idOf(arn string) string { return arn[strings.LastIndexByte(arn, '/')+1:] }

var instanceStatuses = []string{StatusActive, StatusDraining, "REGISTERING", "DEREGISTERING", "REGISTRATION_FAILED"}

func (s *Server) listContainerInstances(body []byte) (any, *apiError) {
	var req struct {
		Cluster    string `json:"cluster"`
		Filter     string `json:"filter"`
		NextToken  string `json:"nextToken"`
		MaxResults *int   `json:"maxResults"`
		Status     string `json:"status"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	c, err := s.resolveCluster(req.Cluster)
	if err != nil {
		return nil, err
	}
	if req.Status != "" && !slices.Contains(instanceStatuses, req.Status) {
		return nil, invalidParameter("status must be one of %s.", strings.Join(instanceStatuses, ", "))
	}
	match := func(*instance) bool { return true }
	if req.Filter != "" {
		pred, perr := parseFilter(req.Filter)
		if perr != nil {
			return nil, invalidParameter("Invalid filter expression %q: %v", req.Filter, perr)
		}
		match = pred
	}
	listed := func(arn string) bool {
		in := c.instances[idOf(arn)]
		statusOK := in.status == req.Status || req.Status == "" && in.status != StatusInactive
		return statusOK && match(in)
	}
	out, next, err := s.page(c.instanceARNs(), listed, req.MaxResults, req.NextToken, queryDigest("ListContainerInstances", c.name, req.Filter, req.Status))
	if err != nil {
		return nil, err
	}
	return struct {
		ARNs      []string `json:"containerInstanceArns"`
		NextToken string   `json:"nextToken,omitempty"`
	}{nonNil(out), next}, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) describeContainerInstances(body []byte) (any, *apiError) {
	var req struct {
		Cluster            string   `json:"cluster"`
		ContainerInstances []string `json:"containerInstances"`
		Include            []string `json:"include"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	c, err := s.resolveCluster(req.Cluster)
	if err != nil {
		return nil, err
	}
	if len(req.ContainerInstances) == 0 || len(req.ContainerInstances) > maxDescribe {
		return nil, invalidParameter("containerInstances must name 1 to %d container instances.", maxDescribe)
	}
	docs := []containerInstanceDoc{}
	failures := []failureDoc{}
	for _, ref := range req.ContainerInstances {
		id, err := s.instanceID(c, ref)
		if err != nil {
			return nil, err
		}
		in := c.instances[id]
		if in == nil {
			failures = append(failures, failureDoc{ARN: s.arn("container-instance/" + c.name + "/" + id), Reason: "MISSING"})
			continue
		}
		docs = append(docs, s.instanceDoc(in))
	}
	return map[string]any{"containerInstances": docs, "failures": failures}, nil
}

func (s *Server) instanceDoc(in *instance) containerInstanceDoc {
	d := containerInstanceDoc{
		ContainerInstanceARN: in.arn, EC2InstanceID: in.ec2ID, Status: in.status,
		AgentConnected: in.agentConnected, RegisteredAt: epoch(in.registeredAt),
		Attributes: []attribute{},
	}
	for _, name := range slices.Sorted(maps.Keys(in.attributes)) {
		d.Attributes = append(d.Attributes, attribute{Name: name, Value: in.attributes[name]})
	}
	for _, t := range in.tasks {
		switch t.lastStatus {
		case TaskRunning:
			d.RunningTasksCount++
		case TaskPending:
			d.PendingTasksCount++
		}
	}
	cpu, mem := in.remaining()
	d.RegisteredResources = []resource{{Name: "CPU", Type: "INTEGER", IntegerValue: in.cpu}, {Name: "MEMORY", Type: "INTEGER", IntegerValue: in.memory}}
	d.RemainingResources = []resource{{Name: "CPU", Type: "INTEGER", IntegerValue: cpu}, {Name: "MEMORY", Type: "INTEGER", IntegerValue: mem}}
	return d
}

// remaining is what an instance has left for new tasks.
func (in *instance) remaining() (cpu, memory int) {
	cpu, memory = in.cpu, in.memory
	for _, t := range in.tasks {
		if t.holdsResources() {
			cpu, memory = cpu-t.def.cpu, memory-t.def.memory
		}
	}
	return cpu, memory
}

func (s *Server) startTask(body []byte) (any, *apiError) {
	var req struct {
		Cluster            string          `json:"cluster"`
		ContainerInstances []string        `json:"containerInstances"`
		TaskDefinition     string          `json:"taskDefinition"`
		StartedBy          *string         `json:"startedBy"`
		Group              *string         `json:"group"`
		Overrides          json.RawMessage `json:"overrides"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	c, err := s.resolveCluster(req.Cluster)
	if err != nil {
		return nil, err
	}
	if len(req.ContainerInstances) == 0 || len(req.ContainerInstances) > maxStartInstances {
		return nil, invalidParameter("containerInstances must name 1 to %d container instances.", maxStartInstances)
	}
	if req.TaskDefinition == "" {
		return nil, invalidParameter("taskDefinition can not be blank.")
	}
	def, err := s.resolveTaskDefinition(req.TaskDefinition)
	if err != nil {
		return nil, err
	}
	by := ""
	if req.StartedBy != nil {
		by = *req.StartedBy
		if !startedBy.MatchString(by) {
			return nil, invalidParameter("startedBy may contain up to 36 letters, numbers, hyphens, forward slashes and underscores; %q does not fit.", by)
		}
	}
	group := "family:" + def.family
	if req.Group != nil {
		group = *req.Group
	}
	ids := make([]string, len(req.ContainerInstances))
	for i, ref := range req.ContainerInstances {
		if ids[i], err = s.instanceID(c, ref); err != nil {
			return nil, err
		}
	}
	now := s.now()
	tasks := []taskDoc{}
	failures := []failureDoc{}
	for _, id := range ids {
		in := c.instances[id]
		if in == nil || in.status == StatusInactive {
			failures = append(failures, failureDoc{ARN: s.arn("container-instance/" + c.name + "/" + id), Reason: "MISSING"})
			continue
		}
		if in.refusal != nil {
			failures = append(failures, *in.refusal)
			continue
		}
		if !in.agentConnected {
			failures = append(failures, failureDoc{ARN: in.arn, Reason: "AGENT"})
			continue
		}
		cpu, mem := in.remaining()
		if def.cpu > cpu {
			failures = append(failures, failureDoc{ARN: in.arn, Reason: "RESOURCE:CPU"})
			continue
		}
		if def.memory > mem {
			failures = append(failures, failureDoc{ARN: in.arn, Reason: "RESOURCE:MEMORY"})
			continue
		}
		tid := randomHex(16)
		t := &task{
			id: tid, arn: s.arn("task/" + c.name + "/" + tid), cluster: c, instance: in, def: def,
			startedBy: by, group: group, lastStatus: TaskPending, desiredStatus: TaskRunning,
			exitCodes: map[string]int{}, version: 1, createdAt: now, overrides: req.Overrides,
		}
		if s.runAtStart {
			t.lastStatus, t.startedAt = TaskRunning, now
		}
		c.tasks[t.id] = t
		in.tasks[t.id] = t
		c.sortedTasks = nil
		tasks = append(tasks, t.doc())
	}
	return map[string]any{"tasks": tasks, "failures": failures}, nil
}

func (t *task) doc() taskDoc {
	d := taskDoc{
		TaskARN: t.arn, ClusterARN: t.cluster.arn, TaskDefinitionARN: t.def.arn,
		ContainerInstanceARN: t.instanceARN(), LaunchType: t.launchType(),
		LastStatus: t.lastStatus, DesiredStatus: t.desiredStatus, StartedBy: t.startedBy,
		Group: t.group, Version: t.version, CPU: strconv.Itoa(t.def.cpu), Memory: strconv.Itoa(t.def.memory),
		Overrides: t.overrides, CreatedAt: epoch(t.createdAt), StartedAt: epochPtr(t.startedAt),
		StoppingAt: epochPtr(t.stoppingAt), StoppedAt: epochPtr(t.stoppedAt),
		StoppedReason: t.stoppedReason, StopCode: t.stopCode, CapacityProviderName: t.capacityProvider,
	}
	for _, name := range t.def.containers {
		cd := containerDoc{
			ContainerARN: strings.Replace(t.arn, ":task/", ":container/", 1) + "/" + name,
			TaskARN:      t.arn, Name: name, LastStatus: t.lastStatus,
		}
		if code, ok := t.exitCodes[name]; ok {
			cd.ExitCode = &code
		}
		d.Containers = append(d.Containers, cd)
	}
	return d
}

var desiredStatuses = []string{TaskRunning, TaskPending, TaskStopped}

func (s *Server) listTasks(body []byte) (any, *apiError) {
	var req struct {
		Cluster           string `json:"cluster"`
		ContainerInstance string `json:"containerInstance"`
		Family            string `json:"family"`
		NextToken         string `json:"nextToken"`
		MaxResults        *int   `json:"maxResults"`
		StartedBy         string `json:"startedBy"`
		ServiceName       string `json:"serviceName"`
		DesiredStatus     string `json:"desiredStatus"`
		LaunchType        string `json:"launchType"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	c, err := s.resolveCluster(req.Cluster)
	if err != nil {
		return nil, err
	}
	desired := req.DesiredStatus
	if desired == "" {
		desired = TaskRunning
	}
	if !slices.Contains(desiredStatuses, desired) {
		return nil, invalidParameter("desiredStatus must be one of RUNNING, PENDING, STOPPED.")
	}
	instanceID := ""
	if req.ContainerInstance != "" {
		if instanceID, err = s.instanceID(c, req.ContainerInstance); err != nil {
			return nil, err
		}
	}
	// ECS documents that startedBy "must be the only filter that you use";
	// this fake still lets desiredStatus and launchType narrow it (without
	// them a deployment's stopped tasks could not be listed) but refuses it
	// beside the filters that pick tasks another way.
	if req.StartedBy != "" && (req.ContainerInstance != "" || req.Family != "" || req.ServiceName != "") {
		return nil, invalidParameter("startedBy must be the only filter; it cannot be combined with containerInstance, family or serviceName.")
	}
	if req.Family != "" && !familyName.MatchString(req.Family) {
		return nil, invalidParameter("Family Identifier is invalid")
	}
	listed := func(arn string) bool {
		t := c.tasks[idOf(arn)]
		return t.desiredStatus == desired &&
			(instanceID == "" || t.instance != nil && t.instance.id == instanceID) &&
			(req.Family == "" || t.def.family == req.Family) &&
			(req.StartedBy == "" || t.startedBy == req.StartedBy) &&
			req.ServiceName == "" && // this fake runs no services
			(req.LaunchType == "" || req.LaunchType == t.launchType())
	}
	query := queryDigest("ListTasks", c.name, instanceID, req.Family, req.StartedBy, req.ServiceName, desired, req.LaunchType)
	out, next, err := s.page(c.taskARNs(), listed, req.MaxResults, req.NextToken, query)
	if err != nil {
		return nil, err
	}
	return struct {
		ARNs      []string `json:"taskArns"`
		NextToken string   `json:"nextToken,omitempty"`
	}{nonNil(out), next}, nil
}

func (s *Server) describeTasks(body []byte) (any, *apiError) {
	var req struct {
		Cluster string   `json:"cluster"`
		Tasks   []string `json:"tasks"`
		Include []string `json:"include"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	c, err := s.resolveCluster(req.Cluster)
	if err != nil {
		return nil, err
	}
	if len(req.Tasks) == 0 || len(req.Tasks) > maxDescribe {
		return nil, invalidParameter("tasks must name 1 to %d tasks.", maxDescribe)
	}
	docs := []taskDoc{}
	failures := []failureDoc{}
	for _, ref := range req.Tasks {
		id, err := s.taskID(c, ref)
		if err != nil {
			return nil, err
		}
		t := c.tasks[id]
		if t == nil {
			failures = append(failures, failureDoc{ARN: s.arn("task/" + c.name + "/" + id), Reason: "MISSING"})
			continue
		}
		docs = append(docs, t.doc())
	}
	return map[string]any{"tasks": docs, "failures": failures}, nil
}

func (s *Server) stopTask(body []byte) (any, *apiError) {
	var req struct {
		Cluster string  `json:"cluster"`
		Task    string  `json:"task"`
		Reason  *string `json:"reason"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	c, err := s.resolveCluster(req.Cluster)
	if err != nil {
		return nil, err
	}
	id, err := s.taskID(c, req.Task)
	if err != nil {
		return nil, err
	}
	reason := "Task stopped by user"
	if req.Reason != nil {
		if len(*req.Reason) > maxStopReasonChars {
			return nil, invalidParameter("reason may be up to %d characters.", maxStopReasonChars)
		}
		reason = *req.Reason
	}
	t := c.tasks[id]
	if t == nil {
		return nil, invalidParameter("The referenced task was not found.")
	}
	if t.proc != nil {
		t.stopProcess(s.now(), reason)
		return map[string]any{"task": t.doc()}, nil
	}
	if t.lastStatus != TaskStopped {
		var exit *int
		if t.lastStatus == TaskRunning {
			exit = &sigtermExit
		}
		now := s.now()
		t.stop(now, reason, "UserInitiated", exit)
		s.forgetAfter(now)
	}
	return map[string]any{"task": t.doc()}, nil
}
