// Package infra is the infrastructure delivery area (seed 000): repositories
// from gantry.yaml, GitHub deliveries, plans of pull requests, and after a
// merge a run of executions applied in dependency order, each planned only
// once everything it depends on is applied, with a vote between plan and
// apply. Web handlers and job workers call it; which executions a run makes
// and which start next is the pure engine in internal/infrarun, reading
// Terragrunt is internal/tgraph, git is internal/gitrepo, commands go
// through internal/runner.
package infra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/gitrepo"
	"github.com/gantryhq/gantry/internal/mail"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// Log events of this area. Runs, executions and pull request plans are
// levels of work with the log's markers (<level>-started,
// <level>-finished-successfully, <level>-failed), so the log's questions
// (latest revision, what is in progress) work on them; the rest are steps.
const (
	EventRepositoryRegistered  = "repository-registered"
	EventRepositoryRemoved     = "repository-removed"
	EventPullRequestPlanned    = "pull-request-planned"
	EventPullRequestScanFailed = "pull-request-scan-failed"
	EventPlanStarted           = "pull-request-plan-started"
	EventPlanSucceeded         = "pull-request-plan-finished-successfully"
	EventPlanFailed            = "pull-request-plan-failed"
	EventRunQueued             = "run-queued"
	EventRunStarted            = "run-started"
	EventRunScanned            = "run-scanned"
	EventRunSucceeded          = "run-finished-successfully"
	EventRunAborted            = "run-aborted"
	EventRunFailed             = "run-failed"
	EventMergeLockTaken        = "merge-lock-taken"
	EventMergeLockReleased     = "merge-lock-released"
	EventExecutionStarted      = "execution-started"
	EventExecutionPlanned      = "execution-planned"
	EventExecutionVoted        = "execution-voted"
	EventExecutionApproved     = "execution-approved"
	EventExecutionRejected     = "execution-rejected"
	EventExecutionApplyStarted = "execution-apply-started"
	EventExecutionSucceeded    = "execution-finished-successfully"
	EventExecutionFailed       = "execution-failed"
	EventExecutionAborted      = "execution-aborted"
	EventExecutionInterrupted  = "execution-interrupted"
	EventExecutionResolved     = "execution-interruption-resolved"
	EventRunRequeued           = "run-requeued"
	EventExecutionRequeued     = "execution-requeued"
	EventPlanRequeued          = "pull-request-plan-requeued"
)

// Service is the infrastructure delivery area.
type Service struct {
	Queue  *jobs.Queue
	Logger *slog.Logger
	// Git is the cache of repository mirrors.
	Git *gitrepo.Cache
	// WorkDir holds the checkouts and plan files of commands under way.
	WorkDir string
	// Getenv reads webhook secrets and status tokens by the variable names
	// gantry.yaml gives.
	Getenv func(string) string
	// GitHubAPI is GitHub's REST API base URL ("" for api.github.com); a
	// GitHub Enterprise server's, or a test's.
	GitHubAPI  string
	HTTPClient *http.Client
	// BaseURL is Gantry's public address, for links in statuses.
	BaseURL string
	// Approvals holds the executions' votes, links and vote requests;
	// executions are its kind ExecutionKind (ApprovalKind).
	Approvals *approvals.Service
	// Roles gives commands the environment of an assumed role; nil refuses
	// accounts with plan or apply roles.
	Roles RoleAssumer
	// CommandTimeout bounds one plan or apply.
	CommandTimeout time.Duration
	// HeartbeatInterval is how often the jobs that run commands say they
	// are alive (GANTRY_HEARTBEAT_INTERVAL); Reconcile takes one quiet for
	// jobs.QuietAfter of it for dead. Zero: DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// Env is added to every plan and apply (for example TF_CLI_CONFIG_FILE,
	// TF_PLUGIN_CACHE_DIR).
	Env []string
	// Mail sends the drift notifications; nil logs that none was sent.
	Mail mail.Sender
	// AWS is the base configuration (credentials, HTTP client) of the ECS,
	// CloudWatch Logs and S3 clients of repositories with runs_on: ecs;
	// nil: the SDK's default chain.
	AWS *aws.Config
	// ECSPoll is how often an ECS task and its log are read; zero: 5s.
	ECSPoll time.Duration
	// Metrics, when set, count deliveries and time commands.
	Metrics *Metrics
	Now     func() time.Time

	graphs graphCache // the last graph scanned of each repository
}

// RoleAssumer assumes an IAM role for one command (awsenv.Provider).
type RoleAssumer interface {
	RoleEnv(ctx context.Context, roleARN, sessionName string, duration time.Duration) ([]string, error)
}

// Defaults for the zero fields of a Service.
const (
	DefaultCommandTimeout    = 2 * time.Hour
	DefaultHeartbeatInterval = 10 * time.Second
)

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) commandTimeout() time.Duration {
	if s.CommandTimeout > 0 {
		return s.CommandTimeout
	}
	return DefaultCommandTimeout
}

// JobTimeout bounds a job that runs commands: the command's time limit
// plus time for the fetch and checkouts around it.
func (s *Service) JobTimeout() time.Duration { return s.commandTimeout() + 15*time.Minute }

// RunTarget, ExecutionTarget, RepositoryTarget and PlanTarget are the log targets of
// this area.
func RunTarget(id int64) string                 { return fmt.Sprintf("run:%d", id) }
func ExecutionTarget(executionID string) string { return "execution:" + executionID }
func RepositoryTarget(name string) string       { return "repository:" + name }
func PlanTarget(id int64) string                { return fmt.Sprintf("plan:%d", id) }

// DeploymentID is the deployment a run's log entries belong to.
// A run reconciling drift has no pull request: its deployment is the
// reconcile's ("live#reconcile-<drift check id>").
func DeploymentID(r *models.Run) string {
	if isReconcile(r) {
		return driftDeployment(r)
	}
	return fmt.Sprintf("%s#%d", r.Repository, r.PRNumber)
}

func (s *Service) log(ctx context.Context, tx jobs.Tx, run *models.Run, target, event, actor string, detail map[string]any) error {
	_, err := s.logged(ctx, tx, run, target, event, actor, detail)
	return err
}

// logged is log returning the entry's id.
func (s *Service) logged(ctx context.Context, tx jobs.Tx, run *models.Run, target, event, actor string, detail map[string]any) (int64, error) {
	e := &models.LogEntry{
		DeploymentID: DeploymentID(run), TargetID: target, Revision: run.MergeCommit,
		Event: event, Actor: actor, Detail: detail,
	}
	if err := models.AppendLog(ctx, tx, e); err != nil {
		return 0, err
	}
	return e.ID, nil
}

// workspace makes a fresh directory for one command's checkout and plan
// file; the caller removes it.
func (s *Service) workspace(name string) (string, error) {
	if err := os.MkdirAll(s.WorkDir, 0o700); err != nil {
		return "", fmt.Errorf("creating the work directory: %w", err)
	}
	return os.MkdirTemp(s.WorkDir, name+"-")
}

// newRand gives each run its own source for the execution ids' digits.
func newRand() *rand.Rand { return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())) }

func notFound(err error, what string) error {
	if errors.Is(err, models.ErrNotFound) {
		return apperr.New(apperr.NotFound, "No %s.", what)
	}
	return err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func checkoutDir(ws string) string { return filepath.Join(ws, "checkout") }
