package ecsfake

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RunTask (ECS's call for one-off tasks on Fargate or EC2 capacity) is
// answered with tasks on no container instance of the server's. When the
// test called RunProcesses, each task runs its container's command (the
// containerOverrides' command, else the task definition's) as a local
// process, so what a "task" does is real: its output lines go, as the
// awslogs driver sends them, to the task definition's log group, stream
// PREFIX/CONTAINER/TASK-ID; the task is RUNNING while the process runs and
// STOPPED with the process's exit code ("Essential container in task
// exited") when it ends. StopTask sends the process SIGTERM (its task
// stays RUNNING, desired STOPPED, until it exits, as ECS waits for the
// container); StopByECS kills it and stops the task without an exit code,
// as ECS does when a task fails under it. NeverStart keeps the next task
// in PROVISIONING.

// Task statuses of RunTask's tasks before RUNNING.
const TaskProvisioning = "PROVISIONING"

// LogWriter receives the tasks' output: logsfake.Server.
type LogWriter interface {
	Append(group, stream string, at time.Time, messages ...string) bool
}

// Processes is how RunTask's tasks run locally.
type Processes struct {
	Logs LogWriter
	// Env is every container's environment, before the overrides' (PATH,
	// and the credentials of the "task role").
	Env []string
	// Program maps a command's first argument to the local executable,
	// e.g. "gantry" to a test binary; nil: as written.
	Program func(name string) string
}

type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

var roleARN = regexp.MustCompile(`^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,128}$`)

// RunProcesses makes RunTask run each task's command as a local process;
// the processes still running when the test ends are killed.
func (s *Server) RunProcesses(t testing.TB, p Processes) {
	s.mu.Lock()
	s.processes = &p
	s.mu.Unlock()
	t.Cleanup(func() {
		s.mu.Lock()
		var running []*process
		for _, c := range s.clusters {
			for _, task := range c.tasks {
				if task.proc != nil {
					running = append(running, task.proc)
				}
			}
		}
		s.mu.Unlock()
		for _, pr := range running {
			_ = syscall.Kill(-pr.cmd.Process.Pid, syscall.SIGKILL)
			<-pr.done
		}
	})
}

// NeverStart keeps the tasks of the next RunTask in PROVISIONING until
// they are stopped, as when ECS cannot place them (no capacity, an image
// that cannot be pulled and is retried).
func (s *Server) NeverStart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.neverStart++
}

// StopByECS stops a task as ECS does when it fails under its containers
// (a Spot interruption, a host gone, an image that cannot be pulled): its
// process, if it has one, is killed, and the task is STOPPED with stopCode
// and reason and no exit code.
func (s *Server) StopByECS(taskARN, stopCode, reason string) {
	s.mu.Lock()
	t := s.task(taskARN)
	t.desiredStatus, t.stoppingAt = TaskStopped, s.now()
	t.stoppedReason, t.stopCode = reason, stopCode
	t.killed = true
	pr := t.proc
	if pr == nil && t.lastStatus != TaskStopped {
		t.stop(s.now(), reason, stopCode, nil)
		s.forgetAfter(s.now())
	}
	s.mu.Unlock()
	if pr != nil {
		_ = syscall.Kill(-pr.cmd.Process.Pid, syscall.SIGKILL)
		<-pr.done
	}
}

func (t *task) instanceARN() string {
	if t.instance == nil {
		return ""
	}
	return t.instance.arn
}

func (t *task) launchType() string {
	if t.launch == "" {
		return "EC2"
	}
	return t.launch
}

type keyValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type containerOverride struct {
	Name              string     `json:"name"`
	Command           []string   `json:"command"`
	Environment       []keyValue `json:"environment"`
	CPU               *int       `json:"cpu"`
	Memory            *int       `json:"memory"`
	MemoryReservation *int       `json:"memoryReservation"`
}

