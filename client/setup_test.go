package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/pools"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// server is a real Gantry (web and workers) on a fresh database, with the
// lease client "ci" (user ci@example.com) and postgres pools.
type server struct {
	URL   string
	Token string // a token of ci@example.com, scopes read and write
	db    *models.DB
	pools *pools.Service
}

// pool is one postgres pool of fresh databases.
type pool = servertest.Pool

// setup serves Gantry with the pools registered through gantry.yaml; every
// environment is released and its database dropped when the test ends.
func setup(t testing.TB, specs ...pool) *server {
	t.Helper()
	ctx := context.Background()
	s := servertest.New(t, "GANTRY_API_RATE=1000")
	s.ApplyPools(t, specs...)
	s.StartWorkers(t) // workers clean released environments, so that they come back
	u, err := access.CreateUser(ctx, s.DB.Bun, access.NewUser{Email: "ci@example.com", Role: string(models.RoleViewer), Password: "correct-horse-battery"}, "test")
	require.NoError(t, err)
	token, _, err := access.CreateToken(ctx, s.DB.Bun, u, access.NewToken{Name: "ci", Scopes: []string{"read", "write"}}, "test")
	require.NoError(t, err)
	return &server{URL: s.URL, Token: token, db: s.DB, pools: s.Pools}
}
