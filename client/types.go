package client

import "time"

// AllocateRequest asks for environments from one pool (POST /allocations).
type AllocateRequest struct {
	Pool string `json:"pool"`
	// Requester names who holds the environments, e.g. the CI job's URL; it
	// is shown in the history (at most 1024 characters).
	Requester string `json:"requester"`
	// Requirements lists one entry per environment wanted; none means one
	// environment of any kind.
	Requirements []Requirement `json:"requirements,omitempty"`
}

// Requirement is what one wanted environment must offer.
type Requirement struct {
	Capabilities map[string]string `json:"capabilities,omitempty"`
}

// Allocation is the answer to an allocation request: one lease per
// requirement, in the request's order, granted all together.
type Allocation struct {
	RequestID string  `json:"request_id"`
	Leases    []Lease `json:"allocations"`
}

// IDs returns the allocation id of every lease.
func (a *Allocation) IDs() []string {
	ids := make([]string, len(a.Leases))
	for i, l := range a.Leases {
		ids[i] = l.ID
	}
	return ids
}

// Lease is one allocated environment, as the API returns it.
type Lease struct {
	ID           string            `json:"id"`
	RequestID    string            `json:"request_id"`
	Pool         string            `json:"pool"`
	Environment  string            `json:"environment"`
	Account      string            `json:"account,omitempty"`
	Region       string            `json:"region,omitempty"`
	Database     string            `json:"database,omitempty"`
	Capabilities map[string]string `json:"capabilities"`
	// Credentials are sent when the lease is granted (and when an extension
	// renews them); reads of a lease leave them out.
	Credentials *Credentials `json:"credentials,omitempty"`
	StartedAt   time.Time    `json:"started_at"`
	ExpiresAt   time.Time    `json:"expires_at"`
	EndedAt     *time.Time   `json:"ended_at,omitempty"`
	// EndedBy says who ended the lease: client, timeout or operator.
	EndedBy   string `json:"ended_by,omitempty"`
	Outcome   string `json:"outcome,omitempty"`
	Requester string `json:"requester"`
	Client    string `json:"client"`
}

// Active reports whether the lease has not ended.
func (l Lease) Active() bool { return l.EndedAt == nil }

// Credentials let a test use one environment: AWS session keys for aws
// pools, a connection URL for postgres pools.
type Credentials struct {
	AccessKeyID     string     `json:"access_key_id,omitempty"`
	SecretAccessKey string     `json:"secret_access_key,omitempty"`
	SessionToken    string     `json:"session_token,omitempty"`
	Expiration      *time.Time `json:"expiration,omitempty"`
	URL             string     `json:"url,omitempty"`
}

// Pool is one environment pool with its current capacity (GET /pools).
type Pool struct {
	Name                  string     `json:"name"`
	Kind                  string     `json:"kind"`
	SessionSeconds        int        `json:"session_seconds"`
	MaxSessionSeconds     int        `json:"max_session_seconds"`
	CleanupTimeoutSeconds int        `json:"cleanup_timeout_seconds"`
	Clients               []string   `json:"clients"`
	CleanupCommand        []string   `json:"cleanup_command"`
	RemovedAt             *time.Time `json:"removed_at,omitempty"`
	UpdatedAt             time.Time  `json:"updated_at"`
	Capacity              Capacity   `json:"capacity"`
}

// Session is the default lease length.
func (p Pool) Session() time.Duration { return time.Duration(p.SessionSeconds) * time.Second }

// MaxSession is how long a lease may last with extensions.
func (p Pool) MaxSession() time.Duration { return time.Duration(p.MaxSessionSeconds) * time.Second }

// Capacity counts a pool's environments by status.
type Capacity struct {
	Available     int `json:"available"`
	InUse         int `json:"in_use"`
	Cleaning      int `json:"cleaning"`
	Dirty         int `json:"dirty"`
	Deregistering int `json:"deregistering"`
}

// Total is every registered environment of the pool.
func (c Capacity) Total() int {
	return c.Available + c.InUse + c.Cleaning + c.Dirty + c.Deregistering
}

// ListOptions filters the allocation history (GET /allocations).
type ListOptions struct {
	Pool       string
	Requester  string
	ActiveOnly bool
	Limit      int // 1 to 500; 0: the server's default
}
