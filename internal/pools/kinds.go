package pools

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/gantryhq/gantry/internal/awsenv"
	"github.com/gantryhq/gantry/internal/pgenv"
	"github.com/gantryhq/gantry/internal/runner"
	"github.com/gantryhq/gantry/models"
)

// Credentials are what a test receives for one environment: AWS session
// keys for aws, a connection URL for postgres.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	Expiration      *time.Time
	URL             string
}

// Kind is what Gantry does with one kind of environment.
type Kind interface {
	// Grant issues credentials valid until until; ref is what Revoke needs.
	Grant(ctx context.Context, pool *models.Pool, env *models.Environment, sessionName string, until time.Time) (creds Credentials, ref string, err error)
	// Extend moves the credentials' end, returning new ones when the kind
	// cannot move existing ones (AWS sessions have a fixed length).
	Extend(ctx context.Context, pool *models.Pool, env *models.Environment, ref, sessionName string, until time.Time) (*Credentials, string, error)
	// Revoke makes every credential issued for the environment before
	// before (and the one named by ref) stop working. It is idempotent.
	Revoke(ctx context.Context, pool *models.Pool, env *models.Environment, ref string, before time.Time) error
	// Clean restores the environment, writing progress to out.
	Clean(ctx context.Context, pool *models.Pool, env *models.Environment, out func(string)) error
	// Register prepares a newly registered environment (creates a database).
	Register(ctx context.Context, pool *models.Pool, env *models.Environment) error
	// NeedsCleanup says whether a released environment must be cleaned
	// before it is leased again.
	NeedsCleanup(pool *models.Pool) bool
}

// PostgresKind leases databases on a PostgreSQL server the pool names by an
// environment variable holding its admin URL.
type PostgresKind struct {
	Getenv func(string) string

	mu      sync.Mutex
	servers map[string]*pgenv.Server // by admin URL
}

func (k *PostgresKind) server(ctx context.Context, pool *models.Pool) (*pgenv.Server, error) {
	url := k.Getenv(pool.PostgresAdminURLEnv)
	if url == "" {
		return nil, fmt.Errorf("pool %s: variable %s (postgres.admin_url_env) is not set in this process", pool.Name, pool.PostgresAdminURLEnv)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if s, ok := k.servers[url]; ok {
		return s, nil
	}
	s, err := pgenv.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("pool %s: %w", pool.Name, err)
	}
	if k.servers == nil {
		k.servers = map[string]*pgenv.Server{}
	}
	k.servers[url] = s
	return s, nil
}

// Close releases the connections to the environments' servers.
func (k *PostgresKind) Close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range k.servers {
		s.Close()
	}
	k.servers = nil
}

func (k *PostgresKind) Grant(ctx context.Context, pool *models.Pool, env *models.Environment, _ string, until time.Time) (Credentials, string, error) {
	s, err := k.server(ctx, pool)
	if err != nil {
		return Credentials{}, "", err
	}
	c, err := s.Grant(ctx, env.Database, until)
	if err != nil {
		return Credentials{}, "", err
	}
	exp := c.ExpiresAt
	return Credentials{URL: c.URL, Expiration: &exp}, c.Role, nil
}

func (k *PostgresKind) Extend(ctx context.Context, pool *models.Pool, _ *models.Environment, ref, _ string, until time.Time) (*Credentials, string, error) {
	s, err := k.server(ctx, pool)
	if err != nil {
		return nil, "", err
	}
	return nil, ref, s.Extend(ctx, ref, until)
}

func (k *PostgresKind) Revoke(ctx context.Context, pool *models.Pool, _ *models.Environment, ref string, _ time.Time) error {
	if ref == "" {
		return nil // credentials were never issued
	}
	s, err := k.server(ctx, pool)
	if err != nil {
		return err
	}
	return s.Revoke(ctx, ref)
}

func (k *PostgresKind) Clean(ctx context.Context, pool *models.Pool, env *models.Environment, out func(string)) error {
	s, err := k.server(ctx, pool)
	if err != nil {
		return err
	}
	out(fmt.Sprintf("recreating database %s", env.Database))
	if pool.PostgresTemplate != "" {
		out(fmt.Sprintf(" from template %s", pool.PostgresTemplate))
	}
	out("\n")
	if err := s.Clean(ctx, env.Database, pool.PostgresTemplate); err != nil {
		return err // the service writes the failure to the output
	}
	if len(pool.CleanupCommand) > 0 {
		dbURL, err := databaseURL(k.Getenv(pool.PostgresAdminURLEnv), env.Database)
		if err != nil {
			return err
		}
		if err := runCleanup(ctx, pool, []string{"DATABASE_URL=" + dbURL, "GANTRY_ENVIRONMENT=" + env.Name()}, out); err != nil {
			return err
		}
	}
	out("done\n")
	return nil
}

// databaseURL points the admin URL at database.
func databaseURL(adminURL, database string) (string, error) {
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", fmt.Errorf("parsing the admin URL: %w", err)
	}
	u.Path = "/" + database
	return u.String(), nil
}

