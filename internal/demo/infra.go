package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// The infrastructure demo: a Terragrunt repository with three accounts, an
// open pull request with one plan with changes and one failed (and another
// whose terragrunt.hcl does not parse), a run that failed to scan, a
// finished run, a failed one, and a real run in progress.
//
// The repository is real (repo.go): a local git repository registered
// through the infra area's Sync, as gantry.yaml would, and the run in
// progress is the merge of its pull request #42, queued as a merge delivery
// queues it: the workers scan it, plan it, ask the voters, and apply what
// they approve, with git and terraform, offline. The other runs, the pull
// requests' plans and their log are history, written through the models as
// the workers would have left them; no job is queued for them, so nothing
// in them can fail.
//
// Without git or terraform on PATH the demo says so and falls back to rows
// only: the repository points at GitHub and the run in progress is written
// as rows too, one execution waiting for the demo approver's vote (whose
// apply cannot work).

const (
	infraLoadedEvent = "demo-infra-loaded"
	demoRepo         = "infra-live"
	// Approver is the demo user the in-progress run waits for.
	Approver = "arun.approver@example.com"
	operator = "olivia.operator@example.com"
)

// demoInfra is the demo's gantry.yaml for the repository at url. A real
// repository runs with the terraform preset (terragrunt is rarely
// installed), without AWS roles (nothing to assume offline), and with one
// approval per account, so one vote moves the run on.
func demoInfra(live *liveRun) string {
	url, runner, prod := "https://github.com/acme/infra-live.git", "terragrunt", `
        plan_role: arn:aws:iam::210987654321:role/GantryPlan
        apply_role: arn:aws:iam::210987654321:role/GantryApply
        min_approvals: 2`
	if live != nil {
		url, runner, prod = live.URL, "terraform", `
        min_approvals: 1`
	}
	return fmt.Sprintf(`repositories:
  - name: infra-live
    url: %s
    trunk: main
    runner: %s
    webhook_secret_env: INFRA_LIVE_WEBHOOK_SECRET
    accounts:
      - name: shared
        path: live/shared/
        voters: [arun.approver@example.com, olivia.operator@example.com]
        min_approvals: 1
        min_rejections: 1
      - name: staging
        path: live/staging/
        depends_on: [shared]
        voters: [olivia.operator@example.com, arun.approver@example.com]
        min_approvals: 1
        min_rejections: 1
      - name: prod
        path: live/prod/
        depends_on: [shared]
        voters: [arun.approver@example.com, olivia.operator@example.com]%s
        min_rejections: 1
`, strconv.Quote(url), runner, prod)
}

// InfraOptions say where the demo repository goes and where the demo
// reports.
type InfraOptions struct {
	// Dir holds the demo repository and its Terraform states
	// (GANTRY_DATA_DIR/demo).
	Dir    string
	Logger *slog.Logger
	// LookPath finds git and terraform (exec.LookPath when nil); tests play
	// a machine without them.
	LookPath func(string) (string, error)
}

// Infra adds the infrastructure demo once (see above); vote requests go
// out through svc (the dev mailbox under gantry dev). Like gantry.yaml, its
// Sync makes the demo repository the only one registered.
func Infra(ctx context.Context, svc *infra.Service, o InfraOptions) (bool, error) {
	db := svc.Queue.DB()
	if _, err := models.LatestRevision(ctx, db, "demo", infraLoadedEvent); err == nil {
		return false, nil
	} else if !errors.Is(err, models.ErrNotFound) {
		return false, err
	}
	if o.LookPath == nil {
		o.LookPath = exec.LookPath
	}
	var live *liveRun
	if missing := tools(o.LookPath); missing != "" {
		o.Logger.Warn("demo: " + missing + " not found on PATH, so the infrastructure demo is rows only: its run waiting for votes cannot apply. " +
			"Install them and start with a fresh GANTRY_DATA_DIR for a demo that really plans and applies.")
	} else {
		var err error
		if live, err = buildRepo(ctx, o.Dir); err != nil {
			o.Logger.Warn("demo: building the demo repository failed, so the infrastructure demo is rows only: its run waiting for votes cannot apply", "error", err)
			live = nil
		} else {
			o.Logger.Info("demo: infrastructure repository created; its pull request #42 is being deployed: vote in the dev mailbox or on /approvals", "url", live.URL)
		}
	}
	f, err := gantryfile.Parse("demo", []byte(demoInfra(live)), nil)
	if err != nil {
		return false, err
	}
	if _, err := svc.Sync(ctx, f, actor); err != nil {
		return false, fmt.Errorf("registering the demo repository: %w", err)
	}
	voting, err := loadInfra(ctx, svc.Queue, live)
	if err != nil {
		return false, fmt.Errorf("loading the infrastructure demo: %w", err)
	}
	for _, id := range voting {
		if err := svc.RequestVote(ctx, id, Approver); err != nil {
			return false, fmt.Errorf("mailing the demo vote request: %w", err)
		}
	}
	return true, nil
}