func (s *Server) runTask(body []byte) (any, *apiError) {
	var req struct {
		Cluster                  string `json:"cluster"`
		TaskDefinition           string `json:"taskDefinition"`
		Count                    *int   `json:"count"`
		LaunchType               string `json:"launchType"`
		CapacityProviderStrategy []struct {
			CapacityProvider string `json:"capacityProvider"`
			Weight           int    `json:"weight"`
			Base             int    `json:"base"`
		} `json:"capacityProviderStrategy"`
		NetworkConfiguration *struct {
			AwsvpcConfiguration *struct {
				Subnets        []string `json:"subnets"`
				SecurityGroups []string `json:"securityGroups"`
				AssignPublicIP string   `json:"assignPublicIp"`
			} `json:"awsvpcConfiguration"`
		} `json:"networkConfiguration"`
		Overrides *struct {
			ContainerOverrides []containerOverride `json:"containerOverrides"`
			TaskRoleArn        string              `json:"taskRoleArn"`
			ExecutionRoleArn   string              `json:"executionRoleArn"`
		} `json:"overrides"`
		StartedBy            *string           `json:"startedBy"`
		Group                *string           `json:"group"`
		PlatformVersion      string            `json:"platformVersion"`
		PropagateTags        string            `json:"propagateTags"`
		EnableECSManagedTags bool              `json:"enableECSManagedTags"`
		ClientToken          string            `json:"clientToken"`
		Tags                 []json.RawMessage `json:"tags"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	c, err := s.resolveCluster(req.Cluster)
	if err != nil {
		return nil, err
	}
	if req.TaskDefinition == "" {
		return nil, invalidParameter("taskDefinition can not be blank.")
	}
	def, err := s.resolveTaskDefinition(req.TaskDefinition)
	if err != nil {
		return nil, err
	}
	count := 1
	if req.Count != nil {
		count = *req.Count
	}
	if count < 1 || count > 10 {
		return nil, invalidParameter("count must be between 1 and 10.")
	}
	if req.LaunchType != "" && len(req.CapacityProviderStrategy) > 0 {
		return nil, invalidParameter("Specifying both a launchType and capacityProviderStrategy is not supported.")
	}
	launch, provider := req.LaunchType, ""
	switch {
	case len(req.CapacityProviderStrategy) > 0:
		provider = req.CapacityProviderStrategy[0].CapacityProvider
		launch = "FARGATE"
		if !strings.HasPrefix(provider, "FARGATE") {
			launch = "EC2"
		}
	case launch == "":
		launch = "EC2"
	case launch != "FARGATE" && launch != "EC2" && launch != "EXTERNAL":
		return nil, invalidParameter("launchType must be one of EC2, FARGATE, EXTERNAL.")
	}
	// Fargate tasks use the awsvpc network mode, which needs subnets.
	if launch == "FARGATE" {
		n := req.NetworkConfiguration
		if n == nil || n.AwsvpcConfiguration == nil {
			return nil, invalidParameter("Network Configuration must be provided when networkMode 'awsvpc' is specified.")
		}
		if len(n.AwsvpcConfiguration.Subnets) == 0 {
			return nil, invalidParameter("subnets can not be empty.")
		}
		if ip := n.AwsvpcConfiguration.AssignPublicIP; ip != "" && ip != "ENABLED" && ip != "DISABLED" {
			return nil, invalidParameter("assignPublicIp must be ENABLED or DISABLED.")
		}
	}
	by, group := "", "family:"+def.family
	if req.StartedBy != nil {
		by = *req.StartedBy
		if !startedBy.MatchString(by) {
			return nil, invalidParameter("startedBy may contain up to 36 letters, numbers, hyphens, forward slashes and underscores; %q does not fit.", by)
		}
	}
	if req.Group != nil {
		group = *req.Group
	}
	var raw struct {
		Overrides json.RawMessage `json:"overrides"`
	}
	_ = json.Unmarshal(body, &raw)
	var compact bytes.Buffer
	if len(raw.Overrides) > 0 && json.Compact(&compact, raw.Overrides) == nil && compact.Len() > MaxOverrides {
		return nil, invalidParameter("Container Overrides length must be at most %d", MaxOverrides)
	}
	var overrides []containerOverride
	var overridesDoc json.RawMessage
	if o := req.Overrides; o != nil {
		if o.TaskRoleArn != "" && !roleARN.MatchString(o.TaskRoleArn) {
			return nil, invalidParameter("Invalid arn syntax: taskRoleArn %q.", o.TaskRoleArn)
		}
		for _, co := range o.ContainerOverrides {
			if !strings.Contains(" "+strings.Join(def.containers, " ")+" ", " "+co.Name+" ") {
				return nil, invalidParameter("Override for container named %s is not a container in the TaskDefinition.", co.Name)
			}
		}
		overrides = o.ContainerOverrides
		overridesDoc, _ = json.Marshal(o)
	}
	// A repeated clientToken is a retry: ECS answers with the tasks the
	// first call started.
	if prior, ok := s.runTokens[req.ClientToken]; ok && req.ClientToken != "" {
		tasks := []taskDoc{}
		for _, t := range prior {
			tasks = append(tasks, t.doc())
		}
		return map[string]any{"tasks": tasks, "failures": []failureDoc{}}, nil
	}
	now := s.now()
	start := s.processes != nil && s.neverStart == 0
	if s.neverStart > 0 {
		s.neverStart--
	}
	tasks := []taskDoc{}
	for range count {
		tid := randomHex(16)
		t := &task{
			id: tid, arn: s.arn("task/" + c.name + "/" + tid), cluster: c, def: def,
			startedBy: by, group: group, lastStatus: TaskProvisioning, desiredStatus: TaskRunning,
			exitCodes: map[string]int{}, version: 1, createdAt: now, overrides: overridesDoc,
			launch: launch, capacityProvider: provider,
		}
		c.tasks[t.id] = t
		c.sortedTasks = nil
		if start {
			if err := s.startProcess(t, overrides, now); err != nil {
				t.stop(now, "CannotStartContainerError: "+err.Error(), "TaskFailedToStart", nil)
			}
		}
		tasks = append(tasks, t.doc())
		if req.ClientToken != "" {
			s.runTokens[req.ClientToken] = append(s.runTokens[req.ClientToken], t)
		}
	}
	return map[string]any{"tasks": tasks, "failures": []failureDoc{}}, nil
}

// startProcess runs the task's first container's command (the server's
// lock held); a task definition without a command runs nothing.
// MaxOverrides is ECS's limit on RunTask's overrides: 8,192 characters of
// their JSON, formatting included.
const MaxOverrides = 8192

func (s *Server) startProcess(t *task, overrides []containerOverride, now time.Time) error {
	container := t.def.containers[0]
	var argv []string
	env := append([]string{}, s.processes.Env...)
	for _, o := range overrides {
		if o.Name == container {
			argv = o.Command
			for _, kv := range o.Environment {
				env = append(env, kv.Name+"="+kv.Value)
			}
		}
	}
	if len(argv) == 0 {
		return fmt.Errorf("container %s has no command", container)
	}
	name := argv[0]
	if s.processes.Program != nil {
		name = s.processes.Program(name)
	}
	cmd := exec.Command(name, argv[1:]...)
	cmd.Env = env
	cmd.Dir = os.TempDir()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return err
	}
	t.lastStatus, t.startedAt = TaskRunning, now
	t.version++
	pr := &process{cmd: cmd, done: make(chan struct{})}
	t.proc = pr
	var stream string
	if a := t.def.awslogs; a != nil {
		stream = a.StreamPrefix + "/" + container + "/" + t.id
	}
	var lines sync.WaitGroup
	lines.Add(1)
	go func() {
		defer lines.Done()
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if stream != "" && s.processes.Logs != nil {
				s.processes.Logs.Append(t.def.awslogs.Group, stream, time.Now(), sc.Text())
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() {
		_ = cmd.Wait() // the exit status is read from ProcessState
		_ = w.Close()
		lines.Wait()
		s.mu.Lock()
		defer s.mu.Unlock()
		now := s.now()
		if t.killed {
			t.stop(now, t.stoppedReason, t.stopCode, nil)
		} else if t.desiredStatus == TaskStopped && t.stoppedReason != "" {
			code := exitCode(cmd)
			t.stop(now, t.stoppedReason, t.stopCode, &code)
		} else {
			code := exitCode(cmd)
			t.stop(now, "Essential container in task exited", "EssentialContainerExited", &code)
		}
		t.proc = nil
		s.forgetAfter(now)
		close(pr.done)
	}()
	return nil
}

// stopProcess asks a task's process to stop (StopTask): SIGTERM to its
// process group; the task stops when the process has exited.
func (t *task) stopProcess(now time.Time, reason string) {
	if t.desiredStatus != TaskStopped {
		t.desiredStatus, t.stoppingAt = TaskStopped, now
	}
	if t.stoppedReason == "" {
		t.stoppedReason, t.stopCode = reason, "UserInitiated"
	}
	t.version++
	_ = syscall.Kill(-t.proc.cmd.Process.Pid, syscall.SIGTERM)
}

// exitCode is a container's exit code: the process's, or 128 + the number
// of the signal that ended it.
func exitCode(cmd *exec.Cmd) int {
	code := cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	return code
}
