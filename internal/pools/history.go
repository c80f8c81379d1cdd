package pools

import (
	"context"
	"time"

	"github.com/gantryhq/gantry/models"
)

// PruneHistory deletes allocation history older than the retention.
func (s *Service) PruneHistory(ctx context.Context) (int64, error) {
	return models.PruneAllocations(ctx, s.Queue.DB(), time.Now().Add(-s.Retention))
}
