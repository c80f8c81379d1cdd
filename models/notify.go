package models

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// logChannel is notified by a trigger on every deployment-log insert.
const logChannel = "gantry_deployment_log"

// ListenLog calls wake after each committed deployment-log insert until ctx
// ends or the connection fails. It holds one pool connection while it runs.
func ListenLog(ctx context.Context, pool *pgxpool.Pool, wake func()) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquiring listener connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+logChannel); err != nil {
		return fmt.Errorf("listening for log entries: %w", err)
	}
	defer func() {
		// The connection goes back to the pool: stop listening first.
		_, _ = conn.Exec(context.WithoutCancel(ctx), "UNLISTEN "+logChannel)
	}()
	for {
		if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
			return err
		}
		wake()
	}
}
