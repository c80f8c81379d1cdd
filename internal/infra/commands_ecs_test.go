package infra_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/ecsrunner"
	"github.com/gantryhq/gantry/internal/ecsrunner/ecstasktest"
	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// setupECS is setup with the repository's commands on (fake) ECS; before
// runs, when given, changes the service before its workers start.
func setupECS(t *testing.T, before ...func(*infra.Service)) (*bundle, *ecstasktest.Fakes) {
	t.Helper()
	f := ecstasktest.New(t)
	s := servertest.NewWith(t, servertest.Options{NoWeb: true})
	repo, _ := infratest.Standard(t)
	repo.Apply(infratest.DNS, infratest.VPC, infratest.RDS, infratest.EC2)
	s.Infra.AWS, s.Infra.ECSPoll = &f.AWS, 50*time.Millisecond
	c := f.Config
	s.Sync(t, repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, []string{ada}, 1, 1)+fmt.Sprintf(`    runs_on: ecs
    ecs:
      region: %s
      cluster: %s
      task_definition: %s
      container: %s
      subnets: [%s]
      security_groups: [%s]
      log_group: %s
      log_stream_prefix: %s
      plan_store: %s
      endpoints: {ecs: %q, logs: %q, s3: %q}
`, c.Region, c.Cluster, c.TaskDefinition, c.Container, c.Subnets[0], c.SecurityGroups[0], c.LogGroup, c.LogStreamPrefix, c.PlanStore,
		c.Endpoints.ECS, c.Endpoints.Logs, c.Endpoints.S3))
	for _, fn := range before {
		fn(s.Infra)
	}
	s.StartWorkers(t)
	return &bundle{Server: s, repo: repo, ctx: t.Context()}, f
}

// taskSpecs are the specs of the tasks RunTask started, in order.
func taskSpecs(t *testing.T, f *ecstasktest.Fakes) []ecsrunner.Spec {
	t.Helper()
	var out []ecsrunner.Spec
	for _, c := range f.ECS.Calls() {
		if c.Operation != "RunTask" || c.Error != "" {
			continue
		}
		var req struct {
			Overrides struct{ ContainerOverrides []struct{ Command []string } }
		}
		require.NoError(t, json.Unmarshal(c.Body, &req))
		cmd := req.Overrides.ContainerOverrides[0].Command
		require.Equal(t, []string{"gantry", "ecs-task"}, cmd[:2])
		var spec ecsrunner.Spec
		require.NoError(t, json.Unmarshal([]byte(cmd[2]), &spec))
		out = append(out, spec)
	}
	return out
}

// TestECS_planAndApplyRunAsTasks: with runs_on: ecs, an execution's plan
// runs as an ECS task (real terraform inside), its output reaches the
// execution from CloudWatch Logs, its plan file goes to S3; after the vote
// the apply task fetches exactly that object, checked by the SHA-256 of
// the plan the voters saw, and applies it.
func TestECS_planAndApplyRunAsTasks(t *testing.T) {
	t.Parallel()
	b, f := setupECS(t)
	p := b.repo.OpenPR(7, b.vpcChange("vpc-v2"))
	_, run := b.merge(t, p)
	x := b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	require.Contains(t, x.PlanOutput, `"vpc-v2"`, "terraform's plan output, read from CloudWatch Logs")
	specs := taskSpecs(t, f)
	require.Len(t, specs, 1, "the plan ran as one task")
	plan := specs[0]
	require.Equal(t, infratest.VPC, plan.Unit)
	require.Equal(t, run.MergeCommit, plan.Commit)
	require.True(t, strings.HasPrefix(plan.PlanPut, "plans/"+x.ExecutionID+"/plan-"), plan.PlanPut)
	stored, ok := f.S3.Object(ecstasktest.Bucket, plan.PlanPut)
	require.True(t, ok, "the plan file is in the plan store")
	require.Equal(t, stored.Data, x.PlanFile, "Gantry keeps the plan file the task stored")
	// The task carries the execution's id alone, and a task of an earlier
	// attempt (none here) was looked for first, to be stopped.
	mark := fmt.Sprintf(`"startedBy":"gantry-execution-%d"`, x.ID)
	var ops []string
	for _, c := range f.ECS.Calls() {
		if strings.Contains(string(c.Body), mark) {
			ops = append(ops, c.Operation)
		}
	}
	require.Equal(t, []string{"ListTasks", "RunTask"}, ops)

	_, err := b.Infra.Vote(b.ctx, infra.VoteInput{ExecutionID: x.ExecutionID, Voter: ada, Decision: "approve", Via: approvals.ViaDashboard})
	require.NoError(t, err)
	x = b.WaitExecution(t, run.ID, infratest.VPC, models.ExecSucceeded, models.StepApplying)
	require.Contains(t, x.ApplyOutput, "applying the approved plan file s3://"+ecstasktest.Bucket+"/"+plan.PlanPut)
	require.Contains(t, x.ApplyOutput, "Apply complete!")
	require.Equal(t, "vpc-v2", b.repo.Output(infratest.VPC))
	specs = taskSpecs(t, f)
	require.GreaterOrEqual(t, len(specs), 2, "then rds, which depends on vpc, is planned")
	apply := specs[1]
	require.Equal(t, plan.PlanPut, apply.PlanGet, "the apply fetches exactly the object the plan stored")
	require.Equal(t, ecsrunner.SHA256(x.PlanFile), apply.PlanSHA256)
	require.Empty(t, apply.PlanPut)
}

