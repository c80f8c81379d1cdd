package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/spf13/cobra"

	"github.com/gantryhq/gantry/client"
	"github.com/gantryhq/gantry/internal/awsenv"
)

// releaseTimeout bounds releasing after a command, when the job may be about
// to be killed.
const releaseTimeout = 30 * time.Second

func (c *cli) envCommand() *cobra.Command {
	conn := &envConn{serverConn: serverConn{cli: c,
		tokenHint: "a token of a user listed under a client in gantry.yaml, with the read and write scopes"}}
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Lease test environments from a CI job: acquire, release, extend, exec",
		Long: `gantry env talks to a Gantry server's environment pools, as a CI job does. It
needs no database or server configuration, only the server and a token:

  GANTRY_SERVER  Gantry's URL (or --server; default GANTRY_BASE_URL)
  GANTRY_TOKEN   API token of a user listed under a client in gantry.yaml,
                 with the read and write scopes (or --token)

The simplest use wraps the test command, which gets the credentials in its
environment and releases the environment however the command ends:

  gantry env exec --pool ci -- go test ./...

Or acquire and release in separate steps:

  eval "$(gantry env acquire --pool ci -o env)"
  ...
  gantry env release "$GANTRY_ALLOCATION_ID" --outcome success

Variables given to commands (and printed by acquire -o env):
  every kind  GANTRY_ALLOCATION_ID, GANTRY_ENVIRONMENT (the environment's name)
  postgres    DATABASE_URL, PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE,
              PGSSLMODE (when the URL sets it)
  aws         AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
              AWS_REGION, AWS_DEFAULT_REGION, AWS_ACCOUNT_ID
With several environments (--count, or requirements), the first one's are
unprefixed, and every one's are repeated as GANTRY_ENV_<i>_<NAME>, i from 0
(GANTRY_ENV_1_DATABASE_URL, GANTRY_ENV_1_ALLOCATION_ID), with
GANTRY_ENV_COUNT and GANTRY_ALLOCATION_IDS (the ids, space-separated).`,
	}
	conn.addFlags(cmd, true)
	cmd.PersistentFlags().BoolVar(&conn.awsIdentity, "aws-identity", false, "authenticate with this machine's AWS credentials (an IAM-signed sts:GetCallerIdentity) instead of a token")
	cmd.PersistentFlags().StringVar(&conn.stsEndpoint, "sts-endpoint", "", "with --aws-identity: the STS endpoint Gantry forwards to (default: the region's)")
	cmd.AddCommand(c.envAcquire(conn), c.envRelease(conn), c.envExtend(conn), c.envExec(conn), c.envPools(conn))
	return cmd
}

// envConn is where env commands send requests: a token's, or with
// --aws-identity an AWS identity's.
type envConn struct {
	serverConn
	awsIdentity bool
	stsEndpoint string
}

func (e *envConn) client() (*client.Client, error) {
	if !e.awsIdentity {
		return e.tokenClient(client.WithRetryHook(e.cli.logRetry))
	}
	server, err := e.serverURL()
	if err != nil {
		return nil, err
	}
	// Signed anew for every request: a signature is good for 15 minutes.
	sign := func(ctx context.Context) (string, error) {
		cfg, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return "", fmt.Errorf("loading AWS credentials: %w", err)
		}
		return awsenv.SignCallerIdentity(ctx, cfg, e.stsEndpoint)
	}
	return client.New(server, client.WithAWSIdentity(sign), client.WithUserAgent("gantry-cli"), client.WithRetryHook(e.cli.logRetry)), nil
}

func (c *cli) eprintf(format string, args ...any) { fmt.Fprintf(c.stderr, format, args...) }

// logRetry tells a waiting job why it waits.
func (c *cli) logRetry(r client.Retry) {
	why := r.Err.Error()
	var ae *client.APIError
	if errors.As(r.Err, &ae) && ae.Status == 423 {
		why = "nothing free"
	}
	c.eprintf("gantry: pool %s: %s; trying again in %s (waited %s of %s)\n",
		r.Pool, why, r.Delay.Round(time.Second), r.Waited.Round(time.Second), r.Wait)
}

