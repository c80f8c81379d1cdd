// Package config loads Gantry's process configuration once, from environment
// variables overridden by command-line flags, and validates it before anything
// starts. docs/configuration.md is the table a reader looks at; Vars below is
// the same table in code, so an unknown GANTRY_* variable can be refused.
package config

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gantryhq/gantry/internal/spelling"
)

// Config is everything a gantry process needs to know about its surroundings.
type Config struct {
	DatabaseURL           string        // DATABASE_URL; empty means "start the private cluster" (gantry dev only)
	Addr                  string        // GANTRY_ADDR
	BaseURL               *url.URL      // GANTRY_BASE_URL, used in links that leave the process (emails)
	SecretKey             []byte        // GANTRY_SECRET_KEY, signs the links emailed to voters
	ConfigFile            string        // GANTRY_CONFIG, path of gantry.yaml
	DataDir               string        // GANTRY_DATA_DIR, the private cluster and dev secrets
	LogLevel              slog.Level    // GANTRY_LOG_LEVEL
	LogFormat             string        // GANTRY_LOG_FORMAT: text or json
	DBMaxConns            int32         // GANTRY_DB_MAX_CONNS
	WorkerCount           int           // GANTRY_WORKERS: jobs worked at once per queue
	SessionTTL            time.Duration // GANTRY_SESSION_TTL
	LoginAttempts         int           // GANTRY_LOGIN_ATTEMPTS failed sign-ins per account in LoginWindow
	LoginAddressAttempts  int           // GANTRY_LOGIN_ADDRESS_ATTEMPTS failed sign-ins per address in LoginWindow
	LoginWindow           time.Duration // GANTRY_LOGIN_WINDOW
	LoginConcurrency      int           // GANTRY_LOGIN_CONCURRENCY: passwords hashed at once per process
	APIRate               float64       // GANTRY_API_RATE, requests per second per client
	APIBurst              int           // GANTRY_API_BURST
	RequestTimeout        time.Duration // GANTRY_REQUEST_TIMEOUT for ordinary requests
	ShutdownGrace         time.Duration // GANTRY_SHUTDOWN_GRACE, how long running jobs get to finish
	TrustedProxies        []*net.IPNet  // GANTRY_TRUSTED_PROXIES, whose X-Forwarded-For is believed
	SMTPURL               string        // GANTRY_SMTP_URL, where mail goes
	MailFrom              string        // GANTRY_MAIL_FROM
	Retention             time.Duration // GANTRY_ALLOCATION_RETENTION, how long allocation history is kept
	AllocationConcurrency int           // GANTRY_ALLOCATION_CONCURRENCY, lease transactions at once
	AWSRegion             string        // GANTRY_AWS_REGION
	STSEndpoint           string        // GANTRY_AWS_STS_ENDPOINT
	IAMEndpoint           string        // GANTRY_AWS_IAM_ENDPOINT
	SESRegion             string        // GANTRY_SES_REGION: mail goes through SES instead of SMTP
	SESEndpoint           string        // GANTRY_SES_ENDPOINT
	WorkDir               string        // GANTRY_WORK_DIR: git mirrors, checkouts and plan files
	GitHubAPIURL          string        // GANTRY_GITHUB_API_URL, for GitHub Enterprise
	VoteLinkTTL           time.Duration // GANTRY_VOTE_LINK_TTL, how long an emailed voting link works
	CommandTimeout        time.Duration // GANTRY_COMMAND_TIMEOUT bounds one plan or apply
	CommandEnv            []string      // GANTRY_COMMAND_ENV: names of variables passed on to plan and apply
	HeartbeatInterval     time.Duration // GANTRY_HEARTBEAT_INTERVAL: how often a job running a command says it is alive
	DaemonsECSClusters    []string      // GANTRY_DAEMONS_ECS_CLUSTERS: daemon clusters that are ECS clusters
	DaemonsECSRegion      string        // GANTRY_DAEMONS_ECS_REGION
	DaemonsECSEndpoint    string        // GANTRY_DAEMONS_ECS_ENDPOINT
}

// Var documents one environment variable.
type Var struct {
	Name    string
	Default string
	Help    string
}