// runCleanup runs the pool's cleanup command through the shared runner,
// bounded by the pool's cleanup timeout, streaming its output to out.
func runCleanup(ctx context.Context, pool *models.Pool, env []string, out func(string)) error {
	out("$ " + runner.Command{Argv: pool.CleanupCommand}.String() + "\n")
	res, err := runner.Run(ctx, runner.Command{Argv: pool.CleanupCommand, Env: env, Timeout: pool.CleanupTimeout()},
		runner.SinkFunc(func(_ context.Context, c runner.Chunk) error { out(c.Text); return nil }))
	if err != nil {
		return fmt.Errorf("running cleanup: %w", err)
	}
	switch {
	case res.TimedOut:
		return fmt.Errorf("cleanup command did not finish within %s", pool.CleanupTimeout())
	case !res.Success():
		return fmt.Errorf("cleanup command exited with %d", res.ExitCode)
	}
	return nil
}

func (k *PostgresKind) NeedsCleanup(*models.Pool) bool { return true }

func (k *PostgresKind) Register(ctx context.Context, pool *models.Pool, env *models.Environment) error {
	s, err := k.server(ctx, pool)
	if err != nil {
		return err
	}
	return s.EnsureFrom(ctx, env.Database, pool.PostgresTemplate)
}

// SlotKind leases named things that carry no credentials of their own; its
// cleanup is the pool's cleanup command, when there is one.
type SlotKind struct{}

func (SlotKind) Grant(context.Context, *models.Pool, *models.Environment, string, time.Time) (Credentials, string, error) {
	return Credentials{}, "", nil
}

func (SlotKind) Extend(_ context.Context, _ *models.Pool, _ *models.Environment, ref, _ string, _ time.Time) (*Credentials, string, error) {
	return nil, ref, nil
}

func (SlotKind) Revoke(context.Context, *models.Pool, *models.Environment, string, time.Time) error {
	return nil
}

func (SlotKind) Clean(ctx context.Context, pool *models.Pool, env *models.Environment, out func(string)) error {
	if len(pool.CleanupCommand) == 0 {
		return nil
	}
	return runCleanup(ctx, pool, []string{"GANTRY_ENVIRONMENT=" + env.Name()}, out)
}

func (SlotKind) Register(context.Context, *models.Pool, *models.Environment) error { return nil }

func (SlotKind) NeedsCleanup(pool *models.Pool) bool { return len(pool.CleanupCommand) > 0 }

// AWSKind leases AWS accounts: credentials are sessions of the
// environment's admin role, revocation is AWS's revoke-older-sessions policy
// on that role, and cleanup runs the pool's command with admin credentials.
type AWSKind struct {
	Provider *awsenv.Provider
}

func awsEnv(env *models.Environment) awsenv.Env {
	return awsenv.Env{Account: env.Account, Region: env.Region, AdminRole: env.AdminRole}
}

func (k AWSKind) Grant(ctx context.Context, _ *models.Pool, env *models.Environment, sessionName string, until time.Time) (Credentials, string, error) {
	c, err := k.Provider.Grant(ctx, awsEnv(env), sessionName, time.Until(until))
	if err != nil {
		return Credentials{}, "", err
	}
	exp := c.Expiration
	return Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken, Expiration: &exp},
		awsenv.SessionName(awsenv.GrantSessionPrefix, sessionName), nil
}

// Extend issues new credentials: an AWS session's length is fixed when it
// is assumed. The old ones stay valid until they expire or are revoked.
func (k AWSKind) Extend(ctx context.Context, pool *models.Pool, env *models.Environment, _, sessionName string, until time.Time) (*Credentials, string, error) {
	c, ref, err := k.Grant(ctx, pool, env, sessionName, until)
	if err != nil {
		return nil, "", err
	}
	return &c, ref, nil
}

func (k AWSKind) Revoke(ctx context.Context, _ *models.Pool, env *models.Environment, _ string, before time.Time) error {
	return k.Provider.RevokeSessions(ctx, awsEnv(env), before)
}

func (k AWSKind) Clean(ctx context.Context, pool *models.Pool, env *models.Environment, out func(string)) error {
	if len(pool.CleanupCommand) == 0 {
		return nil
	}
	admin, err := k.Provider.AdminCredentials(ctx, awsEnv(env), max(pool.CleanupTimeout(), awsenv.MinSession))
	if err != nil {
		return fmt.Errorf("assuming the admin role for cleanup: %w", err)
	}
	return runCleanup(ctx, pool, append(admin.Env(), "GANTRY_ENVIRONMENT="+env.Name(), "AWS_ACCOUNT_ID="+env.Account), out)
}

func (AWSKind) Register(context.Context, *models.Pool, *models.Environment) error { return nil }

func (AWSKind) NeedsCleanup(pool *models.Pool) bool { return len(pool.CleanupCommand) > 0 }