// loadInfra writes the infrastructure demo's history and queues its live
// run (with live; without, writes the run in progress as rows) in one
// transaction with the marker; it reports the executions written as
// waiting for votes (to mail their voters).
func loadInfra(ctx context.Context, queue *jobs.Queue, live *liveRun) ([]int64, error) {
	var voting []int64
	err := queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		d := &infraDemo{ctx: ctx, db: tx, now: time.Now().UTC().Truncate(time.Second)}
		var err error
		if d.repo, err = models.RepositoryByName(ctx, tx, demoRepo); err != nil {
			return err
		}
		steps := []func() error{d.scanFailure, d.finishedRun}
		if live != nil {
			steps = append(steps, d.failedRun, func() error { return d.liveRun(tx, live) })
		} else {
			steps = append(steps, func() error { return models.SetGitHubFullName(ctx, tx, demoRepo, "acme/infra-live") }, d.runInProgress)
		}
		steps = append(steps, d.openPullRequests, d.flushLog)
		for _, step := range steps {
			if err := step(); err != nil {
				return err
			}
		}
		voting = d.voting
		return models.AppendLog(ctx, tx, &models.LogEntry{TargetID: "demo", Event: infraLoadedEvent, Actor: actor,
			Detail: map[string]any{"real": live != nil}})
	})
	return voting, err
}

type infraDemo struct {
	ctx     context.Context
	db      bun.IDB
	now     time.Time
	repo    *models.Repository
	voting  []int64            // executions waiting for votes
	entries []*models.LogEntry // the log, written in time order at the end
}

// ago is a time minutes before now.
func (d *infraDemo) ago(minutes float64) time.Time {
	return d.now.Add(-time.Duration(minutes * float64(time.Minute)))
}

func ptrTime(t time.Time) *time.Time { return &t }
func ptrInt(n int) *int              { return &n }
func ptrBool(b bool) *bool           { return &b }

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (d *infraDemo) account(name string) models.Account {
	for _, a := range d.repo.Accounts {
		if a.Name == name {
			return a
		}
	}
	panic("demo: no account " + name)
}

// log keeps an entry to write with the others, in time order, at the end.
func (d *infraDemo) log(run *models.Run, target, event, actor string, at time.Time, detail map[string]any) error {
	d.entries = append(d.entries, &models.LogEntry{DeploymentID: infra.DeploymentID(run), TargetID: target, Revision: run.MergeCommit,
		Event: event, Actor: actor, Detail: detail, CreatedAt: at})
	return nil
}

func (d *infraDemo) flushLog() error {
	slices.SortStableFunc(d.entries, func(a, b *models.LogEntry) int { return a.CreatedAt.Compare(b.CreatedAt) })
	for _, e := range d.entries {
		if err := models.AppendLog(d.ctx, d.db, e); err != nil {
			return err
		}
	}
	return nil
}

// pullRequest records a pull request as the webhook would have.
func (d *infraDemo) pullRequest(number int, title, author, branch, head, state, merge string) error {
	_, err := models.UpsertPullRequest(d.ctx, d.db, &models.PullRequest{
		Repository: demoRepo, Number: number, Title: title, Author: author, BaseRef: "main", HeadRef: branch, HeadSHA: head,
		HTMLURL: fmt.Sprintf("https://github.com/acme/infra-live/pull/%d", number), State: state, MergeCommitSHA: merge,
	})
	return err
}

// run records a merged pull request's run, queued and started at start
// (minutes ago).
func (d *infraDemo) run(number int, title, branch, head, merge, base string, start float64) (*models.Run, error) {
	if err := d.pullRequest(number, title, "octocat", branch, head, models.PRMerged, merge); err != nil {
		return nil, err
	}
	run := &models.Run{Repository: demoRepo, PRNumber: number, PRTitle: title, BaseRef: "main", HeadRef: branch, HeadSHA: head,
		MergeCommit: merge, BaseCommit: base, Scan: "graph", Status: models.RunRunning, CreatedAt: d.ago(start), StartedAt: ptrTime(d.ago(start))}
	if err := models.InsertRun(d.ctx, d.db, run); err != nil {
		return nil, err
	}
	if err := d.log(run, infra.RunTarget(run.ID), infra.EventRunQueued, "github:octocat", d.ago(start),
		map[string]any{"pull_request": number, "merge_commit": merge}); err != nil {
		return nil, err
	}
	if err := d.log(run, infra.RunTarget(run.ID), infra.EventMergeLockTaken, "gantry", d.ago(start), map[string]any{"pull_request": number}); err != nil {
		return nil, err
	}
	return run, d.log(run, infra.RunTarget(run.ID), infra.EventRunStarted, "gantry", d.ago(start), map[string]any{"scan": "graph"})
}

