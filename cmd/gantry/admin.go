package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/user"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/app"
	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/models"
	"github.com/gantryhq/gantry/web"
)

func (c *cli) adminCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Manage users and API tokens from the command line",
		Long:  "Administration straight against DATABASE_URL, for operators (the first admin, break-glass access, scripting). Every change is a deployment-log entry with the actor cli:<os user>.",
	}
	users := &cobra.Command{Use: "user", Short: "Create, list, disable and enable users; reset passwords"}
	users.AddCommand(c.userCreate(), c.userList(), c.userSetDisabled(true), c.userSetDisabled(false), c.userPassword(), c.userRole())
	tokens := &cobra.Command{Use: "token", Short: "Create, list and revoke API tokens"}
	tokens.AddCommand(c.tokenCreate(), c.tokenList(), c.tokenRevoke())
	cmd.AddCommand(users, tokens)
	cliErrors(cmd)
	return cmd
}

// cliErrors makes the errors of cmd's commands read as the command line's:
// the admin commands share the service with the API, whose invalid-field
// errors name the request's fields ("the request has invalid fields (role:
// …)"); here they name the argument or flag, once ("ROLE: unknown role …").
func cliErrors(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		cliErrors(sub)
	}
	if cmd.RunE == nil {
		return
	}
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		err := run(cmd, args)
		var ae *apperr.Error
		if !errors.As(err, &ae) || len(ae.Fields) == 0 {
			return err
		}
		fields := make([]string, 0, len(ae.Fields))
		for f := range ae.Fields {
			fields = append(fields, f)
		}
		sort.Strings(fields)
		parts := make([]string, len(fields))
		for i, f := range fields {
			parts[i] = argumentOf(cmd, f) + ": " + ae.Fields[f]
		}
		return errors.New(strings.Join(parts, "; "))
	}
}

// argumentOf names a service's field as cmd takes it: a positional
// argument of its usage (ROLE), or a flag (--email, --expires for
// expires_in).
func argumentOf(cmd *cobra.Command, field string) string {
	name := strings.ToUpper(field)
	if slices.Contains(strings.Fields(cmd.Use), name) {
		return name
	}
	for _, flag := range []string{strings.ReplaceAll(field, "_", "-"), strings.TrimSuffix(field, "_in")} {
		if cmd.Flags().Lookup(flag) != nil {
			return "--" + flag
		}
	}
	return field
}

// cliActor names the operator in the log.
func cliActor() string {
	if u, err := user.Current(); err == nil {
		return "cli:" + u.Username
	}
	return "cli"
}

