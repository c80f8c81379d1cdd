package gantryfile_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/gantryfile"
)

const repos = `repositories:
  - name: infra-live
    url: /srv/git/infra-live.git
    webhook_secret_env: HOOK_SECRET
    commit_statuses: {merge_lock: false}
    accounts:
      - name: shared
        path: live/shared/
        voters: [ops@example.com]
        min_approvals: 1
        min_rejections: 1
      - name: prod
        path: live/prod/
        depends_on: [shared]
        apply_role: arn:aws:iam::123456789012:role/Apply
        voters: [ada@example.com, bob@example.com]
        min_approvals: 2
        min_rejections: 1
  - name: modules
    url: https://github.com/acme/modules.git
    trunk: trunk
    scan: plan
    runner: terraform
    webhook_secret_env: HOOK_SECRET
`

func TestRepositories(t *testing.T) {
	t.Parallel()
	f, err := gantryfile.Parse("gantry.yaml", []byte(repos), env("HOOK_SECRET"))
	require.NoError(t, err)
	live := f.Repositories[0]
	require.Equal(t, "main", live.Trunk, "trunk defaults to main")
	require.Equal(t, "graph", live.Scan)
	require.Equal(t, []string{"terragrunt", "run", "--working-dir", "{dir}", "--non-interactive", "--", "plan", "-input=false", "-no-color", "-detailed-exitcode", "-out={plan_file}"}, live.Commands.Plan, "Terragrunt 1.x CLI by default")
	require.True(t, live.StatusEnabled("plan"))
	require.False(t, live.StatusEnabled("merge_lock"))
	require.Equal(t, "prod", live.AccountFor("live/prod/eu-west-1/vpc").Name)
	require.Equal(t, "shared", live.AccountFor("live/shared").Name)
	require.Nil(t, live.AccountFor("live/production/x"), "prefixes match whole directories")
	require.Equal(t, "terraform", f.Repositories[1].Commands.Apply[0])
	require.Equal(t, []string{"terraform", "-chdir={dir}", "init", "-input=false", "-no-color"}, f.Repositories[1].Commands.Init, "terraform needs init in each fresh checkout")
	require.Empty(t, live.Commands.Init, "terragrunt initialises by itself")
	require.Equal(t, "plan", f.Repositories[1].Scan)
}

func TestAccountThresholdsDefaultToOneVote(t *testing.T) {
	t.Parallel()
	src := "repositories:\n  - name: r\n    url: /srv/r.git\n    webhook_secret_env: HOOK_SECRET\n" +
		"    accounts:\n      - {name: a, path: x/, voters: [a@example.com, b@example.com]}\n      - {name: b, path: y/, voters: [a@example.com, b@example.com], min_approvals: 2}\n"
	f, err := gantryfile.Parse("gantry.yaml", []byte(src), env("HOOK_SECRET"))
	require.NoError(t, err)
	accounts := f.Repositories[0].Accounts
	require.Equal(t, [2]int{1, 1}, [2]int{accounts[0].MinApprovals, accounts[0].MinRejections}, "left out: one approval applies, one rejection stops")
	require.Equal(t, [2]int{2, 1}, [2]int{accounts[1].MinApprovals, accounts[1].MinRejections})

	// Written through an anchor and an alias, the thresholds are the ones written.
	anchored := "repositories:\n  - name: r\n    url: /srv/r.git\n    webhook_secret_env: HOOK_SECRET\n" +
		"    accounts:\n      - &prod {name: a, path: x/, voters: [a@example.com, b@example.com], min_approvals: 2, min_rejections: 2}\n" +
		"  - name: s\n    url: /srv/s.git\n    webhook_secret_env: HOOK_SECRET\n    accounts:\n      - *prod\n"
	f, err = gantryfile.Parse("gantry.yaml", []byte(anchored), env("HOOK_SECRET"))
	require.NoError(t, err)
	for _, r := range f.Repositories {
		require.Equal(t, [2]int{2, 2}, [2]int{r.Accounts[0].MinApprovals, r.Accounts[0].MinRejections}, r.Name)
	}
}

func TestAnUnsetStatusTokenIsNoError(t *testing.T) {
	t.Parallel()
	src := "repositories:\n  - name: r\n    url: /srv/r.git\n    webhook_secret_env: HOOK_SECRET\n    status_token_env: NOT_SET\n"
	f, err := gantryfile.Parse("gantry.yaml", []byte(src), env("HOOK_SECRET"))
	require.NoError(t, err, "without the token no statuses are posted; everything else works")
	require.Equal(t, "NOT_SET", f.Repositories[0].StatusTokenEnv)
}

func TestRepositoryProblems(t *testing.T) {
	t.Parallel()
	base := "repositories:\n  - name: r\n    url: /srv/r.git\n    webhook_secret_env: HOOK_SECRET\n"
	cases := []struct{ name, src, want string }{
		{"scan", base + "    scan: guess\n", `gantry.yaml:5: repositories[0].scan: must be graph or plan (got "guess")`},
		{"secret variable unset", "repositories:\n  - name: r\n    url: /srv/r.git\n    webhook_secret_env: MISSING\n", "repositories[0].webhook_secret_env: variable MISSING is not set"},
		{"transport helper", "repositories:\n  - name: r\n    url: 'ext::sh -c touch% /tmp/x'\n    webhook_secret_env: HOOK_SECRET\n", "repositories[0].url: must be a git URL"},
		{"unknown placeholder", base + "    runner: custom\n    commands:\n      plan: [tofu, plan, '-out={plan_file}', '{workdir}']\n      apply: [tofu, apply, '{plan_file}']\n      destroy: [tofu, destroy]\n", "unknown placeholder {workdir}"},
		{"apply without the saved plan", base + "    runner: custom\n    commands:\n      plan: [tofu, plan, '-out={plan_file}']\n      apply: [tofu, apply, -auto-approve]\n      destroy: [tofu, destroy]\n", "repositories[0].commands.apply: must use {plan_file}"},
		{"more approvals than voters", base + "    accounts:\n      - {name: prod, path: live/prod/, voters: [a@example.com], min_approvals: 2, min_rejections: 1}\n", "repositories[0].accounts[0].min_approvals"},
		{"unknown dependency", base + "    accounts:\n      - {name: prod, path: live/prod/, depends_on: [net], voters: [a@example.com], min_approvals: 1, min_rejections: 1}\n", `repositories[0].accounts[0].depends_on[0]: no account named "net"`},
		{"account cycle", base + "    accounts:\n      - {name: a, path: x/, depends_on: [b], voters: [a@example.com], min_approvals: 1, min_rejections: 1}\n      - {name: b, path: y/, depends_on: [a], voters: [a@example.com], min_approvals: 1, min_rejections: 1}\n", "depends_on has a cycle: a -> b -> a"},
		{"path escapes", base + "    accounts:\n      - {name: a, path: ../x/, voters: [a@example.com], min_approvals: 1, min_rejections: 1}\n", "repositories[0].accounts[0].path"},
		{"rejections written as 0", base + "    accounts:\n      - {name: a, path: x/, voters: [a@example.com], min_rejections: 0}\n", "gantry.yaml:6: repositories[0].accounts[0].min_rejections: must be at least 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gantryfile.Parse("gantry.yaml", []byte(tc.src), env("HOOK_SECRET"))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}