// endRun records how a run ended and that it released the merge lock.
func (d *infraDemo) endRun(run *models.Run, ok bool, why string, at float64) error {
	run.Status, run.Error, run.FinishedAt = models.RunFailed, why, ptrTime(d.ago(at))
	event := infra.EventRunFailed
	if ok {
		run.Status, event = models.RunSucceeded, infra.EventRunSucceeded
	}
	if err := models.UpdateRun(d.ctx, d.db, run, "status", "error", "finished_at"); err != nil {
		return err
	}
	if err := d.log(run, infra.RunTarget(run.ID), event, "gantry", d.ago(at), map[string]any{"error": why, "deleted_units": run.DeletedUnits}); err != nil {
		return err
	}
	return d.log(run, infra.RunTarget(run.ID), infra.EventMergeLockReleased, "gantry", d.ago(at), nil)
}

// scanFailure is a merged pull request whose terragrunt.hcl did not parse:
// the run failed before it knew its units.
func (d *infraDemo) scanFailure() error {
	const min = 3*24*60 + 95
	run, err := d.run(37, "Read the VPC id from the network unit", "rds-network-output", sha("37ab"), sha("5e1f37"), sha("0c4a"), min)
	if err != nil {
		return err
	}
	return d.endRun(run, false, `live/prod/rds/terragrunt.hcl:2: Invalid expression: Expected the start of an expression, but found an invalid expression token.`, min-0.2)
}

// voteSpec is one vote, minutes ago.
type voteSpec struct {
	voter, decision, comment string
	at                       float64
}

// execSpec is one execution as the demo leaves it; times are minutes ago
// (0: not yet).
type execSpec struct {
	path, account string
	deps          []string
	started       float64
	planned       float64 // the plan finished
	noChanges     bool
	plan          string
	votes         []voteSpec
	applyOutput   string
	ended         float64
	failed        string // why it failed (an apply error, a rejection)
	aborted       bool
}