func (c *cli) userCreate() *cobra.Command {
	var in access.NewUser
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a user (a password is generated and printed when none is given)",
		Example: `  gantry admin user create --email ada@example.com --name "Ada" --role admin
  gantry admin user create --email bot@example.com --role approver --password "$PASSWORD"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			generated := in.Password == ""
			if generated {
				p, err := auth.NewPassword()
				if err != nil {
					return err
				}
				in.Password = p
			}
			a, err := c.openForAdmin(cmd)
			if err != nil {
				return err
			}
			defer a.Close()
			u, err := access.CreateUser(cmd.Context(), a.DB.Bun, in, cliActor())
			if err != nil {
				return err
			}
			c.printf("created user %d %s (%s)\n", u.ID, u.Email, u.Role)
			if generated {
				c.printf("password (shown only once): %s\n", in.Password)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&in.Email, "email", "", "email address (required)")
	cmd.Flags().StringVar(&in.Name, "name", "", "display name (default: the part of the email before @)")
	cmd.Flags().StringVar(&in.Role, "role", "viewer", "viewer, approver, operator or admin")
	cmd.Flags().StringVar(&in.Password, "password", "", "password, at least 12 characters (default: generated)")
	_ = cmd.MarkFlagRequired("email")
	return cmd
}

func (c *cli) userList() *cobra.Command {
	cmd := &cobra.Command{Use: "list", Short: "List users", Args: cobra.NoArgs}
	output := outputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkOutput(output); err != nil {
			return err
		}
		a, err := c.openForAdmin(cmd)
		if err != nil {
			return err
		}
		defer a.Close()
		users, err := models.ListUsers(cmd.Context(), a.DB.Bun)
		if err != nil {
			return err
		}
		if *output == "json" {
			out := make([]web.UserJSON, len(users))
			for i := range users {
				out[i] = web.UserJSONOf(&users[i])
			}
			return json.NewEncoder(c.stdout).Encode(out)
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tEMAIL\tNAME\tROLE\tSTATUS\tCREATED")
		for _, u := range users {
			status := "active"
			if u.Disabled() {
				status = "disabled"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", u.ID, u.Email, u.Name, u.Role, status, u.CreatedAt.UTC().Format("2006-01-02"))
		}
		return tw.Flush()
	}
	return cmd
}

func (c *cli) userSetDisabled(disabled bool) *cobra.Command {
	use, short := "enable EMAIL", "Let a disabled user sign in again"
	if disabled {
		use, short = "disable EMAIL", "Stop a user signing in; ends their sessions and stops their tokens"
	}
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.onUser(cmd, args[0], func(a *app.App, u *models.User) error {
				if err := access.SetDisabled(cmd.Context(), a.DB.Bun, u.ID, disabled, cliActor()); err != nil {
					return err
				}
				c.printf("%s %s\n", map[bool]string{true: "disabled", false: "enabled"}[disabled], u.Email)
				return nil
			})
		},
	}
}

func (c *cli) userRole() *cobra.Command {
	return &cobra.Command{
		Use: "role EMAIL ROLE", Short: "Change a user's role (viewer, approver, operator, admin)", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.onUser(cmd, args[0], func(a *app.App, u *models.User) error {
				if err := access.SetRole(cmd.Context(), a.DB.Bun, u.ID, args[1], cliActor()); err != nil {
					return err
				}
				c.printf("%s is now %s\n", u.Email, args[1])
				return nil
			})
		},
	}
}

func (c *cli) userPassword() *cobra.Command {
	return &cobra.Command{
		Use: "password EMAIL", Short: "Give a user a new generated password, printed once", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.onUser(cmd, args[0], func(a *app.App, u *models.User) error {
				password, err := auth.NewPassword()
				if err != nil {
					return err
				}
				if err := access.SetPassword(cmd.Context(), a.DB.Bun, u.ID, password, cliActor()); err != nil {
					return err
				}
				c.printf("new password for %s (shown only once): %s\n", u.Email, password)
				return nil
			})
		},
	}
}

// onUser opens the database, finds the user with email and calls fn.
func (c *cli) onUser(cmd *cobra.Command, email string, fn func(a *app.App, u *models.User) error) error {
	a, err := c.openForAdmin(cmd)
	if err != nil {
		return err
	}
	defer a.Close()
	u, err := userByEmail(cmd, a, email)
	if err != nil {
		return err
	}
	return fn(a, u)
}

func userByEmail(cmd *cobra.Command, a *app.App, email string) (*models.User, error) {
	u, err := models.UserByEmail(cmd.Context(), a.DB.Bun, email)
	if err == models.ErrNotFound {
		return nil, fmt.Errorf("no user with email %s (gantry admin user list shows them)", email)
	}
	return u, err
}

func (c *cli) tokenCreate() *cobra.Command {
	var email, name, scopes string
	var expires time.Duration
	cmd := &cobra.Command{
		Use:     "create",
		Short:   "Create an API token for a user and print it (shown only once)",
		Example: `  gantry admin token create --user ci@example.com --name github-actions --scopes read,write --expires 2160h`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.onUser(cmd, email, func(a *app.App, u *models.User) error {
				secret, t, err := access.CreateToken(cmd.Context(), a.DB.Bun, u, access.NewToken{Name: name, Scopes: strings.Split(scopes, ","), ExpiresIn: expires}, cliActor())
				if err != nil {
					return err
				}
				fmt.Fprintf(c.stderr, "created token %d %q for %s with scopes %s; it is shown only once:\n", t.ID, t.Name, u.Email, joinComma(t.Scopes))
				c.printf("%s\n", secret)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&email, "user", "", "email of the token's owner (required); the token never exceeds their role")
	cmd.Flags().StringVar(&name, "name", "", "what will use the token (required)")
	cmd.Flags().StringVar(&scopes, "scopes", "read", "comma-separated: read, write, vote, admin")
	cmd.Flags().DurationVar(&expires, "expires", 0, "lifetime such as 720h (default: never expires)")
	_ = cmd.MarkFlagRequired("user")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func (c *cli) tokenList() *cobra.Command {
	var email string
	cmd := &cobra.Command{Use: "list", Short: "List API tokens (never their secrets)", Args: cobra.NoArgs}
	output := outputFlag(cmd)
	cmd.Flags().StringVar(&email, "user", "", "only this user's tokens")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkOutput(output); err != nil {
			return err
		}
		a, err := c.openForAdmin(cmd)
		if err != nil {
			return err
		}
		defer a.Close()
		var owner int64
		if email != "" {
			u, err := userByEmail(cmd, a, email)
			if err != nil {
				return err
			}
			owner = u.ID
		}
		tokens, err := models.ListTokens(cmd.Context(), a.DB.Bun, owner)
		if err != nil {
			return err
		}
		if *output == "json" {
			out := make([]web.TokenJSON, len(tokens))
			for i := range tokens {
				out[i] = web.TokenJSONOf(&tokens[i])
			}
			return json.NewEncoder(c.stdout).Encode(out)
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tPREFIX\tOWNER\tSCOPES\tLAST USED\tSTATUS")
		now := time.Now()
		for _, t := range tokens {
			status := "active"
			if t.RevokedAt != nil {
				status = "revoked"
			} else if !t.Active(now) {
				status = "expired"
			}
			last := "never"
			if t.LastUsedAt != nil {
				last = t.LastUsedAt.UTC().Format("2006-01-02 15:04")
			}
			fmt.Fprintf(tw, "%d\t%s\t%s…\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Prefix, t.User.Email, joinComma(t.Scopes), last, status)
		}
		return tw.Flush()
	}
	return cmd
}

func (c *cli) tokenRevoke() *cobra.Command {
	return &cobra.Command{
		Use: "revoke ID", Short: "Revoke an API token; whatever uses it gets 401 from then on", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil {
				return fmt.Errorf("token id %q: must be a number (gantry admin token list shows them)", args[0])
			}
			a, err := c.openForAdmin(cmd)
			if err != nil {
				return err
			}
			defer a.Close()
			if err := access.RevokeToken(cmd.Context(), a.DB.Bun, id, 0, cliActor()); err != nil {
				return err
			}
			c.printf("revoked token %d\n", id)
			return nil
		},
	}
}
