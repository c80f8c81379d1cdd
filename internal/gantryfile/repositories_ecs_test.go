package gantryfile_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/gantryfile"
)

const ecsRepo = oneRepo + `    runner: terraform
    runs_on: ecs
    ecs:
      region: eu-west-1
      cluster: gantry
      task_definition: gantry-runner:4
      container: runner
      subnets: [subnet-0123456789abcdef0, subnet-0fedcba9876543210]
      security_groups: [sg-0123456789abcdef0]
      task_role: arn:aws:iam::123456789012:role/GantryTask
      log_group: /gantry/commands
      log_stream_prefix: gantry
      plan_store: s3://acme-gantry-plans/live
      start_timeout: 15m
`

// TestRunsOnECS: runs_on: ecs with its block; the tool (runner) is
// unaffected; local is the default.
func TestRunsOnECS(t *testing.T) {
	t.Parallel()
	f, err := gantryfile.Parse("gantry.yaml", []byte(ecsRepo), env("HOOK_SECRET"))
	require.NoError(t, err)
	r := f.Repositories[0]
	require.Equal(t, "ecs", r.RunsOn)
	require.Equal(t, "terraform", r.Commands.Plan[0], "runner still names the tool")
	require.Equal(t, "gantry-runner:4", r.ECS.TaskDefinition)
	require.Equal(t, 15*time.Minute, r.ECS.StartWithin())
	bucket, prefix := r.ECS.Store()
	require.Equal(t, [2]string{"acme-gantry-plans", "live"}, [2]string{bucket, prefix})

	for _, u := range []string{"git@github.com:acme/live.git", "ssh://git@github.com/acme/live.git", "https://github.com/acme/live.git"} {
		_, err = gantryfile.Parse("gantry.yaml", []byte(replace(ecsRepo, "/srv/r.git", u)), env("HOOK_SECRET"))
		require.NoError(t, err, "a URL without a secret: %s", u)
	}
	_, err = gantryfile.Parse("gantry.yaml", []byte(replace(oneRepo, "/srv/r.git", "https://x-access-token:ghp_secret@github.com/acme/live.git")), env("HOOK_SECRET"))
	require.NoError(t, err, "runs_on: local keeps the URL on Gantry's side")

	f, err = gantryfile.Parse("gantry.yaml", []byte(oneRepo), env("HOOK_SECRET"))
	require.NoError(t, err)
	require.Equal(t, "local", f.Repositories[0].RunsOn)
	require.Nil(t, f.Repositories[0].ECS)
}

func TestRunsOnECSProblems(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, src, want string }{
		{"runner: ecs", oneRepo + "    runner: ecs\n", "gantry.yaml:5: repositories[0].runner: names the tool (terragrunt, terraform or custom); to run the commands on ECS write runs_on: ecs and an ecs: block"},
		{"runs_on unknown", oneRepo + "    runs_on: lambda\n", `gantry.yaml:5: repositories[0].runs_on: must be local or ecs (got "lambda")`},
		{"no block", oneRepo + "    runs_on: ecs\n", "repositories[0].ecs: is required with runs_on: ecs"},
		{"block without runs_on", oneRepo + "    ecs: {cluster: c}\n", `repositories[0].runs_on: must be ecs for the ecs block to be used (got "local")`},
		{"subnet", replace(ecsRepo, "subnet-0fedcba9876543210", "10.0.1.0/24"), `gantry.yaml:12: repositories[0].ecs.subnets[1]: must be a subnet id such as subnet-0123456789abcdef0 (got "10.0.1.0/24")`},
		{"plan store", replace(ecsRepo, "s3://acme-gantry-plans/live", "/var/plans"), `gantry.yaml:17: repositories[0].ecs.plan_store: must be s3://BUCKET/PREFIX`},
		{"role", replace(ecsRepo, "arn:aws:iam::123456789012:role/GantryTask", "GantryTask"), `repositories[0].ecs.task_role: must be an IAM role ARN`},
		{"region", replace(ecsRepo, "eu-west-1", "europe"), `repositories[0].ecs.region: must be an AWS region such as eu-west-1 (got "europe")`},
		{"start timeout", replace(ecsRepo, "15m", "5s"), `repositories[0].ecs.start_timeout: must be a duration of at least 1m`},
		{"launch type and capacity provider", ecsRepo + "      launch_type: FARGATE\n      capacity_provider: FARGATE_SPOT\n", "repositories[0].ecs.launch_type: cannot be set with capacity_provider"},
		{"misspelt key", ecsRepo + "      subnet: [subnet-0123456789abcdef0]\n", "did you mean subnets?"},
		{"token in the url", replace(ecsRepo, "/srv/r.git", "https://x-access-token:ghp_secret@github.com/acme/live.git"), "gantry.yaml:3: repositories[0].url: must not hold credentials with runs_on: ecs"},
		{"user token in the url", replace(ecsRepo, "/srv/r.git", "https://ghp_secret@github.com/acme/live.git"), "repositories[0].url: must not hold credentials with runs_on: ecs"},
		{"missing container", replace(ecsRepo, "      container: runner\n", ""), `repositories[0].ecs.container: must name the task definition's container`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gantryfile.Parse("gantry.yaml", []byte(tc.src), env("HOOK_SECRET"))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func replace(s, old, new string) string { return strings.Replace(s, old, new, 1) }
