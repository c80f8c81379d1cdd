package access

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/models"
)

// UserChange is what an admin changes of a user at once; nil leaves it.
type UserChange struct {
	Role     *string
	Disabled *bool
}

// UpdateUser makes both changes or neither, each logged as SetRole and
// SetDisabled log it, and returns the user as it then is.
func UpdateUser(ctx context.Context, db bun.IDB, userID int64, ch UserChange, actor string) (*models.User, error) {
	var u *models.User
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if ch.Role != nil {
			if err := SetRole(ctx, tx, userID, *ch.Role, actor); err != nil {
				return err
			}
		}
		if ch.Disabled != nil {
			if err := SetDisabled(ctx, tx, userID, *ch.Disabled, actor); err != nil {
				return err
			}
		}
		var err error
		u, err = models.UserByID(ctx, tx, userID)
		return err
	})
	return u, err
}
