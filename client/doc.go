// Package client is the Go client of Gantry's environment pools, for CI jobs
// and test harnesses: it allocates environments, waits for one when none is
// free, and releases, extends and looks them up. It also follows
// infrastructure deployments and votes on them ([Client.Runs],
// [Client.Run], [Client.Execution], [Client.Approvals], [Client.Vote]),
// with a token of the read scope, and the vote scope to vote.
//
// What a client must do beyond plain HTTP (seed 001, "TypeScript Client"):
//
//   - Authenticate every request: with a client's API token ([WithToken]),
//     or with a signed AWS identity ([WithAWSIdentity]) for callers that run
//     under an IAM role of an account on the allow list.
//   - Retry when no environment is free. [Client.Acquire] retries 423 Locked
//     (and 429, 502, 503, 504 and connection failures) with exponential
//     backoff (1s, doubling, at most 30s) and full jitter, never sooner than
//     the server's Retry-After, until the wait is over.
//
// A minimal CI harness:
//
//	c := client.New("https://gantry.example.com", client.WithToken(os.Getenv("GANTRY_TOKEN")))
//	a, err := c.Acquire(ctx, client.AllocateRequest{Pool: "ci", Requester: os.Getenv("CI_JOB_URL")}, 30*time.Minute)
//	if err != nil { ... }
//	defer c.ReleaseAll(context.WithoutCancel(ctx), a, outcome)
//	cmd.Env = append(os.Environ(), a.Env()...)
//
// # Environment variables
//
// [Lease.Env] gives one environment's credentials as the variables tools read:
//
//	GANTRY_ALLOCATION_ID   the allocation's id (what Release takes)
//	GANTRY_ENVIRONMENT     the environment's name: a slot's name, the database, account/region
//	                       (what cleanup commands get under the same name)
//	DATABASE_URL           postgres: the connection URL, and parsed from it
//	PGHOST PGPORT PGUSER PGPASSWORD PGDATABASE (PGSSLMODE when the URL sets sslmode)
//	AWS_ACCESS_KEY_ID      aws: the session's keys
//	AWS_SECRET_ACCESS_KEY
//	AWS_SESSION_TOKEN
//	AWS_REGION             aws: the environment's region, also as AWS_DEFAULT_REGION
//	AWS_DEFAULT_REGION
//	AWS_ACCOUNT_ID         aws: the environment's account
//
// A variable is left out when the lease has no value for it.
//
// [Allocation.Env] covers allocations of several environments: the first
// environment's variables as above, unprefixed, so single-environment jobs
// need nothing else; then every environment's variables again, numbered from
// 0 in the order of the request's requirements, as GANTRY_ENV_<i>_<NAME>
// with the GANTRY_ prefix of NAME dropped (GANTRY_ENV_1_DATABASE_URL,
// GANTRY_ENV_1_ALLOCATION_ID); GANTRY_ENV_COUNT, the number of environments;
// and GANTRY_ALLOCATION_IDS, every allocation id separated by spaces (so
// `gantry env release $GANTRY_ALLOCATION_IDS` releases them all).
package client
