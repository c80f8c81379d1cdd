package pipelines

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/progression"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// MaxRevisionLen bounds a revision's name.
const MaxRevisionLen = 200

// checkRevision refuses a revision name no log entry should hold.
func checkRevision(rev string) error {
	switch {
	case strings.TrimSpace(rev) == "":
		return apperr.Field("revision", "is required: the version to deploy, such as a git SHA or a build number")
	case len(rev) > MaxRevisionLen:
		return apperr.Field("revision", fmt.Sprintf("is longer than %d characters", MaxRevisionLen))
	case strings.ContainsFunc(rev, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == '/' }):
		return apperr.Field("revision", "must not contain spaces, control characters or /")
	}
	return nil
}

// Register starts revision rev through the pipeline: its first log entry
// (pipeline-started) and the progression's wake-up, in one transaction.
// Registering it again changes nothing and says so (created is false).
func (s *Service) Register(ctx context.Context, pipeline, rev, actor string) (r *models.PipelineRevision, created bool, err error) {
	if err := checkRevision(rev); err != nil {
		return nil, false, err
	}
	err = s.inTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		if _, err := s.load(ctx, tx, pipeline); err != nil {
			return err
		}
		r = &models.PipelineRevision{Pipeline: pipeline, Revision: rev, Status: models.RevisionInFlight, RegisteredBy: actor}
		if created, err = models.InsertRevision(ctx, tx, r); err != nil || !created {
			return err
		}
		if err := logStep(ctx, tx, r, pipeline, progression.PipelineStarted, actor, map[string]any{"revision_id": r.ID}); err != nil {
			return err
		}
		return progressTx(ctx, tx, pipeline)
	})
	return r, created, err
}

// RegisterArtifact records the build artifact of revision rev for arch
// (where it is: a URL, an image reference, a path), and completes the
// build step waiting for it. The architecture must be one the pipeline's
// builds wait for (400 naming arch otherwise). Registering the same
// artifact again changes nothing; another location for the same one is a
// conflict: artifacts are immutable.
func (s *Service) RegisterArtifact(ctx context.Context, pipeline, rev, arch, location, actor string) (a *models.PipelineArtifact, created bool, err error) {
	if strings.TrimSpace(location) == "" {
		return nil, false, apperr.Field("location", "is required: where the artifact is (a URL, an image, a path)")
	}
	err = s.inTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		l, err := s.load(ctx, tx, pipeline)
		if err != nil {
			return err
		}
		archs := l.def.Architectures()
		if !slices.Contains(archs, arch) {
			return apperr.Field("arch", fmt.Sprintf("pipeline %s builds no artifact for %q (it waits for %s)", pipeline, arch, orNone(archs)))
		}
		r, err := models.RevisionByName(ctx, tx, pipeline, rev)
		if err != nil {
			return notFound(err, fmt.Sprintf("revision %s in pipeline %s (register it first)", rev, pipeline))
		}
		a = &models.PipelineArtifact{RevisionID: r.ID, Arch: arch, Location: location, RegisteredBy: actor}
		if created, err = models.InsertArtifact(ctx, tx, a); err != nil {
			return err
		}
		if !created {
			if a.Location != location {
				return apperr.New(apperr.Conflict, "Revision %s already has its %s artifact at %s; artifacts do not change.", rev, arch, a.Location)
			}
			return nil
		}
		if err := logStep(ctx, tx, r, pipeline, EventArtifactRegistered, actor, map[string]any{"arch": arch, "location": location}); err != nil {
			return err
		}
		// A build waiting for it completes its step now; one not there yet
		// finds the artifact when it gets there.
		for _, st := range l.def.Stages {
			if !slices.Contains(st.Artifacts, arch) {
				continue
			}
			step := progression.Step{Event: progression.ArtifactEvent(arch), Target: l.shape.StageTarget(st.Name)}
			if err := s.completeIfWaiting(ctx, tx, l, r, step, actor, map[string]any{"location": location}); err != nil {
				return err
			}
		}
		return progressTx(ctx, tx, pipeline)
	})
	return a, created, err
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}