// Vars is every variable Gantry reads. Keep docs/configuration.md in step.
var Vars = []Var{
	{"DATABASE_URL", "", "PostgreSQL connection URL. Unset under `gantry dev`: a private cluster is started in GANTRY_DATA_DIR/postgres."},
	{"GANTRY_ADDR", ":8080", "Address the web server listens on."},
	{"GANTRY_BASE_URL", "http://localhost:8080", "External URL of Gantry, used in links sent by email; https enables Secure cookies and HSTS."},
	{"GANTRY_SECRET_KEY", "", "At least 32 characters; signs approval links. Required by serve/worker; gantry dev generates one in GANTRY_DATA_DIR."},
	{"GANTRY_CONFIG", "", "Path of gantry.yaml (repositories, pools, pipelines)."},
	{"GANTRY_DATA_DIR", ".gantry", "Directory for the private PostgreSQL cluster and dev secrets."},
	{"GANTRY_LOG_LEVEL", "info", "debug, info, warn or error."},
	{"GANTRY_LOG_FORMAT", "text", "text or json."},
	{"GANTRY_DB_MAX_CONNS", "40", "Size of the process's one pgx pool (web, workers and River's listener share it)."},
	{"GANTRY_WORKERS", "5", "Jobs worked at once per queue by this process (a queue per area with background work, plus default and maintenance)."},
	{"GANTRY_SESSION_TTL", "12h", "How long a browser session lasts."},
	{"GANTRY_LOGIN_ATTEMPTS", "5", "Failed sign-ins allowed per account (from any address) within GANTRY_LOGIN_WINDOW; then that account is refused until the window lets go."},
	{"GANTRY_LOGIN_ADDRESS_ATTEMPTS", "50", "Failed sign-ins allowed per client address (over every account) within GANTRY_LOGIN_WINDOW; then that address is refused."},
	{"GANTRY_LOGIN_WINDOW", "15m", "Window for GANTRY_LOGIN_ATTEMPTS and GANTRY_LOGIN_ADDRESS_ATTEMPTS."},
	{"GANTRY_LOGIN_CONCURRENCY", "4", "Passwords this process hashes at once (argon2, about 19 MiB each); sign-ins beyond it get 503 at once."},
	{"GANTRY_API_RATE", "20", "API requests per second allowed per token or address (per process)."},
	{"GANTRY_API_BURST", "40", "Burst size for GANTRY_API_RATE."},
	{"GANTRY_REQUEST_TIMEOUT", "30s", "Time limit for an ordinary request (live streams are exempt)."},
	{"GANTRY_SHUTDOWN_GRACE", "30s", "On stop, how long running jobs may finish before they are cancelled and retried later."},
	{"GANTRY_SMTP_URL", "", "Mail server for notifications and approval emails: smtp://user:pass@host:587 or smtps://…; empty sends no mail."},
	{"GANTRY_MAIL_FROM", "gantry@localhost", "Sender address of Gantry's emails."},
	{"GANTRY_ALLOCATION_RETENTION", "4380h", "How long environment allocation history is kept (default about 6 months)."},
	{"GANTRY_ALLOCATION_CONCURRENCY", "8", "Allocation API transactions (acquire, release, extend) run at once per process; the rest wait their turn in arrival order, so a burst of CI requests leaves database connections to pages and jobs and is answered in steady time."},
	{"GANTRY_AWS_REGION", "us-east-1", "Region of the STS and IAM calls for aws environment pools."},
	{"GANTRY_AWS_STS_ENDPOINT", "", "STS endpoint override (e.g. a VPC endpoint); empty: AWS's own."},
	{"GANTRY_AWS_IAM_ENDPOINT", "", "IAM endpoint override; empty: AWS's own."},
	{"GANTRY_SES_REGION", "", "Send mail through Amazon SES v2 in this region (with the AWS credentials of the process) instead of SMTP."},
	{"GANTRY_SES_ENDPOINT", "", "SES endpoint override (a VPC endpoint); empty: AWS's own for GANTRY_SES_REGION."},
	{"GANTRY_WORK_DIR", "", "Directory for git mirrors, checkouts and plan files of the infrastructure area; empty: GANTRY_DATA_DIR/work. Each process needs its own or a shared one; nothing in it outlives a job."},
	{"GANTRY_GITHUB_API_URL", "", "GitHub REST API base URL for commit statuses; empty: https://api.github.com/ (set it for GitHub Enterprise Server)."},
	{"GANTRY_VOTE_LINK_TTL", "168h", "How long a voting link emailed to an approver works."},
	{"GANTRY_COMMAND_TIMEOUT", "2h", "Time limit of one plan or apply command."},
	{"GANTRY_COMMAND_ENV", "", "Comma-separated names of variables of Gantry's environment passed on to plan and apply commands (e.g. TF_PLUGIN_CACHE_DIR,TF_CLI_CONFIG_FILE); commands get only PATH, HOME and LANG otherwise."},
	{"GANTRY_HEARTBEAT_INTERVAL", "10s", "How often a worker records that a job running a command (plan, apply, cleanup) is alive. A job silent for 6 intervals is taken for dead (its worker crashed or lost the database) by the next sweep, at most a minute later: an apply that began becomes interrupted for an operator, a plan or cleanup runs again."},
	{"GANTRY_TRUSTED_PROXIES", "", "Comma-separated CIDRs of the load balancers in front of Gantry; X-Forwarded-For is believed only from them. Empty: the connection's address is the client's."},
	{"GANTRY_DAEMONS_ECS_CLUSTERS", "", "Comma-separated names of the daemons area's clusters that are Amazon ECS clusters of the same name (the ecs backend, with the AWS credentials of the process); other clusters are local (gantry agent)."},
	{"GANTRY_DAEMONS_ECS_REGION", "", "Region of those ECS clusters; empty: the AWS SDK's default (AWS_REGION, the profile), else us-east-1."},
	{"GANTRY_DAEMONS_ECS_ENDPOINT", "", "ECS endpoint override (a VPC endpoint); empty: AWS's own for the region."},
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// daemonClusterName is the daemons area's cluster name.
var daemonClusterName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// FieldError names the variable that is wrong and why.
type FieldError struct {
	Var    string
	Value  string
	Reason string
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s: %s", e.Var, e.Reason)
	}
	return fmt.Sprintf("%s=%q: %s", e.Var, e.Value, e.Reason)
}

