package gantryfile_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/gantryfile"
)

const valid = `version: 1
clients:
  - name: github-ci
    users: [ci@example.com]
    aws_accounts: ["111122223333"]
pools:
  - name: integration
    kind: postgres
    session: 90m
    clients: [github-ci]
    postgres:
      admin_url_env: POOL_PG_URL
    notify:
      emails: [ops@example.com]
  - name: release
    cleanup: [aws-nuke, run, --force]
environments:
  - pool: integration
    database: env_1
    capabilities: {size: small, gpu: false, slots: 3}
  - pool: integration
    database: env_2
  - pool: release
    account: "123456789012"
    region: eu-west-1
    admin_role: arn:aws:iam::123456789012:role/Admin
`

func TestParseValidFileAppliesDefaults(t *testing.T) {
	t.Parallel()
	f, err := gantryfile.Parse("gantry.yaml", []byte(valid), env("POOL_PG_URL"))
	require.NoError(t, err)
	require.Len(t, f.Pools, 2)
	p := f.PoolByName("integration")
	require.Equal(t, 90*time.Minute, p.Session)
	require.Equal(t, gantryfile.DefaultMaxSession, p.MaxSession)
	require.Equal(t, gantryfile.DefaultCleanupTimeout, p.CleanupTimeout)
	require.Equal(t, gantryfile.KindAWS, f.PoolByName("release").Kind, "aws is the default kind")
	require.Equal(t, gantryfile.DefaultSession, f.PoolByName("release").Session)
	require.Equal(t, map[string]string{"size": "small", "gpu": "false", "slots": "3"}, f.Environments[0].StringCapabilities())
	require.Equal(t, "postgres:env_1", f.Environments[0].Key("postgres"))
	require.Equal(t, "aws:123456789012/eu-west-1", f.Environments[2].Key("aws"))
}

func TestEnvironmentProblems(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src, want string
	}{
		{"bad duration", "pools:\n  - name: a\n    session: soon\n", `gantry.yaml:3: pools[0].session: must be a positive duration such as 3h or 90m (got "soon")`},
		{"unknown pool", "environments:\n  - pool: nope\n    database: x\n", `gantry.yaml:2: environments[0].pool: no pool named "nope" under pools`},
		{"bad account", "pools:\n  - name: a\nenvironments:\n  - pool: a\n    account: 1234\n    region: eu-west-1\n    admin_role: arn:aws:iam::123456789012:role/Admin\n", "gantry.yaml:5: environments[0].account: must be a 12-digit AWS account id"},
		{"role in another account", "pools:\n  - name: a\nenvironments:\n  - pool: a\n    account: \"999999999999\"\n    region: eu-west-1\n    admin_role: arn:aws:iam::123456789012:role/Admin\n", "environments[0].admin_role: is in another account than 999999999999"},
		{"missing admin url variable", "pools:\n  - name: a\n    kind: postgres\n    postgres:\n      admin_url_env: NOT_SET\n", "gantry.yaml:5: pools[0].postgres.admin_url_env: variable NOT_SET is not set"},
		{"unknown kind", "pools:\n  - name: a\n    kind: gcp\n", `gantry.yaml:3: pools[0].kind: must be aws, postgres or slot (got "gcp")`},
		{"duplicate environment", "pools:\n  - name: a\n    kind: postgres\n    postgres: {admin_url_env: X}\nenvironments:\n  - {pool: a, database: d1}\n  - {pool: a, database: d1}\n", "environments[1]: the same environment as environments[0]"},
		{"unknown client", "pools:\n  - name: a\n    clients: [ghost]\n", `pools[0].clients[0]: no client named "ghost" under clients`},
		{"max below session", "pools:\n  - name: a\n    session: 5h\n    max_session: 1h\n", "gantry.yaml:4: pools[0].max_session: must be at least session (5h0m0s)"},
		{"nested capability", "pools:\n  - name: a\n    kind: postgres\n    postgres: {admin_url_env: X}\nenvironments:\n  - pool: a\n    database: d\n    capabilities: {zone: {name: x}}\n", "environments[0].capabilities.zone: must be a string, number or true/false"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gantryfile.Parse("gantry.yaml", []byte(tc.src), env("X"))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}
