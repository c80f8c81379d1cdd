package web

import (
	"time"

	"github.com/google/uuid"

	"github.com/gantryhq/gantry/internal/pools"
	"github.com/gantryhq/gantry/models"
)

// The allocation API's JSON, every request and answer of the environments
// area in one place, mapped from the models by the functions below: a
// column can change without the API changing. The client package restates
// these shapes (client/types.go) and tests that they match.

// allocateRequest is seed 001's allocation request (POST /allocations).
type allocateRequest struct {
	Pool         string               `json:"pool"`
	Requester    string               `json:"requester"`
	Requirements []requirementRequest `json:"requirements"`
}

type requirementRequest struct {
	Capabilities map[string]string `json:"capabilities"`
}

// releaseRequest is DELETE /allocations/:id's optional body.
type releaseRequest struct {
	Outcome string `json:"outcome"`
}

// extendRequest is POST /allocations/:id/extend's body.
type extendRequest struct {
	Duration string `json:"duration"` // added to the current expiry, e.g. "1h"
}

// allocationJSON answers an allocation request: one lease per requirement.
type allocationJSON struct {
	RequestID   uuid.UUID   `json:"request_id"`
	Allocations []leaseJSON `json:"allocations"`
}

// leaseJSON is one allocated environment as the API returns it.
type leaseJSON struct {
	ID           uuid.UUID         `json:"id"`
	RequestID    uuid.UUID         `json:"request_id"`
	Pool         string            `json:"pool"`
	Environment  string            `json:"environment"`
	Account      string            `json:"account,omitempty"`
	Region       string            `json:"region,omitempty"`
	Database     string            `json:"database,omitempty"`
	Capabilities map[string]string `json:"capabilities"`
	Credentials  *credentialsJSON  `json:"credentials,omitempty"`
	StartedAt    time.Time         `json:"started_at"`
	ExpiresAt    time.Time         `json:"expires_at"`
	EndedAt      *time.Time        `json:"ended_at,omitempty"`
	EndedBy      *string           `json:"ended_by,omitempty"`
	Outcome      string            `json:"outcome,omitempty"`
	Requester    string            `json:"requester"`
	Client       string            `json:"client"`
}

// credentialsJSON are a lease's credentials: AWS session keys or a
// PostgreSQL URL.
type credentialsJSON struct {
	AccessKeyID     string     `json:"access_key_id,omitempty"`
	SecretAccessKey string     `json:"secret_access_key,omitempty"`
	SessionToken    string     `json:"session_token,omitempty"`
	Expiration      *time.Time `json:"expiration,omitempty"`
	URL             string     `json:"url,omitempty"`
}

// allocationHistoryJSON is one page of GET /allocations.
type allocationHistoryJSON struct {
	Allocations []leaseJSON `json:"allocations"`
	Next        string      `json:"next,omitempty"` // URL of the next (older) page
}

// poolsJSON is GET /pools.
type poolsJSON struct {
	Pools []poolJSON `json:"pools"`
}

// poolJSON is a pool as gantry.yaml registered it, with its capacity.
type poolJSON struct {
	Name                  string           `json:"name"`
	Kind                  string           `json:"kind"`
	SessionSeconds        int              `json:"session_seconds"`
	MaxSessionSeconds     int              `json:"max_session_seconds"`
	CleanupTimeoutSeconds int              `json:"cleanup_timeout_seconds"`
	Clients               []string         `json:"clients"`
	CleanupCommand        []string         `json:"cleanup_command"`
	RemovedAt             *time.Time       `json:"removed_at,omitempty"`
	UpdatedAt             time.Time        `json:"updated_at"`
	Capacity              poolCapacityJSON `json:"capacity"`
}

// poolCapacityJSON counts a pool's registered environments by status,
// those waiting to leave apart.
type poolCapacityJSON struct {
	Pool          string `json:"pool"`
	Available     int    `json:"available"`
	InUse         int    `json:"in_use"`
	Cleaning      int    `json:"cleaning"`
	Dirty         int    `json:"dirty"`
	Deregistering int    `json:"deregistering"`
}

// leaseJSONOf is allocation a of environment env (nil: unknown), with the
// credentials when they are handed out.
func leaseJSONOf(a *models.Allocation, env *models.Environment, creds *pools.Credentials) leaseJSON {
	out := leaseJSON{ID: a.ID, RequestID: a.RequestID, Pool: a.Pool, Capabilities: a.Capabilities,
		StartedAt: a.StartedAt, ExpiresAt: a.ExpiresAt, EndedAt: a.EndedAt, EndedBy: a.EndedBy, Outcome: a.Outcome,
		Requester: a.Requester, Client: a.Client}
	if creds != nil {
		out.Credentials = &credentialsJSON{AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey,
			SessionToken: creds.SessionToken, Expiration: creds.Expiration, URL: creds.URL}
	}
	if env != nil {
		out.Environment, out.Account, out.Region, out.Database = env.Key, env.Account, env.Region, env.Database
	}
	if out.Capabilities == nil {
		out.Capabilities = map[string]string{}
	}
	return out
}

// allocationJSONOf is the answer to an allocation request that was granted
// leases (never none).
func allocationJSONOf(leases []pools.Lease) allocationJSON {
	out := allocationJSON{RequestID: leases[0].Allocation.RequestID}
	for _, l := range leases {
		out.Allocations = append(out.Allocations, leaseJSONOf(l.Allocation, l.Environment, &l.Credentials))
	}
	return out
}

// allocationHistoryJSONOf is a page of history; next is "" on the last.
func allocationHistoryJSONOf(allocs []models.Allocation, next string) allocationHistoryJSON {
	out := allocationHistoryJSON{Allocations: []leaseJSON{}, Next: next}
	for i := range allocs {
		out.Allocations = append(out.Allocations, leaseJSONOf(&allocs[i], allocs[i].Environment, nil))
	}
	return out
}

// poolsJSONOf is the registered pools with their capacities.
func poolsJSONOf(list []models.Pool, capacities []models.PoolCapacity) poolsJSON {
	byPool := make(map[string]models.PoolCapacity, len(capacities))
	for _, c := range capacities {
		byPool[c.Pool] = c
	}
	out := poolsJSON{Pools: []poolJSON{}}
	for _, p := range list {
		c := byPool[p.Name]
		out.Pools = append(out.Pools, poolJSON{Name: p.Name, Kind: p.Kind, SessionSeconds: p.SessionSeconds,
			MaxSessionSeconds: p.MaxSessionSeconds, CleanupTimeoutSeconds: p.CleanupTimeoutSeconds,
			Clients: p.Clients, CleanupCommand: p.CleanupCommand, RemovedAt: p.RemovedAt, UpdatedAt: p.UpdatedAt,
			Capacity: poolCapacityJSON{Pool: c.Pool, Available: c.Available, InUse: c.InUse, Cleaning: c.Cleaning,
				Dirty: c.Dirty, Deregistering: c.Deregistering}})
	}
	return out
}