// execution writes one execution with its approval, votes and log entries.
func (d *infraDemo) execution(run *models.Run, s execSpec) (*models.Execution, error) {
	acc := d.account(s.account)
	leaf := s.path[strings.LastIndex(s.path, "/")+1:]
	x := &models.Execution{
		ExecutionID: fmt.Sprintf("run-%d-%s-%s-%s-%03d", run.PRNumber, run.MergeCommit[:4], s.account, leaf, digits(s.path, run.PRNumber)),
		RunID:       run.ID, CfgPath: s.path, CfgDeps: orEmpty(s.deps), AccountName: acc.Name, AccountPath: acc.Path, AccountDeps: orEmpty(acc.DependsOn),
		InitCommand: d.repo.InitCommand, PlanCommand: d.repo.PlanCommand, ApplyCommand: d.repo.ApplyCommand,
		PlanRoleARN: acc.PlanRole, ApplyRoleARN: acc.ApplyRole, Voters: acc.Voters,
		MinApprovalCount: acc.MinApprovals, MinRejectionCount: acc.MinRejections, Status: models.ExecWaiting, PlanOutput: s.plan,
	}
	target := infra.ExecutionTarget(x.ExecutionID)
	type entry struct {
		at            float64
		event, author string
		detail        map[string]any
	}
	var entries []entry
	if s.started > 0 {
		x.Status, x.Step = models.ExecRunning, models.StepPlanning
		x.ReadyAt, x.StartedAt, x.PlanStartedAt = ptrTime(d.ago(s.started)), ptrTime(d.ago(s.started)), ptrTime(d.ago(s.started))
		entries = append(entries, entry{s.started, infra.EventExecutionStarted, "gantry", map[string]any{"cfg_path": s.path, "account": s.account}})
	}
	var votes []models.Vote
	if s.planned > 0 {
		x.HasChanges = ptrBool(!s.noChanges)
		x.PlanExitCode = ptrInt(2)
		if s.noChanges {
			x.PlanExitCode = ptrInt(0)
		} else {
			x.Step = models.StepVoting
			x.PlanFile = []byte("demo plan file")
			entries = append(entries, entry{s.planned, infra.EventExecutionPlanned, "gantry", map[string]any{"cfg_path": s.path, "voters": acc.Voters, "min_approvals": acc.MinApprovals}})
		}
		policy := approval.Policy{Voters: acc.Voters, MinApprovals: acc.MinApprovals, MinRejections: acc.MinRejections}
		var cast []approval.Vote
		for _, v := range s.votes {
			votes = append(votes, models.Vote{Voter: v.voter, Decision: v.decision, Comment: v.comment, Via: approvals.ViaLink, CreatedAt: d.ago(v.at)})
			cast = append(cast, approval.Vote{Voter: v.voter, Decision: approval.Decision(v.decision), Comment: v.comment, At: d.ago(v.at)})
			res := approval.Tally(policy, cast)
			entries = append(entries, entry{v.at, infra.EventExecutionVoted, v.voter, map[string]any{"decision": v.decision, "comment": v.comment, "via": approvals.ViaLink, "approvals": res.Approvals, "rejections": res.Rejections}})
			if res.State == approval.Approved {
				x.Step = models.StepApplying
				entries = append(entries, entry{v.at, infra.EventExecutionApproved, v.voter, map[string]any{"approved_by": approvedBy(res)}})
			}
		}
		if !s.noChanges {
			a := &models.Approval{Subject: target, Voters: acc.Voters, MinApprovals: acc.MinApprovals, MinRejections: acc.MinRejections, CreatedAt: d.ago(s.planned)}
			if res := approval.Tally(policy, cast); res.Decided() {
				a.State, a.DecidedAt = string(res.State), ptrTime(res.Decisive.At)
			}
			if a.State == "" && s.ended > 0 {
				a.ClosedAt = ptrTime(d.ago(s.ended)) // it ended before its votes decided
			}
			if err := models.InsertApproval(d.ctx, d.db, a); err != nil {
				return nil, err
			}
			x.ApprovalID = &a.ID
		}
	}
	x.ApplyOutput = s.applyOutput
	if s.ended > 0 {
		x.FinishedAt = ptrTime(d.ago(s.ended))
		switch {
		case s.aborted:
			x.Status, x.Step, x.StartedAt, x.ReadyAt = models.ExecAborted, "", nil, nil
			entries = append(entries, entry{s.ended, infra.EventExecutionAborted, "gantry", map[string]any{"cfg_path": s.path}})
		case s.failed != "":
			x.Status, x.Error = models.ExecFailed, s.failed
			if x.Step == models.StepApplying {
				x.ApplyExitCode = ptrInt(1)
			}
			entries = append(entries, entry{s.ended, infra.EventExecutionFailed, "gantry", map[string]any{"cfg_path": s.path, "error": s.failed}})
		default:
			x.Status = models.ExecSucceeded
			if x.Step == models.StepApplying {
				x.ApplyExitCode = ptrInt(0)
			}
			entries = append(entries, entry{s.ended, infra.EventExecutionSucceeded, "gantry", map[string]any{"cfg_path": s.path}})
		}
	}
	if err := models.InsertExecutions(d.ctx, d.db, []*models.Execution{x}); err != nil {
		return nil, err
	}
	for i := range votes {
		votes[i].ApprovalID = *x.ApprovalID
		if err := models.InsertVoteAt(d.ctx, d.db, &votes[i]); err != nil {
			return nil, err
		}
	}
	for _, e := range entries {
		if err := d.log(run, target, e.event, e.author, d.ago(e.at), e.detail); err != nil {
			return nil, err
		}
	}
	if x.Status == models.ExecRunning && x.Step == models.StepVoting {
		d.voting = append(d.voting, x.ID)
	}
	return x, nil
}

// digits stands in for the three random digits of an execution id, the
// same on every load.
func digits(path string, pr int) int {
	n := pr
	for _, r := range path {
		n = (n*31 + int(r)) % 1000
	}
	return n
}

func approvedBy(r approval.Result) []string {
	var out []string
	for _, v := range r.Votes {
		if v.Decision == approval.Approve {
			out = append(out, v.Voter)
		}
	}
	return out
}

// finishedRun is yesterday's pull request: a shared DNS zone and the CDN in
// front of the status page, both applied.
func (d *infraDemo) finishedRun() error {
	const start = 26*60 + 14
	run, err := d.run(38, "Status page: DNS zone and CDN", "status-page", sha("38c0"), sha("a41c38"), sha("5e1f37"), start)
	if err != nil {
		return err
	}
	_, err = d.execution(run, execSpec{
		path: "live/shared/dns", account: "shared", started: start - 0.1, planned: start - 1.2,
		plan: plan(run, "live/shared/dns", []string{"aws_route53_zone.status: Refreshing state... [id=Z0425ACMESTATUS]"},
			createRecord("aws_route53_record.status", "status.acme.example", "CNAME", "d111111abcdef8.cloudfront.net"), "Plan: 1 to add, 0 to change, 0 to destroy."),
		votes:       []voteSpec{{Approver, "approve", "", start - 9}},
		applyOutput: apply([]string{"aws_route53_record.status: Creating...", "aws_route53_record.status: Still creating... [10s elapsed]", "aws_route53_record.status: Creation complete after 38s [id=Z0425ACMESTATUS_status.acme.example_CNAME]"}, "1 added, 0 changed, 0 destroyed"),
		ended:       start - 9.8,
	})
	if err != nil {
		return err
	}
	_, err = d.execution(run, execSpec{
		path: "live/prod/cdn", account: "prod", started: start - 9.8, planned: start - 11.5,
		plan: plan(run, "live/prod/cdn", []string{"aws_cloudfront_distribution.status: Refreshing state... [id=E2QWRUHAPOMQZL]"},
			updateCDN("aliases", `["www.acme.example"]`, `["www.acme.example", "status.acme.example"]`), "Plan: 0 to add, 1 to change, 0 to destroy."),
		votes: []voteSpec{{operator, "approve", "", start - 20}, {Approver, "approve", "Checked the certificate covers status.acme.example.", start - 31}},
		applyOutput: apply([]string{"aws_cloudfront_distribution.status: Modifying... [id=E2QWRUHAPOMQZL]", "aws_cloudfront_distribution.status: Still modifying... [id=E2QWRUHAPOMQZL, 5m0s elapsed]",
			"aws_cloudfront_distribution.status: Modifications complete after 6m12s [id=E2QWRUHAPOMQZL]"}, "0 added, 1 changed, 0 destroyed"),
		ended: start - 37.5,
	})
	if err != nil {
		return err
	}
	return d.endRun(run, true, "", start-37.5)
}