// TestECS_applyRefusesAPlanFileChangedInTheStore: the object in S3 is
// replaced after the vote; the apply task refuses it, and nothing is
// applied.
func TestECS_applyRefusesAPlanFileChangedInTheStore(t *testing.T) {
	t.Parallel()
	b, f := setupECS(t)
	p := b.repo.OpenPR(7, b.vpcChange("vpc-v2"))
	_, run := b.merge(t, p)
	x := b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	key := taskSpecs(t, f)[0].PlanPut
	f.S3.Put(ecstasktest.Bucket, key, []byte("another plan"))

	_, err := b.Infra.Vote(b.ctx, infra.VoteInput{ExecutionID: x.ExecutionID, Voter: ada, Decision: "approve", Via: approvals.ViaDashboard})
	require.NoError(t, err)
	x = b.WaitExecution(t, run.ID, infratest.VPC, models.ExecFailed, models.StepApplying)
	require.Contains(t, x.Error, "the ECS task could not prepare the unit: the plan file at s3://"+ecstasktest.Bucket+"/"+key+" has SHA-256 ")
	require.Contains(t, x.Error, "refusing to apply it")
	require.Equal(t, "vpc-v1", b.repo.Output(infratest.VPC), "nothing was applied")
}

// TestECS_aPlanFileReplacedBeforeGantryReadsItIsRefused: the object the
// plan task stored is replaced before Gantry reads it back (someone with
// write access to the prefix): its SHA-256 is not the one the task
// reported, so the plan fails and nothing reaches the vote (the
// reviewer's finding 6).
func TestECS_aPlanFileReplacedBeforeGantryReadsItIsRefused(t *testing.T) {
	t.Parallel()
	b, f := setupECS(t)
	f.S3.AfterNextPut(func(bucket, key string) { f.S3.Put(bucket, key, []byte("another plan")) })
	p := b.repo.OpenPR(7, b.vpcChange("vpc-v2"))
	_, run := b.merge(t, p)
	x := b.WaitExecution(t, run.ID, infratest.VPC, models.ExecFailed, models.StepPlanning)
	key := taskSpecs(t, f)[0].PlanPut
	require.Regexp(t, `^plan could not run: the plan file at s3://`+ecstasktest.Bucket+"/"+regexp.QuoteMeta(key)+` has SHA-256 [0-9a-f]{64}, not [0-9a-f]{64} as the ECS task stored it: refusing it$`, x.Error)
	require.Equal(t, "vpc-v1", b.repo.Output(infratest.VPC))
}

// TestECS_taskStoppedByECSFailsTheExecution: ECS stops the plan's task
// under it (no exit code): the execution fails with ECS's reason.
func TestECS_taskStoppedByECSFailsTheExecution(t *testing.T) {
	t.Parallel()
	b, f := setupECS(t)
	f.ECS.NeverStart()
	p := b.repo.OpenPR(7, b.vpcChange("vpc-v2"))
	_, run := b.merge(t, p)
	var arn string
	require.Eventually(t, func() bool {
		for _, task := range f.ECS.Tasks(ecstasktest.Cluster) {
			arn = task.ARN
		}
		return arn != ""
	}, time.Minute, 20*time.Millisecond)
	f.ECS.StopByECS(arn, "TaskFailedToStart", "CannotPullContainerError: pull image manifest has been retried 5 time(s)")
	x := b.WaitExecution(t, run.ID, infratest.VPC, models.ExecFailed, models.StepPlanning)
	require.Equal(t, "plan could not run: ECS stopped the task: CannotPullContainerError: pull image manifest has been retried 5 time(s)", x.Error)
}

