package demo

import (
	"context"
	"errors"
	"fmt"

	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/pipelines"
	"github.com/gantryhq/gantry/models"
)

// The pipelines demo: a release pipeline build → beta (two host groups in
// parallel) → a gate voted by the demo approver → prod with a (deployed,
// tested) batch, and three revisions registered through the service as CI
// would. The workers move them with real commands (sleep, test): 1.0.0
// goes through beta and waits at the gate for a vote, 1.1.0 fails its
// beta smoke test and waits for an operator, 1.2.0 waits at the build for
// its artifact.

const pipelinesLoadedEvent = "demo-pipelines-loaded"

const demoPipeline = `pipelines:
  - name: storefront
    timeout: 2m
    stages:
      - name: build
        artifacts: [x86]
      - name: beta
        after: [build]
        host_groups:
          - {name: east, hosts: [beta-east-1, beta-east-2]}
          - {name: west, hosts: [beta-west-1]}
        steps:
          - {name: deployed, run: [sleep, "2"]}
          - {name: tested, run: [test, "{revision}", "!=", "1.1.0"]}
      - name: approval
        after: [beta]
        approval: {voters: [arun.approver@example.com]}
      - name: prod
        after: [approval]
        batch: [deployed, tested]
        host_groups:
          - {name: all, hosts: [prod-1, prod-2, prod-3]}
        steps:
          - {name: deployed, run: [sleep, "2"]}
          - {name: tested, run: ["true"]}
`

// Pipelines loads the pipelines demo once; it reports whether it did.
func Pipelines(ctx context.Context, svc *pipelines.Service) (bool, error) {
	db := svc.Queue.DB()
	if _, err := models.LatestRevision(ctx, db, "demo", pipelinesLoadedEvent); err == nil {
		return false, nil
	} else if !errors.Is(err, models.ErrNotFound) {
		return false, err
	}
	f, err := gantryfile.Parse("demo", []byte(demoPipeline), nil, gantryfile.PipelinesSection)
	if err != nil {
		return false, err
	}
	if _, err := svc.Sync(ctx, f, actor); err != nil {
		return false, fmt.Errorf("registering the demo pipeline: %w", err)
	}
	ci := "token:demo:ci@example.com"
	for _, rev := range []string{"1.0.0", "1.1.0", "1.2.0"} {
		if _, _, err := svc.Register(ctx, "storefront", rev, ci); err != nil {
			return false, err
		}
	}
	for _, rev := range []string{"1.0.0", "1.1.0"} {
		if _, _, err := svc.RegisterArtifact(ctx, "storefront", rev, "x86", "s3://builds/storefront-"+rev+"-x86.tar.gz", ci); err != nil {
			return false, err
		}
	}
	return true, models.AppendLog(ctx, db, &models.LogEntry{TargetID: "demo", Event: pipelinesLoadedEvent, Actor: actor,
		Detail: map[string]any{"pipeline": "storefront"}})
}
