// Package demo loads example data for `gantry dev --demo`, so that every page
// that exists has something to show on a first look.
package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/models"
)

const (
	actor       = "gantry-demo"
	loadedEvent = "demo-loaded"
	// Password of the demo users; printed nowhere because it is in the docs.
	Password = "demo-password-123"
)

// People are the demo users, one per role below admin.
var People = []access.NewUser{
	{Email: "olivia.operator@example.com", Name: "Olivia Operator", Role: "operator", Password: Password},
	{Email: "arun.approver@example.com", Name: "Arun Approver", Role: "approver", Password: Password},
	{Email: "vera.viewer@example.com", Name: "Vera Viewer", Role: "viewer", Password: Password},
}

// Load adds the demo data once; it reports false when it was already there.
func Load(ctx context.Context, db bun.IDB) (bool, error) {
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
	return err == nil, err
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