// TestECS_pushCancelsAPlanAndStopsItsTask: a pull request's plan whose
// task is still waiting to start is cancelled by a push; Gantry stops the
// task with StopTask, and the new head is planned in a task of its own.
func TestECS_pushCancelsAPlanAndStopsItsTask(t *testing.T) {
	t.Parallel()
	b, f := setupECS(t)
	r := b.repo
	f.ECS.NeverStart()
	p := r.OpenPR(8, b.vpcChange("vpc-v2"))
	b.Deliver(t, "pull_request", r.Event(p, "opened", ""))
	require.Eventually(t, func() bool { return len(f.ECS.Tasks(ecstasktest.Cluster)) == 1 }, time.Minute, 20*time.Millisecond)

	r.PushPR(&p, b.vpcChange("vpc-v3"))
	b.Deliver(t, "pull_request", r.Event(p, "synchronize", ""))
	st := b.WaitStatus(t, p.Head, github.PlanContext(infratest.VPC), "success")
	require.Equal(t, "changes to apply", st.Description)
	var stops []string
	for _, c := range f.ECS.Calls() {
		if c.Operation == "StopTask" {
			stops = append(stops, string(c.Body))
		}
	}
	require.Len(t, stops, 1)
	require.Contains(t, stops[0], "the command was cancelled")
	specs := taskSpecs(t, f)
	require.Len(t, specs, 2)
	require.Equal(t, p.Head, specs[1].Commit)
	require.Empty(t, specs[1].PlanPut, "a pull request's plan is never applied: its plan file stays in the task")
}

// setRepository changes the registered repository's row as no valid
// gantry.yaml could: a start timeout below the minimum, a command that
// hangs.
func (b *bundle) setRepository(t *testing.T, set string, args ...any) {
	t.Helper()
	_, err := b.DB.Bun.NewUpdate().Table("repositories").Set(set, args...).Where("name = 'live'").Exec(b.ctx)
	require.NoError(t, err)
}

func stopTaskBodies(f *ecstasktest.Fakes) []string {
	var out []string
	for _, c := range f.ECS.Calls() {
		if c.Operation == "StopTask" {
			out = append(out, string(c.Body))
		}
	}
	return out
}

// TestECS_aTaskThatNeverStartsIsStopped: the plan's task stays
// PROVISIONING past the start timeout: Gantry stops it and the execution
// fails with that reason.
func TestECS_aTaskThatNeverStartsIsStopped(t *testing.T) {
	t.Parallel()
	b, f := setupECS(t)
	b.setRepository(t, `ecs = jsonb_set(ecs, '{start_timeout}', '"500ms"')`)
	f.ECS.NeverStart()
	_, run := b.merge(t, b.repo.OpenPR(7, b.vpcChange("vpc-v2")))
	x := b.WaitExecution(t, run.ID, infratest.VPC, models.ExecFailed, models.StepPlanning)
	require.Equal(t, "plan could not run: the task did not start within 500ms (ECS status PROVISIONING)", x.Error)
	stops := stopTaskBodies(f)
	require.Len(t, stops, 1)
	require.Contains(t, stops[0], "did not start within 500ms")
}

// TestECS_aCommandPastItsTimeLimitIsStopped: StopTask at the command's
// time limit; the execution fails as timed out, with the output so far.
func TestECS_aCommandPastItsTimeLimitIsStopped(t *testing.T) {
	t.Parallel()
	b, f := setupECS(t, func(s *infra.Service) { s.CommandTimeout = 4 * time.Second })
	b.setRepository(t, "init_command = '{}', plan_command = ?", pgdialect.Array([]string{"sh", "-c", "echo planning; exec sleep 600"}))
	_, run := b.merge(t, b.repo.OpenPR(7, b.vpcChange("vpc-v2")))
	x := b.WaitExecution(t, run.ID, infratest.VPC, models.ExecFailed, models.StepPlanning)
	require.Regexp(t, `^plan timed out after \d+s$`, x.Error)
	require.Contains(t, x.PlanOutput, "planning\n")
	stops := stopTaskBodies(f)
	require.Len(t, stops, 1)
	require.Contains(t, stops[0], "timed out after 4s")
}

