package models

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// Outcomes of a sign-in attempt.
const (
	LoginPending = "pending" // reserved, its password not yet checked (or its process died)
	LoginOK      = "ok"
	LoginFailed  = "failed"
)

// LoginAttempt is one sign-in, reserved before its password is hashed.
type LoginAttempt struct {
	bun.BaseModel `bun:"table:login_attempts"`

	ID        int64     `bun:",pk,autoincrement"`
	Account   string    `bun:",notnull"`
	Address   string    `bun:",notnull"`
	Outcome   string    `bun:",notnull"`
	CreatedAt time.Time `bun:",nullzero,notnull,default:current_timestamp"`
	ExpiresAt time.Time `bun:",notnull"`
}

// LoginThrottle is how many failed or pending attempts an account and an
// address may have within Window.
type LoginThrottle struct {
	Account int
	Address int
	Window  time.Duration
}

// What a LoginBlock blocks.
const (
	BlockedAccount = "account"
	BlockedAddress = "address"
)

// LoginBlock says why an attempt was refused: what is blocked, and until
// when (the moment enough of its counted attempts leave the window).
type LoginBlock struct {
	What  string
	Until time.Time
}

// Advisory-lock namespaces (the first key of pg_advisory_xact_lock's
// two-key form), so an account and an address never share a lock.
const (
	loginAccountLock = 0x6c6f6761 // "loga"
	loginAddressLock = 0x6c6f6769 // "logi"
)

// ReserveLoginAttempt records a pending attempt for account from address,
// or returns the block that refuses it (recording nothing). It runs in a
// transaction holding advisory locks on the account, then the address
// (always in that order, so two reservations cannot deadlock), so that
// concurrent attempts, in any process, count each other: the Nth attempt
// sees the N-1 before it, even while their passwords are still being hashed.
func ReserveLoginAttempt(ctx context.Context, db bun.IDB, account, address string, limits LoginThrottle) (int64, *LoginBlock, error) {
	var id int64
	var block *LoginBlock
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		id, block = 0, nil
		for _, l := range []struct {
			ns  int32
			key string
		}{{loginAccountLock, account}, {loginAddressLock, address}} {
			if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(?::int, hashtext(?))", l.ns, l.key); err != nil {
				return err
			}
		}
		for _, b := range []struct {
			what, column, value string
			limit               int
		}{{BlockedAccount, "account", account, limits.Account}, {BlockedAddress, "address", address, limits.Address}} {
			until, err := blockedUntil(ctx, tx, b.column, b.value, b.limit, limits.Window)
			if err != nil {
				return err
			}
			// Of two blocks, the later one is when trying again can work.
			if !until.IsZero() && (block == nil || until.After(block.Until)) {
				block = &LoginBlock{What: b.what, Until: until}
			}
		}
		if block != nil {
			return nil
		}
		return tx.NewRaw(`INSERT INTO login_attempts (account, address, outcome, expires_at)
			VALUES (?, ?, ?, now() + make_interval(secs => ?)) RETURNING id`,
			account, address, LoginPending, limits.Window.Seconds()).Scan(ctx, &id)
	})
	return id, block, err
}

// blockedUntil is when column = value stops being blocked: the limit-th
// newest failed or pending attempt within the window leaves it then. Zero:
// not blocked.
func blockedUntil(ctx context.Context, db bun.IDB, column, value string, limit int, window time.Duration) (time.Time, error) {
	limit = max(limit, 1)
	var at []time.Time
	err := db.NewSelect().Model((*LoginAttempt)(nil)).Column("created_at").
		Where("? = ?", bun.Ident(column), value).
		Where("outcome <> ?", LoginOK).
		Where("created_at > now() - make_interval(secs => ?)", window.Seconds()).
		OrderExpr("created_at DESC").Offset(int64(limit-1)).Limit(1).
		Scan(ctx, &at)
	if err != nil || len(at) == 0 {
		return time.Time{}, err
	}
	return at[0].Add(window), nil
}

// FinishLoginAttempt records whether a reserved attempt's password was right.
func FinishLoginAttempt(ctx context.Context, db bun.IDB, id int64, outcome string) error {
	_, err := db.NewUpdate().Model((*LoginAttempt)(nil)).Set("outcome = ?", outcome).Where("id = ?", id).Exec(ctx)
	return err
}

// DeleteExpiredLoginAttempts removes attempts that no longer count (older
// than the window they were made under) and says how many.
func DeleteExpiredLoginAttempts(ctx context.Context, db bun.IDB) (int64, error) {
	res, err := db.NewDelete().Model((*LoginAttempt)(nil)).Where("expires_at <= now()").Exec(ctx)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
