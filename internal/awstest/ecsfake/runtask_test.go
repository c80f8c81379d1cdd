package ecsfake_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/awstest/ecsfake"
)

// TestRunTask_contract: RunTask's checks as ECS answers them, through the
// real SDK; a task the server does not run stays PROVISIONING until it is
// stopped.
func TestRunTask_contract(t *testing.T) {
	t.Parallel()
	s := ecsfake.New(t, ecsfake.Options{})
	c := ecs.NewFromConfig(s.Config())
	s.AddCluster("cmds")
	s.RegisterTaskDefinition(ecsfake.TaskDefinition{Family: "runner"})
	ctx := t.Context()
	net := &types.NetworkConfiguration{AwsvpcConfiguration: &types.AwsVpcConfiguration{Subnets: []string{"subnet-1"}}}

	_, err := c.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String("cmds"), TaskDefinition: aws.String("runner"), LaunchType: types.LaunchTypeFargate})
	var invalid *types.InvalidParameterException
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, "Network Configuration must be provided when networkMode 'awsvpc' is specified.", invalid.ErrorMessage())

	_, err = c.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String("cmds"), TaskDefinition: aws.String("runner"), LaunchType: types.LaunchTypeFargate, NetworkConfiguration: net,
		Overrides: &types.TaskOverride{ContainerOverrides: []types.ContainerOverride{{Name: aws.String("other"), Command: []string{"true"}}}}})
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, "Override for container named other is not a container in the TaskDefinition.", invalid.ErrorMessage())

	_, err = c.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String("cmds"), TaskDefinition: aws.String("runner"), LaunchType: types.LaunchTypeFargate, NetworkConfiguration: net,
		CapacityProviderStrategy: []types.CapacityProviderStrategyItem{{CapacityProvider: aws.String("FARGATE_SPOT")}}})
	require.ErrorAs(t, err, &invalid)

	out, err := c.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String("cmds"), TaskDefinition: aws.String("runner"), NetworkConfiguration: net,
		CapacityProviderStrategy: []types.CapacityProviderStrategyItem{{CapacityProvider: aws.String("FARGATE_SPOT"), Weight: 1}}, StartedBy: aws.String("run-1")})
	require.NoError(t, err)
	require.Len(t, out.Tasks, 1)
	task := out.Tasks[0]
	require.Equal(t, ecsfake.TaskProvisioning, aws.ToString(task.LastStatus))
	require.Equal(t, types.LaunchTypeFargate, task.LaunchType)
	require.Equal(t, "FARGATE_SPOT", aws.ToString(task.CapacityProviderName))
	require.Nil(t, task.ContainerInstanceArn, "a Fargate task is on no container instance")

	again, err := c.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String("cmds"), TaskDefinition: aws.String("runner"), NetworkConfiguration: net,
		LaunchType: types.LaunchTypeFargate, ClientToken: aws.String("token-1")})
	require.NoError(t, err)
	retried, err := c.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String("cmds"), TaskDefinition: aws.String("runner"), NetworkConfiguration: net,
		LaunchType: types.LaunchTypeFargate, ClientToken: aws.String("token-1")})
	require.NoError(t, err)
	require.Equal(t, aws.ToString(again.Tasks[0].TaskArn), aws.ToString(retried.Tasks[0].TaskArn), "a retry with the same clientToken starts nothing new")
	require.Len(t, s.Tasks("cmds"), 2)

	stopped, err := c.StopTask(ctx, &ecs.StopTaskInput{Cluster: aws.String("cmds"), Task: task.TaskArn, Reason: aws.String("no longer needed")})
	require.NoError(t, err)
	require.Equal(t, ecsfake.TaskStopped, aws.ToString(stopped.Task.LastStatus))
	require.Nil(t, stopped.Task.Containers[0].ExitCode, "it never ran")
	require.Equal(t, "no longer needed", aws.ToString(stopped.Task.StoppedReason))
}