// TestECS_throttledLogsStillGiveTheWholePlan: CloudWatch throttles the
// reads of the plan's output, more times in a row than the SDK retries:
// the execution's output is still terraform's, each line once.
func TestECS_throttledLogsStillGiveTheWholePlan(t *testing.T) {
	t.Parallel()
	b, f := setupECS(t)
	f.Logs.Throttle("GetLogEvents", 10)
	_, run := b.merge(t, b.repo.OpenPR(7, b.vpcChange("vpc-v2")))
	x := b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	require.Equal(t, 1, strings.Count(x.PlanOutput, "Plan: 0 to add, 1 to change, 0 to destroy."), x.PlanOutput)
	require.Equal(t, 1, strings.Count(x.PlanOutput, "Terraform has been successfully initialized!"), x.PlanOutput)
	throttled := 0
	for _, c := range f.Logs.Calls() {
		if c.Error == "ThrottlingException" {
			throttled++
		}
	}
	require.Equal(t, 10, throttled)
	stream := strings.SplitN(strings.SplitN(x.PlanOutput, "(log stream ", 2)[1], ")", 2)[0]
	streamed := f.Logs.Events(ecstasktest.LogGroup, stream)
	require.Equal(t, strings.Join(streamed, "\n")+"\n", strings.SplitN(x.PlanOutput, "\n", 2)[1], "every line of the stream, in order, after the task's name")
}

// TestECS_abortStopsTheTask: the plan's output is on the execution while
// its task runs; an operator aborts the run, and the task is stopped.
func TestECS_abortStopsTheTask(t *testing.T) {
	t.Parallel()
	b, f := setupECS(t)
	b.setRepository(t, "init_command = '{}', plan_command = ?", pgdialect.Array([]string{"sh", "-c", "echo planning; exec sleep 600"}))
	_, run := b.merge(t, b.repo.OpenPR(7, b.vpcChange("vpc-v2")))
	planning := b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepPlanning)
	servertest.WaitFor(t, func() (bool, string) {
		x, err := models.ExecutionByID(b.ctx, b.DB.Bun, planning.ID)
		require.NoError(t, err)
		return strings.Contains(x.PlanOutput, "planning\n"), "the plan's first line, live: " + x.PlanOutput
	})
	tasks := f.ECS.Tasks(ecstasktest.Cluster)
	require.Len(t, tasks, 1)
	require.Equal(t, "RUNNING", tasks[0].LastStatus)

	require.NoError(t, b.Infra.AbortRun(b.ctx, run.ID, ada, "wrong window"))
	servertest.WaitFor(t, func() (bool, string) {
		task := f.ECS.Tasks(ecstasktest.Cluster)[0]
		return task.LastStatus == "STOPPED", "the task stopped: " + task.LastStatus
	})
	stops := stopTaskBodies(f)
	require.Len(t, stops, 1)
	require.Contains(t, stops[0], "the command was cancelled")
	x, err := models.ExecutionByID(b.ctx, b.DB.Bun, planning.ID)
	require.NoError(t, err)
	require.Equal(t, models.ExecAborted, x.Status)
}

// TestECS_newProviderResourcesAreReadByTasks: on ECS, what an apply
// introduced is read by terraform show -json run as tasks (the approved
// plan fetched from the store by its SHA-256, the state through the
// unit's init), their JSON stored in the plan store and read back: the
// worker needs no access to the state.
func TestECS_newProviderResourcesAreReadByTasks(t *testing.T) {
	t.Parallel()
	p := infratest.Filer(t)
	b, f := setupECS(t, func(s *infra.Service) { s.Env = append(s.Env, p.Env()...) })
	made := filepath.Join(t.TempDir(), "made")
	_, run := b.merge(t, b.repo.OpenPR(8, map[string]string{
		infratest.VPC + "/filer.tf": p.Required() + infratest.FilerFile("made", fmt.Sprintf("%q", made), `"one"`, ""),
	}))
	b.approve(t, run, infratest.VPC)
	require.FileExists(t, made, "applied by the ECS task")
	x, err := models.ExecutionByID(b.ctx, b.DB.Bun, b.mustExecution(t, run.ID, infratest.VPC).ID)
	require.NoError(t, err)
	recs, err := models.NewResourcesOfRun(b.ctx, b.DB.Bun, run.ID)
	require.NoError(t, err)
	require.Empty(t, recs[x.ID].Error)
	require.Equal(t, []string{"filer_file.made"}, recs[x.ID].Addresses)

	var shows []ecsrunner.Spec
	for _, s := range taskSpecs(t, f) {
		if s.OutputPut != "" {
			shows = append(shows, s)
		}
	}
	require.Len(t, shows, 2, "the plan's and the state's show ran as tasks")
	require.Equal(t, []string{"terraform", "-chdir={dir}", "show", "-json", "{plan_file}"}, shows[0].Main)
	require.NotEmpty(t, shows[0].PlanGet, "the approved plan, from the store")
	require.Equal(t, ecsrunner.SHA256(x.PlanFile), shows[0].PlanSHA256)
	require.Equal(t, []string{"terraform", "-chdir={dir}", "show", "-json"}, shows[1].Main)
	require.Equal(t, "plans/"+x.ExecutionID+"/show-state.json", shows[1].OutputPut)
	state, ok := f.S3.Object(ecstasktest.Bucket, shows[1].OutputPut)
	require.True(t, ok)
	require.Contains(t, string(state.Data), `"address":"filer_file.made"`)
	require.NotContains(t, x.ApplyOutput, `"format_version"`, "the shows' JSON is not in the apply output")
}

