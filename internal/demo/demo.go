// Package demo loads example data for `gantry dev --demo`, so that every page
// that exists has something to show on a first look.
package demo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/allocation"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/pools"
	"github.com/gantryhq/gantry/models"
)

const (
	actor       = "gantry-demo"
	loadedEvent = "demo-loaded"
	// environmentsLoadedEvent marks the device farm as loaded.
	environmentsLoadedEvent = "demo-environments-loaded"
	// Password of the demo users; printed nowhere because it is in the docs.
	Password = "demo-password-123"
)

// People are the demo users, one per role below admin.
var People = []access.NewUser{
	{Email: "olivia.operator@example.com", Name: "Olivia Operator", Role: "operator", Password: Password},
	{Email: "arun.approver@example.com", Name: "Arun Approver", Role: "approver", Password: Password},
	{Email: "vera.viewer@example.com", Name: "Vera Viewer", Role: "viewer", Password: Password},
}

// Base adds the users, a token and a pipeline's log once; it reports false
// when they were already there. The areas' demo data is added by the
// areas (Environments, Infra), each once on its own, so a database loaded
// before an area existed gets that area's data too.
func Base(ctx context.Context, db bun.IDB) (bool, error) {
	return loadBase(ctx, db)
}

// loadBase adds the users, a token and a pipeline's log.
func loadBase(ctx context.Context, db bun.IDB) (bool, error) {
	_, err := models.LatestRevision(ctx, db, "demo", loadedEvent)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, models.ErrNotFound) {
		return false, err
	}
	err = db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var operator *models.User
		for _, p := range People {
			u, err := access.CreateUser(ctx, tx, p, actor)
			if err != nil {
				return err
			}
			if operator == nil {
				operator = u
			}
		}
		if _, _, err := access.CreateToken(ctx, tx, operator, access.NewToken{Name: "ci-integration-tests", Scopes: []string{"read", "write"}, ExpiresIn: 90 * 24 * time.Hour}, actor); err != nil {
			return err
		}
		if err := pipelineHistory(ctx, tx); err != nil {
			return err
		}
		return models.AppendLog(ctx, tx, &models.LogEntry{TargetID: "demo", Event: loadedEvent, Actor: actor})
	})
	if err != nil {
		return false, err
	}
	return true, nil
}

// demoPools is a pool of test devices (kind slot): leasable on any machine,
// with a cleanup that fails on purpose for pixel-7, and says so in its
// output, so the dirty queue has an entry. Nothing else in the pool fails:
// the other cleanups (the leases in use end after their 2h session) succeed.
// Its operator is notified of the dirty device, so the notice is in the dev
// mailbox.
const demoPools = `clients:
  - name: demo-ci
    users: [olivia.operator@example.com]
pools:
  - name: device-farm
    kind: slot
    session: 2h
    cleanup: [sh, -c, 'echo "wiping $GANTRY_ENVIRONMENT"; if [ "$GANTRY_ENVIRONMENT" = pixel-7 ]; then echo "${dirtyOnPurpose}"; exit 3; fi']
    cleanup_timeout: 5m
    notify: {emails: [olivia.operator@example.com]}
environments:
  - {pool: device-farm, name: pixel-7, capabilities: {os: android, version: "14"}}
  - {pool: device-farm, name: pixel-8, capabilities: {os: android, version: "15"}}
  - {pool: device-farm, name: iphone-15, capabilities: {os: ios, version: "17"}}
  - {pool: device-farm, name: iphone-16, capabilities: {os: ios, version: "18"}}
`

// Environments registers the device farm once and leases from it: two
// devices in use, one released (its cleanup fails, so it ends dirty),
// history behind.
func Environments(ctx context.Context, db bun.IDB, svc *pools.Service) (bool, error) {
	if _, err := models.LatestRevision(ctx, db, "demo", environmentsLoadedEvent); err == nil {
		return false, nil
	} else if !errors.Is(err, models.ErrNotFound) {
		return false, err
	}
	if err := environments(ctx, svc); err != nil {
		return false, err
	}
	return true, models.AppendLog(ctx, db, &models.LogEntry{TargetID: "demo", Event: environmentsLoadedEvent, Actor: actor,
		Detail: map[string]any{"dirty_on_purpose": dirtyOnPurpose}})
}