// failedRun is this morning's pull request: the staging database's apply
// failed, so the app that depends on it was aborted and the run failed.
func (d *infraDemo) failedRun() error {
	const start = 3*60 + 12
	run, err := d.run(41, "Staging database on db.t4g.large", "staging-db-size", sha("41f0"), sha("b7d241"), sha("a41c38"), start)
	if err != nil {
		return err
	}
	const why = "apply failed (exit code 1): Error: updating RDS DB Instance (staging-main): InvalidParameterCombination: RDS does not support db.t4g.large with postgres 13.4"
	specs := []execSpec{
		{path: "live/staging/rds", account: "staging", started: start - 0.2, planned: start - 1.3,
			plan:        plan(run, "live/staging/rds", []string{"aws_db_instance.main: Refreshing state... [id=staging-main]"}, resizeDB("staging-main", "db.t4g.medium", "db.t4g.large", false), "Plan: 0 to add, 1 to change, 0 to destroy."),
			votes:       []voteSpec{{operator, "approve", "Staging first, good.", start - 6}},
			applyOutput: stagingRDSError, ended: start - 17.9, failed: why},
		{path: "live/staging/app", account: "staging", deps: []string{"live/staging/rds"}, ended: start - 17.9, aborted: true},
	}
	for _, s := range specs {
		if _, err := d.execution(run, s); err != nil {
			return err
		}
	}
	return d.endRun(run, false, "live/staging/rds: "+why, start-17.9)
}

// stagingRDSError is the output of the staging database's failed apply.
const stagingRDSError = "aws_db_instance.main: Modifying... [id=staging-main]\n\nError: updating RDS DB Instance (staging-main): operation error RDS: ModifyDBInstance, https response error StatusCode: 400, RequestID: 6f1c2b9e-8d1e-4f5a-9b7c-2e0c5d4a1f33, InvalidParameterCombination: RDS does not support creating a DB instance with the following combination: DBInstanceClass=db.t4g.large, Engine=postgres, EngineVersion=13.4, LicenseModel=postgresql-license.\n\n  with aws_db_instance.main,\n  on main.tf line 12, in resource \"aws_db_instance\" \"main\":\n  12: resource \"aws_db_instance\" \"main\" {\n"

// liveRun queues the run of pull request #42's merge in the demo
// repository, as a merge delivery does (infra.Service.HandleDelivery): the
// merged pull request, the queued run, its log entry and its StartRun job.
// From there on it is Gantry's own work: the scan, the plans, the votes
// and the applies.
func (d *infraDemo) liveRun(tx jobs.Tx, live *liveRun) error {
	if err := d.pullRequest(livePR, liveTitle, "octocat", liveBranch, live.Head, models.PRMerged, live.MergeCommit); err != nil {
		return err
	}
	run := &models.Run{Repository: demoRepo, PRNumber: livePR, PRTitle: liveTitle, BaseRef: "main", HeadRef: liveBranch,
		HeadSHA: live.Head, MergeCommit: live.MergeCommit, Scan: d.repo.Scan, CreatedAt: d.now}
	if err := models.InsertRun(d.ctx, d.db, run); err != nil {
		return err
	}
	if err := d.log(run, infra.RunTarget(run.ID), infra.EventRunQueued, "github:octocat", d.now,
		map[string]any{"pull_request": livePR, "merge_commit": live.MergeCommit}); err != nil {
		return err
	}
	return tx.Enqueue(d.ctx, jobs.StartRunArgs{RunID: run.ID}, nil)
}