// Load reads the environment (as os.Environ formats it) and applies
// overrides, which are flag values keyed by variable name. Unknown GANTRY_*
// variables are an error so that a typo does not silently fall back to a
// default.
func Load(environ []string, overrides map[string]string) (*Config, error) {
	known := make(map[string]Var, len(Vars))
	for _, v := range Vars {
		known[v.Name] = v
	}
	values := make(map[string]string)
	var errs []error
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if _, ok := known[name]; ok {
			values[name] = value
			continue
		}
		if strings.HasPrefix(name, "GANTRY_") && !allowedExtra(name) {
			errs = append(errs, &FieldError{Var: name, Reason: "unknown variable" + suggest(name, known)})
		}
	}
	for name, value := range overrides {
		if _, ok := known[name]; !ok {
			return nil, fmt.Errorf("config: override for unknown variable %s", name)
		}
		values[name] = value
	}
	get := func(name string) string {
		if v, ok := values[name]; ok && v != "" {
			return v
		}
		return known[name].Default
	}

	c := &Config{
		SMTPURL:            get("GANTRY_SMTP_URL"),
		MailFrom:           get("GANTRY_MAIL_FROM"),
		AWSRegion:          get("GANTRY_AWS_REGION"),
		STSEndpoint:        get("GANTRY_AWS_STS_ENDPOINT"),
		IAMEndpoint:        get("GANTRY_AWS_IAM_ENDPOINT"),
		SESRegion:          get("GANTRY_SES_REGION"),
		SESEndpoint:        get("GANTRY_SES_ENDPOINT"),
		DaemonsECSRegion:   get("GANTRY_DAEMONS_ECS_REGION"),
		DaemonsECSEndpoint: get("GANTRY_DAEMONS_ECS_ENDPOINT"),
		WorkDir:            get("GANTRY_WORK_DIR"),
		GitHubAPIURL:       get("GANTRY_GITHUB_API_URL"),
		DatabaseURL:        get("DATABASE_URL"),
		Addr:               get("GANTRY_ADDR"),
		ConfigFile:         get("GANTRY_CONFIG"),
		DataDir:            get("GANTRY_DATA_DIR"),
		LogFormat:          get("GANTRY_LOG_FORMAT"),
	}
	fail := func(name, reason string) {
		errs = append(errs, &FieldError{Var: name, Value: get(name), Reason: reason})
	}

	if c.DatabaseURL != "" {
		if u, err := url.Parse(c.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			errs = append(errs, &FieldError{Var: "DATABASE_URL", Reason: "must be a postgres:// or postgresql:// URL"})
		}
	}
	if _, port, err := net.SplitHostPort(c.Addr); err != nil {
		fail("GANTRY_ADDR", "must be host:port or :port")
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		fail("GANTRY_ADDR", "port must be a number from 0 to 65535")
	}
	if u, err := url.Parse(get("GANTRY_BASE_URL")); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fail("GANTRY_BASE_URL", "must be an absolute http:// or https:// URL")
	} else {
		u.Path = strings.TrimSuffix(u.Path, "/")
		c.BaseURL = u
	}
	if key := get("GANTRY_SECRET_KEY"); key != "" {
		if len(key) < 32 {
			errs = append(errs, &FieldError{Var: "GANTRY_SECRET_KEY", Reason: "must be at least 32 characters (e.g. `openssl rand -hex 32`)"})
		}
		c.SecretKey = []byte(key)
	}
	if c.ConfigFile != "" {
		if _, err := os.Stat(c.ConfigFile); err != nil {
			fail("GANTRY_CONFIG", "cannot read the file: "+errors.Unwrap(err).Error())
		}
	}
	if err := c.LogLevel.UnmarshalText([]byte(get("GANTRY_LOG_LEVEL"))); err != nil {
		fail("GANTRY_LOG_LEVEL", "must be debug, info, warn or error")
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		fail("GANTRY_LOG_FORMAT", "must be text or json")
	}
	c.DBMaxConns = int32(positiveInt(get, fail, "GANTRY_DB_MAX_CONNS", 4))
	c.WorkerCount = positiveInt(get, fail, "GANTRY_WORKERS", 1)
	c.LoginAttempts = positiveInt(get, fail, "GANTRY_LOGIN_ATTEMPTS", 1)
	c.LoginAddressAttempts = positiveInt(get, fail, "GANTRY_LOGIN_ADDRESS_ATTEMPTS", 1)
	c.LoginConcurrency = positiveInt(get, fail, "GANTRY_LOGIN_CONCURRENCY", 1)
	c.APIBurst = positiveInt(get, fail, "GANTRY_API_BURST", 1)
	c.SessionTTL = positiveDuration(get, fail, "GANTRY_SESSION_TTL")
	c.LoginWindow = positiveDuration(get, fail, "GANTRY_LOGIN_WINDOW")
	c.RequestTimeout = positiveDuration(get, fail, "GANTRY_REQUEST_TIMEOUT")
	c.ShutdownGrace = positiveDuration(get, fail, "GANTRY_SHUTDOWN_GRACE")
	c.Retention = positiveDuration(get, fail, "GANTRY_ALLOCATION_RETENTION")
	c.AllocationConcurrency = positiveInt(get, fail, "GANTRY_ALLOCATION_CONCURRENCY", 1)
	c.VoteLinkTTL = positiveDuration(get, fail, "GANTRY_VOTE_LINK_TTL")
	c.CommandTimeout = positiveDuration(get, fail, "GANTRY_COMMAND_TIMEOUT")
	c.HeartbeatInterval = positiveDuration(get, fail, "GANTRY_HEARTBEAT_INTERVAL")
	if c.WorkDir == "" {
		c.WorkDir = filepath.Join(c.DataDir, "work")
	}
	// Commands run in their unit's own directory, so a path Gantry hands
	// them (a plan file) must not be relative to Gantry's.
	if abs, err := filepath.Abs(c.WorkDir); err == nil {
		c.WorkDir = abs
	} else {
		fail("GANTRY_WORK_DIR", err.Error())
	}
	for _, name := range strings.Split(get("GANTRY_COMMAND_ENV"), ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		if !envName.MatchString(name) {
			fail("GANTRY_COMMAND_ENV", fmt.Sprintf("%q is not a variable name", name))
			continue
		}
		c.CommandEnv = append(c.CommandEnv, name)
	}
	for _, name := range strings.Split(get("GANTRY_DAEMONS_ECS_CLUSTERS"), ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "":
		case !daemonClusterName.MatchString(name):
			fail("GANTRY_DAEMONS_ECS_CLUSTERS", fmt.Sprintf("%q is not a daemon cluster name (1–63 lower-case letters, digits, '-' or '_')", name))
		case !slices.Contains(c.DaemonsECSClusters, name):
			c.DaemonsECSClusters = append(c.DaemonsECSClusters, name)
		}
	}
	if c.SESEndpoint != "" && c.SESRegion == "" {
		fail("GANTRY_SES_ENDPOINT", "needs GANTRY_SES_REGION as well")
	}
	if c.SESRegion != "" && get("GANTRY_SMTP_URL") != "" {
		fail("GANTRY_SES_REGION", "choose one way to send mail: GANTRY_SES_REGION or GANTRY_SMTP_URL, not both")
	}
	for _, name := range []string{"GANTRY_SMTP_URL", "GANTRY_AWS_STS_ENDPOINT", "GANTRY_AWS_IAM_ENDPOINT", "GANTRY_SES_ENDPOINT", "GANTRY_GITHUB_API_URL", "GANTRY_DAEMONS_ECS_ENDPOINT"} {
		if v := get(name); v != "" {
			if u, err := url.Parse(v); err != nil || u.Host == "" {
				fail(name, "must be an absolute URL")
			}
		}
	}
	if r, err := strconv.ParseFloat(get("GANTRY_API_RATE"), 64); err != nil || r <= 0 {
		fail("GANTRY_API_RATE", "must be a positive number")
	} else {
		c.APIRate = r
	}

	for _, cidr := range strings.Split(get("GANTRY_TRUSTED_PROXIES"), ",") {
		if cidr = strings.TrimSpace(cidr); cidr == "" {
			continue
		}
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			fail("GANTRY_TRUSTED_PROXIES", fmt.Sprintf("%q is not a CIDR such as 10.0.0.0/8", cidr))
			continue
		}
		c.TrustedProxies = append(c.TrustedProxies, n)
	}

	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid configuration:\n  %w", joinLines(errs))
	}
	return c, nil
}

