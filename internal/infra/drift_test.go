package infra_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/mail/mailtest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

const opsMail = "ops@example.com"

// withDrift is the test repository's gantry.yaml with drift detection.
func (b *bundle) withDrift() string {
	yaml := b.repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, []string{ada, grace}, 1, 1)
	return strings.Replace(yaml, "scan: graph\n", "scan: graph\n    drift: {schedule: every 6h, notify: [Ops@Example.com]}\n", 1)
}

// driftOut changes unit's infrastructure behind Gantry's back: its state
// is applied from code that is not on the trunk.
func (b *bundle) driftOut(t *testing.T, unit, name, input string) {
	t.Helper()
	main := b.repo.Resource(unit, name, input)
	infratest.Git(t, b.repo.Work, "checkout", "--quiet", infratest.Trunk)
	b.repo.Write(map[string]string{unit + "/main.tf": main})
	b.repo.Apply(unit)
	infratest.Git(t, b.repo.Work, "checkout", "--quiet", "--", unit+"/main.tf")
}

// sweep runs what River's leader runs on schedule and waits until every
// check of the sweep has finished; it returns the repository's drift.
func (b *bundle) sweep(t *testing.T) models.DriftRepository {
	t.Helper()
	require.NoError(t, b.Infra.ScheduleDrift(b.ctx))
	var d models.DriftRepository
	servertest.WaitFor(t, func() (bool, string) {
		all, err := models.ListDrift(b.ctx, b.DB.Bun)
		require.NoError(t, err)
		if len(all) != 1 {
			return false, fmt.Sprintf("%d repositories with drift", len(all))
		}
		d = all[0]
		return d.Sweep != nil && d.Checking == 0, fmt.Sprintf("sweep %+v, %d checks left", d.Sweep, d.Checking)
	})
	return d
}

func paths(units []models.DriftUnit) []string {
	var out []string
	for _, u := range units {
		out = append(out, u.Path)
	}
	return out
}

