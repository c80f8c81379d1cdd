package client_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/client"
)

func TestEnvOfAnAWSLease(t *testing.T) {
	t.Parallel()
	l := client.Lease{ID: "a1", Environment: "aws:123456789012/eu-west-1", Account: "123456789012", Region: "eu-west-1", Credentials: &client.Credentials{
		AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "secret", SessionToken: "token"}}
	require.Equal(t, []string{
		"GANTRY_ALLOCATION_ID=a1",
		"GANTRY_ENVIRONMENT=123456789012/eu-west-1",
		"AWS_ACCESS_KEY_ID=ASIAEXAMPLE",
		"AWS_SECRET_ACCESS_KEY=secret",
		"AWS_SESSION_TOKEN=token",
		"AWS_REGION=eu-west-1",
		"AWS_DEFAULT_REGION=eu-west-1",
		"AWS_ACCOUNT_ID=123456789012",
	}, l.Env())

	a := &client.Allocation{Leases: []client.Lease{l, {ID: "a2", Account: "210987654321", Region: "us-east-1"}}}
	env := envMap(a.Env())
	require.Equal(t, "ASIAEXAMPLE", env["AWS_ACCESS_KEY_ID"])
	require.Equal(t, "a1", env["GANTRY_ALLOCATION_ID"])
	require.Equal(t, "a1 a2", env["GANTRY_ALLOCATION_IDS"])
	require.Equal(t, "2", env["GANTRY_ENV_COUNT"])
	require.Equal(t, "eu-west-1", env["GANTRY_ENV_0_AWS_REGION"])
	require.Equal(t, "us-east-1", env["GANTRY_ENV_1_AWS_REGION"])
	require.Equal(t, "210987654321", env["GANTRY_ENV_1_AWS_ACCOUNT_ID"])
	require.Equal(t, "a2", env["GANTRY_ENV_1_ALLOCATION_ID"])
	require.Equal(t, "123456789012/eu-west-1", env["GANTRY_ENVIRONMENT"])
	require.Equal(t, "123456789012/eu-west-1", env["GANTRY_ENV_0_ENVIRONMENT"])
	require.NotContains(t, env, "GANTRY_ENV_1_AWS_ACCESS_KEY_ID", "variables without a value are left out")
}

func TestEnvOfAPostgresURL(t *testing.T) {
	t.Parallel()
	cases := []struct {
		url  string
		want map[string]string
	}{
		{"postgres://u:p%40ss@db.example.com:6543/envdb?sslmode=require", map[string]string{
			"PGHOST": "db.example.com", "PGPORT": "6543", "PGUSER": "u", "PGPASSWORD": "p@ss", "PGDATABASE": "envdb", "PGSSLMODE": "require"}},
		{"postgres://u:p@db/envdb", map[string]string{"PGHOST": "db", "PGPORT": "5432", "PGDATABASE": "envdb"}},
		{"postgresql://u:p@/envdb?host=/var/run/postgresql&port=5433", map[string]string{
			"PGHOST": "/var/run/postgresql", "PGPORT": "5433", "PGUSER": "u"}},
		{"postgres://u:p@[::1]:5432/envdb", map[string]string{"PGHOST": "::1", "PGPORT": "5432"}},
	}
	for _, tc := range cases {
		env := envMap(client.Lease{ID: "x", Credentials: &client.Credentials{URL: tc.url}}.Env())
		require.Equal(t, tc.url, env["DATABASE_URL"])
		for k, v := range tc.want {
			require.Equal(t, v, env[k], "%s of %s", k, tc.url)
		}
	}
}

func TestEnvOfASlotLease(t *testing.T) {
	t.Parallel()
	l := client.Lease{ID: "a1", Environment: "slot:device-3"}
	require.Equal(t, []string{"GANTRY_ALLOCATION_ID=a1", "GANTRY_ENVIRONMENT=device-3"}, l.Env())
}