// TestECS_aShowOutputReplacedInTheStoreIsRefused: the JSON a show task
// stored is replaced before Gantry reads it (it decides what a rollback
// destroys): its SHA-256 is not the one the task reported, so it is not
// used, and the execution records why.
func TestECS_aShowOutputReplacedInTheStoreIsRefused(t *testing.T) {
	t.Parallel()
	p := infratest.Filer(t)
	b, f := setupECS(t, func(s *infra.Service) { s.Env = append(s.Env, p.Env()...) })
	var tamper func(bucket, key string)
	tamper = func(bucket, key string) {
		if !strings.HasSuffix(key, "/show-plan.json") {
			f.S3.AfterNextPut(tamper)
			return
		}
		f.S3.Put(bucket, key, []byte(`{"format_version":"1.2","prior_state":{"values":{"root_module":{}}}}`))
	}
	f.S3.AfterNextPut(tamper)
	made := filepath.Join(t.TempDir(), "made")
	_, run := b.merge(t, b.repo.OpenPR(8, map[string]string{
		infratest.VPC + "/filer.tf": p.Required() + infratest.FilerFile("made", fmt.Sprintf("%q", made), `"one"`, ""),
	}))
	b.approve(t, run, infratest.VPC)
	require.FileExists(t, made, "applied by the ECS task")
	x := b.mustExecution(t, run.ID, infratest.VPC)
	var recs map[int64]models.NewResources
	require.Eventually(t, func() bool {
		var err error
		recs, err = models.NewResourcesOfRun(b.ctx, b.DB.Bun, run.ID)
		_, ok := recs[x.ID]
		return err == nil && ok
	}, time.Minute, 20*time.Millisecond)
	require.Contains(t, recs[x.ID].Error, "show-plan.json has SHA-256 ")
	require.Contains(t, recs[x.ID].Error, "as the ECS task stored it: refusing it")
	require.Empty(t, recs[x.ID].Addresses)
}

// TestECS_failedRollbackReadsWhatIsLeftInATask: on ECS, what a failed
// rollback left in the state is read by a show task too.
func TestECS_failedRollbackReadsWhatIsLeftInATask(t *testing.T) {
	t.Parallel()
	p := infratest.Filer(t)
	b, f := setupECS(t, func(s *infra.Service) { s.Env = append(s.Env, p.Env()...) })
	files := filerUnit(p, infratest.VPC, t.TempDir(), true)
	files[infratest.RDS+"/main.tf"] = failingRDS(b)
	_, run := b.merge(t, b.repo.OpenPR(48, files))
	b.approve(t, run, infratest.VPC)
	require.Equal(t, approval.Approved, b.voteRollback(t, run, infratest.VPC, "approve", 1).State)
	rb := b.waitRollback(t, run.ID, infratest.VPC, models.ExecFailed, models.StepApplying)
	recs, err := models.RollbacksOfRun(b.ctx, b.DB.Bun, run.ID)
	require.NoError(t, err)
	require.Empty(t, recs[rb.ID].RemainingError)
	require.Contains(t, recs[rb.ID].Remaining, "filer_file.single")
	var left []ecsrunner.Spec
	for _, s := range taskSpecs(t, f) {
		if s.OutputPut == "plans/"+rb.ExecutionID+"/show-left.json" {
			left = append(left, s)
		}
	}
	require.Len(t, left, 1, "what is left was read by a task")
	require.Equal(t, run.MergeCommit, left[0].Commit)

	var scope []ecsrunner.Spec
	for _, s := range taskSpecs(t, f) {
		if s.OutputPut == "plans/"+rb.ExecutionID+"/show-scope.json" {
			scope = append(scope, s)
		}
	}
	require.Len(t, scope, 1, "the destroy plan was checked against the rollback's addresses by a task (rollback_scope.go)")
	require.Equal(t, []string{"terraform", "-chdir={dir}", "show", "-json", "{plan_file}"}, scope[0].Main)
	require.NotEmpty(t, scope[0].PlanGet, "the destroy plan, from the store")
	require.NotEmpty(t, scope[0].PlanSHA256)
}
