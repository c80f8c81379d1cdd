package mail

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	sestypes "github.com/aws/aws-sdk-go-v2/service/sesv2/types"
)

// SESOptions configure an SES sender.
type SESOptions struct {
	// Region is the SES region the From identity is verified in (SES has no
	// global endpoint); empty: the SDK's default chain's (AWS_REGION, the
	// shared config), and NewSES fails when that names none.
	Region string
	// Endpoint replaces AWS's SES endpoint for Region (a VPC endpoint, or a
	// test server); empty: AWS's own.
	Endpoint string
	// From is the sender, such as "Gantry <gantry@example.com>". Its address,
	// or its domain, must be a verified SES identity in Region.
	From string
	// Credentials sign the calls; nil: the SDK's default chain (environment,
	// shared files, the ECS or EC2 role).
	Credentials aws.CredentialsProvider
	// Timeout bounds one Send, retries included, when its ctx has no earlier
	// deadline; zero means DefaultTimeout.
	Timeout time.Duration
}

// SES sends email through Amazon SES (API v2, SendEmail). The message is
// sent as Raw content built by the same compose as SMTP's, so an email
// reads the same whichever way it went; the envelope (FromEmailAddress and
// Destination) is set as SMTP's MAIL FROM and RCPT TO are. Build it with
// NewSES.
type SES struct {
	client   *sesv2.Client
	from     *mail.Address
	region   string
	endpoint string
	timeout  time.Duration
}

var _ Sender = (*SES)(nil)

// NewSES builds an SES sender. It makes no AWS call: a wrong region,
// unverified From or missing permission (ses:SendEmail) shows at the first
// Send. Errors name what is wrong and never contain credentials.
func NewSES(ctx context.Context, o SESOptions) (*SES, error) {
	if o.From == "" {
		return nil, errors.New("mail: From address is empty")
	}
	from, err := parseAddress(o.From)
	if err != nil {
		return nil, fmt.Errorf("mail: From: %w", err)
	}
	if o.Endpoint != "" {
		if err := checkEndpoint(o.Endpoint); err != nil {
			return nil, err
		}
	}
	var load []func(*config.LoadOptions) error
	if o.Region != "" {
		load = append(load, config.WithRegion(o.Region))
	}
	if o.Credentials != nil {
		load = append(load, config.WithCredentialsProvider(o.Credentials))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("mail: loading AWS configuration for SES: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("mail: SES needs a region (the one the From identity is verified in); none is configured")
	}
	s := &SES{from: from, region: cfg.Region, endpoint: o.Endpoint, timeout: o.Timeout}
	s.client = sesv2.NewFromConfig(cfg, func(so *sesv2.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
	})
	return s, nil
}

// checkEndpoint accepts http(s)://host[:port][/path]. Its errors quote no
// more than the scheme and host, in case the URL carries a password.
func checkEndpoint(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("mail: SES endpoint is not a URL")
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("mail: SES endpoint (scheme %q, host %q) must look like https://host[:port], without user, query or fragment", u.Scheme, u.Host)
	}
	return nil
}

// String names the sender for logs: the region, and the endpoint when it
// is not AWS's own.
func (s *SES) String() string {
	if s.endpoint != "" {
		return "Amazon SES in " + s.region + " at " + s.endpoint
	}
	return "Amazon SES in " + s.region
}

// Send delivers m through SES. It honours ctx's deadline and cancellation;
// an invalid message is refused before any request is made. An error from
// SES (MessageRejected for an unverified From, for example) is wrapped, so
// errors.As finds the SDK's type (sesv2/types.MessageRejected, …).
func (s *SES) Send(ctx context.Context, m Message) error {
	rcpts, msg, err := compose(s.from, m, time.Now())
	if err != nil {
		return err
	}
	timeout := s.timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err = s.client.SendEmail(ctx, &sesv2.SendEmailInput{
		FromEmailAddress: aws.String(s.from.Address),
		Destination:      &sestypes.Destination{ToAddresses: rcpts},
		Content:          &sestypes.EmailContent{Raw: &sestypes.RawMessage{Data: msg}},
	})
	if err != nil {
		return fmt.Errorf("mail: sending through SES in %s: %w", s.region, err)
	}
	return nil
}