// leaseFlags are the flags that describe what to lease.
type leaseFlags struct {
	pool, requester string
	capabilities    []string
	count           int
	wait            time.Duration
}

func (f *leaseFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.pool, "pool", "", "pool to lease from (required)")
	cmd.Flags().StringVar(&f.requester, "requester", "", "who leases, shown in the history (default: $CI_JOB_URL, the GitHub Actions run, $BUILD_URL, or host and pid)")
	cmd.Flags().StringArrayVar(&f.capabilities, "capability", nil, "capability the environment must have, as key=value (repeatable)")
	cmd.Flags().IntVar(&f.count, "count", 1, "number of environments, each with the capabilities")
	cmd.Flags().DurationVar(&f.wait, "wait", 30*time.Minute, "how long to keep trying while nothing is free (0: try once)")
	_ = cmd.MarkFlagRequired("pool")
}

func (f *leaseFlags) request(c *cli) (client.AllocateRequest, error) {
	req := client.AllocateRequest{Pool: f.pool, Requester: f.requester}
	if req.Requester == "" {
		req.Requester = c.defaultRequester()
	}
	if f.count < 1 || f.count > 32 {
		return req, fmt.Errorf("--count must be from 1 to 32, not %d", f.count)
	}
	caps := map[string]string{}
	for _, kv := range f.capabilities {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return req, fmt.Errorf("--capability %q: want key=value", kv)
		}
		caps[k] = v
	}
	if f.count > 1 || len(caps) > 0 {
		for range f.count {
			req.Requirements = append(req.Requirements, client.Requirement{Capabilities: caps})
		}
	}
	return req, nil
}

