package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gantryhq/gantry/internal/app"
	"github.com/gantryhq/gantry/migrations"
)

func (c *cli) migrateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply, roll back and inspect database migrations",
		Long: `Gantry's schema is a series of SQL migrations embedded in the binary, plus
River's own (the job queue). "up" applies both, under a lock, so running it
from several processes at once is safe.`,
	}
	up := &cobra.Command{
		Use: "up", Short: "Apply every pending migration (River's, then Gantry's)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := c.openForAdmin(cmd)
			if err != nil {
				return err
			}
			defer a.Close()
			applied, err := a.Migrator.Up(cmd.Context())
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				c.printf("Nothing to apply: the schema is current.\n")
			}
			for _, name := range applied {
				c.printf("applied %s\n", name)
			}
			return nil
		},
	}
	down := &cobra.Command{
		Use: "down", Short: "Roll back the last group of Gantry migrations (River's schema is kept)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := c.openForAdmin(cmd)
			if err != nil {
				return err
			}
			defer a.Close()
			rolled, err := a.Migrator.Down(cmd.Context())
			if err != nil {
				return err
			}
			if len(rolled) == 0 {
				c.printf("Nothing to roll back.\n")
			}
			for _, name := range rolled {
				c.printf("rolled back %s\n", name)
			}
			return nil
		},
	}
	status := &cobra.Command{
		Use: "status", Short: "List Gantry's and River's migrations, applied or pending", Args: cobra.NoArgs,
	}
	output := outputFlag(status)
	status.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkOutput(output); err != nil {
			return err
		}
		a, err := c.openForAdmin(cmd)
		if err != nil {
			return err
		}
		defer a.Close()
		st, err := a.Migrator.Status(cmd.Context())
		if err != nil {
			return err
		}
		if *output == "json" {
			return json.NewEncoder(c.stdout).Encode(st)
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SOURCE\tMIGRATION\tSTATE\tAPPLIED AT")
		for _, s := range st {
			state, at := "pending", ""
			if s.Applied {
				state = "applied"
				if !s.AppliedAt.IsZero() {
					at = s.AppliedAt.UTC().Format("2006-01-02 15:04:05")
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Source, s.Name, state, at)
		}
		return tw.Flush()
	}
	var dir string
	create := &cobra.Command{
		Use: "create NAME", Short: "Write a new pair of empty SQL migration files", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			paths, err := migrations.Create(dir, args[0])
			if err != nil {
				return err
			}
			for _, p := range paths {
				c.printf("created %s\n", p)
			}
			return nil
		},
	}
	create.Flags().StringVar(&dir, "dir", "migrations", "directory of the migration files")
	cmd.AddCommand(up, down, status, create)
	return cmd
}

// openForAdmin connects for a one-off admin command: DATABASE_URL is needed,
// the secret key is not.
func (c *cli) openForAdmin(cmd *cobra.Command) (*app.App, error) {
	cfg, err := c.config()
	if err != nil {
		return nil, err
	}
	if cfg.DatabaseURL == "" {
		return nil, fmt.Errorf("DATABASE_URL is not set (for the database of gantry dev, start gantry dev and use the URL it logs)")
	}
	return c.openApp(cmd.Context(), cfg, newLogger(cfg, c.stderr), false)
}
