package ecsconfig_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/ecsrunner/ecsconfig"
)

func valid() ecsconfig.Config {
	return ecsconfig.Config{
		Region: "eu-west-1", Cluster: "gantry", TaskDefinition: "gantry-runner:4", Container: "runner",
		Subnets: []string{"subnet-0123456789abcdef0"}, LogGroup: "/gantry/commands", LogStreamPrefix: "gantry",
		PlanStore: "s3://acme-gantry-plans/live",
	}
}

// TestCheck_endpointsInTheirOrder: every bad endpoint is reported, always
// in the same order (ecs, logs, s3), whatever Go's map order.
func TestCheck_endpointsInTheirOrder(t *testing.T) {
	c := valid()
	c.Endpoints = ecsconfig.Endpoints{ECS: "ftp://x", Logs: "nohost", S3: "://"}
	for range 50 {
		var fields []string
		for _, p := range c.Check() {
			fields = append(fields, p.Field)
		}
		require.Equal(t, []string{"endpoints.ecs", "endpoints.logs", "endpoints.s3"}, fields)
	}
}

// TestCheck_logStreamPrefixRefusesControlCharacters: NUL, a newline and
// other control characters cannot be in a log stream name.
func TestCheck_logStreamPrefixRefusesControlCharacters(t *testing.T) {
	require.Empty(t, valid().Check())
	for _, prefix := range []string{"gan\x00try", "gantry\n", "\ttabbed", "del\x7f", "", "a:b", "a*", "/lead"} {
		c := valid()
		c.LogStreamPrefix = prefix
		problems := c.Check()
		require.Len(t, problems, 1, "%q", prefix)
		require.Equal(t, "log_stream_prefix", problems[0].Field, "%q", prefix)
	}
	c := valid()
	c.LogStreamPrefix = "team a/gantry-é"
	require.Empty(t, c.Check())
}