// defaultRequester names the CI job, or else this machine and process.
func (c *cli) defaultRequester() string {
	if u := c.getenv("CI_JOB_URL"); u != "" { // GitLab
		return u
	}
	if id, repo := c.getenv("GITHUB_RUN_ID"), c.getenv("GITHUB_REPOSITORY"); id != "" && repo != "" {
		return firstNonEmpty(c.getenv("GITHUB_SERVER_URL"), "https://github.com") + "/" + repo + "/actions/runs/" + id
	}
	if u := c.getenv("BUILD_URL"); u != "" { // Jenkins
		return u
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s pid %d", firstNonEmpty(host, "unknown-host"), os.Getpid())
}

func (c *cli) envAcquire(conn *envConn) *cobra.Command {
	var f leaseFlags
	var output string
	cmd := &cobra.Command{
		Use:   "acquire",
		Short: "Lease environments, waiting while none is free, and print them",
		Example: `  eval "$(gantry env acquire --pool ci --wait 30m -o env)"
  gantry env acquire --pool ci --capability size=large --count 2 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(&output, "text", "json", "env"); err != nil {
				return err
			}
			cl, err := conn.client()
			if err != nil {
				return err
			}
			req, err := f.request(c)
			if err != nil {
				return err
			}
			a, err := cl.Acquire(cmd.Context(), req, f.wait)
			if err != nil {
				return err
			}
			return c.printLeases(output, a, a.Leases, a.Env())
		},
	}
	f.add(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json or env (export lines for sh, with the credentials)")
	return cmd
}

// printLeases shows leases: a table (no secrets), v as JSON, or env as sh
// exports.
func (c *cli) printLeases(output string, v any, leases []client.Lease, env []string) error {
	switch output {
	case "json":
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "env":
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			c.printf("export %s=%s\n", k, shellQuote(v))
		}
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tENVIRONMENT\tPOOL\tEXPIRES")
	for _, l := range leases {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", l.ID, l.Environment, l.Pool, l.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

// shellQuote quotes s for sh: in single quotes, each single quote in s
// closed, escaped and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func (c *cli) envRelease(conn *envConn) *cobra.Command {
	var outcome string
	cmd := &cobra.Command{
		Use:   "release ID...",
		Short: "End leases: the credentials stop working and the environments are cleaned",
		Example: `  gantry env release "$GANTRY_ALLOCATION_ID" --outcome success
  gantry env release $GANTRY_ALLOCATION_IDS --outcome "failure: 3 tests"`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			cl, err := conn.client()
			if err != nil {
				return err
			}
			var errs []error
			for _, id := range ids {
				l, err := cl.Release(cmd.Context(), id, outcome)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				c.printf("released %s (%s)\n", l.ID, l.Environment)
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().StringVar(&outcome, "outcome", "", "how the test ended, e.g. success or failure (recorded and counted in metrics)")
	return cmd
}

func (c *cli) envExtend(conn *envConn) *cobra.Command {
	var by time.Duration
	var output string
	cmd := &cobra.Command{
		Use:     "extend ID",
		Short:   "Move a lease's expiry later (within the pool's max_session)",
		Example: `  gantry env extend "$GANTRY_ALLOCATION_ID" --by 1h`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(&output, "text", "json", "env"); err != nil {
				return err
			}
			if by <= 0 {
				return errors.New("--by must be a positive duration such as 30m or 1h")
			}
			cl, err := conn.client()
			if err != nil {
				return err
			}
			l, err := cl.Extend(cmd.Context(), args[0], by)
			if err != nil {
				return err
			}
			return c.printLeases(output, l, []client.Lease{*l}, l.Env())
		},
	}
	cmd.Flags().DurationVar(&by, "by", time.Hour, "how much later")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json or env (new AWS credentials, when the extension renewed them)")
	return cmd
}

func (c *cli) envPools(conn *envConn) *cobra.Command {
	cmd := &cobra.Command{Use: "pools", Short: "List pools and how many environments are free", Args: cobra.NoArgs}
	output := outputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkOutput(output); err != nil {
			return err
		}
		cl, err := conn.client()
		if err != nil {
			return err
		}
		pools, err := cl.Pools(cmd.Context())
		if err != nil {
			return err
		}
		if *output == "json" {
			return json.NewEncoder(c.stdout).Encode(pools)
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tKIND\tAVAILABLE\tIN USE\tCLEANING\tDIRTY\tTOTAL\tSESSION")
		for _, p := range pools {
			cp := p.Capacity
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", p.Name, p.Kind, cp.Available, cp.InUse, cp.Cleaning, cp.Dirty, cp.Total(), p.Session())
		}
		return tw.Flush()
	}
	return cmd
}

func (c *cli) envExec(conn *envConn) *cobra.Command {
	var f leaseFlags
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "exec --pool POOL [flags] -- COMMAND [ARG...]",
		Short: "Lease environments, run a command with their credentials, release them",
		Long: `gantry env exec leases environments (waiting while none is free), runs COMMAND
(directly, not through a shell) with the credentials added to its environment
and its input and output passed through, then releases the environments with
the outcome "success" when it exits 0 and "failure: exit N" otherwise. Its own
exit status is the command's.

On Ctrl-C (SIGINT) or SIGTERM it passes the signal on to the command, gives
it --grace to exit (then kills it), releases with the outcome "interrupted"
and exits 130 (SIGINT) or 143 (SIGTERM). A command that cannot be started
releases too, with exit status 127 (not found) or 126.`,
		Example: `  gantry env exec --pool ci -- go test ./...
  gantry env exec --pool ci --capability region=eu-west-1 -- npm run integ`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, argv []string) error {
			cl, err := conn.client()
			if err != nil {
				return err
			}
			req, err := f.request(c)
			if err != nil {
				return err
			}
			return c.execLeased(cmd.Context(), cl, req, f.wait, grace, argv)
		},
	}
	cmd.Flags().SetInterspersed(false) // flags after COMMAND are COMMAND's
	f.add(cmd)
	cmd.Flags().DurationVar(&grace, "grace", 5*time.Second, "on a signal, how long the command may take to exit before it is killed")
	return cmd
}

// exitError ends gantry with a status of its own choosing: a command's
// exit status, or 128 plus the signal that interrupted it.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// ExitCode is the status the process should exit with.
func (e *exitError) ExitCode() int { return e.code }

// execLeased acquires, runs argv with the leases' credentials, and releases
// however the command ends. Cancelling ctx is the signal path (main turns
// SIGINT and SIGTERM into it).
func (c *cli) execLeased(ctx context.Context, cl *client.Client, req client.AllocateRequest, wait, grace time.Duration, argv []string) error {
	if grace <= 0 {
		return errors.New("--grace must be a positive duration such as 5s")
	}
	a, err := cl.Acquire(ctx, req, wait)
	if err != nil {
		if ctx.Err() != nil {
			sig := signalOf(ctx)
			return &exitError{code: 128 + int(sig), msg: "interrupted by " + signalName(sig) + " while waiting for an environment"}
		}
		return err
	}
	for _, l := range a.Leases {
		c.eprintf("gantry: leased %s from pool %s until %s (allocation %s)\n", l.Environment, l.Pool, l.ExpiresAt.UTC().Format(time.RFC3339), l.ID)
	}

	res := c.runCommand(ctx, a, grace, argv)

	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := cl.ReleaseAll(rctx, a, res.outcome); err != nil {
		c.eprintf("gantry: %v; the server ends the lease when it expires\n", err)
	} else {
		c.eprintf("gantry: released %s with outcome %q\n", strings.Join(a.IDs(), ", "), res.outcome)
	}
	if res.code == 0 {
		return nil
	}
	return &exitError{code: res.code, msg: res.msg}
}

// result is how a command ended: gantry's exit status, the outcome recorded
// on the leases, and what to tell the user.
type result struct {
	code         int
	outcome, msg string
}

// runCommand runs argv to its end.
func (c *cli) runCommand(ctx context.Context, a *client.Allocation, grace time.Duration, argv []string) result {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(slices.Clone(c.environ), a.Env()...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, c.stdout, c.stderr
	// On cancellation, pass the signal on; WaitDelay later kills the command
	// if it is still running.
	cmd.Cancel = func() error { return cmd.Process.Signal(signalOf(ctx)) }
	cmd.WaitDelay = grace
	if err := cmd.Start(); err != nil {
		code := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = 127
		}
		return result{code: code, outcome: truncate("failure: cannot start: "+err.Error(), 1024), msg: fmt.Sprintf("cannot start %s: %v", argv[0], err)}
	}
	err := cmd.Wait()
	if ctx.Err() != nil {
		sig := signalOf(ctx)
		return result{code: 128 + int(sig), outcome: "interrupted", msg: fmt.Sprintf("interrupted by %s; %s was stopped", signalName(sig), argv[0])}
	}
	code := 0
	if st := cmd.ProcessState; st != nil {
		code = st.ExitCode()
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	}
	if code == 0 && err != nil && !errors.Is(err, exec.ErrWaitDelay) {
		// The command exited 0 but its output could not be passed on.
		c.eprintf("gantry: %s: %v\n", argv[0], err)
		code = 1
	}
	if code == 0 {
		return result{outcome: "success"}
	}
	return result{code: code, outcome: fmt.Sprintf("failure: exit %d", code), msg: fmt.Sprintf("%s exited with status %d", argv[0], code)}
}

// signalOf names the signal that cancelled ctx: signal.NotifyContext's cause
// describes it ("terminated signal received"); anything else counts as
// Ctrl-C.
func signalOf(ctx context.Context) syscall.Signal {
	if cause := context.Cause(ctx); cause != nil && strings.HasPrefix(cause.Error(), syscall.SIGTERM.String()+" ") {
		return syscall.SIGTERM
	}
	return syscall.SIGINT
}

func signalName(sig syscall.Signal) string {
	if sig == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGINT"
}

// truncate cuts s to at most n bytes, on a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
