package ecsdaemon_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/awstest/ecsfake"
	"github.com/gantryhq/gantry/internal/ecsdaemon"
)

// benchInstances is the cluster size of the daemons issue's targets.
const benchInstances = 10_000

// BenchmarkClusterRead reads what one reconcile of an environment needs from
// a 10,000-instance cluster running one daemon task per instance: Instances
// (with an attribute filter) and Tasks (its group). Compare its calls/op and
// ns/call with BenchmarkCallFloor's.
func BenchmarkClusterRead(b *testing.B) {
	fake := ecsfake.New(b, ecsfake.Options{})
	fake.AddCluster(cluster)
	td := fake.RegisterTaskDefinition(ecsfake.TaskDefinition{Family: "agent", CPU: 10, Memory: 10})
	c, err := ecsdaemon.New(b.Context(), ecsdaemon.Options{
		Region: fake.Region(), Endpoint: fake.URL, Credentials: fake.Credentials(),
	})
	require.NoError(b, err)
	for range benchInstances {
		in := fake.AddInstance(cluster, ecsfake.InstanceSpec{Attributes: map[string]string{"role": "web"}})
		_, err := c.StartTask(b.Context(), cluster, in.ARN, td, "deployment", "daemon:logs")
		require.NoError(b, err)
	}
	before := len(fake.Calls())

	for b.Loop() {
		ins, err := c.Instances(b.Context(), cluster, map[string]string{"role": "web"})
		require.NoError(b, err)
		require.Len(b, ins, benchInstances)
		tasks, err := c.Tasks(b.Context(), cluster, "daemon:logs")
		require.NoError(b, err)
		require.Len(b, tasks, benchInstances)
	}
	calls := float64(len(fake.Calls())-before) / float64(b.N)
	b.ReportMetric(calls, "calls/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/calls, "ns/call")
}

// BenchmarkCallFloor is the floor of one call: a signed ListTasks of an
// empty cluster through the same SDK client and fake, with no paging and
// nothing to encode.
func BenchmarkCallFloor(b *testing.B) {
	fake := ecsfake.New(b, ecsfake.Options{})
	fake.AddCluster(cluster)
	client := ecs.NewFromConfig(fake.Config())
	for b.Loop() {
		_, err := client.ListTasks(b.Context(), &ecs.ListTasksInput{Cluster: aws.String(cluster)})
		require.NoError(b, err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/call")
}