// runInProgress is the pull request being deployed now: an IAM change in
// shared applied; in staging, the database's apply failed and what depends
// on it was aborted; in prod the VPC and the CDN are applied, monitoring had
// no changes, the database's plan waits for the demo approver, and the
// instances wait for the database. Nothing is left planning or applying: a
// step under way needs its job, and the reconcile sweep would fail (rightly)
// a step whose job is gone.
func (d *infraDemo) runInProgress() error {
	const start = 41.0
	run, err := d.run(42, "Bigger prod database with a read replica; alarms for it", "db-replica", sha("42d9"), sha("9f3c42"), sha("a41c38"), start)
	if err != nil {
		return err
	}
	if _, err := models.TakeMergeLock(d.ctx, d.db, run); err != nil {
		return err
	}
	// It took the lock when it started, as the log says, not when the demo loaded.
	if err := models.BackdateMergeLock(d.ctx, d.db, run, d.ago(start)); err != nil {
		return err
	}
	specs := []execSpec{
		{path: "live/shared/iam", account: "shared", started: 40.8, planned: 39.9,
			plan: plan(run, "live/shared/iam", []string{"aws_iam_role.rds_monitoring: Refreshing state... [id=rds-monitoring]"},
				createPolicyAttachment(), "Plan: 1 to add, 0 to change, 0 to destroy."),
			votes:       []voteSpec{{Approver, "approve", "", 36.5}},
			applyOutput: apply([]string{"aws_iam_role_policy_attachment.rds_enhanced_monitoring: Creating...", "aws_iam_role_policy_attachment.rds_enhanced_monitoring: Creation complete after 1s [id=rds-monitoring-20261123]"}, "1 added, 0 changed, 0 destroyed"),
			ended:       36.2},
		{path: "live/staging/rds", account: "staging", started: 36.2, planned: 35.1,
			plan:        plan(run, "live/staging/rds", []string{"aws_db_instance.main: Refreshing state... [id=staging-main]"}, resizeDB("staging-main", "db.t4g.medium", "db.t4g.large", false), "Plan: 0 to add, 1 to change, 0 to destroy."),
			votes:       []voteSpec{{operator, "approve", "Staging first, good.", 30.4}},
			applyOutput: stagingRDSError,
			ended:       24.3, failed: "apply failed (exit code 1): Error: updating RDS DB Instance (staging-main): InvalidParameterCombination: RDS does not support db.t4g.large with postgres 13.4"},
		{path: "live/staging/app", account: "staging", deps: []string{"live/staging/rds"}, ended: 24.3, aborted: true},
		{path: "live/prod/vpc", account: "prod", started: 36.2, planned: 34.8,
			plan: plan(run, "live/prod/vpc", []string{"aws_vpc.main: Refreshing state... [id=vpc-0a1b2c3d4e5f60789]", "aws_subnet.private[0]: Refreshing state... [id=subnet-0123456789abcdef0]"},
				tagVPC(), "Plan: 0 to add, 1 to change, 0 to destroy."),
			votes:       []voteSpec{{operator, "approve", "", 12.2}, {Approver, "approve", "Tags only.", 4.1}},
			applyOutput: apply([]string{"aws_vpc.main: Modifying... [id=vpc-0a1b2c3d4e5f60789]", "aws_vpc.main: Modifications complete after 2s [id=vpc-0a1b2c3d4e5f60789]"}, "0 added, 1 changed, 0 destroyed"),
			ended:       2.3},
		{path: "live/prod/cdn", account: "prod", started: 36.2, planned: 33.6,
			plan: plan(run, "live/prod/cdn", []string{"aws_cloudfront_distribution.app: Refreshing state... [id=E1ACMEAPPDIST]"},
				updateCDN("price_class", `"PriceClass_100"`, `"PriceClass_All"`), "Plan: 0 to add, 1 to change, 0 to destroy."),
			votes: []voteSpec{{Approver, "approve", "", 20.5}, {operator, "approve", "", 8.0}},
			applyOutput: "aws_cloudfront_distribution.app: Modifying... [id=E1ACMEAPPDIST]\naws_cloudfront_distribution.app: Still modifying... [id=E1ACMEAPPDIST, 10s elapsed]\naws_cloudfront_distribution.app: Still modifying... [id=E1ACMEAPPDIST, 1m0s elapsed]\naws_cloudfront_distribution.app: Still modifying... [id=E1ACMEAPPDIST, 3m0s elapsed]\naws_cloudfront_distribution.app: Still modifying... [id=E1ACMEAPPDIST, 5m0s elapsed]\naws_cloudfront_distribution.app: Still modifying... [id=E1ACMEAPPDIST, 7m50s elapsed]\n" +
				apply([]string{"aws_cloudfront_distribution.app: Modifications complete after 8m12s [id=E1ACMEAPPDIST]"}, "0 added, 1 changed, 0 destroyed"),
			ended: 0.6},
		{path: "live/prod/rds", account: "prod", deps: []string{"live/prod/vpc"}, started: 2.3, planned: 1.2,
			plan: plan(run, "live/prod/rds", []string{"aws_db_subnet_group.main: Refreshing state... [id=prod-main]", "aws_db_instance.main: Refreshing state... [id=prod-main]"},
				resizeDB("prod-main", "db.r6g.large", "db.r6g.xlarge", true), "Plan: 1 to add, 1 to change, 0 to destroy."),
			votes: []voteSpec{{operator, "approve", "Replica sized like the primary; fine by me.", 0.4}}},
		{path: "live/prod/monitoring", account: "prod", deps: []string{"live/prod/vpc"}, started: 2.3, planned: 1.9, noChanges: true, ended: 1.9,
			plan: initOutput(run, "live/prod/monitoring") + "aws_sns_topic.alarms: Refreshing state... [id=arn:aws:sns:eu-west-1:210987654321:prod-alarms]\naws_cloudwatch_metric_alarm.rds_cpu: Refreshing state... [id=prod-main-cpu]\n\nNo changes. Your infrastructure matches the configuration.\n"},
		{path: "live/prod/ec2", account: "prod", deps: []string{"live/prod/rds"}},
	}
	for _, s := range specs {
		if _, err := d.execution(run, s); err != nil {
			return err
		}
	}
	return nil
}

