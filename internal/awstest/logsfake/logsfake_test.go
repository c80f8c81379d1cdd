package logsfake_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/awstest/logsfake"
)

func client(s *logsfake.Server, key, secret string) *cloudwatchlogs.Client {
	return cloudwatchlogs.NewFromConfig(aws.Config{
		Region: "us-east-1", BaseEndpoint: aws.String(s.URL),
		Credentials:      credentials.NewStaticCredentialsProvider(key, secret, ""),
		RetryMaxAttempts: 1,
	})
}

// TestGetLogEvents_contract: the real SDK reads a stream forward page by
// page; at the end the forward token comes back unchanged, as CloudWatch
// documents; missing streams and bad signatures are CloudWatch's errors.
func TestGetLogEvents_contract(t *testing.T) {
	t.Parallel()
	s := logsfake.New(t, logsfake.Options{Credentials: aws.Credentials{AccessKeyID: "AKIATEST", SecretAccessKey: "secret"}})
	s.AddGroup("/g")
	for i := 1; i <= 25; i++ {
		require.True(t, s.Append("/g", "p/c/1", time.Now(), fmt.Sprintf("line %d", i)))
	}
	c := client(s, "AKIATEST", "secret")
	ctx := t.Context()
	var got []string
	var token *string
	for {
		out, err := c.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{LogGroupName: aws.String("/g"), LogStreamName: aws.String("p/c/1"), StartFromHead: aws.Bool(true), Limit: aws.Int32(10), NextToken: token})
		require.NoError(t, err)
		for _, e := range out.Events {
			got = append(got, aws.ToString(e.Message))
		}
		if token != nil && aws.ToString(out.NextForwardToken) == aws.ToString(token) {
			require.Empty(t, out.Events)
			break
		}
		token = out.NextForwardToken
	}
	require.Len(t, got, 25)
	require.Equal(t, "line 25", got[24])

	out, err := c.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{LogGroupName: aws.String("/g"), LogStreamName: aws.String("p/c/1"), Limit: aws.Int32(5)})
	require.NoError(t, err)
	require.Equal(t, "line 21", aws.ToString(out.Events[0].Message), "without startFromHead: the latest events")

	_, err = c.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{LogGroupName: aws.String("/g"), LogStreamName: aws.String("nope")})
	var notFound *types.ResourceNotFoundException
	require.ErrorAs(t, err, &notFound)
	require.Equal(t, "The specified log stream does not exist.", notFound.ErrorMessage())

	s.Throttle("GetLogEvents", 1)
	_, err = c.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{LogGroupName: aws.String("/g"), LogStreamName: aws.String("p/c/1")})
	var apiErr smithy.APIError
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, "ThrottlingException", apiErr.ErrorCode())

	_, err = client(s, "AKIATEST", "wrong").GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{LogGroupName: aws.String("/g"), LogStreamName: aws.String("p/c/1")})
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, "InvalidSignatureException", apiErr.ErrorCode())
}
