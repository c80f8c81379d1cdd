package ecstasktest

import (
	"context"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/gantryhq/gantry/internal/awstest/ecsfake"
	"github.com/gantryhq/gantry/internal/awstest/logsfake"
	"github.com/gantryhq/gantry/internal/awstest/s3fake"
	"github.com/gantryhq/gantry/internal/ecsrunner/ecsconfig"
)

// Names of the fakes' account.
const (
	Cluster   = "gantry-commands"
	Family    = "gantry-runner"
	Container = "runner"
	LogGroup  = "/gantry/commands"
	LogPrefix = "gantry"
	Bucket    = "gantry-plans"
)

// Fakes are ECS, CloudWatch Logs and S3 in the test, accepting the same
// keys: a cluster, a task definition whose container logs with awslogs, a
// log group and a plan bucket. ECS runs its tasks as local processes, with
// the keys in their environment as the task role's credentials.
type Fakes struct {
	ECS    *ecsfake.Server
	Logs   *logsfake.Server
	S3     *s3fake.Server
	AWS    aws.Config // for Gantry's clients
	Config ecsconfig.Config
}

// New starts the fakes.
func New(t testing.TB) *Fakes {
	t.Helper()
	e := ecsfake.New(t, ecsfake.Options{})
	creds, err := e.Credentials().Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f := &Fakes{
		ECS:  e,
		Logs: logsfake.New(t, logsfake.Options{Region: e.Region(), Credentials: creds}),
		S3:   s3fake.New(t, s3fake.Options{Region: e.Region(), Credentials: creds}),
		AWS:  aws.Config{Credentials: e.Credentials(), HTTPClient: e.HTTPClient(), Region: e.Region()},
	}
	e.AddCluster(Cluster)
	e.RegisterTaskDefinition(ecsfake.TaskDefinition{Family: Family, Containers: []string{Container}, Awslogs: &ecsfake.Awslogs{Group: LogGroup, StreamPrefix: LogPrefix}})
	f.Logs.AddGroup(LogGroup)
	f.S3.AddBucket(Bucket)
	e.RunProcesses(t, ecsfake.Processes{
		Logs:    f.Logs,
		Program: Program,
		Env: []string{
			"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
			"AWS_ACCESS_KEY_ID=" + creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + creds.SecretAccessKey,
			"AWS_EC2_METADATA_DISABLED=true",
		},
	})
	f.Config = ecsconfig.Config{
		Region: e.Region(), Cluster: Cluster, TaskDefinition: Family, Container: Container,
		Subnets: []string{"subnet-0123456789abcdef0"}, SecurityGroups: []string{"sg-0123456789abcdef0"},
		LogGroup: LogGroup, LogStreamPrefix: LogPrefix, PlanStore: "s3://" + Bucket + "/plans",
		Endpoints: ecsconfig.Endpoints{ECS: e.URL, Logs: f.Logs.URL, S3: f.S3.URL},
	}
	return f
}
