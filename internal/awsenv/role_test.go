package awsenv_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/awsenv"
)

// planRole is a Terraform plan role in the environment's account, not its
// admin role.
const planRole = "arn:aws:iam::222222222222:role/terraform/TerraformPlan"

// envMap reads KEY=VALUE lines, failing on a key given twice.
func envMap(t *testing.T, env []string) map[string]string {
	t.Helper()
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		require.True(t, ok, "not KEY=VALUE: %q", kv)
		require.NotContains(t, m, k, "%s given twice", k)
		m[k] = v
	}
	return m
}

func TestRoleEnv(t *testing.T) {
	t.Parallel()

	t.Run("holds the session issued for the role and session name", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(o *awsenv.Options) { o.Region = "eu-central-1" })
		b.aws.AddRole(planRole, 0)
		start := time.Now()

		env, err := b.p.RoleEnv(t.Context(), planRole, "pr-7", 2*time.Hour)
		require.NoError(t, err)
		vars := envMap(t, env)
		require.Len(t, vars, 5)
		require.Equal(t, "eu-central-1", vars["AWS_REGION"], "the provider's region")
		require.Equal(t, "eu-central-1", vars["AWS_DEFAULT_REGION"])

		s, ok := b.aws.Session(vars["AWS_ACCESS_KEY_ID"])
		require.True(t, ok, "the fake issued no session %s", vars["AWS_ACCESS_KEY_ID"])
		require.Equal(t, planRole, s.RoleARN)
		require.Equal(t, "gantry-infra-pr-7", s.SessionName)
		require.Equal(t, s.SecretAccessKey, vars["AWS_SECRET_ACCESS_KEY"])
		require.Equal(t, s.SessionToken, vars["AWS_SESSION_TOKEN"])
		require.WithinDuration(t, start.Add(2*time.Hour), s.Expiration, 2*time.Second)

		call := b.aws.CallsOf("AssumeRole")[0]
		require.Equal(t, "arn:aws:iam::111111111111:user/gantry", call.Caller)
		require.Equal(t, "7200", call.Params.Get("DurationSeconds"))

		// The keys work, as the plan role.
		creds := aws.Credentials{AccessKeyID: vars["AWS_ACCESS_KEY_ID"], SecretAccessKey: vars["AWS_SECRET_ACCESS_KEY"], SessionToken: vars["AWS_SESSION_TOKEN"]}
		out, err := sts.NewFromConfig(b.aws.Config(creds)).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{})
		require.NoError(t, err)
		require.Equal(t, "arn:aws:sts::222222222222:assumed-role/TerraformPlan/gantry-infra-pr-7", *out.Arn)
	})

	t.Run("reduces the session name to AWS's characters and length", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.aws.AddRole(planRole, 0)
		env, err := b.p.RoleEnv(t.Context(), planRole, "exec 01J/"+strings.Repeat("x", 80), time.Hour)
		require.NoError(t, err, "AWS (the fake) refused the session name")
		s, ok := b.aws.Session(envMap(t, env)["AWS_ACCESS_KEY_ID"])
		require.True(t, ok)
		require.Equal(t, ("gantry-infra-exec-01J-" + strings.Repeat("x", 80))[:64], s.SessionName)
	})

	t.Run("names the role AWS refuses", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		missing := "arn:aws:iam::222222222222:role/terraform/TerraformApply"
		env, err := b.p.RoleEnv(t.Context(), missing, "x-1", time.Hour)
		require.Nil(t, env)
		require.ErrorContains(t, err, "assuming "+missing+" as gantry-infra-x-1")
		var apiErr smithy.APIError
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, "AccessDenied", apiErr.ErrorCode())
	})

	t.Run("fails, as AWS does, beyond the role's MaxSessionDuration", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.aws.AddRole(planRole, time.Hour)
		_, err := b.p.RoleEnv(t.Context(), planRole, "x-1", 2*time.Hour)
		require.ErrorContains(t, err, planRole)
		require.ErrorContains(t, err, "MaxSessionDuration")
	})

	t.Run("refuses a malformed ARN before any call", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, arn := range []string{"", "TerraformPlan", "arn:aws:iam::222222222222:user/terraform", "arn:aws:iam::2222:role/x", "arn:aws:sts::222222222222:role/x", "arn:aws:iam::222222222222:role/"} {
			_, err := b.p.RoleEnv(t.Context(), arn, "x-1", time.Hour)
			require.ErrorIs(t, err, awsenv.ErrRoleARN, arn)
			require.ErrorContains(t, err, `"`+arn+`"`)
		}
		require.Empty(t, b.aws.Calls())
	})
}