// RequireServerSettings checks what serve and worker need but dev provides itself.
func (c *Config) RequireServerSettings() error {
	var errs []error
	if c.DatabaseURL == "" {
		errs = append(errs, &FieldError{Var: "DATABASE_URL", Reason: "required (gantry dev starts its own database; serve and worker do not)"})
	}
	if len(c.SecretKey) == 0 {
		errs = append(errs, &FieldError{Var: "GANTRY_SECRET_KEY", Reason: "required: at least 32 random characters, the same on every process"})
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid configuration:\n  %w", joinLines(errs))
	}
	return nil
}

// EnsureDevSecret gives a dev process a secret key that survives restarts, so
// emailed links keep working after Ctrl-C and start again.
func (c *Config) EnsureDevSecret() error {
	if len(c.SecretKey) > 0 {
		return nil
	}
	path := filepath.Join(c.DataDir, "secret-key")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= 32 {
		c.SecretKey = []byte(strings.TrimSpace(string(b)))
		return nil
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return fmt.Errorf("generating secret key: %w", err)
	}
	key := hex.EncodeToString(buf)
	if err := os.MkdirAll(c.DataDir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", c.DataDir, err)
	}
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	c.SecretKey = []byte(key)
	return nil
}

// SecureCookies reports whether cookies must carry the Secure attribute.
func (c *Config) SecureCookies() bool { return c.BaseURL.Scheme == "https" }

