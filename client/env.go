package client

import (
	"net/url"
	"strconv"
	"strings"
)

// Env returns the lease's environment variables as KEY=VALUE, the usual
// names for its kind of credentials (see the package documentation).
func (l Lease) Env() []string {
	var env []string
	add := func(k, v string) {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	add("GANTRY_ALLOCATION_ID", l.ID)
	add("GANTRY_ENVIRONMENT", l.EnvironmentName())
	if cr := l.Credentials; cr != nil && cr.URL != "" {
		add("DATABASE_URL", cr.URL)
		for _, kv := range postgresVars(cr.URL) {
			add(kv[0], kv[1])
		}
	}
	if cr := l.Credentials; cr != nil {
		add("AWS_ACCESS_KEY_ID", cr.AccessKeyID)
		add("AWS_SECRET_ACCESS_KEY", cr.SecretAccessKey)
		add("AWS_SESSION_TOKEN", cr.SessionToken)
	}
	add("AWS_REGION", l.Region)
	add("AWS_DEFAULT_REGION", l.Region)
	add("AWS_ACCOUNT_ID", l.Account)
	return env
}

// EnvironmentName is the environment's name within its kind: the slot's
// name, the database, or account/region (the key without its "kind:").
func (l Lease) EnvironmentName() string {
	if _, name, ok := strings.Cut(l.Environment, ":"); ok {
		return name
	}
	return l.Environment
}

// postgresVars splits a postgres:// URL into libpq's variables. A host in
// the query (a Unix socket directory) wins over the URL's, as in libpq.
func postgresVars(raw string) [][2]string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil
	}
	q := u.Query()
	host, port := u.Hostname(), u.Port()
	if h := q.Get("host"); h != "" {
		host = h
	}
	if p := q.Get("port"); p != "" {
		port = p
	}
	if host != "" && port == "" {
		port = "5432"
	}
	password, _ := u.User.Password()
	return [][2]string{
		{"PGHOST", host},
		{"PGPORT", port},
		{"PGUSER", u.User.Username()},
		{"PGPASSWORD", password},
		{"PGDATABASE", strings.TrimPrefix(u.Path, "/")},
		{"PGSSLMODE", q.Get("sslmode")},
	}
}

// Env returns the environment variables of every lease: the first lease's
// unprefixed, then each lease's as GANTRY_ENV_<i>_<NAME>, GANTRY_ENV_COUNT
// and GANTRY_ALLOCATION_IDS (see the package documentation).
func (a *Allocation) Env() []string {
	if len(a.Leases) == 0 {
		return nil
	}
	env := a.Leases[0].Env()
	env = append(env, "GANTRY_ALLOCATION_IDS="+strings.Join(a.IDs(), " "), "GANTRY_ENV_COUNT="+strconv.Itoa(len(a.Leases)))
	for i, l := range a.Leases {
		prefix := "GANTRY_ENV_" + strconv.Itoa(i) + "_"
		for _, kv := range l.Env() {
			env = append(env, prefix+strings.TrimPrefix(kv, "GANTRY_"))
		}
	}
	return env
}
