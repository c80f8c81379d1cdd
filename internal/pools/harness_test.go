package pools_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/allocation"
	"github.com/gantryhq/gantry/internal/mail/mailtest"
	"github.com/gantryhq/gantry/internal/pools"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// The light harness of the area's behaviour tests (servertest.Services):
// the application's services on a cloned test database, the pools with the
// postgres, slot and aws kinds, notifications to an in-test webhook and
// SMTP server, and on request River workers. No web server: the HTTP
// concerns are tested in web/.

type harness struct {
	*servertest.Server
	db      *models.DB
	svc     *pools.Service
	webhook chan map[string]any // dirty-environment notifications received
	mail    *mailtest.Server
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	s := servertest.Services(t)
	return &harness{Server: s, db: s.DB, svc: s.Pools, webhook: s.Webhook, mail: s.Mail}
}

// startWorkers works the jobs until the test ends, as gantry worker does.
func (h *harness) startWorkers(t *testing.T) { h.StartWorkers(t) }

// sync applies yaml as gantry.yaml; every variable it names counts as set.
func (h *harness) sync(t *testing.T, yaml string) { h.Sync(t, yaml) }

// pgPool describes one postgres pool of fresh databases for a test.
type pgPool = servertest.Pool

// applyPools registers postgres pools (and a client "ci") through the real
// gantry.yaml path, with notifications to ops@example.com and the webhook
// receiver, and returns each pool's database names. Everything is released
// and dropped when the test ends.
func (h *harness) applyPools(t *testing.T, specs ...pgPool) map[string][]string {
	t.Helper()
	return h.ApplyPools(t, specs...)
}

// lease asks client ci for n environments of pool, any.
func (h *harness) lease(pool, requester string, n int) ([]pools.Lease, error) {
	return h.svc.Allocate(context.Background(), allocation.Request{Pool: pool, Requester: requester,
		Requirements: make([]allocation.Requirement, n)}, "ci", "client:ci")
}

// release gives an allocation back as client ci.
func (h *harness) release(t *testing.T, l pools.Lease, outcome string) *models.Allocation {
	t.Helper()
	a, _, err := h.svc.Release(context.Background(), l.Allocation.ID, "ci", models.EndedByClient, outcome, "client:ci")
	require.NoError(t, err)
	return a
}

// events are the log's event names for target, newest first.
func (h *harness) events(t *testing.T, target string) []string {
	t.Helper()
	entries, err := models.ListLog(context.Background(), h.db.Bun, models.LogFilter{Target: target})
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Event)
	}
	return names
}