// dirtyOnPurpose says, in the demo's log and in the failing cleanup's
// output, that the dirty device is the demo's doing, not a fault. It goes
// inside single quotes in demoPools: no apostrophes.
const dirtyOnPurpose = "demo: the cleanup of pixel-7 fails on purpose (exit code 3) so that the dirty queue has an entry; Mark clean puts it back in the pool"

func environments(ctx context.Context, svc *pools.Service) error {
	f, err := gantryfile.Parse("demo", []byte(strings.ReplaceAll(demoPools, "${dirtyOnPurpose}", dirtyOnPurpose)), nil)
	if err != nil {
		return err
	}
	if _, err := svc.Sync(ctx, f, actor); err != nil {
		return err
	}
	lease := func(requester string, caps map[string]string) (*pools.Lease, error) {
		leases, err := svc.Allocate(ctx, allocation.Request{Pool: "device-farm", Requester: requester,
			Requirements: []allocation.Requirement{{Capabilities: caps}}}, "demo-ci", "client:demo-ci")
		if err != nil {
			return nil, err
		}
		return &leases[0], nil
	}
	first, err := lease("github.com/acme/app/actions/runs/1201", map[string]string{"version": "14"})
	if err != nil {
		return err
	}
	if _, _, err := svc.Release(ctx, first.Allocation.ID, "", models.EndedByClient, "success", "client:demo-ci"); err != nil {
		return err
	}
	if _, err := lease("github.com/acme/app/actions/runs/1202", map[string]string{"os": "ios"}); err != nil {
		return err
	}
	_, err = lease("github.com/acme/app/actions/runs/1203", map[string]string{"version": "15"})
	return err
}

// pipelineHistory writes the log of a small release pipeline (seed 004's
// shape: pipeline → stages → hosts): one revision through, one failed in
// staging, one in progress.
func pipelineHistory(ctx context.Context, db bun.IDB) error {
	type step struct{ target, event string }
	through := []step{
		{"p-web", "pipeline-started"},
		{"p-web/build", "stage-started"}, {"p-web/build", "stage-finished-successfully"},
		{"p-web/staging", "stage-started"}, {"p-web/staging/web-1", "host-deployed"}, {"p-web/staging/web-2", "host-deployed"}, {"p-web/staging", "stage-finished-successfully"},
		{"p-web/production", "stage-started"}, {"p-web/production/web-1", "host-deployed"}, {"p-web/production/web-2", "host-deployed"}, {"p-web/production", "stage-finished-successfully"},
		{"p-web", "pipeline-finished-successfully"},
	}
	failed := []step{
		{"p-web", "pipeline-started"},
		{"p-web/build", "stage-started"}, {"p-web/build", "stage-finished-successfully"},
		{"p-web/staging", "stage-started"}, {"p-web/staging/web-1", "host-deploy-failed"}, {"p-web/staging", "stage-failed"},
		{"p-web", "pipeline-failed"},
	}
	inProgress := []step{
		{"p-web", "pipeline-started"},
		{"p-web/build", "stage-started"}, {"p-web/build", "stage-finished-successfully"},
		{"p-web/staging", "stage-started"}, {"p-web/staging/web-1", "host-deployed"},
	}
	for i, run := range [][]step{through, failed, inProgress} {
		rev := fmt.Sprintf("v1.%d.0", 4+i)
		dep := fmt.Sprintf("dep-%04d", 101+i)
		for _, s := range run {
			e := &models.LogEntry{DeploymentID: dep, TargetID: s.target, Revision: rev, Event: s.event, Actor: "pipeline:p-web"}
			if err := models.AppendLog(ctx, db, e); err != nil {
				return err
			}
		}
	}
	return nil
}