// allowedExtra lists GANTRY_* variables read by other parts (tests, tooling,
// gantry env on CI machines and the variables it gives commands) rather than
// by the server itself.
func allowedExtra(name string) bool {
	return strings.HasPrefix(name, "GANTRY_TEST_") || strings.HasPrefix(name, "GANTRY_E2E_") ||
		name == "GANTRY_CHROMIUM" ||
		name == "GANTRY_SERVER" || name == "GANTRY_TOKEN" ||
		name == "GANTRY_ALLOCATION_ID" || name == "GANTRY_ALLOCATION_IDS" || name == "GANTRY_ENVIRONMENT" ||
		strings.HasPrefix(name, "GANTRY_ENV_")
}

func positiveInt(get func(string) string, fail func(string, string), name string, min int) int {
	n, err := strconv.Atoi(get(name))
	if err != nil || n < min {
		fail(name, fmt.Sprintf("must be a whole number of at least %d", min))
	}
	return n
}

func positiveDuration(get func(string) string, fail func(string, string), name string) time.Duration {
	d, err := time.ParseDuration(get(name))
	if err != nil || d <= 0 {
		fail(name, "must be a positive duration such as 30s, 15m or 12h")
	}
	return d
}

func suggest(name string, known map[string]Var) string {
	names := make([]string, 0, len(known))
	for k := range known {
		names = append(names, k)
	}
	if best, ok := spelling.Closest(name, names); ok {
		return fmt.Sprintf(" (did you mean %s?)", best)
	}
	return " (see docs/configuration.md)"
}

type lines []error

func (l lines) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n  ")
}

func (l lines) Unwrap() []error { return l }

func joinLines(errs []error) error { return lines(errs) }