// TestDrift_detectedListedNotifiedAndReconciled: state changed out of band
// is found by the scheduled plan of every unit of the trunk, listed with its
// plan, counted by the metric and mailed once; nothing is applied until an
// operator reconciles it, which runs the normal plan → vote → apply under
// the merge lock, after which a fresh check finds no drift.
func TestDrift_detectedListedNotifiedAndReconciled(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.driftOut(t, infratest.DNS, "zone", `"dns-changed-by-hand"`)
	b.Sync(t, b.withDrift())

	d := b.sweep(t)
	require.Equal(t, 6*60*60, d.EverySeconds)
	require.ElementsMatch(t, []string{infratest.DNS, infratest.VPC, infratest.RDS, infratest.EC2}, d.Sweep.Units)
	require.Equal(t, infratest.Git(t, b.repo.Work, "rev-parse", infratest.Trunk), d.Sweep.CommitSHA)
	require.Equal(t, []string{infratest.DNS}, paths(d.Drifted), "only dns drifted")
	require.Empty(t, d.Failed)
	check, err := models.DriftCheckByID(b.ctx, b.DB.Bun, d.Drifted[0].ID)
	require.NoError(t, err)
	require.Contains(t, check.Output, `"dns-changed-by-hand" -> "dns-v1"`)
	require.Equal(t, "dns-changed-by-hand", b.repo.Output(infratest.DNS), "a drift check never applies")

	// The metric, and the mail to the configured recipients.
	reg := prometheus.NewRegistry()
	infra.NewMetrics(reg, b.DB)
	require.Equal(t, map[string]float64{"live": 1}, gauge(t, reg, "gantry_infra_drifted_units"))
	require.Equal(t, map[string]float64{"live": 0}, gauge(t, reg, "gantry_infra_drift_failed_units"))
	m := b.Mail.Wait(t, servertest.Wait, func(m mailtest.Message) bool { return slices.Contains(m.To, opsMail) })
	require.Equal(t, "Drift in live: live/shared/dns", m.Subject)
	require.Contains(t, m.Text, fmt.Sprintf("http://gantry.test/infra/drift/%d", check.ID))
	require.Contains(t, m.Text, "Plan: 0 to add, 1 to change, 0 to destroy.")

	// A second sweep finds it again, and mails nobody again.
	require.NoError(t, b.Infra.SweepDrift(b.ctx, "live"))
	d = b.sweep(t)
	require.Equal(t, []string{infratest.DNS}, paths(d.Drifted))
	require.Greater(t, d.Drifted[0].ID, check.ID)
	require.Len(t, slices.DeleteFunc(b.Mail.Messages(), func(m mailtest.Message) bool { return !slices.Contains(m.To, opsMail) }), 1,
		"a drift already mailed is not mailed again")

	// Only a drifted check can be reconciled.
	clean := lastCheckOf(t, b, infratest.VPC)
	_, err = b.Infra.ReconcileDrift(b.ctx, clean.ID, "user:op@example.com")
	var ae *apperr.Error
	require.True(t, errors.As(err, &ae) && ae.Code == apperr.Conflict, "%v", err)

	// Reconcile: a run of that unit alone at the trunk's head, voted on
	// and applied like a merge's.
	run, err := b.Infra.ReconcileDrift(b.ctx, d.Drifted[0].ID, "user:op@example.com")
	require.NoError(t, err)
	_, err = b.Infra.ReconcileDrift(b.ctx, d.Drifted[0].ID, "user:op@example.com")
	require.True(t, errors.As(err, &ae) && ae.Code == apperr.Conflict, "a second reconcile while one runs: %v", err)
	x := b.WaitExecution(t, run.ID, infratest.DNS, models.ExecRunning, models.StepVoting)
	require.Contains(t, x.PlanOutput, `"dns-changed-by-hand" -> "dns-v1"`)
	lock, err := models.MergeLockOf(b.ctx, b.DB.Bun, "live")
	require.NoError(t, err)
	require.Equal(t, run.ID, lock.RunID, "under the repository's merge lock")
	token := b.VoteMail(t, ada, infratest.DNS)
	_, result, err := b.Infra.Approvals.VoteWithLink(b.ctx, token, "approve", "put it back")
	require.NoError(t, err)
	require.Equal(t, approval.Approved, result.State)
	run = b.WaitRun(t, run.ID, models.RunSucceeded)
	require.Equal(t, map[string]string{infratest.DNS: models.ExecSucceeded}, b.executions(t, run.ID))
	require.Equal(t, "dns-v1", b.repo.Output(infratest.DNS))
	require.Equal(t, d.Sweep.CommitSHA, run.MergeCommit)
	require.Equal(t, "Reconcile drift of "+infratest.DNS, run.PRTitle)
	require.NotNil(t, run.ReconcileCheckID)

	// The applied unit is checked again and no longer listed.
	servertest.WaitFor(t, func() (bool, string) {
		all, err := models.ListDrift(b.ctx, b.DB.Bun)
		require.NoError(t, err)
		return len(all[0].Drifted) == 0 && all[0].Checking == 0, fmt.Sprintf("drifted: %v", paths(all[0].Drifted))
	})

	// The log tells it: found, reconcile requested by the operator, the run.
	entries, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Deployment: infra.DeploymentID(run), Limit: 100})
	require.NoError(t, err)
	var events []string
	for _, e := range entries {
		events = append(events, e.Event)
	}
	require.Contains(t, events, infra.EventDriftReconcileStart)
	require.Contains(t, events, infra.EventRunSucceeded)
	found, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Target: infra.DriftTarget(check.ID), Limit: 10})
	require.NoError(t, err)
	require.Equal(t, infra.EventDriftFound, found[len(found)-1].Event)
}

// TestDrift_failingPlanIsShownNotFatal: a unit whose drift plan fails on
// the trunk is listed as failing with its reason; the other units are
// checked as usual.
func TestDrift_failingPlanIsShownNotFatal(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.repo.Write(map[string]string{infratest.EC2 + "/main.tf": "resource \"terraform_data\" \"ec2\" {\n"})
	b.repo.Commit("break ec2")
	b.repo.Push(infratest.Trunk)
	b.Sync(t, b.withDrift())

	d := b.sweep(t)
	require.Equal(t, []string{infratest.EC2}, paths(d.Failed))
	require.Equal(t, "init failed (exit code 1)", d.Failed[0].Error)
	require.Empty(t, d.Drifted)
	for _, unit := range []string{infratest.DNS, infratest.VPC, infratest.RDS} {
		c := lastCheckOf(t, b, unit)
		require.Equal(t, models.DriftSucceeded, c.Status, unit)
		require.False(t, *c.HasChanges, unit)
	}
	_, err := b.Infra.ReconcileDrift(b.ctx, d.Failed[0].ID, "user:op@example.com")
	require.Error(t, err, "a failed check has nothing to reconcile")
}