// openPullRequests are two pull requests waiting to merge: one planned
// (a unit with changes, one whose plan failed, one without changes), and
// one whose head does not parse.
func (d *infraDemo) openPullRequests() error {
	head := sha("45e7")
	if err := d.pullRequest(45, "Longer CDN cache for assets; tag the staging VPC", "grace-h", "cdn-cache-ttl", head, models.PROpen, ""); err != nil {
		return err
	}
	run := &models.Run{Repository: demoRepo, PRNumber: 45, MergeCommit: head}
	plans := []*models.PRPlan{
		{Path: "live/prod/cdn", Status: models.PlanSucceeded, ExitCode: ptrInt(2), HasChanges: ptrBool(true),
			Output: plan(run, "live/prod/cdn", []string{"aws_cloudfront_distribution.app: Refreshing state... [id=E1ACMEAPPDIST]"},
				updateCDN("default_cache_behavior[0].default_ttl", "3600", "86400"), "Plan: 0 to add, 1 to change, 0 to destroy.")},
		{Path: "live/staging/vpc", Status: models.PlanFailed, ExitCode: ptrInt(1), Error: "plan failed (exit code 1)",
			Output: initOutput(run, "live/staging/vpc") + "\nError: Unsupported argument\n\n  on main.tf line 9, in resource \"aws_vpc\" \"main\":\n   9:   tag = {\n\nAn argument named \"tag\" is not expected here. Did you mean \"tags\"?\n"},
		{Path: "live/shared/dns", Status: models.PlanSucceeded, ExitCode: ptrInt(0), HasChanges: ptrBool(false),
			Output: initOutput(run, "live/shared/dns") + "aws_route53_zone.status: Refreshing state... [id=Z0425ACMESTATUS]\n\nNo changes. Your infrastructure matches the configuration.\n\nTerraform has compared your real infrastructure against your configuration\nand found no differences, so no changes are needed.\n"},
	}
	for i, p := range plans {
		p.Repository, p.PRNumber, p.HeadSHA = demoRepo, 45, head
		p.CreatedAt, p.StartedAt, p.FinishedAt = d.ago(18), ptrTime(d.ago(17.9)), ptrTime(d.ago(17-float64(i)*0.4))
	}
	if _, err := models.InsertPRPlans(d.ctx, d.db, plans); err != nil {
		return err
	}
	d.entries = append(d.entries, &models.LogEntry{DeploymentID: infra.DeploymentID(run), TargetID: infra.RepositoryTarget(demoRepo), Revision: head,
		Event: infra.EventPullRequestPlanned, Actor: "gantry", Detail: map[string]any{"pull_request": 45, "units": []string{"live/shared/dns", "live/staging/vpc", "live/prod/cdn"}},
		CreatedAt: d.ago(18)})
	broken := sha("46b1")
	if err := d.pullRequest(46, "Move the EC2 fleet to the new launch template", "ada-l", "ec2-launch-template", broken, models.PROpen, ""); err != nil {
		return err
	}
	scanErr := `live/prod/ec2/terragrunt.hcl:4: dependency "rds" has no config_path`
	d.entries = append(d.entries, &models.LogEntry{DeploymentID: infra.DeploymentID(&models.Run{Repository: demoRepo, PRNumber: 46}),
		TargetID: infra.RepositoryTarget(demoRepo), Revision: broken, Event: infra.EventPullRequestScanFailed, Actor: "gantry",
		Detail: map[string]any{"pull_request": 46, "head_commit": broken, "error": scanErr}, CreatedAt: d.ago(6)})
	return models.SetPlanError(d.ctx, d.db, demoRepo, 46, broken, scanErr)
}