// TestDrift_unreadableUnitFailsOnlyItsCheck: a unit Gantry cannot read on
// the trunk fails its own check with the reason; the sweep goes on.
func TestDrift_unreadableUnitFailsOnlyItsCheck(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.repo.Write(map[string]string{infratest.RDS + "/terragrunt.hcl": "dependency \"vpc\" {\n  config_path = \"../vpc\"\n}\n\ndependency \"gone\" {\n  config_path = \"../gone\"\n}\n"})
	b.repo.Commit("rds names a directory that does not exist")
	b.repo.Push(infratest.Trunk)
	b.Sync(t, b.withDrift())

	d := b.sweep(t)
	require.Empty(t, d.Sweep.Error, "the sweep is not failed by one unit")
	require.Contains(t, paths(d.Failed), infratest.RDS)
	require.Equal(t, "Gantry cannot read this unit's configuration:\n"+infratest.RDS+`/terragrunt.hcl:6: dependency "gone": config_path ../gone is not a directory with terragrunt.hcl`,
		lastCheckOf(t, b, infratest.RDS).Error)
	for _, unit := range []string{infratest.DNS, infratest.VPC} {
		require.Equal(t, models.DriftSucceeded, lastCheckOf(t, b, unit).Status, unit)
	}
}

// TestDrift_offByDefault: a repository without drift in gantry.yaml gets
// no sweep and no drift plan, whenever the schedule runs.
func TestDrift_offByDefault(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	require.NoError(t, b.Infra.ScheduleDrift(b.ctx))
	require.NoError(t, b.Infra.SweepDrift(b.ctx, "live"))
	var n int
	require.NoError(t, b.DB.Bun.NewRaw("SELECT count(*) FROM river_job WHERE kind IN ('drift_sweep', 'drift_plan')").Scan(b.ctx, &n))
	require.Zero(t, n)
	require.NoError(t, b.DB.Bun.NewRaw("SELECT count(*) FROM drift_sweeps").Scan(b.ctx, &n))
	require.Zero(t, n)
	all, err := models.ListDrift(b.ctx, b.DB.Bun)
	require.NoError(t, err)
	require.Empty(t, all)
}

func lastCheckOf(t *testing.T, b *bundle, unit string) models.DriftCheck {
	t.Helper()
	var c models.DriftCheck
	require.NoError(t, b.DB.Bun.NewSelect().Model(&c).Where("path = ?", unit).OrderExpr("id DESC").Limit(1).Scan(b.ctx))
	return c
}

// gauge reads a gauge labelled by repository from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			require.Len(t, m.GetLabel(), 1)
			require.Equal(t, "repository", m.GetLabel()[0].GetName())
			out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return out
}

// TestDrift_strandedCheckDoesNotBlockTheUnit: a check whose job is gone
// (cancelled from /admin/jobs, or discarded) would keep its unit from ever
// being checked again (one live check per unit); the next sweep fails it
// with why and queues a fresh one.
func TestDrift_strandedCheckDoesNotBlockTheUnit(t *testing.T) {
	t.Parallel()
	b := setup(t, options{noWorkers: true})
	b.Sync(t, b.withDrift())
	stranded, err := models.QueueDriftChecks(b.ctx, b.DB.Bun, "live", "0000000000000000000000000000000000000000", []string{infratest.DNS})
	require.NoError(t, err)
	require.Len(t, stranded, 1)
	_, err = b.DB.Bun.NewUpdate().Model((*models.DriftCheck)(nil)).Set("status = ?, created_at = now() - interval '10 minutes'", models.DriftRunning).
		Where("id = ?", stranded[0].ID).Exec(b.ctx)
	require.NoError(t, err)

	require.NoError(t, b.Infra.SweepDrift(b.ctx, "live"))
	old, err := models.DriftCheckByID(b.ctx, b.DB.Bun, stranded[0].ID)
	require.NoError(t, err)
	require.Equal(t, models.DriftFailed, old.Status)
	require.Equal(t, "its job ended without finishing the plan", old.Error)
	fresh := lastCheckOf(t, b, infratest.DNS)
	require.Equal(t, models.DriftQueued, fresh.Status)
	require.Greater(t, fresh.ID, old.ID)
	var jobs int
	require.NoError(t, b.DB.Bun.NewRaw("SELECT count(*) FROM river_job WHERE kind = 'drift_plan' AND (args->>'check_id')::bigint = ?", fresh.ID).Scan(b.ctx, &jobs))
	require.Equal(t, 1, jobs)

	// A sweep while the unit's check still waits queues no second one.
	require.NoError(t, b.Infra.SweepDrift(b.ctx, "live"))
	require.Equal(t, fresh.ID, lastCheckOf(t, b, infratest.DNS).ID, "not stacked")
}

// TestDrift_oldChecksArePruned: a sweep deletes the checks finished more
// than DriftRetention ago, but never a unit's latest nor one a run
// reconciled.
func TestDrift_oldChecksArePruned(t *testing.T) {
	t.Parallel()
	b := setup(t, options{noWorkers: true})
	b.Sync(t, b.withDrift())
	old := time.Now().Add(-infra.DriftRetention - time.Hour)
	insert := func(unit string, finished time.Time, drifted bool) int64 {
		c := &models.DriftCheck{Repository: "live", Path: unit, CommitSHA: strings.Repeat("a", 40), Status: models.DriftSucceeded,
			HasChanges: &drifted, FinishedAt: &finished}
		_, err := b.DB.Bun.NewInsert().Model(c).Returning("id").Exec(b.ctx)
		require.NoError(t, err)
		return c.ID
	}
	stale := insert(infratest.VPC, old, false)
	reconciled := insert(infratest.VPC, old, true)
	latestOld := insert(infratest.VPC, old, false) // the unit's latest: kept however old
	recent := insert(infratest.DNS, time.Now(), false)
	staleDNS := insert(infratest.DNS, old, false) // newer id, but an older finish than recent: not the latest
	_, err := b.Infra.ReconcileDrift(b.ctx, reconciled, "user:op@example.com")
	require.NoError(t, err)

	require.NoError(t, b.Infra.SweepDrift(b.ctx, "live"))
	left := map[int64]bool{}
	var ids []int64
	require.NoError(t, b.DB.Bun.NewSelect().Model((*models.DriftCheck)(nil)).Column("id").Scan(b.ctx, &ids))
	for _, id := range ids {
		left[id] = true
	}
	require.False(t, left[stale], "an old check with a newer one of its unit is pruned")
	require.True(t, left[reconciled], "a check a run reconciled is kept")
	require.True(t, left[latestOld], "the unit's latest finished check is kept")
	require.True(t, left[recent])
	require.True(t, left[staleDNS], "the latest of dns by id, kept")
}

// TestDrift_reconcilingAUnitGoneFromTheTrunkFails: the trunk moved on and
// the drifted unit was deleted meanwhile: the reconcile run fails saying
// so, releases the merge lock, and applies nothing.
func TestDrift_reconcilingAUnitGoneFromTheTrunkFails(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.Sync(t, b.withDrift())
	drifted, finished := true, time.Now()
	c := &models.DriftCheck{Repository: "live", Path: infratest.EC2, CommitSHA: b.repo.Head(), Status: models.DriftSucceeded,
		HasChanges: &drifted, FinishedAt: &finished}
	_, err := b.DB.Bun.NewInsert().Model(c).Returning("id").Exec(b.ctx)
	require.NoError(t, err)
	b.repo.Write(map[string]string{infratest.EC2: ""})
	head := b.repo.Commit("remove ec2")
	b.repo.Push(infratest.Trunk)

	run, err := b.Infra.ReconcileDrift(b.ctx, c.ID, "user:op@example.com")
	require.NoError(t, err)
	run = b.WaitRun(t, run.ID, models.RunFailed)
	require.Contains(t, run.Error, "live/prod/ec2 is no longer a unit on main at "+head[:12])
	require.Equal(t, head, run.MergeCommit)
	require.Empty(t, b.executions(t, run.ID))
	lock, err := models.MergeLockOf(b.ctx, b.DB.Bun, "live")
	require.NoError(t, err)
	require.Nil(t, lock)
}