// sha makes a commit id that starts with prefix.
func sha(prefix string) string {
	const filler = "7c1e0f5a9b3d2e4f6a8c0b1d3e5f7a9c2b4d6e8f"
	return (prefix + filler)[:40]
}

func initOutput(run *models.Run, unit string) string {
	return fmt.Sprintf("Checking out %s at %s\nInitializing the backend...\n\nSuccessfully configured the backend \"s3\"! Terraform will automatically\nuse this backend unless the backend configuration changes.\nInitializing provider plugins...\n- Reusing previous version of hashicorp/aws from the dependency lock file\n- Using previously-installed hashicorp/aws v5.82.2\n\nTerraform has been successfully initialized!\n", unit, run.MergeCommit[:7])
}

func plan(run *models.Run, unit string, refresh []string, actions, summary string) string {
	var b strings.Builder
	b.WriteString(initOutput(run, unit))
	for _, r := range refresh {
		b.WriteString(r + "\n")
	}
	b.WriteString("\nTerraform used the selected providers to generate the following execution\nplan. Resource actions are indicated with the following symbols:\n")
	if strings.Contains(actions, "will be created") {
		b.WriteString("  + create\n")
	}
	if strings.Contains(actions, "updated in-place") {
		b.WriteString("  ~ update in-place\n")
	}
	b.WriteString("\nTerraform will perform the following actions:\n\n" + actions + "\n" + summary + "\n")
	b.WriteString("\n─────────────────────────────────────────────────────────────────────────────\n\nSaved the plan to: plan.tfplan\n\nTo perform exactly these actions, run the following command to apply:\n    terraform apply \"plan.tfplan\"\n")
	return b.String()
}

func apply(lines []string, counts string) string {
	return strings.Join(lines, "\n") + "\n\nApply complete! Resources: " + counts + ".\n"
}

func createRecord(address, name, kind, value string) string {
	return fmt.Sprintf(`  # %s will be created
  + resource "aws_route53_record" "status" {
      + allow_overwrite = (known after apply)
      + fqdn            = (known after apply)
      + id              = (known after apply)
      + name            = "%s"
      + records         = [
          + "%s",
        ]
      + ttl             = 300
      + type            = "%s"
      + zone_id         = "Z0425ACMESTATUS"
    }
`, address, name, value, kind)
}

func updateCDN(attr, from, to string) string {
	return fmt.Sprintf(`  # aws_cloudfront_distribution.app will be updated in-place
  ~ resource "aws_cloudfront_distribution" "app" {
        id                             = "E1ACMEAPPDIST"
      ~ %s = %s -> %s
        tags                           = {
            "team" = "platform"
        }
        # (24 unchanged attributes hidden)

        # (6 unchanged blocks hidden)
    }
`, attr, from, to)
}

func resizeDB(id, from, to string, replica bool) string {
	s := fmt.Sprintf(`  # aws_db_instance.main will be updated in-place
  ~ resource "aws_db_instance" "main" {
        id                                    = "%s"
      ~ instance_class                        = "%s" -> "%s"
        tags                                  = {
            "team" = "platform"
        }
        # (61 unchanged attributes hidden)
    }
`, id, from, to)
	if replica {
		s += fmt.Sprintf(`
  # aws_db_instance.replica[0] will be created
  + resource "aws_db_instance" "replica" {
      + address                               = (known after apply)
      + arn                                   = (known after apply)
      + identifier                            = "%s-replica-1"
      + instance_class                        = "%s"
      + replicate_source_db                   = "%s"
      + storage_encrypted                     = true
      + tags                                  = {
          + "team" = "platform"
        }
      + vpc_security_group_ids                = (known after apply)
        # (48 more attributes known after apply)
    }
`, id, to, id)
	}
	return s
}

func tagVPC() string {
	return `  # aws_vpc.main will be updated in-place
  ~ resource "aws_vpc" "main" {
        id                                   = "vpc-0a1b2c3d4e5f60789"
      ~ tags                                 = {
          + "cost-center" = "platform-42"
            "team"        = "platform"
        }
      ~ tags_all                             = {
          + "cost-center" = "platform-42"
            # (1 unchanged element hidden)
        }
        # (16 unchanged attributes hidden)
    }
`
}

func createPolicyAttachment() string {
	return `  # aws_iam_role_policy_attachment.rds_enhanced_monitoring will be created
  + resource "aws_iam_role_policy_attachment" "rds_enhanced_monitoring" {
      + id         = (known after apply)
      + policy_arn = "arn:aws:iam::aws:policy/service-role/AmazonRDSEnhancedMonitoringRole"
      + role       = "rds-monitoring"
    }
`
}
